"""Wire models of the per-segment analysis: what a worker is given and what it returns.

They are frozen, JSON-ready Pydantic models because they travel as sub-task inputs and
outputs through the orchestrator and its state store: a segment's result must stay small
(curves are bucketed, the edge frames kept coarse) whatever the segment's length.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import ReadPath, WritePath

__all__ = [
    "AnalysisSettings",
    "CurvePoint",
    "Cut",
    "EdgeFrames",
    "LoudnessPeak",
    "SegmentAnalysis",
    "SegmentAnalysisRequest",
    "SegmentJob",
    "Thumbnail",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

# Bounds of what a caller may ask of one segment's analysis (`AnalysisSettings`): each
# one multiplies the work or the output of every segment of a video.
MAX_CURVE_POINTS = 1000
"""Buckets of a segment's curves at most (its output stays small, see the docstring)."""
MAX_THUMBNAILS = 32
"""Thumbnails one segment may write."""
MAX_THUMBNAIL_WIDTH = 1920
"""Widest thumbnail in pixels."""
MAX_DECODE_THREADS = 16
"""FFmpeg threads one segment's worker may start (Ray counts one core per worker)."""


class SegmentJob(BaseModel):
    """One row of the analysis stage: which file and which time range."""

    model_config = _FROZEN
    path: ReadPath
    """The file; every worker opens it itself."""
    index: int = Field(ge=0)
    """The segment's position in the video."""
    start_s: float
    """First instant of the segment (frames shown at or after it belong to it)."""
    end_s: float
    """First instant of the next segment."""
    frame_rate: float = Field(gt=0)
    """Average frame rate from the probe (to judge how many frames are missing)."""
    rotation: int = 0
    """Degrees to turn thumbnails by for display."""


class AnalysisSettings(BaseModel):
    """Tuning of the per-segment analysis; the defaults suit gameplay and film."""

    model_config = _FROZEN
    cut_threshold: float = Field(default=10.0, ge=0)
    """Smallest cut score (content delta x (0.5 + histogram delta)) that can be a cut."""
    cut_ratio: float = Field(default=3.0, ge=1)
    """How far a cut's score must stand above its neighbours' mean."""
    min_scene_s: float = Field(default=0.5, ge=0, le=86_400)
    """Shortest scene: a second cut closer than this is ignored (flashes)."""
    black_level: float = Field(default=8.0, ge=0, le=255)
    """Mean intensity (0-255) under which a frame counts as black (fades)."""
    curve_step_s: float = Field(default=0.5, ge=0.01, le=3600)
    """Finest bucket of the activity and loudness curves."""
    max_curve_points: int = Field(default=120, ge=4, le=MAX_CURVE_POINTS)
    """Buckets per segment at most (coarser buckets for long segments)."""
    max_thumbnails: int = Field(default=4, ge=0, le=MAX_THUMBNAILS)
    """Keyframe thumbnails written per segment at most."""
    thumbnail_width: int = Field(default=320, ge=16, le=MAX_THUMBNAIL_WIDTH)
    """Width of a thumbnail in pixels."""
    decode_threads: int = Field(default=1, ge=0, le=MAX_DECODE_THREADS)
    """FFmpeg decoding threads per worker (0: FFmpeg decides); 1 lets Ray count cores."""
    min_decoded_fraction: float = Field(default=0.5, ge=0, le=1)
    """Fewer frames than this fraction of the expected ones, with decode errors, fails the
    segment as corrupted."""


class SegmentAnalysisRequest(BaseModel):
    """Input of `video.analysis.segment`."""

    model_config = _FROZEN
    job: SegmentJob
    """The segment."""
    out_dir: WritePath | None = None
    """Where thumbnails go (`thumbnails/` under it); None writes none."""
    settings: AnalysisSettings = AnalysisSettings()
    """Tuning."""


class Cut(BaseModel):
    """A scene change."""

    model_config = _FROZEN
    t_s: float
    """When the new scene starts."""
    score: float
    """Cut score (0 for fades)."""
    kind: str = "cut"
    """`cut` (hard cut) or `fade` (through black, placed mid-way as PySceneDetect does)."""


class CurvePoint(BaseModel):
    """One bucket of a curve."""

    model_config = _FROZEN
    t_s: float
    """Bucket start."""
    value: float


class LoudnessPeak(BaseModel):
    """A loud moment."""

    model_config = _FROZEN
    t_s: float
    db: float
    """RMS level over 100 ms, dBFS."""


class Thumbnail(BaseModel):
    """A JPEG written for the report."""

    model_config = _FROZEN
    t_s: float
    path: str
    reason: str
    """`start`, `cut` or `peak` (the most active moment)."""


class EdgeFrames(BaseModel):
    """Coarse signatures of a segment's first and last frames, and their neighbours' scores.

    The aggregator compares one segment's last frame with the next one's first to tell
    whether a cut falls exactly on the boundary, which neither worker can see.
    """

    model_config = _FROZEN
    first: dict[str, list[list[int]] | list[float]]
    last: dict[str, list[list[int]] | list[float]]
    first_deltas: list[float]
    """Cut scores of the frames right after the first."""
    last_deltas: list[float]
    """Cut scores of the frames right before the last."""
    first_black: bool
    last_black: bool


class SegmentAnalysis(BaseModel):
    """Output of `video.analysis.segment`."""

    model_config = _FROZEN
    index: int
    start_s: float
    end_s: float
    frames_decoded: int
    """Every frame the worker decoded, those before its start (seek pre-roll) included."""
    frames_in_range: int
    """Frames inside `[start_s, end_s)`."""
    preroll_frames: int
    """Frames decoded before `start_s` (from the keyframe the seek landed on)."""
    first_frame_s: float | None
    last_frame_s: float | None
    cuts: tuple[Cut, ...]
    """Hard cuts inside the segment."""
    black_spans: tuple[tuple[float, float], ...]
    """Runs of black frames `[start, end)`; ones touching an edge may continue next door."""
    activity_curve: tuple[CurvePoint, ...]
    """Mean motion (content delta between consecutive frames, 0-255) per bucket."""
    loudness_curve: tuple[CurvePoint, ...]
    """Mean RMS level (dBFS) per bucket; empty without audio."""
    loudness_peaks: tuple[LoudnessPeak, ...]
    motion_mean: float
    loudness_mean_db: float | None
    cuts_per_minute: float
    intensity: float = Field(ge=0, le=1)
    """Motion, cut rate and loudness combined on an absolute 0-1 scale."""
    thumbnails: tuple[Thumbnail, ...]
    edges: EdgeFrames | None
    decode_errors: int
    decode_seconds: float
    """Wall time of the decoding loop (throughput figures)."""
    warnings: tuple[str, ...] = ()
