"""What the scheduler is told (events) and what it asks for (intents).

Events are the scheduler's only input and are persisted in order: replaying a task's
event log through a fresh scheduler rebuilds its state exactly, which is how the
orchestrator recovers. Intents are its only output; the orchestrator carries them out.
Every event carries the time, so the scheduler never reads a clock and stays
deterministic.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._subtask import SubTaskResult, SubTaskSpec

__all__: list[str] = []

_FROZEN = ConfigDict(frozen=True, extra="forbid")


# ---- events -------------------------------------------------------------------------


class Start(BaseModel):
    """The task's plan is accepted: dispatch what is ready."""

    model_config = _FROZEN
    kind: Literal["start"] = "start"
    at: float


class SubTaskDone(BaseModel):
    """An attempt produced an output (its watermark was already verified)."""

    model_config = _FROZEN
    kind: Literal["done"] = "done"
    at: float
    result: SubTaskResult

    @model_validator(mode="after")
    def _ok(self) -> Self:
        if not self.result.ok:
            raise ValueError("SubTaskDone needs a result without an error")
        return self


class SubTaskFailed(BaseModel):
    """An attempt failed with a structured error."""

    model_config = _FROZEN
    kind: Literal["failed"] = "failed"
    at: float
    result: SubTaskResult

    @model_validator(mode="after")
    def _failed(self) -> Self:
        if self.result.ok:
            raise ValueError("SubTaskFailed needs a result with an error")
        return self


class SubTaskTimedOut(BaseModel):
    """An attempt passed its deadline; its agent slot has been freed."""

    model_config = _FROZEN
    kind: Literal["timed_out"] = "timed_out"
    at: float
    subtask_id: str
    attempt: int


class Tick(BaseModel):
    """Time passed: lets open circuit breakers cool down."""

    model_config = _FROZEN
    kind: Literal["tick"] = "tick"
    at: float


class CancelRequested(BaseModel):
    """The user cancelled the task."""

    model_config = _FROZEN
    kind: Literal["cancel"] = "cancel"
    at: float
    reason: str = "cancelled by user"


class ChildAdded(BaseModel):
    """A running sub-task's agent asked for a child sub-task (a tool call into a capability).

    The child is dispatched like any sub-task (validated, watermarked, retried, recorded);
    nothing depends on it: its agent waits for it outside the scheduler.
    """

    model_config = _FROZEN
    kind: Literal["child"] = "child"
    at: float
    spec: SubTaskSpec


class HumanAnswered(BaseModel):
    """A person answered a sub-task waiting for them (checked against its schema already)."""

    model_config = _FROZEN
    kind: Literal["answer"] = "answer"
    at: float
    subtask_id: str
    answer: dict[str, Any]
    principal: str
    """Who answered (the audit trail's `who`)."""
    review_of: int | None = None
    """The attempt under review, when the answer settles a `needs_review` wait."""
    asked_in: int | None = None
    """The attempt that asked, when an agent asked the question (`AskedHumanError`)."""


class ReviewRequested(BaseModel):
    """An attempt with side effects was out when the orchestrator stopped.

    Nothing records whether it finished, so it is not run again until a person says so.
    """

    model_config = _FROZEN
    kind: Literal["review"] = "review"
    at: float
    subtask_id: str
    attempt: int


class SpendingStopped(BaseModel):
    """The task reached its budget and finishes with what it has (`on_exceeded: finish`)."""

    model_config = _FROZEN
    kind: Literal["spend_stop"] = "spend_stop"
    at: float
    limit: str
    """The bound reached (`budget.max_cost`, `daily.max_tokens`, ...)."""
    message: str
    """What was spent, over which bound (the error of every sub-task it stops)."""


class PlanAdopted(BaseModel):
    """The task's plan, made from what its planning sub-task drafted (see `_planning`).

    Its sub-tasks join the DAG and its template becomes the task's (stages, rules, loops,
    aggregate). The plan was decided outside the scheduler (the draft checked, or the
    template router's instead), so the event carries it: a replay grows the same DAG.
    """

    model_config = _FROZEN
    kind: Literal["adopt"] = "adopt"
    at: float
    plan: Plan


SchedulerEvent = Annotated[
    Start
    | SubTaskDone
    | SubTaskFailed
    | SubTaskTimedOut
    | Tick
    | CancelRequested
    | ChildAdded
    | HumanAnswered
    | ReviewRequested
    | SpendingStopped
    | PlanAdopted,
    Field(discriminator="kind"),
]
"""Any scheduler input; persisted as JSON in the task's log."""


