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
(`tests/test_layers.py` holds the package to it), so orchestrator shards (`_shards`)
are found here and nowhere else: a call about one task goes to the shard its id names,
a new task to the next shard in turn (or, with an id its caller chose, the shard that
id hashes to), and a listing asks every shard and merges their answers newest first.
An id naming a shard that does not exist is not known (`TaskNotFoundError`, 404); a
shard that is down is unavailable (`OrchestratorUnavailableError`, 503) to the calls
about its own tasks only, and a listing leaves its tasks out and names it (`listing`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import ray
from ray.exceptions import RayActorError, RayTaskError

from swarm_ray.core.driver._children import ChildOutcome
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import (
    AnswerRefusedError,
    InvalidSpecError,
    OrchestratorUnavailableError,
    SwarmError,
    TaskNotFoundError,
)
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._task import TaskEvent, TaskRequest
from swarm_ray.core.views._trace import find_tokens
from swarm_ray.core.views._views import TaskStatus
from swarm_ray.runtime._merge import merge_health, merge_info, merge_metrics
from swarm_ray.runtime._shards import chosen_shard, shard_name, shard_of

__all__ = ["AsyncSwarmClient"]

T = TypeVar("T")

_RETRY_S = 0.2
"""Pause between calls that met the orchestrator away (restarting)."""
_WAIT_STEP_S = 5.0
"""Longest single wait call: a restart in between is ridden out, not waited through."""
_ABSENT_S = 5.0
"""How long a shard an id named and the GCS did not know is taken to be absent."""
_FREED_S = 10.0
"""Longest `shutdown` waits for the GCS to free the shards' names."""


class AsyncSwarmClient:
    """The orchestrator's calls as coroutines returning its models (picklable).

    Args:
        actor: The orchestrator's Ray actor handle (`swarm_ray.connect().aio` gives one).
        timeout_s: How long a call may take (past the time it is asked to wait, for the
            long polls `events` and `wait`) before it raises
            `OrchestratorUnavailableError`; None: no limit.
        ride_out_restarts: Try a call again while the orchestrator is away, until
            `timeout_s`; False: raise at once.
        shards: Every shard's handle by index, shard 0 (`actor`) among them; None: `actor`
            is the one orchestrator.
        spread: How many shards (the first ones) take new tasks.
        name: The orchestrator's actor name and Ray namespace (`NAMESPACE/NAME`), for
            finding a shard an id names that this client was not given, and for
            `shutdown` to wait until the names are free.
    """

    def __init__(
        self,
        actor: Any,
        *,
        timeout_s: float | None = None,
        ride_out_restarts: bool = True,
        shards: Mapping[int, Any] | None = None,
        spread: int = 1,
        name: str | None = None,
    ) -> None:
        self.actor = actor
        """The orchestrator's actor handle (shard 0's)."""
        self.timeout_s = timeout_s
        self.ride_out_restarts = ride_out_restarts
        self.shards: dict[int, Any] = dict(shards) if shards else {0: actor}
        """Each shard's actor handle by index."""
        self.spread = max(1, min(spread, len(self.shards)))
        self.name = name
        self._turn = itertools.count()
        self._absent: dict[int, float] = {}
        """When each shard an id named was last looked up and not found (monotonic s)."""

    def __repr__(self) -> str:
        shards = f", shards={len(self.shards)}" if len(self.shards) > 1 else ""
        return f"AsyncSwarmClient(timeout_s={self.timeout_s!r}{shards})"

    def __reduce__(self) -> tuple[Any, ...]:
        options = {
            "timeout_s": self.timeout_s,
            "ride_out_restarts": self.ride_out_restarts,
            "shards": self.shards,
            "spread": self.spread,
            "name": self.name,
        }
        return (_rebuild, (self.actor, options))

    @property
    def sharded(self) -> bool:
        """Whether this client knows more than one shard."""
        return len(self.shards) > 1

    def _shard(self, task_id: str) -> Any:
        """The actor of the shard `task_id` names (raises `TaskNotFoundError`)."""
        if not self.sharded:
            return self.actor  # one orchestrator: every id is its own, as always
        shard = shard_of(task_id)
        actor = self.shards.get(shard)
        recently = time.monotonic() - self._absent.get(shard, -_ABSENT_S) < _ABSENT_S
        if actor is None and self.name is not None and not recently:
            # A blocking lookup in the GCS: ids naming shards that do not run (a caller
            # can write any) cost one lookup per shard per `_ABSENT_S`, not one a request.
            try:
                actor = self._lookup(shard)
                self.shards[shard] = actor
            except ValueError:  # no such shard runs
                self._absent[shard] = time.monotonic()
        if actor is None:
            raise TaskNotFoundError(f"task `{task_id}` is not known", task_id=task_id)
        return actor

    def _lookup(self, shard: int) -> Any:
        """Shard `shard`'s actor by its name in the GCS (blocking); `ValueError` if none runs."""
        assert self.name is not None
        namespace, _, name = self.name.partition("/")
        return ray.get_actor(shard_name(name, shard), namespace=namespace)

    def _new_shard(self, request: TaskRequest) -> int:
        """The shard a new task goes to: its parent's, its chosen id's, or the next.

        A child task lives with its parent (the shard checks in its own store that a
        tenant's parent is its own); a chosen id goes where its hash says.
        """
        parent = request.parent_task_id
        if parent is not None and shard_of(parent) in self.shards:
            return shard_of(parent)
        if request.task_id is not None:
            named = shard_of(request.task_id)
            if named and named not in self.shards:
                # Placed on another shard, the task would be routed by its id to this one
                # (now or once N grows) and never found again.
                raise InvalidSpecError(
                    f"task id `{request.task_id}` names orchestrator shard {named}, which "
                    "does not run: a chosen id may not end in `--s<number>`"
                )
            return chosen_shard(request.task_id, self.spread)
        return next(self._turn) % self.spread

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
            shards=self.shards,
            spread=self.spread,
            name=self.name,
        )

    async def _call(
        self,
        send: Callable[[Any], Awaitable[T]],
        *,
        waits_s: float = 0.0,
        task_id: str | None = None,
        actor: Any = None,
    ) -> T:
        """Await `send(actor)` (an `actor.METHOD.remote(...)`), its errors translated.

        The actor is the shard `task_id` names, else `actor`, else shard 0.
        `waits_s`: how long the call is asked to wait, on top of `timeout_s`.
        """
        if task_id is not None:
            actor = self._shard(task_id)
        elif actor is None:
            actor = self.actor
        loop = asyncio.get_running_loop()
        deadline = None if self.timeout_s is None else loop.time() + waits_s + self.timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - loop.time())
            try:
                return await asyncio.wait_for(send(actor), left)
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
        return await self._submit_to(
            self._new_shard(request),
            lambda a: a.submit.remote(request, principal=principal),
            chosen=request.task_id is not None or request.parent_task_id is not None,
        )

    async def _submit_to(
        self, shard: int, send: Callable[[Any], Awaitable[T]], *, chosen: bool = False
    ) -> T:
        """Send new tasks to `shard`; while it is away, to the next shard that answers.

        Tasks whose callers chose their ids (or parents) stay with the shard those name.
        """
        tried = 0
        while True:
            try:
                return await self._call(send, actor=self.shards[shard])
            except OrchestratorUnavailableError:
                tried += 1
                if chosen or tried >= self.spread:
                    raise
                shard = (shard + 1) % self.spread

    async def submit_many(
        self, requests: Sequence[TaskRequest], principals: Sequence[Principal | None]
    ) -> list[str | SwarmError]:
        """`submit` for each request in one call; each gets its task id or its own error.

        Sharded, one call per shard, side by side. A request whose chosen id names a shard
        that does not run gets its own error; the rest of the batch goes on.
        """
        answers: list[str | SwarmError | None] = [None] * len(requests)
        groups: dict[int, list[int]] = {}
        for n, request in enumerate(requests):
            try:
                groups.setdefault(self._new_shard(request), []).append(n)
            except InvalidSpecError as exc:
                answers[n] = exc

        async def one(shard: int, picked: list[int]) -> list[str | SwarmError]:
            batch = [requests[n] for n in picked]
            who = [principals[n] for n in picked]
            if not self.sharded:  # one orchestrator: today's one call
                return await self._call(lambda a: a.submit_many.remote(batch, who))
            chosen = any(r.task_id is not None or r.parent_task_id is not None for r in batch)
            return await self._submit_to(
                shard, lambda a: a.submit_many.remote(batch, who), chosen=chosen
            )

        found = await asyncio.gather(*(one(k, picked) for k, picked in groups.items()))
        for picked, got in zip(groups.values(), found, strict=True):
            for n, answer in zip(picked, got, strict=True):
                answers[n] = answer
        return [a for a in answers if a is not None]

    async def tasks(
        self, limit: int = 100, *, principal: Principal | None = None
    ) -> list[TaskStatus]:
        """The newest tasks `principal` may see, in brief (merged across shards).

        A shard that is down leaves its tasks out (`listing` says which); with every
        shard down this raises `OrchestratorUnavailableError`.
        """
        listed, _down = await self.listing(limit, principal=principal)
        return listed

    async def listing(
        self, limit: int = 100, *, principal: Principal | None = None
    ) -> tuple[list[TaskStatus], list[int]]:
        """`tasks`, and the shards that did not answer (whose tasks are not in it)."""
        if not self.sharded:
            return await self._call(lambda a: a.tasks.remote(limit, principal=principal)), []
        lists, down = await self._each(
            lambda a: a.tasks.remote(limit, principal=principal), every=False
        )
        merged = sorted(
            (t for listed in lists.values() for t in listed),
            key=lambda t: t.created_at,
            reverse=True,
        )
        return merged[:limit], down

    async def status(self, task_id: str, *, principal: Principal | None = None) -> TaskStatus:
        """State, progress, sub-tasks, warnings, usage and output (the gateway's model)."""
        return await self._call(
            lambda a: a.status.remote(task_id, principal=principal), task_id=task_id
        )

    async def record(self, task_id: str, *, principal: Principal | None = None) -> TaskRecord:
        """The full record: request, plan, audit log, scheduler log."""
        return await self._call(
            lambda a: a.record.remote(task_id, principal=principal), task_id=task_id
        )

    async def output(
        self, task_id: str, *, principal: Principal | None = None
    ) -> dict[str, Any] | None:
        """The task's output (None until it completes), fetched from the result store."""
        return await self._call(
            lambda a: a.output.remote(task_id, principal=principal), task_id=task_id
        )

    async def markdown(self, task_id: str, *, principal: Principal | None = None) -> str | None:
        """The Markdown report of a completed task, if it has one readable there."""
        return await self._call(
            lambda a: a.markdown.remote(task_id, principal=principal), task_id=task_id
        )

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
            task_id=task_id,
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

            record: TaskRecord = await self._call(send, waits_s=step, task_id=task_id)
            if record.machine.state.terminal or (deadline is not None and loop.time() >= deadline):
                return record

    async def cancel(self, task_id: str, *, principal: Principal | None = None) -> TaskRecord:
        """Cancel a running task (an ended one is left as it is); its record."""
        return await self._call(
            lambda a: a.cancel.remote(task_id, principal=principal), task_id=task_id
        )

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
            lambda a: a.answer.remote(task_id, sid, answer, principal=principal), task_id=task_id
        )

    async def trace(
        self, text: str, *, include_input: bool = False, principal: Principal | None = None
    ) -> list[dict[str, Any]]:
        """What produced each watermark in `text` (full tokens or `wm:` short ids).

        Sub-task, capability, agent, timings, digests and, with `include_input`, the input
        (to the task's owner only). Only tasks `principal` may see are looked up.
        """
        tokens = find_tokens(text)  # linear, and at most `MAX_TOKENS`

        def send(actor: Any) -> Any:
            return actor.trace_watermarks.remote(
                tokens, principal=principal, include_input=include_input
            )

        if not self.sharded:
            return await self._call(send)
        found = await asyncio.gather(*(self._call(send, actor=a) for a in self.shards.values()))
        return [entry for entries in found for entry in entries]

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
            ),
            task_id=task_id,
        )

    # ---- the swarm -------------------------------------------------------------------

    async def info(self) -> dict[str, Any]:
        """Capabilities, templates, agents and counters (of every shard, `_merge`)."""
        if not self.sharded:
            return await self._call(lambda a: a.info.remote())
        answers, _down = await self._each(lambda a: a.info.remote(), every=True)
        return merge_info(answers)

    async def health(self) -> dict[str, Any]:
        """Each capability's health and the swarm health score.

        Sharded: the worst shard's, with the shards that did not answer in `shards_down`
        (`OrchestratorUnavailableError` only when none answers).
        """
        if not self.sharded:
            return await self._call(lambda a: a.health.remote())
        answers, down = await self._each(lambda a: a.health.remote(), every=False)
        return merge_health(answers, down)

    async def metrics(self) -> dict[str, Any]:
        """Swarm-level numbers (the gateway's `/metrics`), added up over the shards."""
        if not self.sharded:
            return await self._call(lambda a: a.metrics.remote())
        answers, _down = await self._each(lambda a: a.metrics.remote(), every=True)
        return merge_metrics(answers)

    async def _each(
        self, send: Callable[[Any], Awaitable[T]], *, every: bool
    ) -> tuple[dict[int, T], list[int]]:
        """Every shard's answer by index, and the shards that did not answer.

        Raises `OrchestratorUnavailableError` when one did not and `every` answer is
        needed, or when none did.
        """
        shards = sorted(self.shards)
        found = await asyncio.gather(
            *(self._call(send, actor=self.shards[k]) for k in shards), return_exceptions=True
        )
        answers: dict[int, T] = {}
        down: list[int] = []
        for k, answer in zip(shards, found, strict=True):
            if isinstance(answer, OrchestratorUnavailableError):
                if every:
                    raise answer
                down.append(k)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                answers[k] = answer
        if not answers:
            raise OrchestratorUnavailableError("no orchestrator shard is reachable")
        return answers, down

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

        Rollouts of tasks that just ended are written first (waiting up to 10 s). It
        returns once each shard's name is free (up to 10 s): a `connect()` right after
        then starts a fresh orchestrator, where it could have been handed the dying one,
        whose calls would wait for a restart that never comes.
        """
        for actor in self.shards.values():
            with contextlib.suppress(Exception):  # gone, restarting or stuck: kill it anyway
                await asyncio.wait_for(actor.flush_rollouts.remote(), 10)
            with contextlib.suppress(ValueError):  # already gone
                ray.kill(actor, no_restart=True)
        if self.name is None:
            return
        deadline = time.monotonic() + _FREED_S
        for shard in sorted(self.shards):
            while time.monotonic() < deadline:
                try:
                    self._lookup(shard)
                except ValueError:
                    break  # the name is free
                await asyncio.sleep(0.05)


def _rebuild(actor: Any, options: dict[str, Any]) -> AsyncSwarmClient:
    """An `AsyncSwarmClient` unpickled (its turn among the shards starts again)."""
    return AsyncSwarmClient(actor, **options)
