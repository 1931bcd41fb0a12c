"""A task driver's conversation with the orchestrator: inputs, commands and notices.

The driver (`_driver.TaskDriver`) owns everything about one task and decides what
happens next; the orchestrator actor only feeds it inputs and carries out what it says:

    orchestrator                           driver.step(input) -> Step
      Planned / AskPlanner / PlanFailed  ->    commands: Run, Halt, WakeAt, Replan, Close
      Arrived / Cancel / Wake / AskChild       notices:  Accepted, Retrying, BreakerMoved,
      Answer / Resume / Broken                           Refused, AnswerRejected,
                                                         ChildAdmitted, ChildRefused,
                                                         ChildSettled

Commands change the world (run attempts on agents, stop them, arm a timer, ask a planner,
wake the task's waiters); notices only inform (metrics, health, audit). Both are closed
unions, matched exhaustively where they are consumed. Inputs hold exceptions, so they are
dataclasses rather than persisted models: what must survive a crash is the scheduler's
event log, which the driver writes before it decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from swarm_ray.core.driver._children import ChildOutcome
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import SwarmError
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._subtask import SubTask, SubTaskResult
from swarm_ray.core.model._task import TaskRequest

__all__: list[str] = []


# ---- inputs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Planned:
    """A new task's plan, validated (`_request_plan.plan_request`), or a stored one's."""

    plan: Plan


@dataclass(frozen=True, slots=True)
class AskPlanner:
    """A new task is planned by a planning capability, as its first sub-task."""

    planner: str
    request: TaskRequest
    """What to plan: the request with its file ids resolved."""


@dataclass(frozen=True, slots=True)
class PlanFailed:
    """No plan can be made (no template fits, or the planner and the templates refused)."""

    error: SwarmError


@dataclass(frozen=True, slots=True)
class Arrived:
    """An attempt's result came back from an executor."""

    result: SubTaskResult


@dataclass(frozen=True, slots=True)
class Cancel:
    """The task's owner (or an admin) cancelled it."""

    reason: str = "cancelled by user"


@dataclass(frozen=True, slots=True)
class Wake:
    """A timer the driver armed went off (a breaker's cool-down, a person's deadline)."""


@dataclass(frozen=True, slots=True)
class Resume:
    """The orchestrator restarted and reloaded this open task."""


@dataclass(frozen=True, slots=True)
class AskChild:
    """A running attempt's agent asks to run a child sub-task (see `_children`).

    The driver answers with `ChildAdmitted` or `ChildRefused`, and later `ChildSettled`.
    """

    parent: str
    """The asking attempt's sub-task."""
    parent_watermark: str
    """Its attempt's watermark: only the running attempt may ask."""
    capability_id: str
    input: dict[str, Any]
    key: str
    """The agent's own name for the call: asked again (a retry), it finds its child."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A person answers a waiting sub-task; the driver checks it (`AnswerRejected`)."""

    subtask_id: str
    answer: Any
    """As given: the driver checks it against the sub-task's answer schema."""
    principal: Principal
    """Who answers: only the task's owner (or a trusted caller) may."""


@dataclass(frozen=True, slots=True)
class Broken:
    """Taking an input failed: the state store refused a write, or a handler raised.

    The task stops, in memory first, naming `subtask_id` when a result was lost.
    """

    error: SwarmError
    subtask_id: str | None = None


DriverInput = (
    Planned
    | AskPlanner
    | PlanFailed
    | Arrived
    | Cancel
    | Wake
    | Resume
    | AskChild
    | Answer
    | Broken
)
"""Everything the orchestrator tells a driver."""


# ---- commands -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """Run one attempt (already watermarked) on its capability's executor."""

    subtask: SubTask
    delay_s: float = 0.0
    """Wait this long first (a retry's backoff)."""


@dataclass(frozen=True, slots=True)
class Halt:
    """Stop these running attempts (the task ended)."""

    subtask_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WakeAt:
    """Feed the driver `Wake` at this time."""

    at: float


@dataclass(frozen=True, slots=True)
class Replan:
    """Plan a task stored before its plan, as a new request would be planned."""


@dataclass(frozen=True, slots=True)
class Close:
    """The task ended: wake its waiters; its driver may be dropped from memory."""


Command = Run | Halt | WakeAt | Replan | Close
"""What a driver asks the orchestrator to do."""


# ---- notices --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Accepted:
    """A result passed its watermark check (for run-time metrics, health and audit)."""

    result: SubTaskResult
    trace_id: str


@dataclass(frozen=True, slots=True)
class Retrying:
    """An attempt goes again: `retry` on its capability or `fallback` to another."""

    capability_id: str
    kind: str


@dataclass(frozen=True, slots=True)
class BreakerMoved:
    """A capability's circuit breaker changed: 0 closed, 1 half-open, 2 open."""

    capability_id: str
    state: int


@dataclass(frozen=True, slots=True)
class Refused:
    """A result was refused (`forged`, `replayed`, `not_outstanding`, `unknown_task`...)."""

    reason: str


@dataclass(frozen=True, slots=True)
class AnswerRejected:
    """An `Answer` was refused: not the owner, not waiting, or not matching its schema."""

    error: SwarmError


@dataclass(frozen=True, slots=True)
class ChildAdmitted:
    """An `AskChild` was admitted: the child's id, and its outcome if settled already."""

    child_id: str
    outcome: ChildOutcome | None = None


@dataclass(frozen=True, slots=True)
class ChildRefused:
    """An `AskChild` was refused (task ended, not the running attempt, a child rule)."""

    error: SwarmError


@dataclass(frozen=True, slots=True)
class ChildSettled:
    """A child sub-task an agent asked for settled (or its task ended): wake the agent."""

    child_id: str
    outcome: ChildOutcome


Notice = (
    Accepted
    | Retrying
    | BreakerMoved
    | Refused
    | AnswerRejected
    | ChildAdmitted
    | ChildRefused
    | ChildSettled
)
"""What a driver tells the orchestrator without asking anything of it."""


@dataclass
class Step:
    """What one input led to."""

    commands: list[Command] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
