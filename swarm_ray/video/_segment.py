"""`plan_segments`: content-aware segment boundaries from the cheap sampling pass.

Each sample gives an activity level (motion between its two frames, plus loudness where
there is audio) and, with the previous sample, a content change (what a scene cut
maximises). A boundary candidate lies between every two samples; its score is the larger
of the content change and the change of activity level across it, so boundaries fall on
cuts and where a calm stretch turns intense or back. Candidates are taken best first
while segments stay within the minimum and maximum lengths, until the target count is
reached; over-long segments are then split at their best inner candidate.

The target follows the cluster: `max(32, 2 x CPUs)` segments (about 32 on a small
cluster, two waves per core on a large one), bounded by the lengths. Lengths are also
kept within a factor of two of the mean, because the slowest segment sets the wall time
of the parallel stage. A boundary snaps to a keyframe inside its interval when there is
one: encoders put keyframes at cuts, and a worker then starts decoding exactly there.
"""

from __future__ import annotations

import bisect
import itertools
import math
import os
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.video._features import content_delta, histogram_delta
from swarm_ray.video._models import SegmentJob
from swarm_ray.video._probe import VideoMetadata
from swarm_ray.video._sampling import RawSample, keyframe_times, plan_sample_times, take_samples

__all__ = [
    "ActivitySample",
    "Segment",
    "SegmentPlan",
    "SegmentationRequest",
    "default_target_segments",
    "plan_segments",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_CUT_SCALE = 30.0
"""Cut score (content delta x (0.5 + histogram delta)) that counts as a certain cut."""
_BALANCE = 2.0
"""No segment longer than this many times the mean, none shorter than its inverse / 2."""
MAX_SEGMENTS = 1024
"""Segments one video is split into at most (`SWARM_RAY_VIDEO_MAX_SEGMENTS`): each is a
sub-task of the task, so the count is a fan-out like items x fields, and never more than
the request limit `max_fanout` either."""
MIN_SEGMENT_S = 1.0
"""No segment is shorter (but a video that is): a segment is a sub-task, a worker's
start-up, seek and pre-roll; a few frames' worth is all overhead."""
MAX_SAMPLES = 10_000
"""Samples the first pass may be asked to take at most."""


def max_segments() -> int:
    """Most segments of one video: `MAX_SEGMENTS` (or its setting), at most `max_fanout`."""
    from swarm_ray.core import RequestLimits

    cap = int(os.environ.get("SWARM_RAY_VIDEO_MAX_SEGMENTS", MAX_SEGMENTS))
    return max(1, min(cap, RequestLimits.from_env().max_fanout))


class SegmentationRequest(BaseModel):
    """Input of `video.segmentation.adaptive`."""

    model_config = _FROZEN
    metadata: VideoMetadata
    """The probe's result for the file."""
    target_segments: int | None = Field(default=None, ge=1, le=100_000)
    """How many segments to aim for; default from the cluster's CPUs. At most
    `max_segments()` are made, whatever is asked."""
    min_segment_s: float = Field(default=10.0, gt=0)
    """Shortest segment (the last one may be shorter only if the video is); raised to
    `MIN_SEGMENT_S`, and where the video would otherwise make more than
    `max_segments()`."""
    max_segment_s: float = Field(default=1800.0, gt=0)
    """Longest segment."""
    sample_rate_hz: float = Field(default=1.0, gt=0, le=30)
    """Samples per second of video at most."""
    max_samples: int = Field(default=1024, ge=4, le=MAX_SAMPLES)
    """Samples at most, whatever the length."""
    max_decode_fraction: float = Field(default=0.2, gt=0, le=1)
    """Decode at most this fraction of the file's frames (estimated before, counted after)."""


class ActivitySample(BaseModel):
    """One sample of the first pass."""

    model_config = _FROZEN
    t_s: float
    motion: float
    """Mean absolute change between the two frames (0-255)."""
    change: float
    """Cut score against the previous sample."""
    loudness_db: float | None
    activity: float
    """Motion and loudness combined, 0-1 relative to this video."""


class Segment(BaseModel):
    """One time range for one worker."""

    model_config = _FROZEN
    index: int = Field(ge=0)
    start_s: float
    end_s: float
    boundary_score: float = 0.0
    """Score of the boundary this segment starts at (0 for the first)."""
    starts_at_keyframe: bool = False
    activity: float = 0.0
    """Mean first-pass activity inside (0-1)."""

    @property
    def duration_s(self) -> float:
        """Length in seconds."""
        return self.end_s - self.start_s


class SegmentPlan(BaseModel):
    """What `video.segmentation.adaptive` returns."""

    model_config = _FROZEN
    path: str
    metadata: VideoMetadata
    segments: tuple[Segment, ...]
    target_segments: int
    samples: tuple[ActivitySample, ...]
    frames_decoded: int
    """Frames the first pass decoded (counted)."""
    decoded_fraction: float
    """`frames_decoded` over the file's frame count."""
    seeks: int
    warnings: tuple[str, ...] = ()
    jobs: tuple[SegmentJob, ...] = ()
    """One analysis job per segment, in order: what `analyze` fans out over (`for_each`)."""


def default_target_segments() -> int:
    """`max(32, 2 x CPUs)` of the Ray cluster this runs in, else of this machine."""
    cpus = float(os.cpu_count() or 1)
    try:
        import ray

        if ray.is_initialized():
            resources = ray.cluster_resources()  # type: ignore[no-untyped-call]
            cpus = float(resources.get("CPU", cpus))
    except Exception:  # a cluster that cannot say still gets a sensible target
        pass
    return max(32, 2 * math.ceil(cpus))


def _normalise(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = np.percentile(values, 5), np.percentile(values, 95)
    if high - low < 1e-9:
        return np.zeros_like(values)
    return np.asarray(np.clip((values - low) / (high - low), 0.0, 1.0), dtype=np.float64)


def _activity(samples: list[RawSample]) -> list[ActivitySample]:
    motion = np.array([content_delta(s.first, s.second) if s.second else 0.0 for s in samples])
    change = np.array(
        [0.0]
        + [
            content_delta(a.first, b.first) * (0.5 + histogram_delta(a.first, b.first))
            for a, b in itertools.pairwise(samples)
        ]
    )
    levels = [s.loudness_db for s in samples]
    activity = _normalise(motion)
    if any(v is not None for v in levels):
        loud = _normalise(np.array([-90.0 if v is None else v for v in levels]))
        activity = 0.6 * activity + 0.4 * loud
    return [
        ActivitySample(t_s=s.t, motion=float(m), change=float(c), loudness_db=v, activity=float(a))
        for s, m, c, v, a in zip(samples, motion, change, levels, activity, strict=True)
    ]


@dataclass(frozen=True)
class _Candidate:
    t: float
    score: float
    keyframe: bool


def _candidates(samples: list[ActivitySample], keyframes: list[float]) -> list[_Candidate]:
    acts = np.array([s.activity for s in samples])
    found = []
    for i in range(1, len(samples)):
        lo, hi = samples[i - 1].t_s, samples[i].t_s
        before, after = acts[max(0, i - 2) : i], acts[i : i + 2]
        level = abs(float(after.mean()) - float(before.mean()))
        score = max(min(1.0, samples[i].change / _CUT_SCALE), level)
        j = bisect.bisect_right(keyframes, lo + 1e-6)
        inside = [k for k in keyframes[j : j + 64] if lo < k <= hi]
        if inside:
            mid = (lo + hi) / 2
            found.append(_Candidate(min(inside, key=lambda k: abs(k - mid)), score, True))
        else:
            found.append(_Candidate((lo + hi) / 2, score, False))
    return found


def _split_point(a: float, b: float, keyframes: list[float], min_len: float) -> _Candidate:
    """The middle of `(a, b)`, moved to the nearest keyframe leaving both parts long enough.

    A worker whose segment starts on a keyframe decodes nothing before its start.
    """
    mid = (a + b) / 2
    j = bisect.bisect_left(keyframes, a + min_len)
    inside = keyframes[j : bisect.bisect_right(keyframes, b - min_len)]
    if inside:
        return _Candidate(min(inside, key=lambda k: abs(k - mid)), 0.0, True)
    return _Candidate(mid, 0.0, False)


def _place(
    candidates: list[_Candidate],
    keyframes: list[float],
    span: tuple[float, float],
    target: int,
    lengths: tuple[float, float],
) -> list[_Candidate]:
    """Boundaries at the best candidates that keep segments within the lengths.

    Then what is still too long is split at its best candidate, and the longest segments
    are halved while the count is under the target (few samples, few candidates).
    """
    (start, end), (min_len, max_len) = span, lengths
    chosen: list[_Candidate] = []

    def fits(t: float, within: tuple[float, float] = (start, end)) -> bool:
        edges = [within[0], within[1], *(c.t for c in chosen)]
        return all(abs(t - e) >= min_len - 1e-9 for e in edges)

    for cand in sorted(candidates, key=lambda c: -c.score):
        if len(chosen) >= target - 1:
            break
        if fits(cand.t):
            chosen.append(cand)
    while True:
        edges = sorted([start, end, *(c.t for c in chosen)])
        a, b = max(itertools.pairwise(edges), key=lambda g: g[1] - g[0])  # the longest
        if b - a <= max_len + 1e-9 and (len(chosen) >= target - 1 or b - a < 2 * min_len):
            return sorted(chosen, key=lambda c: c.t)
        inner = [c for c in candidates if a + min_len <= c.t <= b - min_len and fits(c.t)]
        if b - a > max_len + 1e-9 and inner:
            chosen.append(max(inner, key=lambda c: c.score))
        else:
            chosen.append(_split_point(a, b, keyframes, min_len))


def segment_lengths(
    request: SegmentationRequest, duration: float, most: int
) -> tuple[int, float, float]:
    """The target count and the shortest and longest segment, for at most `most` segments.

    `_place` keeps segments at least `min_len` long, but for a halving, which leaves
    `min_len / 2` at worst; so `min_len` is at least `2 x duration / (most - 1)`, and
    at least `MIN_SEGMENT_S`.
    """
    target = min(request.target_segments or default_target_segments(), most)
    mean_len = duration / max(1, target)
    floor_len = max(MIN_SEGMENT_S, 2 * duration / max(1, most - 1))
    min_len = min(duration, max(request.min_segment_s, mean_len / (2 * _BALANCE), floor_len))
    max_len = max(min_len, min(request.max_segment_s, _BALANCE * mean_len))
    target = max(1, min(target, math.floor(duration / min_len + 1e-9)))
    return target, min_len, max_len


def plan_segments(request: SegmentationRequest) -> SegmentPlan:
    """Sample the video cheaply and split it into content-aware segments."""
    meta = request.metadata
    start, duration = meta.start_time_s, meta.duration_s
    end = start + duration
    target, min_len, max_len = segment_lengths(request, duration, max_segments())
    keyframes = keyframe_times(meta.path, meta.keyframes_s, meta.pts_offset_s)
    budget = request.max_decode_fraction * max(1, meta.frame_count)
    n = min(request.max_samples, max(4, math.ceil(duration * request.sample_rate_hz)))
    times, cost = plan_sample_times(start, duration, keyframes, meta.frame_rate, n)
    while cost > budget and n > 4:
        n = max(4, int(n * 0.75))
        times, cost = plan_sample_times(start, duration, keyframes, meta.frame_rate, n)
    warnings = []
    if cost > budget:
        warnings.append(
            f"keyframes are sparse (up to {meta.max_keyframe_gap_s:.1f} s apart): the first "
            f"pass needs about {cost:.0f} decoded frames, over its budget of {budget:.0f}"
        )
    taken = take_samples(
        meta.path,
        times,
        keyframes=keyframes,
        fps=meta.frame_rate,
        audio=meta.audio is not None,
    )
    samples = _activity(taken.samples)
    chosen = _place(
        _candidates(samples, keyframes), keyframes, (start, end), target, (min_len, max_len)
    )
    edges = [start, *(c.t for c in chosen), end]
    segments = []
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        inside = [s.activity for s in samples if a <= s.t_s < b]
        segments.append(
            Segment(
                index=i,
                start_s=round(a, 6),
                end_s=round(b, 6),
                boundary_score=chosen[i - 1].score if i else 0.0,
                starts_at_keyframe=chosen[i - 1].keyframe if i else True,
                activity=float(np.mean(inside)) if inside else 0.0,
            )
        )
    return SegmentPlan(
        path=meta.path,
        metadata=meta,
        segments=tuple(segments),
        target_segments=target,
        samples=tuple(samples),
        frames_decoded=taken.frames_decoded,
        decoded_fraction=taken.frames_decoded / max(1, meta.frame_count),
        seeks=taken.seeks,
        warnings=tuple(warnings),
        jobs=tuple(
            SegmentJob(
                path=meta.path,
                index=seg.index,
                start_s=seg.start_s,
                end_s=seg.end_s,
                frame_rate=meta.frame_rate,
                rotation=meta.rotation,
            )
            for seg in segments
        ),
    )
