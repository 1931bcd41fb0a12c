"""`TaskRecord`: everything needed to resume a task after the orchestrator restarts.

The record holds the request, the plan, the state machine with its audit log and the
scheduler's event log. Replaying that log through a fresh `Scheduler` rebuilds the
scheduler exactly, so a restarted orchestrator re-dispatches only what was outstanding.
Large outputs are not kept here: results carry `output_ref`s into the result store.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core.model._fsm import TaskMachine
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._signals import SchedulerEvent
from swarm_ray.core.model._subtask import SubTaskError
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.model._traceparent import parse_traceparent

__all__ = ["TaskRecord"]

SCHEMA_VERSION = 2
"""Version of the persisted record format, bumped on every change to what is stored: a
record of an older version is migrated as it is read (`runtime._migrations`), one of a
newer one refused."""


class TaskRecord(BaseModel):
    """A task as persisted by the orchestrator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[2] = 2
    """Format version (`SCHEMA_VERSION`): the stores keep it beside each task's snapshot,
    migrate older ones as they read them and refuse newer ones."""
    task_id: str
    """The task."""
    trace_id: str
    """Shared by every event and log line of the task."""
    request: TaskRequest
    """What was asked."""
    machine: TaskMachine
    """State and audit log."""
    plan: Plan | None = None
    """The plan, once the template router or a planner's draft produced one."""
    planning: Plan | None = None
    """The DAG a planner's task starts with: one sub-task asking a planning capability for
    `plan` (see `_planning`). The task's log grows it by `plan` (`PlanAdopted`)."""
    log: tuple[SchedulerEvent, ...] = ()
    """Every scheduler event, in order (replayed on recovery)."""
    created_at: float
    """When it was submitted."""
    updated_at: float
    """When it last changed."""
    output: dict[str, Any] | None = None
    """The aggregate's output (small) once completed."""
    output_ref: str | None = None
    """Result-store reference of a large aggregate output."""
    error: SubTaskError | None = None
    """Why it failed or was cancelled."""
    warnings: tuple[str, ...] = Field(default=())
    """Degradations the result must mention."""
    owner: str | None = None
    """The principal that submitted it; None for a trusted caller (the Python client, a
    job, the CLI). An owned task is untrusted: its inputs are checked (`_access`)."""
    workdir: str | None = None
    """The task's own directory for outputs (`$task_dir` in templates)."""


def new_record(
    request: TaskRequest,
    now: float,
    *,
    task_id: str | None = None,
    owner: str | None = None,
    workdir: str | None = None,
) -> TaskRecord:
    """A new task's record, in state `created` at `now`.

    Its id is `task_id`, else the request's own, else a new one; its trace the caller's
    (the request's `traceparent`), else a new one.
    """
    task_id = task_id or request.task_id or uuid.uuid4().hex[:16]
    parent = parse_traceparent(request.traceparent)
    return TaskRecord(
        task_id=task_id,
        trace_id=parent.trace_id if parent is not None else uuid.uuid4().hex,
        request=request,
        machine=TaskMachine(task_id=task_id),
        created_at=now,
        updated_at=now,
        owner=owner,
        workdir=workdir,
    )
