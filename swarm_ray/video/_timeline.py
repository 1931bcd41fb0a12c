"""Stitching segment results into one timeline: cuts, fades, active spans, pacing.

Workers see only their own range, so three things are decided here, across segments:

- a cut exactly on a boundary: the last frame of one segment and the first of the next
  are compared (coarse signatures) with the same adaptive rule the workers use;
- fades through black: black runs touching a boundary are joined, and each run that ends
  becomes one transition at its midpoint (PySceneDetect's ThresholdDetector places them
  the same way);
- active spans: buckets whose intensity stands in the upper half between the video's
  calm (10th percentile) and busy (90th percentile) levels, joined across gaps under a
  second. "Active" is relative to the video itself; a video of uniform pace has none.

Failed segments leave gaps: their time is reported as unanalysed, never guessed.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.video._analyze import intensity_score
from swarm_ray.video._features import FrameSignature, cut_score
from swarm_ray.video._models import AnalysisSettings, CurvePoint, Cut, SegmentAnalysis
from swarm_ray.video._probe import VideoMetadata

__all__ = ["ActiveSpan", "Pacing", "SegmentOutcome", "Timeline", "TimelineCut", "build_timeline"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class SegmentOutcome(BaseModel):
    """One segment's result as the swarm recorded it: output or error, and provenance."""

    model_config = _FROZEN
    index: int
    start_s: float
    end_s: float
    subtask_id: str
    """The analysis sub-task (`analyze[3]`)."""
    watermark: str | None = None
    """Watermark of the accepted result (traces it to agent and input)."""
    attempts: int = 1
    analysis: SegmentAnalysis | None = None
    error: str | None = None
    """Why it failed, as the swarm reported it."""


class TimelineCut(BaseModel):
    """A scene change on the whole video's timeline."""

    model_config = _FROZEN
    t_s: float
    frame: int
    """`t_s` times the nominal frame rate (how PySceneDetect numbers frames)."""
    kind: str
    """`cut`, `boundary_cut` (found across two segments) or `fade`."""
    score: float
    segment: int


class ActiveSpan(BaseModel):
    """A stretch of high intensity."""

    model_config = _FROZEN
    start_s: float
    end_s: float
    intensity: float
    """Mean bucket intensity inside (0-1)."""


class Pacing(BaseModel):
    """How the video moves overall."""

    model_config = _FROZEN
    cuts_per_minute: float
    mean_shot_s: float
    active_share: float = Field(ge=0, le=1)
    """Fraction of the analysed time inside active spans."""
    mean_calm_gap_s: float | None
    """Mean time between active spans."""
    analysed_s: float


class Timeline(BaseModel):
    """The stitched result."""

    model_config = _FROZEN
    cuts: tuple[TimelineCut, ...]
    active_spans: tuple[ActiveSpan, ...]
    intensity_curve: tuple[CurvePoint, ...]
    """Per-bucket intensity over the whole video (0-1)."""
    pacing: Pacing
    ranking: tuple[int, ...]
    """Segment indices, most intense first (failed ones left out)."""


def _edge_signature(data: dict[str, list[list[int]] | list[float]]) -> FrameSignature:
    return FrameSignature(
        y=np.asarray(data["y"], dtype=np.uint8),
        u=np.asarray(data["u"], dtype=np.uint8),
        v=np.asarray(data["v"], dtype=np.uint8),
        hist=np.asarray(data["hist"], dtype=np.float64),
    )


def _boundary_cuts(done: list[SegmentAnalysis], settings: AnalysisSettings) -> list[Cut]:
    found = []
    for left, right in itertools.pairwise(done):
        if abs(left.end_s - right.start_s) > 1e-6 or left.edges is None or right.edges is None:
            continue
        score = cut_score(_edge_signature(left.edges.last), _edge_signature(right.edges.first))
        around = [*left.edges.last_deltas, *right.edges.first_deltas]
        mean = sum(around) / len(around) if around else 0.0
        if score >= settings.cut_threshold and score >= settings.cut_ratio * mean:
            assert right.first_frame_s is not None
            found.append(Cut(t_s=right.first_frame_s, score=round(score, 2), kind="boundary_cut"))
    return found


def _fades(done: list[SegmentAnalysis], fps: float, video_end: float) -> list[Cut]:
    spans = sorted(s for a in done for s in a.black_spans)
    merged: list[list[float]] = []
    for start, end in spans:
        if merged and start - merged[-1][1] <= 1.5 / fps:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [
        Cut(t_s=round((a + b) / 2, 4), score=0.0, kind="fade")
        for a, b in merged
        if b < video_end - 1.5 / fps  # a fade out at the very end starts no new scene
    ]


