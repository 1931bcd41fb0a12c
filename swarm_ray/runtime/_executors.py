"""Three executors, one seam: sub-tasks in, a `SubTaskResult` per attempt out.

Every executor answers `runs(spec, subtasks, on_result)`: it splits a batch of attempts of
one capability into runs (coroutines the orchestrator tracks and may cancel, each with
the sub-task ids it carries) and owns everything particular to it: how it batches, how
it keeps deadlines, whether the capability is in dispatch.

- `ActorPoolExecutor`: pooled sub-agent actors (`_subagent.SubAgent`) per capability,
  created with the capability's resources (fractional GPUs included) up to its max
  concurrency, or as many as the cluster's nodes hold (`_placement.Cluster.fit`). Each
  sub-task is a fresh call on a fresh input: nothing is carried between sub-tasks. On a
  deadline the actor is killed and replaced, which frees the slot for sure; an actor that
  dies is replaced and only its own sub-task is reported failed.
- `ServeExecutor`: capabilities hosted as Ray Serve deployments (model-backed agents).
- `DataExecutor`: a batch of sub-tasks becomes a Ray Data stage whose rows stream back
  one by one as they finish, so downstream work starts at once (partial rollout).

Idle agents keep what Ray reserved for them (a CPU, a GPU). On a cluster that declares its
real cores that would starve the stages feeding them, so the executors share a `Room`
(`_placement`): a Ray Data stage first reserves its rows' resources in a placement group,
and while it (or a new agent) waits to be placed, idle agents are released and no new
agent is created for a stage's rows to wait behind. A sub-task's deadline starts once its
agent or its row's slot is placed: waiting for a CPU is not a timeout. One that cannot be
placed within `SWARM_RAY_PLACEMENT_S`, or whose resources no node has, fails by name ("no
resources for `capability`"), retried and fallen back from like an unavailable agent.

All run inside the orchestrator's event loop and report through `on_result`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import signal
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Protocol

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError
from ray.util.annotations import RayDeprecationWarning

from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._subtask import SubTask, SubTaskResult
from swarm_ray.runtime._agent import error_result, run_subtask
from swarm_ray.runtime._placement import Room, need, placement_limit_s, process_room
from swarm_ray.runtime._rlimits import limited, run_limited
from swarm_ray.runtime._subagent import SubAgent

__all__: list[str] = []

OnResult = Callable[[SubTaskResult], object]
"""Called on the event loop with each attempt's result."""

RunSpec = tuple[list[str], Coroutine[Any, Any, None]]
"""One run of an executor: the sub-task ids it carries and the coroutine that runs them."""

_MAX_CHUNK = 64
"""Most sub-tasks sent to one pooled agent in one streaming call."""


class Executor(Protocol):
    """The seam between the orchestrator and the ways a capability runs."""

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """Split attempts of `spec` into runs; each reports through `on_result`."""
        ...


