"""`analyze_video`: drive the three video tasks through a swarm client.

plan (probe + first pass) -> one analysis sub-task per segment (a streaming Ray Data
stage) -> timeline report. Between the second and third task the driver reads the
segments task's record: each accepted result's watermark, each failed segment's last
error and the attempts each took, so the report can trace every segment (see
`_capabilities` for why these are separate tasks).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from swarm_ray._client import SwarmClient
from swarm_ray._errors import SwarmRuntimeError
from swarm_ray._progress import follow_with_progress
from swarm_ray._signals import SubTaskDone, SubTaskFailed, SubTaskTimedOut
from swarm_ray.video._models import AnalysisSettings, SegmentAnalysis, SegmentJob
from swarm_ray.video._report import TimelineReport
from swarm_ray.video._segment import SegmentPlan
from swarm_ray.video._timeline import SegmentOutcome

__all__ = ["VideoRun", "analyze_video", "segment_outcomes"]

OnStage = Callable[[str, dict[str, Any]], object]
"""Told `(stage, facts)` as each task finishes (progress output in the job)."""


class VideoRun(BaseModel):
    """What one analysis produced, and where its time went."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    plan_task: str
    segments_task: str
    timeline_task: str
    plan: SegmentPlan
    outcomes: tuple[SegmentOutcome, ...]
    report: TimelineReport
    seconds: dict[str, float]
    """Wall time of `plan`, `segments`, `timeline` and `total`."""


def _finish(client: SwarmClient, task_id: str, what: str, timeout_s: float | None) -> Any:
    record = client.wait(task_id, timeout_s=timeout_s)
    if record.machine.state.value != "completed":
        error = record.error.message if record.error else record.machine.state.value
        causes = "; ".join(w for w in record.warnings if "failed" in w)  # the named errors
        raise SwarmRuntimeError(
            f"{what} task `{task_id}` ended: {error}" + (f" ({causes})" if causes else ""),
            task_id=task_id,
        )
    return client.output(task_id)


def segment_outcomes(
    client: SwarmClient, task_id: str, plan: SegmentPlan
) -> tuple[SegmentOutcome, ...]:
    """Each planned segment's output or error, watermark and attempts, from the record."""
    record = client.record(task_id)
    output = client.output(task_id) or {}
    results: dict[str, Any] = output.get("results", {})
    marks: dict[str, str] = {}
    errors: dict[str, str] = {}
    attempts: Counter[str] = Counter()
    for event in record.log:
        if isinstance(event, SubTaskDone):
            marks[event.result.subtask_id] = event.result.watermark
            attempts[event.result.subtask_id] += 1
        elif isinstance(event, SubTaskFailed):
            assert event.result.error is not None
            errors[event.result.subtask_id] = event.result.error.message
            attempts[event.result.subtask_id] += 1
        elif isinstance(event, SubTaskTimedOut):
            errors[event.subtask_id] = f"timed out (attempt {event.attempt})"
            attempts[event.subtask_id] += 1
    outcomes = []
    for seg in plan.segments:
        sid = f"analyze[{seg.index}]"
        data = results.get(sid)
        analysis = SegmentAnalysis.model_validate(data) if data else None
        outcomes.append(
            SegmentOutcome(
                index=seg.index,
                start_s=seg.start_s,
                end_s=seg.end_s,
                subtask_id=sid,
                watermark=marks.get(sid) if analysis else None,
                attempts=max(1, attempts[sid]),
                analysis=analysis,
                error=None if analysis else errors.get(sid, "no result"),
            )
        )
    return tuple(outcomes)


def analyze_video(
    client: SwarmClient,
    path: str,
    out_dir: str,
    *,
    target_segments: int | None = None,
    min_segment_s: float | None = None,
    max_segment_s: float | None = None,
    settings: AnalysisSettings | None = None,
    timeout_s: float | None = None,
    on_stage: OnStage | None = None,
    progress: bool = False,
) -> VideoRun:
    """Probe, segment, analyse every segment in parallel and render the timeline.

    With `progress`, the segments task shows its per-stage progress on stdout (a bar on
    a terminal, plain lines elsewhere) while it runs.

    Raises:
        SwarmRuntimeError: A task did not complete; for a file that cannot be analysed
            at all, its message carries the probe's named error (file and reason).
    """
    started = time.perf_counter()
    params: dict[str, Any] = {"path": path}
    for name, value in (
        ("target_segments", target_segments),
        ("min_segment_s", min_segment_s),
        ("max_segment_s", max_segment_s),
    ):
        if value is not None:
            params[name] = value
    plan_task = client.submit(template="video_plan", params=params)
    plan = SegmentPlan.model_validate(_finish(client, plan_task, "video plan", timeout_s))
    planned = time.perf_counter()
    if on_stage:
        on_stage("plan", {"task": plan_task, "segments": len(plan.segments)})
    meta = plan.metadata
    jobs = tuple(
        SegmentJob(
            path=path,
            index=s.index,
            start_s=s.start_s,
            end_s=s.end_s,
            frame_rate=meta.frame_rate,
            rotation=meta.rotation,
        ).model_dump(mode="json")
        for s in plan.segments
    )
    shared: dict[str, Any] = {"out_dir": out_dir}
    if settings is not None:
        shared["settings"] = settings.model_dump(mode="json")
    segments_task = client.submit(template="video_segments", items=jobs, params=shared)
    if progress:
        for _event in follow_with_progress(client, segments_task):
            pass
    client.wait(segments_task, timeout_s=timeout_s)
    outcomes = segment_outcomes(client, segments_task, plan)
    analysed = time.perf_counter()
    if on_stage:
        failed = sum(1 for o in outcomes if o.analysis is None)
        on_stage(
            "segments", {"task": segments_task, "ok": len(outcomes) - failed, "failed": failed}
        )
    timeline_task = client.submit(
        template="video_timeline",
        params={
            **shared,
            "metadata": meta.model_dump(mode="json"),
            "segments": [o.model_dump(mode="json") for o in outcomes],
            "provenance": {"plan_task": plan_task, "segments_task": segments_task},
        },
    )
    report = TimelineReport.model_validate(
        _finish(client, timeline_task, "video timeline", timeout_s)
    )
    done = time.perf_counter()
    if on_stage:
        on_stage("timeline", {"task": timeline_task, "report": report.markdown_path})
    return VideoRun(
        plan_task=plan_task,
        segments_task=segments_task,
        timeline_task=timeline_task,
        plan=plan,
        outcomes=outcomes,
        report=report,
        seconds={
            "plan": round(planned - started, 3),
            "segments": round(analysed - planned, 3),
            "timeline": round(done - analysed, 3),
            "total": round(done - started, 3),
        },
    )
