"""The video workload as capabilities and one template, `analyze_video`.

    probe (once) -> segment (once) -> analyze (for each segment: one Ray Data stage)
                                   -> timeline (once, every segment's outcome)

The segments exist only once the first pass has run, so `analyze` fans out over the
segment plan's `jobs` when the `segment` sub-task succeeds (`for_each`), as durable as
any other decision: each segment is a sub-task of its own, with its own watermark, named
error and retries, and a row of a streaming Ray Data stage whose result comes back as
soon as it is done. The timeline gets each analysis sub-task's outcome (output or
error, watermark, attempts), so the report traces every segment to its agent. One task
from the CLI, the job, the notebook and the gateway (`params.path`: a file id there).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.agent import AgentReply, declared_limits
from swarm_ray.core import (
    CapabilitySpec,
    Catalog,
    ErrorCode,
    ExecutorKind,
    ReadPath,
    Resources,
    RetryPolicy,
    TaskTemplate,
    capability_maker,
)
from swarm_ray.video._analyze import analyze_segment
from swarm_ray.video._models import SegmentAnalysis, SegmentAnalysisRequest
from swarm_ray.video._probe import VideoMetadata, probe_video
from swarm_ray.video._report import TimelineReport, TimelineRequest, render_timeline
from swarm_ray.video._segment import SegmentationRequest, SegmentPlan, plan_segments

__all__ = [
    "ProbeRequest",
    "analyze_video_segment",
    "probe_metadata",
    "render_video_timeline",
    "segment_adaptive",
    "video_catalog",
]

VIDEO_TEMPLATE = """
name: analyze_video
description: Find the intense scenes of a video; segments analysed in parallel.
keywords: [video, intense, scenes, segments, analyse, analyze, timeline]
aggregate: timeline
stages:
  - name: probe
    capability: video.probe.metadata
    required: true
    input: {path: $params.path}
  - name: segment
    capability: video.segmentation.adaptive
    depends_on: [probe]
    required: true
    input:
      metadata: $from.probe
      target_segments: $params.target_segments
      min_segment_s: $params.min_segment_s
      max_segment_s: $params.max_segment_s
      sample_rate_hz: $params.sample_rate_hz
      max_samples: $params.max_samples
      max_decode_fraction: $params.max_decode_fraction
  - name: analyze
    capability: video.analysis.segment
    depends_on: [segment]
    for_each: $from.segment.jobs
    max_each: 10000
    input: {job: $each, out_dir: $task_dir, settings: $params.settings}
  - name: timeline
    capability: report.render.timeline
    depends_on: [segment, analyze]
    partial_ok: true
    input:
      metadata: $from.segment.metadata
      plan: $from.segment
      analyses: $from.analyze.@outcome
      out_dir: $task_dir
      settings: $params.settings
      top: $params.top
"""


class ProbeRequest(BaseModel):
    """Input of `video.probe.metadata`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    path: ReadPath = Field(min_length=1)
    """A local path or URI every worker can read."""
    max_keyframes: int = Field(default=256, ge=2)
    """Keyframe times returned at most."""


def probe_metadata(data: ProbeRequest) -> VideoMetadata:
    """Describe a video (raises `VideoProbeError` naming the file and the reason)."""
    return probe_video(data.path, max_keyframes=data.max_keyframes)


def segment_adaptive(data: SegmentationRequest) -> AgentReply:
    """Sample the video cheaply and place content-aware segment boundaries."""
    plan = plan_segments(data)
    return AgentReply(output=plan, warnings=plan.warnings)


def analyze_video_segment(data: SegmentAnalysisRequest) -> AgentReply:
    """Decode one segment's range and measure it (raises `SegmentDecodeError`)."""
    result = analyze_segment(data)
    return AgentReply(output=result, warnings=result.warnings)


def render_video_timeline(data: TimelineRequest) -> AgentReply:
    """Write the timeline report; failed segments are listed, never guessed."""
    report = render_timeline(data)
    ok = report.segments_ok / max(1, report.segments_ok + report.segments_failed)
    return AgentReply(output=report, confidence=ok, warnings=report.warnings)


_spec = capability_maker(__name__, tags=("video",))

_BRIEF_CPUS = 0.0
"""CPU reserved by the probe, first-pass and timeline agents. They run before or after
the analysis stage, never during it, but a pooled agent keeps its reservation while it
sits idle (`SWARM_RAY_AGENT_IDLE_S`, 60 s by default). The 1.0 CPU they held left a
2-CPU node room for one `num_cpus=1` decoder instead of two: bench/video.py saw the
segments run one at a time."""


def _limits(cpu_s: float) -> dict[str, Any]:
    """FFmpeg decodes tenants' files: a decompression bomb fails its own sub-task."""
    return declared_limits("VIDEO", memory_bytes=2 << 30, cpu_s=cpu_s)


def _capabilities() -> tuple[CapabilitySpec, ...]:
    workers = int(os.environ.get("SWARM_RAY_VIDEO_WORKERS", "64"))
    return (
        _spec(
            "video.probe.metadata",
            "Duration, streams, codec, frame rate (variable or not), keyframes and rotation "
            "of a video (PyAV); a named error per unreadable file.",
            "probe_metadata",
            ProbeRequest,
            VideoMetadata,
            resources=Resources(num_cpus=_BRIEF_CPUS, max_concurrency=4, **_limits(cpu_s=120)),
            timeout_s=120,
            retry=RetryPolicy(
                max_attempts=2, retry_on=frozenset({ErrorCode.TIMEOUT, ErrorCode.AGENT_UNAVAILABLE})
            ),
        ),
        _spec(
            "video.segmentation.adaptive",
            "Content-aware segment boundaries from a cheap seek-sampling pass over frames "
            "and audio, sized to the cluster.",
            "segment_adaptive",
            SegmentationRequest,
            SegmentPlan,
            resources=Resources(num_cpus=_BRIEF_CPUS, max_concurrency=2, **_limits(cpu_s=900)),
            timeout_s=900,
            retry=RetryPolicy(max_attempts=2, backoff_s=0.5),
        ),
        _spec(
            "video.analysis.segment",
            "Scene cuts, activity curve, loudness peaks, keyframe thumbnails and an "
            "intensity score of one segment, decoding only its own time range.",
            "analyze_video_segment",
            SegmentAnalysisRequest,
            SegmentAnalysis,
            executor=ExecutorKind.DATA,
            resources=Resources(num_cpus=1.0, max_concurrency=workers, **_limits(cpu_s=3600)),
            timeout_s=3600,
            retry=RetryPolicy(max_attempts=2, backoff_s=0.5),
        ),
        _spec(
            "report.render.timeline",
            "Timeline report of a video: intense segments ranked, pacing, intensity plot, "
            "thumbnails, each segment traceable by its watermark.",
            "render_video_timeline",
            TimelineRequest,
            TimelineReport,
            resources=Resources(num_cpus=_BRIEF_CPUS),
            timeout_s=300,
        ),
    )


def video_catalog() -> Catalog:
    """The video capabilities and the `analyze_video` template."""
    return Catalog(
        capabilities=_capabilities(),
        templates=(TaskTemplate.from_yaml(VIDEO_TEMPLATE, source="analyze_video"),),
    )
