"""An attempt across the task's edge: the `SubTask` it leaves as, the event it comes back as.

A run intent (`Dispatch`, `Retry`, `Fallback`) leaves the driver as a `SubTask`: its
input, the watermark the task's gate issued for it, and what the agent needs of the task
(trace, priority, owner, the orchestrator to call back for children, where to record the
effects of a side-effecting capability). Its result comes back priced (the operator's
price per compute-second of its capability, added to its cost) and, once the gate let it
in, becomes the scheduler's event: done, failed, or timed out.

Pure: no Ray, no I/O (the caller passes the time and the watermark).
"""

from __future__ import annotations

from collections.abc import Mapping

from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._signals import RunIntent, SubTaskDone, SubTaskFailed, SubTaskTimedOut
from swarm_ray.core.model._subtask import SubTask, SubTaskResult

__all__: list[str] = []


def subtask_for(
    intent: RunIntent,
    record: TaskRecord,
    *,
    watermark: str,
    now: float,
    orchestrator: str | None,
    record_effects: str | None,
) -> SubTask:
    """The sub-task `intent` runs as, in `record`'s task, queued at `now`."""
    return SubTask(
        task_id=record.task_id,
        parent_task_id=record.request.parent_task_id,
        subtask_id=intent.subtask_id,
        capability_id=intent.capability_id,
        attempt=intent.attempt,
        input=intent.input,
        watermark=watermark,
        trace_id=record.trace_id,
        timeout_s=intent.timeout_s,
        queued_at=now,
        orchestrator=orchestrator,
        priority=record.request.priority,
        owner=record.owner,
        resume=intent.resume,
        record_effects=record_effects,
    )


def priced(result: SubTaskResult, prices: Mapping[str, float]) -> SubTaskResult:
    """`result` with its run time's price (per second, of its capability) in its cost."""
    price = prices.get(result.capability_id)
    if not price:
        return result
    used = result.usage
    cost = used.cost + price * result.timings.duration_s
    return result.model_copy(update={"usage": used.model_copy(update={"cost": cost})})


def result_event(
    result: SubTaskResult, now: float
) -> SubTaskDone | SubTaskFailed | SubTaskTimedOut:
    """The scheduler event an accepted `result` is."""
    if result.ok:
        return SubTaskDone(at=now, result=result)
    assert result.error is not None
    if result.error.code is ErrorCode.TIMEOUT:
        return SubTaskTimedOut(at=now, subtask_id=result.subtask_id, attempt=result.attempt)
    return SubTaskFailed(at=now, result=result)