def _intensity_curve(done: list[SegmentAnalysis]) -> list[CurvePoint]:
    """Motion and loudness per bucket (the cut rate is a segment-level measure)."""
    points = []
    for a in done:
        loud = {p.t_s: p.value for p in a.loudness_curve}
        for p in a.activity_curve:
            db = loud.get(p.t_s, a.loudness_mean_db)
            points.append(CurvePoint(t_s=p.t_s, value=intensity_score(p.value, 0.0, db)))
    return points


def _active_spans(curve: list[CurvePoint], done: list[SegmentAnalysis]) -> list[ActiveSpan]:
    if len(curve) < 3:
        return []
    values = np.array([p.value for p in curve])
    low, high = np.percentile(values, 10), np.percentile(values, 90)
    if high - low < 0.08:
        return []
    threshold = low + 0.5 * (high - low)
    ends = {p.t_s: p.t_s for p in curve}
    for a in done:  # each point covers up to the next point of its segment
        ts = [p.t_s for p in a.activity_curve]
        for t, nxt in zip(ts, [*ts[1:], a.end_s], strict=True):
            ends[t] = nxt
    spans: list[list[float]] = []
    weights: list[list[float]] = []
    for p, v in zip(curve, values, strict=True):
        if v < threshold:
            continue
        if spans and p.t_s - spans[-1][1] < 1.0:
            spans[-1][1] = ends[p.t_s]
            weights[-1].append(float(v))
        else:
            spans.append([p.t_s, ends[p.t_s]])
            weights.append([float(v)])
    return [
        ActiveSpan(start_s=round(a, 3), end_s=round(b, 3), intensity=round(float(np.mean(w)), 4))
        for (a, b), w in zip(spans, weights, strict=True)
        if b - a >= 1.0
    ]


def build_timeline(
    metadata: VideoMetadata,
    outcomes: Sequence[SegmentOutcome],
    settings: AnalysisSettings | None = None,
) -> Timeline:
    """Stitch the segments' results (failed ones are gaps) into one timeline."""
    settings = settings or AnalysisSettings()
    done = sorted((o.analysis for o in outcomes if o.analysis is not None), key=lambda a: a.index)
    fps = metadata.nominal_frame_rate or metadata.frame_rate
    video_end = metadata.start_time_s + metadata.duration_s
    cuts = [(c, a.index) for a in done for c in a.cuts]
    cuts += [(c, c_seg) for c, c_seg in _segment_of(_boundary_cuts(done, settings), done)]
    cuts += [(c, c_seg) for c, c_seg in _segment_of(_fades(done, fps, video_end), done)]
    timeline_cuts = tuple(
        TimelineCut(t_s=c.t_s, frame=round(c.t_s * fps), kind=c.kind, score=c.score, segment=s)
        for c, s in sorted(cuts, key=lambda x: x[0].t_s)
    )
    curve = _intensity_curve(done)
    spans = _active_spans(curve, done)
    analysed = sum(a.end_s - a.start_s for a in done)
    hard = [c for c in timeline_cuts if c.kind != "fade"]
    active = sum(s.end_s - s.start_s for s in spans)
    gaps = [b.start_s - a.end_s for a, b in itertools.pairwise(spans)]
    pacing = Pacing(
        cuts_per_minute=round(len(hard) * 60 / analysed, 3) if analysed else 0.0,
        mean_shot_s=round(analysed / (len(timeline_cuts) + 1), 3),
        active_share=round(min(1.0, active / analysed), 4) if analysed else 0.0,
        mean_calm_gap_s=round(float(np.mean(gaps)), 3) if gaps else None,
        analysed_s=round(analysed, 3),
    )
    ranking = tuple(a.index for a in sorted(done, key=lambda a: (-a.intensity, a.index)))
    return Timeline(
        cuts=timeline_cuts,
        active_spans=tuple(spans),
        intensity_curve=tuple(curve),
        pacing=pacing,
        ranking=ranking,
    )


def _segment_of(cuts: list[Cut], done: list[SegmentAnalysis]) -> list[tuple[Cut, int]]:
    found = []
    for cut in cuts:
        owner = next((a.index for a in done if a.start_s - 1e-4 <= cut.t_s < a.end_s), -1)
        found.append((cut, owner))
    return found
