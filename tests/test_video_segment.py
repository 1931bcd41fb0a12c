"""`video.segmentation.adaptive`: a cheap first pass, boundaries where content changes."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from swarm_ray.video import (
    SampleVideo,
    SegmentationRequest,
    SegmentPlan,
    default_target_segments,
    generate_sample_video,
    plan_segments,
    probe_video,
)

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "video"
TOLERANCE_S = 1.2
"""A boundary is at most one sample interval (1 s here) plus a keyframe step away from
the change it marks: the first pass only sees one frame pair per second."""


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SampleVideo:
    out = tmp_path_factory.mktemp("segment") / "sample.mp4"
    return generate_sample_video(out, duration_s=40, gop=10, seed=1)


def changes(sample: SampleVideo) -> list[float]:
    """Every instant the content changes: cuts and both ends of every active span."""
    edges = [t for span in sample.active_spans_s for t in span]
    return sorted([*sample.cut_times_s, *edges])


def check_tiling(plan: SegmentPlan) -> None:
    segments = plan.segments
    assert [s.index for s in segments] == list(range(len(segments)))
    assert segments[0].start_s == plan.metadata.start_time_s
    assert segments[-1].end_s == pytest.approx(plan.metadata.duration_s)
    for a, b in itertools.pairwise(segments):
        assert a.end_s == b.start_s


def test_boundaries_follow_content_not_equal_slices(sample: SampleVideo) -> None:
    truth = changes(sample)
    plan = plan_segments(
        SegmentationRequest(
            metadata=probe_video(sample.path), target_segments=len(truth) + 1, min_segment_s=1.5
        )
    )
    check_tiling(plan)
    boundaries = [s.start_s for s in plan.segments[1:]]
    missed = [t for t in truth if min(abs(t - b) for b in boundaries) > TOLERANCE_S]
    print(f"\nchanges {truth}\nboundaries {boundaries}")
    # Two changes closer than the minimum length cannot both get a boundary.
    close = sum(1 for a, b in itertools.pairwise(truth) if b - a < 1.5 + TOLERANCE_S)
    assert len(missed) <= close, missed
    lengths = [s.duration_s for s in plan.segments]
    assert max(lengths) / min(lengths) > 2  # content decides, not an equal split
    assert all(length >= 1.5 - 1e-6 for length in lengths)


def test_first_pass_never_decodes_the_whole_file(sample: SampleVideo) -> None:
    meta = probe_video(sample.path)
    plan = plan_segments(SegmentationRequest(metadata=meta, min_segment_s=1.5))
    assert len(plan.samples) == 40  # one per second
    assert plan.frames_decoded <= 2 * len(plan.samples)  # samples snap to keyframes
    assert plan.decoded_fraction <= 0.2 < 1
    assert plan.seeks == len(plan.samples)


def test_sample_activity_and_loudness_track_the_active_spans(sample: SampleVideo) -> None:
    plan = plan_segments(SegmentationRequest(metadata=probe_video(sample.path)))

    def active(t: float) -> bool:
        return any(a + 0.5 <= t < b - 0.5 for a, b in sample.active_spans_s)

    def calm(t: float) -> bool:
        return all(t < a - 0.5 or t >= b + 0.5 for a, b in sample.active_spans_s)

    hot = [s for s in plan.samples if active(s.t_s)]
    cold = [s for s in plan.samples if calm(s.t_s)]
    assert hot and cold
    assert min(s.activity for s in hot) > max(s.activity for s in cold)
    assert min(s.loudness_db or -99 for s in hot) > max(s.loudness_db or -99 for s in cold) + 20


def test_lengths_and_target(sample: SampleVideo) -> None:
    meta = probe_video(sample.path)
    plan = plan_segments(
        SegmentationRequest(metadata=meta, target_segments=4, min_segment_s=6, max_segment_s=12)
    )
    check_tiling(plan)
    assert all(6 - 1e-6 <= s.duration_s <= 12 + 1e-6 for s in plan.segments)
    assert 4 <= len(plan.segments) <= 5  # the maximum may add a boundary to the target
    default = plan_segments(SegmentationRequest(metadata=meta, min_segment_s=1))
    assert default.target_segments == min(40, default_target_segments()) >= 32
    assert len(default.segments) == default.target_segments


def test_sparse_keyframes_stay_within_budget_or_say_so() -> None:
    path = CORPUS / "pyscenedetect" / "testvideo.mp4"  # keyframes up to 10 s apart
    if not path.exists():
        pytest.skip(f"no corpus file {path}")
    meta = probe_video(str(path))
    plan = plan_segments(SegmentationRequest(metadata=meta, target_segments=4, min_segment_s=2))
    check_tiling(plan)
    assert plan.decoded_fraction < 0.5
    assert plan.warnings and "keyframes are sparse" in plan.warnings[0]
