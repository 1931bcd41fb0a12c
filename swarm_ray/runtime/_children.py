"""Child sub-tasks: an agent runs another capability as a sub-task of its own task.

A tool-using agent that calls a registered capability does not call its function: it
asks the orchestrator for a **child sub-task** of the sub-task it is running, which the
scheduler dispatches like any other (validated input, watermark, retries, fallback,
breaker, deadline, events, accounting), and waits for its final outcome.

Two sides:

- In the agent (any capability's code, in any Ray process): `run_child(capability_id,
  input)` finds its own attempt (`current_subtask()`), calls the orchestrator that
  dispatched it through `AsyncSwarmClient` (on the process's `_loop`) and blocks until
  the child settles; it returns a `ChildOutcome`. `describe_capabilities` gives a tool
  agent the schemas of the capabilities it may call so; `task_spend` what the task has
  spent so far.
- In the orchestrator: `Orchestrator.run_child(task_id, parent_subtask_id,
  parent_watermark, capability_id, input, key)` hands the task's driver an `AskChild`.
  The driver decides: the parent's watermark must be the one of its running attempt,
  and the rules are in `core.driver._children`. It adds the child to the plan (a `ChildAdded`
  scheduler event, persisted and replayed like every event) and answers `ChildAdmitted`
  or `ChildRefused`, then `ChildSettled` when the child settles. `ChildBook` here keeps
  only the agents' waiting futures.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from swarm_ray.core.driver._children import ChildOutcome
from swarm_ray.core.model._errors import InvalidSpecError, SubTaskTimeoutError
from swarm_ray.core.model._subtask import SubTask
from swarm_ray.core.views._views import UsageView
from swarm_ray.runtime._aclient import AsyncSwarmClient
from swarm_ray.runtime._agent import current_subtask
from swarm_ray.runtime._loop import LOOP

__all__ = ["ChildOutcome", "run_child"]


class ChildBook:
    """The orchestrator's side: the agents' futures, woken by the driver's notices."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], list[asyncio.Future[ChildOutcome]]] = {}

    def wait(self, task_id: str, child_id: str) -> asyncio.Future[ChildOutcome]:
        """A future of the child's outcome, set by `settle` (`ChildSettled`)."""
        future: asyncio.Future[ChildOutcome] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault((task_id, child_id), []).append(future)
        return future

    def settle(self, task_id: str, child_id: str, outcome: ChildOutcome) -> None:
        """Wake the agents waiting on this child."""
        for future in self._waiting.pop((task_id, child_id), []):
            if not future.done():
                future.set_result(outcome)


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


def _orchestrator(
    subtask: SubTask | None, what: str, **options: Any
) -> tuple[SubTask, AsyncSwarmClient]:
    """The running attempt and a client of the orchestrator that dispatched it."""
    if subtask is None or not subtask.orchestrator:
        raise InvalidSpecError(
            f"{what} needs a running sub-task dispatched by an orchestrator "
            "(call it from a capability's code)"
        )
    return subtask, AsyncSwarmClient.at(subtask.orchestrator, **options)


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
        OrchestratorUnavailableError: the orchestrator is gone, or restarting.
        SwarmError: the orchestrator refused the child (see `core.driver._children`).
    """
    subtask, client = _orchestrator(
        parent or current_subtask(), f"`run_child({capability_id!r})`", ride_out_restarts=False
    )
    call = client.run_child(
        subtask.task_id,
        subtask.subtask_id,
        subtask.watermark,
        capability_id,
        data,
        key or _next_key(subtask),
    )
    try:
        return LOOP.run(asyncio.wait_for(call, timeout_s))
    except TimeoutError:
        raise SubTaskTimeoutError(
            f"child `{capability_id}` of `{subtask.subtask_id}` did not settle in "
            f"{timeout_s} s (it keeps running)",
            capability_id=capability_id,
        ) from None


def describe_capabilities(
    capability_ids: Sequence[str], *, parent: SubTask | None = None
) -> list[dict[str, Any]]:
    """The catalogue lines, with JSON Schemas, of capabilities an agent may run as children.

    From the registry of the orchestrator that dispatched the running attempt (`parent`,
    by default `current_subtask()`), in the order asked.

    Raises:
        InvalidSpecError: not called from a capability dispatched by an orchestrator.
        UnknownCapabilityError: one of them is not registered.
    """
    _, client = _orchestrator(parent or current_subtask(), "describing capabilities")

    async def describe() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(client.capability(c) for c in capability_ids)))

    return LOOP.run(describe())


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
    try:
        _, client = _orchestrator(subtask, "`task_spend()`", timeout_s=timeout_s)
        status = LOOP.run(client.status(subtask.task_id))
    except Exception:  # an orchestrator away or restarting: nothing to show
        return None
    return status.usage
