"""The video workload: where are the intense parts of a long video, and how are they paced.

    probe_video(path) -> VideoMetadata             (or raises VideoProbeError)
    plan_segments(SegmentationRequest) -> SegmentPlan      cheap seek-sampling first pass
    analyze_segment(SegmentAnalysisRequest) -> SegmentAnalysis    one worker, one range
    render_timeline(TimelineRequest) -> TimelineReport     Markdown, JSON, intensity plot
    analyze_video(client, path, out_dir) -> VideoRun       all of it through the swarm

`video_catalog` registers the capabilities (`video.probe.metadata`,
`video.segmentation.adaptive`, `video.analysis.segment` on Ray Data,
`report.render.timeline`) and templates; pass `"swarm_ray.video:video_catalog"` to
`swarm_ray.connect(catalogs=[...])`. `generate_sample_video` paints test videos with a
known truth. PyAV (FFmpeg) does all decoding; matplotlib is imported when a plot is drawn.
"""

from __future__ import annotations

from swarm_ray.testing.sample_video import (
    SampleVideo,
    corrupt_range,
    generate_sample_video,
    remux_repeat,
)
from swarm_ray.video._analyze import analyze_segment, intensity_score
from swarm_ray.video._capabilities import ProbeRequest, video_catalog
from swarm_ray.video._errors import SegmentDecodeError, VideoFailureReason, VideoProbeError
from swarm_ray.video._models import (
    AnalysisSettings,
    CurvePoint,
    Cut,
    EdgeFrames,
    LoudnessPeak,
    SegmentAnalysis,
    SegmentAnalysisRequest,
    SegmentJob,
    Thumbnail,
)
from swarm_ray.video._pipeline import VideoRun, analyze_video
from swarm_ray.video._probe import AudioInfo, StreamInfo, VideoMetadata, probe_video
from swarm_ray.video._report import TimelineReport, TimelineRequest, render_timeline
from swarm_ray.video._segment import (
    ActivitySample,
    Segment,
    SegmentationRequest,
    SegmentPlan,
    default_target_segments,
    plan_segments,
)
from swarm_ray.video._timeline import (
    ActiveSpan,
    Pacing,
    SegmentOutcome,
    Timeline,
    TimelineCut,
    build_timeline,
)

__all__ = [
    "ActiveSpan",
    "ActivitySample",
    "AnalysisSettings",
    "AudioInfo",
    "CurvePoint",
    "Cut",
    "EdgeFrames",
    "LoudnessPeak",
    "Pacing",
    "ProbeRequest",
    "SampleVideo",
    "Segment",
    "SegmentAnalysis",
    "SegmentAnalysisRequest",
    "SegmentDecodeError",
    "SegmentJob",
    "SegmentOutcome",
    "SegmentPlan",
    "SegmentationRequest",
    "StreamInfo",
    "Thumbnail",
    "Timeline",
    "TimelineCut",
    "TimelineReport",
    "TimelineRequest",
    "VideoFailureReason",
    "VideoMetadata",
    "VideoProbeError",
    "VideoRun",
    "analyze_segment",
    "analyze_video",
    "build_timeline",
    "corrupt_range",
    "default_target_segments",
    "generate_sample_video",
    "intensity_score",
    "plan_segments",
    "probe_video",
    "remux_repeat",
    "render_timeline",
    "video_catalog",
]