# ---- intents ------------------------------------------------------------------------


class RunIntent(BaseModel):
    """Shared shape of the intents that run an attempt."""

    model_config = _FROZEN
    subtask_id: str
    stage: str
    capability_id: str
    attempt: int
    input: dict[str, Any]
    timeout_s: float
    delay_s: float = 0.0
    resume: dict[str, Any] | None = None
    """For an attempt that asked a person: `{"answer": ..., "state": ...}` (`SubTask.resume`)."""


class Dispatch(RunIntent):
    """Run a sub-task whose own dependencies are done (partial rollout: no stage barrier)."""

    reason: Literal[
        "ready", "rule", "feedback", "each", "half_open", "resume", "child", "answered", "reviewed"
    ] = "ready"


class Retry(RunIntent):
    """Run a failed sub-task again after `delay_s` (exponential backoff)."""

    error_code: ErrorCode


class Fallback(RunIntent):
    """Run a sub-task on its fallback capability."""

    from_capability: str
    reason: str


class AwaitHuman(BaseModel):
    """A sub-task is ready but waits for a person: tell them, and wake at the deadline."""

    model_config = _FROZEN
    subtask_id: str
    prompt: str
    deadline: float | None


class HumanSettled(BaseModel):
    """A wait ended: `answered` (by `principal`), `default` or `timed_out` at the deadline."""

    model_config = _FROZEN
    subtask_id: str
    outcome: Literal["answered", "default", "timed_out"]
    principal: str | None = None


class BreakerOpened(BaseModel):
    """A capability failed too often in a row: no dispatch to it until `until`."""

    model_config = _FROZEN
    capability_id: str
    failures: int
    until: float


class BreakerHalfOpened(BaseModel):
    """The cool-down passed: one trial sub-task may go through."""

    model_config = _FROZEN
    capability_id: str


class BreakerClosed(BaseModel):
    """A trial succeeded: the capability takes sub-tasks again."""

    model_config = _FROZEN
    capability_id: str


class RuleFired(BaseModel):
    """A dynamic rule matched an output and added sub-tasks."""

    model_config = _FROZEN
    rule: str
    source: str
    added: tuple[str, ...]


class FeedbackRoundStarted(BaseModel):
    """A judge found fault: the stage runs again with the judge's feedback."""

    model_config = _FROZEN
    stage: str
    judge_subtask: str
    round: int
    added: tuple[str, ...]


class FannedOut(BaseModel):
    """A `for_each` stage expanded over a list its source produced."""

    model_config = _FROZEN
    stage: str
    source: str
    added: tuple[str, ...]


class SkipSubTask(BaseModel):
    """A sub-task will not run because something it needs failed."""

    model_config = _FROZEN
    subtask_id: str
    reason: str


class CancelSubTasks(BaseModel):
    """Stop these running attempts (the task failed or was cancelled)."""

    model_config = _FROZEN
    subtask_ids: tuple[str, ...]


class ResultRejected(BaseModel):
    """A result for a sub-task that is not outstanding (replayed, stale or unknown)."""

    model_config = _FROZEN
    subtask_id: str
    attempt: int
    reason: str


class DraftSettled(BaseModel):
    """The planning sub-task settled: make the task's plan from its draft (`PlanAdopted`).

    Until that plan comes the task does not finish. `failure` says why the sub-task failed
    for good, when it did (there is no draft then).
    """

    model_config = _FROZEN
    subtask_id: str
    failure: str | None = None


class Warn(BaseModel):
    """A degradation the final result must mention."""

    model_config = _FROZEN
    message: str
    subtask_id: str | None = None


class FinishTask(BaseModel):
    """Every sub-task settled and nothing required failed."""

    model_config = _FROZEN
    warnings: tuple[str, ...]


class FailTask(BaseModel):
    """A required sub-task failed for good, or the task was cancelled."""

    model_config = _FROZEN
    reason: str
    code: ErrorCode
    subtask_id: str | None = None


Intent = (
    Dispatch
    | Retry
    | Fallback
    | AwaitHuman
    | HumanSettled
    | BreakerOpened
    | BreakerHalfOpened
    | BreakerClosed
    | RuleFired
    | FeedbackRoundStarted
    | FannedOut
    | SkipSubTask
    | CancelSubTasks
    | ResultRejected
    | DraftSettled
    | Warn
    | FinishTask
    | FailTask
)
"""Any scheduler output."""
