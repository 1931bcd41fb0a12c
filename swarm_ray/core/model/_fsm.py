"""The task state machine: one transition table, one `transition()` function.

Pure: no I/O, no clock of its own (the caller passes the time). Every move goes through
`transition()`, which refuses an illegal one with `InvalidStateTransitionError` and
returns a new `TaskMachine` whose audit log has one more entry.
"""

from __future__ import annotations

from enum import StrEnum
from types import MappingProxyType

from pydantic import BaseModel, ConfigDict

from swarm_ray.core.model._errors import InvalidStateTransitionError

__all__ = ["TaskState"]


class TaskState(StrEnum):
    """Where a task is in its life."""

    CREATED = "created"
    ROUTING = "routing"
    DISPATCHING = "dispatching"
    EXECUTING = "executing"
    AGGREGATING = "aggregating"
    FINALIZING = "finalizing"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        """True for completed, failed and cancelled: nothing moves out of them."""
        return not TRANSITIONS[self]


_S = TaskState
_ENDS = frozenset({_S.FAILED, _S.CANCELLED})

TRANSITIONS: MappingProxyType[TaskState, frozenset[TaskState]] = MappingProxyType(
    {
        _S.CREATED: frozenset({_S.ROUTING}) | _ENDS,
        _S.ROUTING: frozenset({_S.DISPATCHING}) | _ENDS,
        _S.DISPATCHING: frozenset({_S.EXECUTING}) | _ENDS,
        _S.EXECUTING: frozenset({_S.AGGREGATING}) | _ENDS,
        _S.AGGREGATING: frozenset({_S.FINALIZING}) | _ENDS,
        _S.FINALIZING: frozenset({_S.COMPLETED}) | _ENDS,
        _S.COMPLETED: frozenset(),
        _S.FAILED: frozenset(),
        _S.CANCELLED: frozenset(),
    }
)
"""Legal moves: the one table the machine follows."""


class AuditEntry(BaseModel):
    """One line of a task's audit log."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_state: TaskState
    """State before the move."""
    to_state: TaskState
    """State after the move."""
    reason: str
    """Why the move happened, in words."""
    at: float
    """When, in seconds since the epoch."""
    trace_id: str
    """The task's trace id."""


class TaskMachine(BaseModel):
    """A task's current state and the audit log of how it got there."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    """The task this machine belongs to."""
    state: TaskState = TaskState.CREATED
    """Current state."""
    audit: tuple[AuditEntry, ...] = ()
    """Every transition so far, oldest first."""


def transition(
    machine: TaskMachine, to: TaskState, *, reason: str, at: float, trace_id: str
) -> TaskMachine:
    """Move `machine` to `to`, or raise `InvalidStateTransitionError` if that is illegal.

    Returns a new machine; the old one is unchanged (it is frozen).
    """
    if to not in TRANSITIONS[machine.state]:
        allowed = ", ".join(sorted(TRANSITIONS[machine.state])) or "nothing (terminal)"
        raise InvalidStateTransitionError(
            f"task `{machine.task_id}` cannot move from `{machine.state}` to `{to}` "
            f"(allowed: {allowed}); reason given: {reason!r}",
            task_id=machine.task_id,
            from_state=str(machine.state),
            to_state=str(to),
        )
    entry = AuditEntry(
        from_state=machine.state, to_state=to, reason=reason, at=at, trace_id=trace_id
    )
    return machine.model_copy(update={"state": to, "audit": (*machine.audit, entry)})
