"""Child sub-tasks: an agent runs another capability as a sub-task of its own task.

A tool-using agent that calls a registered capability does not call its function: it
asks the orchestrator for a **child sub-task** of the sub-task it is running, which the
scheduler dispatches like any other (validated input, watermark, retries, fallback,
breaker, deadline, events, accounting), and waits for its final outcome.

Two sides:

- In the agent (any capability's code, in any Ray process): `run_child(capability_id,
  input)` finds its own attempt (`current_subtask()`), calls the orchestrator that
  dispatched it and blocks until the child settles; it returns a `ChildOutcome`.
- In the orchestrator: `Orchestrator.run_child(task_id, parent_subtask_id,
  parent_watermark, capability_id, input, key)` checks the caller (the parent's
  watermark must be the one of its running attempt), adds the child to the plan (a
  `ChildAdded` scheduler event, persisted and replayed like every event), and answers
  when the scheduler settles it. `ChildBook` here does the checks and the waiting.

A child's id is `{parent}>{key}`; the key is the agent's own name for the call, so a
call retried after an orchestrator restart finds its child instead of adding another.
Children count toward the template's `max_depth` (a child of a child nests one deeper),
at most `MAX_CHILDREN` per parent, and never run the parent's own capability (its agent
would wait for itself).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from swarm_ray.core._errors import (
    AgentUnavailableError,
    ErrorCode,
    InvalidPlanError,
    InvalidSpecError,
    SubTaskTimeoutError,
    WatermarkRejectedError,
)
from swarm_ray.core._plan import nesting_depth
from swarm_ray.core._signals import ChildAdded
from swarm_ray.core._subtask import SubTask, SubTaskError, SubTaskSpec, TokenUsage
from swarm_ray.core._views import UsageView
from swarm_ray.runtime._agent import current_subtask

if TYPE_CHECKING:
    from swarm_ray.core._driver import TaskDriver

__all__ = ["ChildOutcome", "run_child"]

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


def outcome_of(driver: TaskDriver, child_id: str) -> ChildOutcome:
    """The outcome of a settled child, from the scheduler's state."""
    scheduler = driver.scheduler
    assert scheduler is not None
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


class ChildBook:
    """The orchestrator's side: checks requests, and wakes agents when children settle."""

    def __init__(self) -> None:
        self._waiting: dict[str, dict[str, list[asyncio.Future[ChildOutcome]]]] = {}

    def request(
        self,
        driver: TaskDriver,
        parent: str,
        parent_watermark: str,
        capability_id: str,
        data: dict[str, Any],
        key: str,
    ) -> tuple[str, ChildAdded | None]:
        """The child's id, and the event that adds it (None when it exists already).

        Raises:
            AgentUnavailableError: the task has ended.
            WatermarkRejectedError: `parent` has no running attempt with that watermark.
            UnknownCapabilityError: `capability_id` is not registered.
            InvalidPlanError: a bad key, the parent's own capability, too deep, too many.
        """
        scheduler = driver.scheduler
        if driver.state.terminal or scheduler is None:
            raise AgentUnavailableError(
                f"task `{driver.task_id}` is {driver.state}: it takes no child sub-tasks"
            )
        if not parent_watermark or driver.outstanding_watermark(parent) != parent_watermark:
            raise WatermarkRejectedError(
                f"sub-task `{parent}` of task `{driver.task_id}` has no running attempt with "
                "that watermark; only a running attempt may ask for child sub-tasks",
                reason="not_outstanding",
                subtask_id=parent,
            )
        if not _KEY.match(key):
            raise InvalidPlanError(f"child key {key!r} must match `{_KEY.pattern}`")
        child_id = f"{parent}>{key}"
        specs = {s.id: s for s in scheduler.specs()}
        if child_id in specs:
            return child_id, None
        spec = specs[parent]
        driver.registry.get(capability_id)  # unknown ids raise here, not in the scheduler
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
            dimension=spec.dimension,
        )
        assert driver.record.plan is not None
        depth = nesting_depth({**specs, child_id: child}, child_id)
        if depth > driver.record.plan.template.max_depth:
            raise InvalidPlanError(
                f"child `{child_id}` would nest {depth} deep, over the limit of "
                f"{driver.record.plan.template.max_depth}",
                subtask_id=child_id,
            )
        return child_id, ChildAdded(at=time.time(), spec=child)

    async def wait(self, driver: TaskDriver, child_id: str) -> ChildOutcome:
        """The child's outcome once it settles (at once if it has)."""
        assert driver.scheduler is not None
        if driver.scheduler.settled(child_id):
            return outcome_of(driver, child_id)
        future: asyncio.Future[ChildOutcome] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(driver.task_id, {}).setdefault(child_id, []).append(future)
        return await future

    def settle(self, driver: TaskDriver) -> None:
        """Wake the agents waiting on children of `driver`'s task that have settled."""
        waiting = self._waiting.get(driver.task_id)
        if not waiting or driver.scheduler is None:
            return
        for child_id in [c for c in waiting if driver.scheduler.settled(c)]:
            outcome = outcome_of(driver, child_id)
            for future in waiting.pop(child_id):
                if not future.done():
                    future.set_result(outcome)
        if not waiting:
            del self._waiting[driver.task_id]


