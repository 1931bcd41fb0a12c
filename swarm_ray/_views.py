"""Views of a task for callers: the status dict behind `status`, `tasks` and the gateway."""

from __future__ import annotations

from typing import Any

from swarm_ray._driver import TaskDriver
from swarm_ray._fsm import TaskState
from swarm_ray._scheduler import Scheduler
from swarm_ray._subtask import SubTaskSpec

__all__: list[str] = []


def _subtask_view(scheduler: Scheduler, spec: SubTaskSpec) -> dict[str, Any]:
    view: dict[str, Any] = {
        "status": str(scheduler.status(spec.id)),
        "capability": spec.capability_id,
        "stage": spec.stage,
        "depends_on": list(spec.depends_on),
    }
    if spec.parent is not None:  # a rule's or an agent's child: who spawned it
        view["parent"] = spec.parent
    result = scheduler.result(spec.id)
    if result is not None:  # the result's references: who made it, its watermark, its blob
        view.update(agent=result.agent, watermark=result.watermark, output_ref=result.output_ref)
    error = scheduler.error(spec.id)
    if error is not None:
        view["error"] = error.model_dump(mode="json")
    return view


def status_view(driver: TaskDriver, *, brief: bool = False) -> dict[str, Any]:
    """State, progress, warnings and error; unless `brief`, sub-tasks, usage and output."""
    record = driver.record
    scheduler = driver.scheduler
    status: dict[str, Any] = {
        "task_id": record.task_id,
        "state": str(driver.state),
        "template": record.plan.template.name if record.plan else None,
        "query": record.request.query,
        "progress": 1.0
        if driver.state is TaskState.COMPLETED
        else (scheduler.progress() if scheduler else 0.0),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "warnings": list(record.warnings or (scheduler.warnings if scheduler else ())),
        "error": record.error.model_dump(mode="json") if record.error else None,
    }
    if brief or scheduler is None:
        return status
    status["subtasks"] = {s.id: _subtask_view(scheduler, s) for s in scheduler.specs()}
    usage = scheduler.usage()
    status["usage"] = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "compute_s": round(scheduler.compute_seconds(), 6),
    }
    status["output"] = record.output
    status["output_ref"] = record.output_ref
    return status
