"""Child sub-tasks, the driver's side: whether one may be added, and how one ended.

An agent running a sub-task may ask for a **child sub-task** of it (see
`swarm_ray.runtime._children` for the agent's side and the waiting). Whether the child
is allowed is the task's decision, so it is made here, on the task's scheduler and plan:
the child's id is `{parent}>{key}` (the agent's own name for the call, so a call retried
after a restart finds its child instead of adding another); children count toward the
template's `max_depth`, at most `MAX_CHILDREN` per parent, and never run the parent's
own capability (its agent would wait for itself).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict

from swarm_ray.core.model._errors import ErrorCode, InvalidPlanError
from swarm_ray.core.model._plan import Plan, nesting_depth
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import ChildAdded
from swarm_ray.core.model._subtask import SubTaskError, SubTaskSpec, TokenUsage
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__: list[str] = []

MAX_CHILDREN = 256
"""Child sub-tasks one sub-task may ask for (all attempts together)."""
_KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")


class ChildOutcome(BaseModel):
    """How a child sub-task ended: its output and references, or its final error."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subtask_id: str
    """The child's id in the task (`{parent}>{key}`)."""
    capability_id: str
    """The capability that ran it last (a fallback's, when it switched)."""
    status: str
    """`succeeded`, `failed`, `skipped` or `cancelled`."""
    output: dict[str, Any] | None = None
    """The accepted output (None unless it succeeded)."""
    error: SubTaskError | None = None
    """Why it failed (an invalid input names the fields)."""
    watermark: str = ""
    """The accepted result's watermark: traces the output to the child's agent and input."""
    agent: str | None = None
    """The agent that produced the output."""
    usage: TokenUsage = TokenUsage()
    """Tokens its accepted attempt reported."""
    seconds: float = 0.0
    """Its accepted attempt's run time on the agent."""

    @property
    def ok(self) -> bool:
        """True when the child succeeded."""
        return self.status == "succeeded"


def admit_child(
    scheduler: Scheduler,
    plan: Plan,
    registry: Registry,
    parent: str,
    capability_id: str,
    data: dict[str, Any],
    key: str,
    at: float,
) -> tuple[str, ChildAdded | None]:
    """The child's id, and the event that adds it at `at` (None when it exists already).

    Raises:
        UnknownCapabilityError: `capability_id` is not registered.
        InvalidPlanError: a bad key, the parent's own capability, too deep, too many.
    """
    if not _KEY.match(key):
        raise InvalidPlanError(f"child key {key!r} must match `{_KEY.pattern}`")
    child_id = f"{parent}>{key}"
    specs = {s.id: s for s in scheduler.specs()}
    if child_id in specs:
        return child_id, None
    spec = specs[parent]
    registry.get(capability_id)  # unknown ids raise here, not in the scheduler
    if capability_id == spec.capability_id:
        raise InvalidPlanError(
            f"sub-task `{parent}` cannot run its own capability `{capability_id}` as a "
            "child: its agent would wait for itself"
        )
    if sum(1 for s in specs.values() if s.parent == parent) >= MAX_CHILDREN:
        raise InvalidPlanError(
            f"sub-task `{parent}` already asked for {MAX_CHILDREN} child sub-tasks"
        )
    child = SubTaskSpec(
        id=child_id,
        stage=f"{spec.stage}.child",
        capability_id=capability_id,
        input=data,
        parent=parent,
        item=spec.item,
        element=spec.element,
    )
    depth = nesting_depth({**specs, child_id: child}, child_id)
    if depth > plan.template.max_depth:
        raise InvalidPlanError(
            f"child `{child_id}` would nest {depth} deep, over the limit of "
            f"{plan.template.max_depth}",
            subtask_id=child_id,
        )
    return child_id, ChildAdded(at=at, spec=child)


def child_outcome(scheduler: Scheduler, child_id: str) -> ChildOutcome | None:
    """How a child ended, from the scheduler's state; None while it has not settled."""
    if not scheduler.settled(child_id):
        return None
    spec = next(s for s in scheduler.specs() if s.id == child_id)
    status = str(scheduler.status(child_id))
    result = scheduler.result(child_id)
    if result is not None:
        return ChildOutcome(
            subtask_id=child_id,
            capability_id=result.capability_id,
            status=status,
            output=result.output,
            watermark=result.watermark,
            agent=result.agent,
            usage=result.usage,
            seconds=result.timings.duration_s,
        )
    error = scheduler.error(child_id) or SubTaskError(
        code=ErrorCode.CANCELLED if status == "cancelled" else ErrorCode.SKIPPED,
        message=f"child sub-task `{child_id}` was {status} (its task ended)",
    )
    return ChildOutcome(
        subtask_id=child_id, capability_id=spec.capability_id, status=status, error=error
    )
