"""`video.analysis.segment`: each worker decodes its own range only, and finds the truth."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from swarm_ray.video import (
    SampleVideo,
    SegmentAnalysis,
    SegmentAnalysisRequest,
    SegmentDecodeError,
    SegmentJob,
    SegmentOutcome,
    VideoFailureReason,
    build_timeline,
    corrupt_range,
    generate_sample_video,
    probe_video,
    remux_repeat,
)
from swarm_ray.video._features import (
    CutScore,
    FrameSignature,
    SignatureReader,
    content_delta,
    cut_score,
    signature,
)

CUT_TOLERANCE_S = 1 / 15 + 1e-6
"""A cut is found on its exact frame (one frame of slack for rounding)."""
SPAN_TOLERANCE_S = 0.75
"""Active spans are measured on 0.5 s buckets: an edge may be off by one bucket and a half."""


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleVideo:
    out = tmp_path_factory.mktemp("analyze") / "sample.mp4"
    return generate_sample_video(out, duration_s=30, gop=15, seed=2)


def run(
    sample: SampleVideo, edges: list[float], out_dir: Path | None = None
) -> list[SegmentAnalysis]:
    return [
        analyze_segment_at(sample.path, i, a, b, sample.fps, out_dir)
        for i, (a, b) in enumerate(itertools.pairwise(edges))
    ]


def analyze_segment_at(
    path: str, index: int, start: float, end: float, fps: float, out_dir: Path | None = None
) -> SegmentAnalysis:
    from swarm_ray.video import analyze_segment

    job = SegmentJob(path=path, index=index, start_s=start, end_s=end, frame_rate=fps)
    return analyze_segment(
        SegmentAnalysisRequest(job=job, out_dir=None if out_dir is None else str(out_dir))
    )


def outcomes(results: list[SegmentAnalysis]) -> list[SegmentOutcome]:
    return [
        SegmentOutcome(
            index=r.index, start_s=r.start_s, end_s=r.end_s, subtask_id=f"s{r.index}", analysis=r
        )
        for r in results
    ]


def test_each_worker_decodes_only_its_own_range(sample: SampleVideo) -> None:
    # Boundaries off the keyframe grid (keyframes every 1 s): each worker pays a pre-roll
    # from the keyframe before its start, and nothing after its end.
    edges = [0.0, 7.3, 15.5, 22.9, sample.duration_s]
    results = run(sample, edges)
    for r, (a, b) in zip(results, itertools.pairwise(edges), strict=True):
        own = sum(1 for i in range(sample.frame_count) if a - 1e-4 <= i / sample.fps < b - 1e-4)
        assert r.frames_in_range == own
        assert r.preroll_frames < sample.gop
        assert r.frames_decoded <= own + r.preroll_frames + 1  # at most the next frame
        assert r.first_frame_s is not None and r.first_frame_s >= a - 1e-4
        assert r.last_frame_s is not None and r.last_frame_s < b
    assert sum(r.frames_in_range for r in results) == sample.frame_count
    decoded = sum(r.frames_decoded for r in results)
    print(f"\nframes decoded by 4 workers: {decoded} for {sample.frame_count} in the file")
    assert decoded < sample.frame_count + 4 * sample.gop


def test_cuts_and_active_spans_match_the_truth(sample: SampleVideo, tmp_path: Path) -> None:
    # One boundary exactly on a cut: neither worker can see it alone.
    on_cut = sample.cut_times_s[1]
    edges = [0.0, 9.5, on_cut, 21.0, sample.duration_s]
    results = run(sample, edges, tmp_path)
    timeline = build_timeline(probe_video(sample.path), outcomes(results))
    found = [c for c in timeline.cuts if c.kind != "fade"]
    assert len(found) == len(sample.cut_times_s), found
    for cut, truth in zip(found, sample.cut_times_s, strict=True):
        assert abs(cut.t_s - truth) <= CUT_TOLERANCE_S
    assert [c.kind for c in found if abs(c.t_s - on_cut) < 1e-3] == ["boundary_cut"]
    spans = [(s.start_s, s.end_s) for s in timeline.active_spans]
    print(f"\nactive spans found {spans}, planted {sample.active_spans_s}")
    assert len(spans) == len(sample.active_spans_s)
    for (a, b), (ta, tb) in zip(spans, sample.active_spans_s, strict=True):
        assert abs(a - ta) <= SPAN_TOLERANCE_S and abs(b - tb) <= SPAN_TOLERANCE_S
    assert timeline.pacing.active_share == pytest.approx(
        sum(b - a for a, b in sample.active_spans_s) / sample.duration_s, abs=0.1
    )


def test_loudness_peaks_thumbnails_and_intensity(sample: SampleVideo, tmp_path: Path) -> None:
    span = sample.active_spans_s[0]
    calm = analyze_segment_at(sample.path, 0, 0.0, span[0] - 0.5, sample.fps, tmp_path)
    busy = analyze_segment_at(sample.path, 1, span[0] + 0.2, span[1], sample.fps, tmp_path)
    both = analyze_segment_at(sample.path, 2, 0.0, span[1] + 2, sample.fps, tmp_path)
    assert busy.intensity > calm.intensity + 0.3
    assert busy.motion_mean > 5 * calm.motion_mean
    assert busy.loudness_mean_db is not None and calm.loudness_mean_db is not None
    assert busy.loudness_mean_db > calm.loudness_mean_db + 20
    # Peaks stand out from their own segment: none in a calm one, all in the loud part.
    assert not calm.loudness_peaks
    assert both.loudness_peaks and all(span[0] <= p.t_s < span[1] for p in both.loudness_peaks)
    for r in (calm, busy, both):
        assert r.thumbnails and r.thumbnails[0].reason == "start"
        for thumb in r.thumbnails:
            assert Path(thumb.path).read_bytes()[:2] == b"\xff\xd8"  # JPEG
            assert r.start_s - 1e-3 <= thumb.t_s < r.end_s


def test_a_corrupted_range_fails_its_segment_alone(sample: SampleVideo, tmp_path: Path) -> None:
    bad = corrupt_range(sample.path, tmp_path / "bad.mp4", 10.0, 14.0)
    left = analyze_segment_at(str(bad), 0, 0.0, 10.0, sample.fps)
    right = analyze_segment_at(str(bad), 2, 14.0, sample.duration_s, sample.fps)
    assert left.decode_errors == 0 and right.decode_errors == 0  # neighbours never touch it
    with pytest.raises(SegmentDecodeError) as caught:
        analyze_segment_at(str(bad), 1, 10.0, 14.0, sample.fps)
    error = caught.value
    assert error.reason == VideoFailureReason.CORRUPT_DATA and error.segment == 1
    assert f"`{bad}`" in error.message and "10.00-14.00 s" in error.message


MEASURE = """
import json, resource, sys
from swarm_ray.video import SegmentAnalysisRequest, SegmentJob, analyze_segment
path, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
job = SegmentJob(path=path, index=0, start_s=start, end_s=end, frame_rate=15)
result = analyze_segment(SegmentAnalysisRequest(job=job))
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"peak_kb": peak, "frames": result.frames_decoded}))
"""


def peak_memory(path: Path, start: float, end: float) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), str(start), str(end)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    return facts["peak_kb"], facts["frames"]


def test_worker_memory_does_not_grow_with_file_length(sample: SampleVideo, tmp_path: Path) -> None:
    copies = 16
    long = remux_repeat(sample.path, tmp_path / "long.mp4", copies)  # no re-encoding
    length = probe_video(str(long)).duration_s
    assert length == pytest.approx(copies * sample.duration_s, rel=0.01)
    short_tail, _ = peak_memory(Path(sample.path), sample.duration_s - 10, sample.duration_s)
    long_tail, _ = peak_memory(long, length - 10, length)
    short_all, short_frames = peak_memory(Path(sample.path), 0, sample.duration_s)
    long_all, long_frames = peak_memory(long, 0, length)
    assert long_frames >= copies * short_frames - copies
    print(
        f"\npeak RSS: last 10 s of a {sample.duration_s:.0f} s file {short_tail / 1024:.0f} MiB,"
        f" of a {length:.0f} s file {long_tail / 1024:.0f} MiB; whole {sample.duration_s:.0f} s"
        f" {short_all / 1024:.0f} MiB, whole {length:.0f} s {long_all / 1024:.0f} MiB"
    )
    slack_kb = 12 * 1024  # allocator noise, the container index (a few bytes per frame)
    assert long_tail <= short_tail + slack_kb
    assert long_all <= short_all + slack_kb  # nor with the length of the segment


@pytest.mark.parametrize(
    ("width", "height", "fmt"),
    [(1280, 720, "yuv420p"), (1920, 1080, "yuv420p"), (642, 362, "yuv422p"), (320, 90, "yuv444p")],
)
def test_signature_keeps_every_nth_pixel_of_each_plane(width: int, height: int, fmt: str) -> None:
    # The picks are read as machine words (see `SignatureReader`): they must be the same pixels as
    # plain byte striding, whatever the step, the padding and the chroma layout.
    rng = np.random.default_rng(7)
    frame = av.VideoFrame(width, height, fmt)
    for plane in frame.planes:
        noise = rng.integers(0, 256, plane.buffer_size, dtype=np.uint8)
        plane.update(noise.tobytes())
    sig = signature(frame)
    step = max(1, height // 90)
    for index, got in enumerate((sig.y, sig.u, sig.v)):
        plane = frame.planes[index]
        rows = np.frombuffer(plane, dtype=np.uint8).reshape(plane.height, plane.line_size)
        pick = step if index == 0 else max(1, step // 2)
        assert np.array_equal(got, rows[::pick, : plane.width : pick])


@pytest.mark.parametrize(
    ("width", "height", "fmt"), [(1280, 720, "yuv420p"), (642, 362, "yuv422p")]
)
def test_packed_distances_match_plane_by_plane(width: int, height: int, fmt: str) -> None:
    # The analysis loop compares frames in one pass over their packed picks, and reads the
    # luma mean and histogram from one count: the same figures as plane by plane.
    rng = np.random.default_rng(11)
    reader = SignatureReader()
    sigs = []
    for _ in range(3):
        frame = av.VideoFrame(width, height, fmt)
        for plane in frame.planes:
            plane.update(rng.integers(0, 256, plane.buffer_size, dtype=np.uint8).tobytes())
        sigs.append(reader(frame))
    for a, b in itertools.pairwise(sigs):
        plain = [
            FrameSignature(y=s.y.copy(), u=s.u.copy(), v=s.v.copy(), hist=s.hist) for s in (a, b)
        ]
        assert a.packed is not None and plain[0].packed is None
        assert content_delta(a, b) == content_delta(*plain)
        assert a.luma_mean() == plain[0].luma_mean() == int(a.y.sum()) / a.y.size
        levels = np.bincount((a.y >> 4).ravel(), minlength=16)
        assert np.array_equal(a.hist, levels / a.y.size)


def test_a_lazy_cut_score_is_the_counted_one(sample: SampleVideo) -> None:
    # The analysis loop counts histograms only where a cut is possible: the score it gets
    # then is the one of fully counted signatures, and the bound it skips by holds.
    reader = SignatureReader()
    with av.open(sample.path) as container:
        frames = list(itertools.islice(container.decode(video=0), 0, 120, 3))
    lazy = [reader(f, histogram=False) for f in frames]
    eager = [reader(f) for f in frames]
    assert all(s.hist.size == 0 for s in lazy)
    for (a, b), (ea, eb) in zip(itertools.pairwise(lazy), itertools.pairwise(eager), strict=True):
        assert np.array_equal(a.counted().hist, ea.hist) and a.luma_mean() == ea.luma_mean()
        score = CutScore(content_delta(a, b), a, b)
        exact = cut_score(ea, eb)
        assert score.upper >= exact
        assert score.at_least(exact) and not score.at_least(exact + 1e-9)
        assert score.value() == exact
