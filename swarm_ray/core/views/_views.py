"""A task as callers see it: `TaskStatus`, one model for the client, the CLI and the gateway.

`Orchestrator.status` and `Orchestrator.tasks` return it, `SwarmClient.status` and a
`TaskHandle` hand it on, and `GET /v1/tasks/{id}` serialises it: one shape, declared once.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._human import HumanWait
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._subtask import SubTaskSpec
from swarm_ray.core.scheduling._scheduler import Scheduler
from swarm_ray.core.views._attempts import SubTaskHistory, critical_path, histories

__all__ = ["TaskStatus"]

_VIEW = ConfigDict(frozen=True, extra="forbid")


def record_view(driver: TaskDriver) -> TaskRecord:
    """The task's record with its scheduler log filled in (for `show`)."""
    log = tuple(driver.scheduler.log) if driver.scheduler else ()
    return driver.record.model_copy(update={"log": log})


def waiting_of(driver: TaskDriver) -> list[HumanWait]:
    """Sub-tasks waiting for a person, with who may answer (the task's owner)."""
    if driver.scheduler is None or driver.state.terminal:
        return []
    owner = driver.record.owner
    return [w.model_copy(update={"owner": owner}) for w in driver.scheduler.waiting()]


class SubTaskView(BaseModel):
    """One sub-task of a task: where it is, who ran it, what its attempts did."""

    model_config = _VIEW

    status: str
    """`pending`, `running`, `held`, `waiting` (for a person), `succeeded`, `failed`,
    `skipped` or `cancelled`."""
    capability: str
    """The capability it runs on (the fallback's, after a switch)."""
    stage: str
    """The template stage that made it."""
    depends_on: list[str] = []
    """The sub-tasks it waits for (the plan's edges)."""
    attempts: int = 0
    """Attempts that came back (failed ones included)."""
    queued_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    """When its first attempt was queued, and its last one started and ended."""
    run_s: float = 0.0
    """Run time of every attempt, summed."""
    tokens: dict[str, int] = Field(default_factory=dict)
    """`prompt` and `completion` tokens of its attempts."""
    cost: float = 0.0
    """What its attempts cost (the endpoints' `prices`; 0 where none are set)."""
    critical: bool = False
    """Whether it lies on the task's critical path."""
    agent: str | None = None
    """The agent that produced its accepted result."""
    watermark: str | None = None
    """Its accepted result's watermark (traces it; see `swarm_ray.short_id`)."""
    output_ref: str | None = None
    """Where a large output lives in the result store."""
    error: dict[str, Any] | None = None
    """Why it failed for good: `code`, `message`, `details`."""
    parent: str | None = None
    """The sub-task that spawned it (a child sub-task, a rule's, a feedback round's)."""
    answer: dict[str, Any] | None = None
    """The answer it ran with, for a sub-task that asked a person (`await_human`)."""


class UsageView(BaseModel):
    """What a task spent."""

    model_config = _VIEW

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    """Prompt plus completion tokens (what `budget.max_tokens` counts)."""
    cost: float = 0.0
    """Money spent, from the endpoints' `prices` (what `budget.max_cost` counts)."""
    compute_s: float = 0.0
    """Agent run time of every attempt, summed."""


class TaskStatus(BaseModel):
    """A task: state, progress, warnings, error; in full, its plan, usage and output.

    A listing (`GET /v1/tasks`, `SwarmClient.tasks`) gives the brief form: `subtasks`
    empty and `usage`, `output` and `output_ref` None.
    """

    model_config = _VIEW

    task_id: str
    state: str
    """`created`, `routing`, `dispatching`, `executing`, `aggregating`, `finalizing`,
    `completed`, `failed` or `cancelled`."""
    template: str | None = None
    """The template (or `llm-plan`) that shaped its plan."""
    query: str = ""
    metadata: dict[str, str] = {}
    """The caller's labels (`TaskRequest.metadata`)."""
    progress: float
    """Share of its sub-tasks settled, 0..1."""
    created_at: float
    updated_at: float
    warnings: list[str] = []
    """Degradations its result must mention."""
    error: dict[str, Any] | None = None
    """Why it failed or was cancelled: `code`, `message`, `details`."""
    waiting: list[HumanWait] = []
    """Sub-tasks waiting for a person: the question, its schema, the deadline and who
    answers (the brief form lists them too)."""
    subtasks: dict[str, SubTaskView] = {}
    """Each sub-task by id (the plan as a DAG: see `depends_on`)."""
    usage: UsageView | None = None
    output: dict[str, Any] | None = None
    """The aggregate's output when small (else `output_ref`)."""
    output_ref: str | None = None
    """Where a large output lives in the result store."""

    @property
    def ended(self) -> bool:
        """Whether the task completed, failed or was cancelled."""
        return self.state in ("completed", "failed", "cancelled")


def _subtask_view(
    scheduler: Scheduler, spec: SubTaskSpec, history: SubTaskHistory, critical: bool
) -> SubTaskView:
    view: dict[str, Any] = {
        "status": str(scheduler.status(spec.id)),
        "capability": spec.capability_id,
        "stage": spec.stage,
        "depends_on": list(spec.depends_on),
        # What its attempts did (for the task page's side panel) and whether it lies on
        # the task's critical path.
        "attempts": history.count,
        "queued_at": history.queued_at,
        "started_at": history.started_at,
        "ended_at": history.ended_at,
        "run_s": round(history.run_s, 6),
        "tokens": {"prompt": history.prompt_tokens, "completion": history.completion_tokens},
        "cost": round(history.cost, 9),
        "critical": critical,
    }
    if spec.parent is not None:  # a rule's or an agent's child: who spawned it
        view["parent"] = spec.parent
    result = scheduler.result(spec.id)
    if result is not None:  # the result's references: who made it, its watermark, its blob
        view.update(agent=result.agent, watermark=result.watermark, output_ref=result.output_ref)
    error = scheduler.error(spec.id)
    if error is not None:
        view["error"] = error.model_dump(mode="json")
    answer = scheduler.answer(spec.id)
    if answer is not None:
        view["answer"] = answer
    return SubTaskView(**view)


def status_view(driver: TaskDriver, *, brief: bool = False) -> TaskStatus:
    """State, progress, warnings and error; unless `brief`, sub-tasks, usage and output."""
    record = driver.record
    scheduler = driver.scheduler
    status: dict[str, Any] = {
        "task_id": record.task_id,
        "state": str(driver.state),
        "template": record.plan.template.name if record.plan else None,
        "query": record.request.query,
        "metadata": dict(record.request.metadata),
        "progress": 1.0
        if driver.state is TaskState.COMPLETED
        else (scheduler.progress() if scheduler else 0.0),
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "warnings": list(record.warnings or (scheduler.warnings if scheduler else ())),
        "error": record.error.model_dump(mode="json") if record.error else None,
        "waiting": waiting_of(driver),
    }
    if brief or scheduler is None:
        return TaskStatus(**status)
    specs = scheduler.specs()
    history = histories(scheduler)
    chain, _seconds = critical_path(specs, history)
    on_chain = set(chain)
    status["subtasks"] = {
        s.id: _subtask_view(scheduler, s, history[s.id], s.id in on_chain) for s in specs
    }
    usage = driver.usage()
    status["usage"] = UsageView(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        cost=round(usage.cost, 9),
        compute_s=round(scheduler.compute_seconds(), 6),
    )
    status["output"] = record.output
    status["output_ref"] = record.output_ref
    return TaskStatus(**status)
