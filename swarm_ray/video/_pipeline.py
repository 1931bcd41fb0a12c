"""`analyze_video`: one `analyze_video` task through a swarm client, and what it produced.

The whole job is one durable task (see `_capabilities`): the client submits it, waits,
and reads back the timeline report, the segment plan and each segment's outcome from the
task's record. Nothing here drives the work; a crash of this process loses nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from swarm_ray.agent import SwarmClient, follow_with_progress
from swarm_ray.core import SubTaskDone, SwarmRuntimeError, TaskRecord
from swarm_ray.video._models import AnalysisSettings
from swarm_ray.video._report import TimelineReport
from swarm_ray.video._segment import SegmentPlan
from swarm_ray.video._timeline import SegmentOutcome

__all__ = ["VideoRun", "analyze_video"]

OnStage = Callable[[str, dict[str, Any]], object]
"""Told `(stage, facts)` as each stage of the task settles (progress output in the job)."""


class VideoRun(BaseModel):
    """What one analysis produced, and where its time went."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    task_id: str
    """The one task that did it all."""
    plan: SegmentPlan
    outcomes: tuple[SegmentOutcome, ...]
    report: TimelineReport
    seconds: dict[str, float]
    """Wall time of the `plan` (probe and first pass), `segments` and `timeline` stages,
    from the sub-tasks' own timings, and `total`."""


def _stage_seconds(record: TaskRecord) -> dict[str, float]:
    spans: dict[str, tuple[float, float]] = {}
    for event in record.log:
        if not isinstance(event, SubTaskDone):
            continue
        stage = event.result.subtask_id.split("[", 1)[0]
        stage = "plan" if stage in ("probe", "segment") else stage
        stage = "segments" if stage == "analyze" else stage
        timings = event.result.timings
        start = timings.queued_at or timings.started_at or event.at
        end = timings.finished_at or event.at
        low, high = spans.get(stage, (start, end))
        spans[stage] = (min(low, start), max(high, end))
    seconds = {stage: round(high - low, 3) for stage, (low, high) in spans.items()}
    seconds["total"] = round(record.updated_at - record.created_at, 3)
    return seconds


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

    With `progress`, the task shows its per-stage progress on stdout (a bar on
    a terminal, plain lines elsewhere) while it runs.

    Raises:
        SwarmRuntimeError: The task did not complete; for a file that cannot be analysed
            at all, its message carries the probe's named error (file and reason).
    """
    params: dict[str, Any] = {"path": path, "out_dir": out_dir}
    for name, value in (
        ("target_segments", target_segments),
        ("min_segment_s", min_segment_s),
        ("max_segment_s", max_segment_s),
    ):
        if value is not None:
            params[name] = value
    if settings is not None:
        params["settings"] = settings.model_dump(mode="json")
    task = client.start(template="analyze_video", params=params)
    task_id = task.id
    seen: set[str] = set()
    events = follow_with_progress(task) if progress else task.events()
    for event in events:
        if on_stage is None or event.kind != "subtask" or event.status != "succeeded":
            continue
        stage = (event.subtask_id or "").split("[", 1)[0]
        if stage in ("segment", "timeline") and stage not in seen:
            seen.add(stage)
            on_stage("plan" if stage == "segment" else stage, {"task": task_id})
    record = task.wait(timeout_s=timeout_s)
    if record.machine.state.value != "completed":
        error = record.error.message if record.error else record.machine.state.value
        causes = "; ".join(w for w in record.warnings if "failed" in w)  # the named errors
        raise SwarmRuntimeError(
            f"video task `{task_id}` ended: {error}" + (f" ({causes})" if causes else ""),
            task_id=task_id,
        )
    report = task.output(TimelineReport)
    plan_output = next(
        e.result.output
        for e in record.log
        if isinstance(e, SubTaskDone) and e.result.subtask_id == "segment"
    )
    plan = SegmentPlan.model_validate(plan_output)
    return VideoRun(
        task_id=task_id,
        plan=plan,
        outcomes=report.outcomes,
        report=report,
        seconds=_stage_seconds(record),
    )