def _chunks(subtasks: list[SubTask], agents: int) -> list[list[SubTask]]:
    """Guided self-scheduling: each chunk half the remainder's share per agent.

    Large chunks while much remains (one streaming call carries up to `_MAX_CHUNK`, so
    a big fan-out costs few calls), smaller ones toward the end, so no agent is left with
    a long chunk while the others have nothing to do.
    """
    chunks: list[list[SubTask]] = []
    start = 0
    while start < len(subtasks):
        left = len(subtasks) - start
        size = max(1, min(_MAX_CHUNK, -(-left // (2 * max(1, agents)))))
        chunks.append(subtasks[start : start + size])
        start += size
    return chunks


async def _await(awaitable: Any) -> Any:
    return await awaitable


def _local(ref: ray.ObjectRef[Any]) -> Any:
    """The object if this process already holds it, else None (then await it).

    A streamed result is announced once it exists, and a small one arrives inline with
    the announcement; reading it here skips awaiting it, a round trip through Ray's
    I/O thread and the event loop that cost about a sixth of the orchestrator's CPU.
    """
    try:
        return ray.get(ref, timeout=0)
    except GetTimeoutError:
        return None


def _no_resources(subtask: SubTask, why: str, agent: str | None = None) -> SubTaskResult:
    return error_result(subtask, ErrorCode.AGENT_UNAVAILABLE, why, agent)


async def _unplaceable_run(subtasks: list[SubTask], why: str, on_result: OnResult) -> None:
    for subtask in subtasks:
        on_result(_no_resources(subtask, why))


class _Pool:
    """Actors of one capability, leased one sub-task at a time."""

    _serial = itertools.count()
    _incarnation = uuid.uuid4().hex[:6]
    """Distinguishes agents of a restarted orchestrator from the dying ones of the last."""

    def __init__(self, spec: CapabilitySpec, namespace: str, room: Room | None = None) -> None:
        self.spec = spec
        self.namespace = namespace
        self.room = room or process_room()
        self.room.pools.append(self)
        self.idle: list[Any] = []
        self.idle_since: dict[Any, float] = {}
        self.names: dict[Any, str] = {}
        self.placed: set[Any] = set()
        """Agents whose actor is known to run (placed, `__init__` done)."""
        self.waiters: list[tuple[int, int, asyncio.Future[Any]]] = []
        """A heap of (-priority, arrival, waiter): higher priority first, then first come."""
        self._arrivals = itertools.count()

    @property
    def size(self) -> int:
        """Most agents at once: the capability's cap, or as many as the nodes hold."""
        return self.room.cluster.fit(self.spec.resources)

    def _create(self) -> Any:
        name = f"swarm-agent:{self.spec.id}:{self._incarnation}-{next(self._serial)}"
        options = {**self.spec.resources.ray_options(), "name": name, "namespace": self.namespace}
        actor = ray.remote(SubAgent).options(max_restarts=0, **options).remote(self.spec, name)
        self.names[actor] = name
        return actor

    async def acquire(self, priority: int = 0) -> Any:
        """An agent: idle, new (under `size`), or the next one freed.

        When agents are scarce, waiters of higher-`priority` tasks get them first. No new
        agent is created while a stage of ours waits to be placed.
        """
        if self.idle:
            actor = self.idle.pop()
            self.idle_since.pop(actor, None)
            return actor
        if len(self.names) < self.size:
            if self.room.stages_waiting:
                await self.room.stages_placed()
                return await self.acquire(priority)
            return self._create()
        waiter: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        heapq.heappush(self.waiters, (-priority, next(self._arrivals), waiter))
        try:
            return await waiter
        except asyncio.CancelledError:
            # Cancelled after `release` handed this waiter an agent but before it woke:
            # the agent goes to the next waiter, or it would be leaked for good.
            if waiter.done() and not waiter.cancelled():
                self.release(waiter.result())
            raise

    async def placed_within(self, actor: Any, limit_s: float) -> bool:
        """Wait until `actor` runs (not counted in any deadline); False past `limit_s`.

        While it waits past a grace, the room's idle agents are released for it.

        Raises:
            RayActorError: the actor died before it ran (its node went, say).
        """
        if actor in self.placed:
            return True
        if not await self.room.placed_within(actor.__ray_ready__.remote(), limit_s, stage=False):
            return False
        self.placed.add(actor)
        return True

    def release(self, actor: Any) -> None:
        while self.waiters:
            _, _, waiter = heapq.heappop(self.waiters)
            if not waiter.done():
                waiter.set_result(actor)
                return
        if self.room.contended:  # something of ours waits for what this agent holds
            self._retire(actor)
            return
        self.idle.append(actor)
        self.idle_since[actor] = time.monotonic()

    def _retire(self, actor: Any) -> None:
        self.names.pop(actor, None)
        self.placed.discard(actor)
        with contextlib.suppress(RayError, ValueError):
            ray.kill(actor, no_restart=True)

    def reap(self, max_idle_s: float) -> int:
        """Kill agents idle longer than `max_idle_s`, so idle pools hold no CPU or GPU."""
        now = time.monotonic()
        stale = [a for a in self.idle if now - self.idle_since.get(a, now) >= max_idle_s]
        for actor in stale:
            self.idle.remove(actor)
            self.idle_since.pop(actor, None)
            self._retire(actor)
        return len(stale)

    def replace(self, actor: Any) -> None:
        self._retire(actor)
        if self.waiters:
            self.release(self._create())


class ActorPoolExecutor:
    """Runs sub-tasks on pooled sub-agent actors."""

    def __init__(self, namespace: str, room: Room | None = None) -> None:
        self._namespace = namespace
        self._pools: dict[str, _Pool] = {}
        self.room = room or process_room()
        """Shared with the `DataExecutor` whose stages feed these agents."""

    def reap(self, max_idle_s: float) -> int:
        """Release agents idle longer than `max_idle_s` (they are created again on demand)."""
        return sum(pool.reap(max_idle_s) for pool in self._pools.values())

    def agent_names(self) -> list[str]:
        """Names of the live sub-agent actors."""
        return sorted(n for pool in self._pools.values() for n in pool.names.values())

    def _pool(self, spec: CapabilitySpec) -> _Pool:
        if spec.id not in self._pools:
            self._pools[spec.id] = _Pool(spec, self._namespace, self.room)
        return self._pools[spec.id]

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """Spread the batch over the pool in chunks (each streams its results back).

        A capability whose agent no node can hold fails at once, by name.
        """
        why = self.room.cluster.unplaceable(spec.id, spec.resources)
        if why is not None:
            return [([s.subtask_id for s in subtasks], _unplaceable_run(subtasks, why, on_result))]
        chunks = _chunks(subtasks, self._pool(spec).size)
        return [([s.subtask_id for s in c], self.run_many(spec, c, on_result)) for c in chunks]

    async def run_many(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> None:
        """Run attempts one after another on one agent, reporting each as it finishes.

        One streaming call carries the whole batch, which saves a round trip per sub-task;
        each result still comes back within `_subagent.BUNCH_S` of being ready (partial rollout;
        fast ones in bunches, see `SubAgent.run_stream`), and each
        sub-task keeps its own deadline, counted from the previous result, once the agent
        runs (its wait to be placed is not counted). When the agent dies or passes a
        deadline, the sub-task it was running fails; the ones queued behind it never
        started and go to a fresh agent, unchanged.
        """
        pool = self._pool(spec)
        actor = await pool.acquire(max(s.priority for s in subtasks))
        name = pool.names.get(actor, "?")
        pending = list(subtasks)
        current = pending[0]
        failure: SubTaskResult | None = None
        healthy = False
        try:
            limit = placement_limit_s()
            if not await pool.placed_within(actor, limit):
                why = (
                    f"no resources for `{spec.id}`: agent `{name}` waited {limit:g} s to be "
                    f"placed ({_shown_need(spec)}); the cluster is busy or too small"
                )
                for subtask in pending:
                    on_result(_no_resources(subtask, why, name))
                pending.clear()
                return
            if len(pending) == 1:  # a plain call costs half a stream's CPU
                ref = actor.run.remote(current)
                result: SubTaskResult = await asyncio.wait_for(_await(ref), current.timeout_s)
                pending.pop(0)
                on_result(result)
            else:
                stream = actor.run_stream.options(num_returns="streaming").remote(subtasks)
            while pending:
                current = pending[0]
                ref = await asyncio.wait_for(stream.__anext__(), current.timeout_s)
                bunch = _local(ref)
                if bunch is None:
                    bunch = await ref
                for result in bunch:
                    pending.pop(0)
                    on_result(result)
            healthy = True
        except TimeoutError:
            failure = error_result(
                current,
                ErrorCode.TIMEOUT,
                f"sub-task `{current.subtask_id}` ran past its {current.timeout_s} s "
                f"deadline on `{name}`; the agent was replaced",
                name,
            )
        except (RayActorError, StopAsyncIteration) as exc:
            failure = error_result(
                current,
                ErrorCode.AGENT_UNAVAILABLE,
                f"agent `{name}` died: {type(exc).__name__}",
                name,
            )
        finally:
            # The agent goes back to its pool, or is replaced, whatever happened above
            # (a cancelled batch, a handler that raised): a slot is never leaked.
            if healthy:
                pool.release(actor)
            else:
                pool.replace(actor)
        if failure is None:
            return
        pending.pop(0)
        on_result(failure)
        if pending:
            await self.run_many(spec, pending, on_result)


def _shown_need(spec: CapabilitySpec) -> str:
    wanted = need(spec.resources)
    return ", ".join(f"{k} {v:g}" for k, v in wanted.items()) or "nothing"


class ServeExecutor:
    """Runs sub-tasks on Ray Serve deployments, deploying each capability on first use.

    Args:
        out_of_dispatch: Why a capability is out of dispatch (failing health checks), or
            None when it takes sub-tasks; its attempts then fail fast with
            `agent_unavailable`, so retries and fallbacks apply.
        room: Shared with the pools (default: this process's).
    """

    def __init__(
        self,
        out_of_dispatch: Callable[[str], str | None] = lambda _cid: None,
        room: Room | None = None,
    ) -> None:
        self._handles: dict[str, Any] = {}
        self._names: dict[str, tuple[str, str]] = {}
        """(application, deployment) of each deployed capability."""
        self._lock = asyncio.Lock()
        self._out = out_of_dispatch
        self.room = room or process_room()
        """Shared with the pools: idle agents yield while a deployment starts."""

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """One run per attempt (Serve routes and batches requests itself)."""
        return [([s.subtask_id], self._run_one(spec, s, on_result)) for s in subtasks]

    async def _run_one(self, spec: CapabilitySpec, subtask: SubTask, on_result: OnResult) -> None:
        why = self._out(spec.id)
        if why is None and spec.id not in self._handles:  # its replica no node can hold
            why = self.room.cluster.unplaceable(spec.id, spec.resources)
        if why is not None:
            on_result(error_result(subtask, ErrorCode.AGENT_UNAVAILABLE, why))
            return
        on_result(await self.run(spec, subtask))

    async def _handle(self, spec: CapabilitySpec) -> Any:
        async with self._lock:
            if spec.id not in self._handles:
                from swarm_ray.runtime._serve_app import capability_app, deployment_names

                app_name, deployment = deployment_names(spec)
                # Its replicas reserve what the spec asks, like agents: idle agents must
                # not hold it (they would, up to `SWARM_RAY_AGENT_IDLE_S`, on a cluster
                # of few CPUs), and its first request waits for it.
                async with self.room.placing(stage=False):
                    await asyncio.to_thread(_serve_run, capability_app(spec), app_name)
                from ray import serve

                self._handles[spec.id] = serve.get_deployment_handle(deployment, app_name)
                self._names[spec.id] = (app_name, deployment)
            return self._handles[spec.id]

    def deployed(self) -> list[str]:
        """Capabilities deployed so far (the ones worth probing)."""
        return sorted(self._handles)

    async def probe(
        self, capability_id: str, timeout_s: float = 5.0
    ) -> tuple[bool, dict[str, Any]]:
        """Ask a deployment for its health: (healthy, the replica's report or the error).

        A deployment its autoscaler took to zero replicas has none to ask, and asking
        would start one: it is reported healthy as it is.
        """
        if await asyncio.to_thread(_scaled_to_zero, *self._names[capability_id]):
            return True, {"status": "ok", "replicas": 0, "capability": capability_id}
        handle = self._handles[capability_id]
        response = handle.health.remote()
        try:
            detail: dict[str, Any] = await asyncio.wait_for(_await(response), timeout_s)
        except TimeoutError:
            response.cancel()
            return False, {"error": f"health check of `{capability_id}` took over {timeout_s} s"}
        except RayError as exc:
            return False, {"error": f"{type(exc).__name__}: {exc}"}
        return detail.get("status") in ("ok", "healthy"), detail

    async def run(self, spec: CapabilitySpec, subtask: SubTask) -> SubTaskResult:
        """Run one attempt on the capability's deployment within its deadline.

        A deployment scaled to zero first gets a replica back (a health call starts one),
        not counted in the deadline, and idle agents yield to it as to a new agent's;
        unplaced past `SWARM_RAY_PLACEMENT_S`, the attempt fails by name.
        """
        handle = await self._handle(spec)
        if await asyncio.to_thread(_scaled_to_zero, *self._names[spec.id]):
            limit = placement_limit_s()
            try:
                woken = handle.health.remote()
                placed = await self.room.placed_within(woken, limit, stage=False)
            except RayError as exc:
                return error_result(
                    subtask,
                    ErrorCode.AGENT_UNAVAILABLE,
                    f"deployment of `{spec.id}` failed to start a replica: "
                    f"{type(exc).__name__}: {exc}",
                )
            if not placed:
                return error_result(
                    subtask,
                    ErrorCode.AGENT_UNAVAILABLE,
                    f"no resources for `{spec.id}`: its deployment, scaled to zero, started "
                    f"no replica within {limit:g} s; the cluster is busy or too small",
                )
        response = handle.run.remote(subtask)
        try:
            result: SubTaskResult = await asyncio.wait_for(_await(response), subtask.timeout_s)
        except TimeoutError:
            response.cancel()
            return error_result(
                subtask,
                ErrorCode.TIMEOUT,
                f"sub-task `{subtask.subtask_id}` ran past its {subtask.timeout_s} s deadline "
                f"on deployment `{spec.id}`",
            )
        except asyncio.CancelledError:
            response.cancel()
            raise
        except RayError as exc:
            return error_result(
                subtask,
                ErrorCode.AGENT_UNAVAILABLE,
                f"deployment of `{spec.id}` failed the call: {type(exc).__name__}: {exc}",
            )
        return result


def _serve_run(app: Any, name: str) -> None:
    from ray import serve

    serve.run(app, name=name, route_prefix=None)


def _scaled_to_zero(app_name: str, deployment: str) -> bool:
    """Whether the deployment is healthy with no replica at all (its autoscaler's doing)."""
    from ray import serve

    app = serve.status().applications.get(app_name)
    shown = app.deployments.get(deployment) if app is not None else None
    return (
        shown is not None and shown.status == "HEALTHY" and not any(shown.replica_states.values())
    )


_ROW_GRACE_S = 10.0
"""Past its deadline a row stops itself; the orchestrator's backstop waits this much more
(a slot's row may still be starting a worker process when its timer starts)."""


class _RowDeadline(BaseException):
    """Raised inside a Ray Data row by its own timer when the row runs past its deadline.

    A `BaseException`, so the agent's own `except Exception` does not swallow it.
    """


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Interrupt the code inside after `seconds` (in a worker's main thread; else no-op).

    A Ray Data row cannot be cancelled from outside one by one, so each row keeps its own
    sub-task deadline: past it, the row stops and frees its worker for the next row.
    """
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise _RowDeadline

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _data_row(row: dict[str, Any], spec: CapabilitySpec) -> dict[str, Any]:
    subtask = SubTask.model_validate_json(row["subtask"])
    agent = f"data:{spec.id}"
    if limited(spec.resources, subtask):  # a tenant's file: in a limited child, its own deadline
        return {"result": run_limited(spec, subtask, agent=agent).model_dump_json()}
    try:
        with _deadline(subtask.timeout_s):
            result = run_subtask(spec, subtask, agent=agent)
    except _RowDeadline:
        result = error_result(
            subtask,
            ErrorCode.TIMEOUT,
            f"sub-task `{subtask.subtask_id}` ran past its {subtask.timeout_s} s deadline "
            f"in the Ray Data stage of `{spec.id}`; the row was stopped",
            agent,
        )
    return {"result": result.model_dump_json()}


class DataExecutor:
    """Runs a batch of sub-tasks as one streaming Ray Data stage.

    Args:
        room: Shared with the `ActorPoolExecutor` whose agents its stages feed (default:
            this process's).
    """

    def __init__(self, room: Room | None = None) -> None:
        self.pipelines = 0
        self.room = room or process_room()

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """The whole batch as one stage, each row held to its own deadline.

        A capability whose row no node can hold fails at once, by name.
        """
        ids = [s.subtask_id for s in subtasks]
        why = self.room.cluster.unplaceable(spec.id, spec.resources)
        if why is not None:
            return [(ids, _unplaceable_run(subtasks, why, on_result))]
        return [(ids, self._run_placed(spec, subtasks, on_result))]

    async def _run_placed(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> None:
        """Reserve the stage's slots in a placement group, then run it in them.

        The stage holds its rows' CPUs (or GPUs) from the moment it is placed to its end,
        so agents created meanwhile cannot take them and leave rows waiting; while the
        group waits, idle agents are released (see `_placement.Room`). Its rows' deadlines count
        from then. Past `SWARM_RAY_PLACEMENT_S` unplaced, every row fails by name.
        """
        slots = max(1, min(len(subtasks), self.room.cluster.fit(spec.resources)))
        bundle = need(spec.resources)
        if not bundle:  # the rows reserve nothing: nothing to wait for
            await self._run_timed(spec, subtasks, on_result, slots, None)
            return
        from ray.util.placement_group import placement_group, remove_placement_group

        group = placement_group([dict(bundle) for _ in range(slots)], strategy="PACK")
        try:
            limit = placement_limit_s()
            if not await self.room.placed_within(group.ready(), limit, stage=True):
                why = (
                    f"no resources for `{spec.id}`: its Ray Data stage waited {limit:g} s "
                    f"for {slots} slot(s) of {_shown_need(spec)}; the cluster is busy or "
                    "too small"
                )
                await _unplaceable_run(subtasks, why, on_result)
                return
            await self._run_timed(spec, subtasks, on_result, slots, group)
        finally:
            with contextlib.suppress(RayError, ValueError):
                remove_placement_group(group)

    async def _run_timed(
        self,
        spec: CapabilitySpec,
        subtasks: list[SubTask],
        on_result: OnResult,
        slots: int,
        group: Any,
    ) -> None:
        """`run_batch` with a timer per row: past its deadline a row is reported failed.

        The row also stops itself at its deadline (see `_data_row`): this timer is the
        backstop for a row stuck where a signal cannot reach. The stage runs `slots` rows
        at a time, taken in order, so a row's timer starts when a slot frees for it, not
        at dispatch: a row waiting behind others is not late.
        """
        loop = asyncio.get_running_loop()
        queued = list(reversed(subtasks))
        timers: dict[str, asyncio.TimerHandle] = {}
        reported: set[str] = set()

        def late(s: SubTask) -> None:
            timers.pop(s.subtask_id, None)
            report(
                error_result(
                    s,
                    ErrorCode.TIMEOUT,
                    f"sub-task `{s.subtask_id}` ran past its {s.timeout_s} s deadline "
                    f"in the Ray Data stage of `{spec.id}`",
                )
            )

        def arm() -> None:
            while queued and len(timers) < slots:
                s = queued.pop()
                if s.subtask_id not in reported:
                    timers[s.subtask_id] = loop.call_later(s.timeout_s + _ROW_GRACE_S, late, s)

        def report(result: SubTaskResult) -> None:
            reported.add(result.subtask_id)
            timer = timers.pop(result.subtask_id, None)
            if timer is not None:
                timer.cancel()
            on_result(result)
            arm()

        arm()
        try:
            await self.run_batch(spec, subtasks, report, slots, group)
        finally:
            for timer in timers.values():
                timer.cancel()

    async def run_batch(
        self,
        spec: CapabilitySpec,
        subtasks: list[SubTask],
        on_result: OnResult,
        slots: int | None = None,
        group: Any = None,
    ) -> None:
        """Stream each row's result to `on_result` as soon as it is produced.

        `slots` rows run at once (default: the capability's cap), in `group`'s bundles
        when a placement group is given.
        """
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        stop = threading.Event()
        seen: set[str] = set()
        self.pipelines += 1
        size = slots or spec.resources.max_concurrency
        placed: dict[str, Any] = {}
        if group is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            placed["scheduling_strategy"] = PlacementGroupSchedulingStrategy(group)

        def emit(result: SubTaskResult) -> None:
            seen.add(result.subtask_id)
            on_result(result)

        def emit_unless_seen(result: SubTaskResult) -> None:
            if result.subtask_id not in seen:
                emit(result)

        def pump() -> None:
            from ray.data import DataContext, TaskPoolStrategy

            DataContext.get_current().enable_progress_bars = False
            rows = [{"subtask": s.model_dump_json()} for s in subtasks]
            with warnings.catch_warnings():
                # Ray 2.60 has no supported route for a placement group into a stage:
                # `map()` names no scheduling strategy (its named remote parameters are
                # resources, labels, `max_calls`, `runtime_env`); `ray_remote_args`,
                # `ray_remote_args_fn` and `DataContext.scheduling_strategy` all warn as
                # deprecated; and a group captured by a parent task is no way round, as
                # Ray Data gives each task `"SPREAD"` unless told otherwise. Upstream
                # plans named options after ray-project/ray#64090 (see #65227); until
                # then the group goes in `ray_remote_args`, its warning silenced; Ray
                # 2.64 removes that route, and every Data stage would fail there.
                warnings.simplefilter("ignore", RayDeprecationWarning)
                ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(
                    functools.partial(_data_row, spec=spec),
                    compute=TaskPoolStrategy(size=size),
                    **spec.resources.ray_options(),
                    **placed,
                )
            # A one-operator stage has nothing to reserve resources against; with the
            # reservation on, Ray Data ran about 1.4 rows at a time on 2 free CPUs.
            ds.context.op_resource_reservation_enabled = False
            rows_out = ds.iter_rows()
            try:
                for row in rows_out:
                    if stop.is_set():  # the batch was cancelled: stop the whole stage
                        break
                    result = SubTaskResult.model_validate_json(row["result"])
                    loop.call_soon_threadsafe(emit, result)
            except (RayError, GetTimeoutError) as exc:
                message = f"Ray Data stage of `{spec.id}` failed: {type(exc).__name__}: {exc}"
                for s in subtasks:
                    loop.call_soon_threadsafe(
                        emit_unless_seen, error_result(s, ErrorCode.AGENT_UNAVAILABLE, message)
                    )
            finally:
                close = getattr(rows_out, "close", None)
                if close is not None:
                    with contextlib.suppress(Exception):
                        close()
                loop.call_soon_threadsafe(done.set)

        threading.Thread(target=pump, name=f"data:{spec.id}", daemon=True).start()
        try:
            await done.wait()
        finally:
            stop.set()
