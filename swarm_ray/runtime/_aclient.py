"""`AsyncSwarmClient`: the one typed way to call the orchestrator actor.

Every call on the orchestrator goes through here: the gateway awaits it on its replica's
event loop, and `SwarmClient` (the sync client) runs the same coroutines for scripts,
notebooks, job drivers and agents. This is the one place that knows the actor's method
names and translates Ray's errors:

- a swarm-ray error raised in the orchestrator comes back as itself (not Ray's wrapper);
- an orchestrator that does not answer within `timeout_s`, or is gone, raises
  `OrchestratorUnavailableError`, chained from Ray's error (whose text names actors,
  nodes and addresses: the operator's, not an HTTP caller's).

While Ray restarts the orchestrator it retries calls on the new one itself; a call that
still meets the actor away is tried again every 0.2 s until `timeout_s` passes, or, with
`ride_out_restarts=False` (the gateway, whose callers retry), given up at once.

`principal` is who asks: None for a trusted caller holding the cluster; the gateway
passes its HTTP caller's, and the orchestrator shows and lets it touch only its own tasks.

Agents reach the orchestrator that dispatched them the same way, by the address their
sub-task carries (`AsyncSwarmClient.at(subtask.orchestrator)`): a child sub-task, the
task's spend, the tool box's capabilities. No other module calls the actor's methods
(`tests/test_layers.py` holds the package to it), so an orchestrator split into shards
changes how the actor is found here and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError

from swarm_ray.core.driver._children import ChildOutcome
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import (
    AnswerRefusedError,
    OrchestratorUnavailableError,
    SwarmError,
)
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._task import TaskEvent, TaskRequest
from swarm_ray.core.views._trace import find_tokens
from swarm_ray.core.views._views import TaskStatus

__all__ = ["AsyncSwarmClient"]

T = TypeVar("T")

_RETRY_S = 0.2
"""Pause between calls that met the orchestrator away (restarting)."""
_WAIT_STEP_S = 5.0
"""Longest single wait call: a restart in between is ridden out, not waited through."""


class AsyncSwarmClient:
    """The orchestrator's calls as coroutines returning its models (picklable).

    Args:
        actor: The orchestrator's Ray actor handle (`swarm_ray.connect().aio` gives one).
        timeout_s: How long a call may take (past the time it is asked to wait, for the
            long polls `events` and `wait`) before it raises
            `OrchestratorUnavailableError`; None: no limit.
        ride_out_restarts: Try a call again while the orchestrator is away, until
            `timeout_s`; False: raise at once.
    """

    def __init__(
        self, actor: Any, *, timeout_s: float | None = None, ride_out_restarts: bool = True
    ) -> None:
        self.actor = actor
        """The orchestrator's actor handle."""
        self.timeout_s = timeout_s
        self.ride_out_restarts = ride_out_restarts

    def __repr__(self) -> str:
        return f"AsyncSwarmClient(timeout_s={self.timeout_s!r})"

    @classmethod
    def at(
        cls, address: str, *, timeout_s: float | None = None, ride_out_restarts: bool = True
    ) -> AsyncSwarmClient:
        """The client of the orchestrator at `address`, `NAMESPACE/NAME` as a sub-task names it.

        Raises:
            OrchestratorUnavailableError: no orchestrator of that name is alive.
        """
        namespace, _, name = address.partition("/")
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError as exc:
            raise OrchestratorUnavailableError(f"no orchestrator `{address}` is alive") from exc
        return cls(actor, timeout_s=timeout_s, ride_out_restarts=ride_out_restarts)

    def options(
        self, *, timeout_s: float | None = None, ride_out_restarts: bool | None = None
    ) -> AsyncSwarmClient:
        """A client on the same orchestrator with another `timeout_s` (and restart rule)."""
        return AsyncSwarmClient(
            self.actor,
            timeout_s=timeout_s,
            ride_out_restarts=(
                self.ride_out_restarts if ride_out_restarts is None else ride_out_restarts
            ),
        )

    async def _call(self, send: Callable[[Any], Awaitable[T]], *, waits_s: float = 0.0) -> T:
        """Await `send(actor)` (an `actor.METHOD.remote(...)`), its errors translated.

        `waits_s`: how long the call is asked to wait, on top of `timeout_s`.
        """
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout_s is None else loop.time() + waits_s + self.timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                return await asyncio.wait_for(send(self.actor), left)
            except RayTaskError as exc:  # raised in the orchestrator
                if isinstance(exc.cause, SwarmError):
                    raise exc.cause from None
                raise
            except TimeoutError as exc:
                raise OrchestratorUnavailableError(
                    "the orchestrator did not answer in time"
                ) from exc
            except RayActorError as exc:
                out_of_time = deadline is not None and loop.time() >= deadline
                if out_of_time or not self.ride_out_restarts:
                    raise OrchestratorUnavailableError("the orchestrator is not reachable") from exc
                await asyncio.sleep(_RETRY_S)

    # ---- tasks -----------------------------------------------------------------------

    async def submit(self, request: TaskRequest, *, principal: Principal | None = None) -> str:
        """Plan and start a task; its id at once. Raises `SwarmUserError` for bad input."""
        return await self._call(lambda a: a.submit.remote(request, principal=principal))

    async def submit_many(
        self, requests: Sequence[TaskRequest], principals: Sequence[Principal | None]
    ) -> list[str | SwarmError]:
        """`submit` for each request in one call; each gets its task id or its own error."""
        return await self._call(lambda a: a.submit_many.remote(list(requests), list(principals)))

    async def tasks(
        self, limit: int = 100, *, principal: Principal | None = None
    ) -> list[TaskStatus]:
        """The newest tasks `principal` may see, in brief."""
        return await self._call(lambda a: a.tasks.remote(limit, principal=principal))

    async def status(self, task_id: str, *, principal: Principal | None = None) -> TaskStatus:
        """State, progress, sub-tasks, warnings, usage and output (the gateway's model)."""
        return await self._call(lambda a: a.status.remote(task_id, principal=principal))

    async def record(self, task_id: str, *, principal: Principal | None = None) -> TaskRecord:
        """The full record: request, plan, audit log, scheduler log."""
        return await self._call(lambda a: a.record.remote(task_id, principal=principal))

    async def output(
        self, task_id: str, *, principal: Principal | None = None
    ) -> dict[str, Any] | None:
        """The task's output (None until it completes), fetched from the result store."""
        return await self._call(lambda a: a.output.remote(task_id, principal=principal))

    async def markdown(self, task_id: str, *, principal: Principal | None = None) -> str | None:
        """The Markdown report of a completed task, if it has one readable there."""
        return await self._call(lambda a: a.markdown.remote(task_id, principal=principal))

    async def events(
        self,
        task_id: str,
        after_seq: int = 0,
        wait_s: float = 0.0,
        *,
        principal: Principal | None = None,
    ) -> list[TaskEvent]:
        """Events after `after_seq` (long-polls up to `wait_s` when there are none)."""
        return await self._call(
            lambda a: a.events.remote(task_id, after_seq, wait_s, principal=principal),
            waits_s=wait_s,
        )

    async def follow(
        self,
        task_id: str,
        after_seq: int = 0,
        *,
        wait_s: float = 2.0,
        principal: Principal | None = None,
    ) -> AsyncGenerator[TaskEvent, None]:
        """Yield events as they happen until the task ends (polls of up to `wait_s`)."""
        while True:
            batch = await self.events(task_id, after_seq, wait_s, principal=principal)
            for event in batch:
                after_seq = event.seq
                yield event
            if not batch and (await self.status(task_id, principal=principal)).ended:
                return

    async def wait(
        self, task_id: str, timeout_s: float | None = None, *, principal: Principal | None = None
    ) -> TaskRecord:
        """Wait until the task ends, or `timeout_s` passes; its record then."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            step = _WAIT_STEP_S if left is None else min(_WAIT_STEP_S, left)

            def send(actor: Any, step: float = step) -> Any:
                return actor.wait.remote(task_id, step, principal=principal)

            record: TaskRecord = await self._call(send, waits_s=step)
            if record.machine.state.terminal or (deadline is not None and loop.time() >= deadline):
                return record

    async def cancel(self, task_id: str, *, principal: Principal | None = None) -> TaskRecord:
        """Cancel a running task (an ended one is left as it is); its record."""
        return await self._call(lambda a: a.cancel.remote(task_id, principal=principal))

    async def answer(
        self,
        task_id: str,
        subtask_id: str | None,
        answer: dict[str, Any],
        *,
        principal: Principal | None = None,
    ) -> TaskStatus:
        """Answer a sub-task waiting for a person: `subtask_id`, or the one that waits.

        Raises:
            AnswerRefusedError: no sub-task waits (or several do, and none was named), the
                one named does not, or it is not `principal`'s to answer.
            InvalidInputError: the answer does not match the sub-task's schema.
        """
        if subtask_id is None:
            status = await self.status(task_id, principal=principal)
            waiting = [w.subtask_id for w in status.waiting]
            if len(waiting) != 1:
                raise AnswerRefusedError(
                    f"task `{task_id}` has {len(waiting)} sub-tasks waiting for an answer "
                    f"({', '.join(waiting) or 'none'}); name one",
                    task_id=task_id,
                    reason="not_waiting",
                )
            subtask_id = waiting[0]
        sid = subtask_id
        return await self._call(
            lambda a: a.answer.remote(task_id, sid, answer, principal=principal)
        )

    async def trace(
        self, text: str, *, include_input: bool = False, principal: Principal | None = None
    ) -> list[dict[str, Any]]:
        """What produced each watermark in `text` (full tokens or `wm:` short ids).

        Sub-task, capability, agent, timings, digests and, with `include_input`, the input
        (to the task's owner only). Only tasks `principal` may see are looked up.
        """
        tokens = find_tokens(text)  # linear, and at most `MAX_TOKENS`
        return await self._call(
            lambda a: a.trace_watermarks.remote(
                tokens, principal=principal, include_input=include_input
            )
        )

    async def run_child(
        self,
        task_id: str,
        parent_subtask_id: str,
        parent_watermark: str,
        capability_id: str,
        data: dict[str, Any],
        key: str,
    ) -> ChildOutcome:
        """Add a child sub-task to a running attempt's task and wait until it settles.

        The caller proves it is the parent's running attempt by its watermark; the child
        (`{parent}>{key}`) is idempotent per key. Agents call it through
        `swarm_ray.agent.run_child`.

        Raises:
            SwarmError: the orchestrator refused the child (why is in the error).
        """
        return await self._call(
            lambda a: a.run_child.remote(
                task_id, parent_subtask_id, parent_watermark, capability_id, data, key
            )
        )

    # ---- the swarm -------------------------------------------------------------------

    async def info(self) -> dict[str, Any]:
        """Capabilities, templates, agents and counters."""
        return await self._call(lambda a: a.info.remote())

    async def health(self) -> dict[str, Any]:
        """Each capability's health and the swarm health score."""
        return await self._call(lambda a: a.health.remote())

    async def metrics(self) -> dict[str, Any]:
        """Swarm-level numbers (the gateway's `/metrics`)."""
        return await self._call(lambda a: a.metrics.remote())

    async def storage(self) -> dict[str, str]:
        """Where the orchestrator keeps results (`results_uri`) and tasks' own files."""
        return await self._call(lambda a: a.storage.remote())

    async def catalogue(self, schemas: bool = False) -> list[dict[str, Any]]:
        """Every registered capability, with its JSON Schemas if asked."""
        return await self._call(lambda a: a.catalogue.remote(schemas))

    async def capability(self, capability_id: str) -> dict[str, Any]:
        """One capability with its JSON Schemas; raises `UnknownCapabilityError`."""
        return await self._call(lambda a: a.capability.remote(capability_id))

    async def shutdown(self) -> None:
        """Kill the orchestrator for good (its state stays in the store).

        Rollouts of tasks that just ended are written first (waiting up to 10 s).
        """
        with contextlib.suppress(Exception):  # gone, restarting or stuck: kill it anyway
            await asyncio.wait_for(self.actor.flush_rollouts.remote(), 10)
        with contextlib.suppress(ValueError):  # already gone
            ray.kill(self.actor, no_restart=True)