# ---- the agent's side ----------------------------------------------------------------

_counters: OrderedDict[str, itertools.count[int]] = OrderedDict()
_counters_lock = threading.Lock()


def _next_key(subtask: SubTask) -> str:
    """`a{attempt}-{n}`: the n-th call of this attempt (thread-safe)."""
    with _counters_lock:
        counter = _counters.setdefault(subtask.watermark, itertools.count(1))
        _counters.move_to_end(subtask.watermark)
        while len(_counters) > 10_000:
            _counters.popitem(last=False)
        return f"a{subtask.attempt}-{next(counter)}"


def run_child(
    capability_id: str,
    data: dict[str, Any],
    *,
    parent: SubTask | None = None,
    key: str | None = None,
    timeout_s: float | None = None,
) -> ChildOutcome:
    """Run `capability_id` on `data` as a child sub-task of the running one, and wait.

    Call it from a capability's code: the child is added to the task, dispatched and
    accounted like any sub-task, and shows in the task's events and status.

    Args:
        capability_id: A registered capability (not the caller's own).
        data: Its input (validated before dispatch; an invalid one fails the child with
            `invalid_input`, field by field).
        parent: The calling attempt; defaults to `current_subtask()` (pass it from
            threads the capability starts, which do not inherit it).
        key: The caller's name for this call, unique within its attempt; by default the
            call's number in the attempt.
        timeout_s: Stop waiting after this long (the child keeps running).

    Raises:
        InvalidSpecError: not called from a capability dispatched by an orchestrator.
        SubTaskTimeoutError: `timeout_s` passed first.
        SwarmError: the orchestrator refused the child (see `ChildBook.request`).
    """
    import ray
    from ray.exceptions import GetTimeoutError

    subtask = parent or current_subtask()
    if subtask is None or not subtask.orchestrator:
        raise InvalidSpecError(
            f"`run_child({capability_id!r})` needs a running sub-task dispatched by an "
            "orchestrator (call it from a capability's code)"
        )
    namespace, _, name = subtask.orchestrator.partition("/")
    actor = ray.get_actor(name, namespace=namespace)
    ref: Any = actor.run_child.remote(
        subtask.task_id,
        subtask.subtask_id,
        subtask.watermark,
        capability_id,
        data,
        key or _next_key(subtask),
    )
    try:
        outcome: ChildOutcome = ray.get(ref, timeout=timeout_s)
    except GetTimeoutError:
        raise SubTaskTimeoutError(
            f"child `{capability_id}` of `{subtask.subtask_id}` did not settle in "
            f"{timeout_s} s (it keeps running)",
            capability_id=capability_id,
        ) from None
    return outcome


def task_spend(timeout_s: float = 10.0) -> UsageView | None:
    """What the running sub-task's task has spent so far (tokens, cost, compute), or None.

    An aggregate stage reports it (the documents report's *Spend* line): it runs last, so
    nearly everything is counted. None outside an orchestrator's sub-task, or when the
    orchestrator does not answer in `timeout_s`: the spend is something to show, never a
    reason to fail.
    """
    subtask = current_subtask()
    if subtask is None or not subtask.orchestrator:
        return None
    import ray

    try:
        namespace, _, name = subtask.orchestrator.partition("/")
        actor = ray.get_actor(name, namespace=namespace)
        status: Any = ray.get(actor.status.remote(subtask.task_id), timeout=timeout_s)
    except Exception:  # an orchestrator away or restarting: nothing to show
        return None
    usage: UsageView | None = status.usage
    return usage
