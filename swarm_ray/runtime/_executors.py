"""Three executors, one seam: sub-tasks in, a `SubTaskResult` per attempt out.

Every executor answers `runs(spec, subtasks, on_result)`: it splits a batch of attempts of
one capability into runs (coroutines the orchestrator tracks and may cancel, each with
the sub-task ids it carries) and owns everything particular to it: how it batches, how
it keeps deadlines, whether the capability is in dispatch.

- `ActorPoolExecutor`: pooled sub-agent actors (`_subagent.SubAgent`) per capability,
  created with the capability's resources (fractional GPUs included) up to its max
  concurrency. Each sub-task is a fresh call on a fresh input: nothing is carried between
  sub-tasks. On a deadline the actor is killed and replaced, which frees the slot for
  sure; an actor that dies is replaced and only its own sub-task is reported failed.
- `ServeExecutor`: capabilities hosted as Ray Serve deployments (model-backed agents).
- `DataExecutor`: a batch of sub-tasks becomes a Ray Data stage whose rows stream back
  one by one as they finish, so downstream work starts at once (partial rollout).

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
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, Protocol

import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from swarm_ray.core._capability import CapabilitySpec
from swarm_ray.core._errors import ErrorCode
from swarm_ray.core._subtask import SubTask, SubTaskResult
from swarm_ray.runtime._agent import error_result, run_subtask
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


class _Pool:
    """Actors of one capability, leased one sub-task at a time."""

    _serial = itertools.count()
    _incarnation = uuid.uuid4().hex[:6]
    """Distinguishes agents of a restarted orchestrator from the dying ones of the last."""

    def __init__(self, spec: CapabilitySpec, namespace: str) -> None:
        self.spec = spec
        self.namespace = namespace
        self.idle: list[Any] = []
        self.idle_since: dict[Any, float] = {}
        self.names: dict[Any, str] = {}
        self.waiters: list[tuple[int, int, asyncio.Future[Any]]] = []
        """A heap of (-priority, arrival, waiter): higher priority first, then first come."""
        self._arrivals = itertools.count()

    def _create(self) -> Any:
        name = f"swarm-agent:{self.spec.id}:{self._incarnation}-{next(self._serial)}"
        options = {**self.spec.resources.ray_options(), "name": name, "namespace": self.namespace}
        actor = ray.remote(SubAgent).options(max_restarts=0, **options).remote(self.spec, name)
        self.names[actor] = name
        return actor

    async def acquire(self, priority: int = 0) -> Any:
        """An agent: idle, new (under `max_concurrency`), or the next one freed.

        When agents are scarce, waiters of higher-`priority` tasks get them first.
        """
        if self.idle:
            actor = self.idle.pop()
            self.idle_since.pop(actor, None)
            return actor
        if len(self.names) < self.spec.resources.max_concurrency:
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

    def release(self, actor: Any) -> None:
        while self.waiters:
            _, _, waiter = heapq.heappop(self.waiters)
            if not waiter.done():
                waiter.set_result(actor)
                return
        self.idle.append(actor)
        self.idle_since[actor] = time.monotonic()

    def reap(self, max_idle_s: float) -> int:
        """Kill agents idle longer than `max_idle_s`, so idle pools hold no CPU or GPU."""
        now = time.monotonic()
        stale = [a for a in self.idle if now - self.idle_since.get(a, now) > max_idle_s]
        for actor in stale:
            self.idle.remove(actor)
            self.idle_since.pop(actor, None)
            self.names.pop(actor, None)
            with contextlib.suppress(RayError, ValueError):
                ray.kill(actor, no_restart=True)
        return len(stale)

    def replace(self, actor: Any) -> None:
        self.names.pop(actor, None)
        with contextlib.suppress(RayError, ValueError):
            ray.kill(actor, no_restart=True)
        if self.waiters:
            self.release(self._create())


class ActorPoolExecutor:
    """Runs sub-tasks on pooled sub-agent actors."""

    def __init__(self, namespace: str) -> None:
        self._namespace = namespace
        self._pools: dict[str, _Pool] = {}

    def reap(self, max_idle_s: float) -> int:
        """Release agents idle longer than `max_idle_s` (they are created again on demand)."""
        return sum(pool.reap(max_idle_s) for pool in self._pools.values())

    def agent_names(self) -> list[str]:
        """Names of the live sub-agent actors."""
        return sorted(n for pool in self._pools.values() for n in pool.names.values())

    def _pool(self, spec: CapabilitySpec) -> _Pool:
        if spec.id not in self._pools:
            self._pools[spec.id] = _Pool(spec, self._namespace)
        return self._pools[spec.id]

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """Spread the batch over the pool in chunks (each streams its results back)."""
        chunks = _chunks(subtasks, spec.resources.max_concurrency)
        return [([s.subtask_id for s in c], self.run_many(spec, c, on_result)) for c in chunks]

    async def run_many(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> None:
        """Run attempts one after another on one agent, reporting each as it finishes.

        One streaming call carries the whole batch, which saves a round trip per sub-task;
        each result still comes back within `_subagent.BUNCH_S` of being ready (partial rollout;
        fast ones in bunches, see `SubAgent.run_stream`), and each
        sub-task keeps its own deadline, counted from the previous result. When the agent
        dies or passes a deadline, the sub-task it was running fails; the ones queued
        behind it never started and go to a fresh agent, unchanged.
        """
        pool = self._pool(spec)
        actor = await pool.acquire(max(s.priority for s in subtasks))
        name = pool.names.get(actor, "?")
        pending = list(subtasks)
        failure: SubTaskResult | None = None
        healthy = False
        try:
            if len(pending) == 1:  # a plain call costs half a stream's CPU
                current = pending[0]
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


class ServeExecutor:
    """Runs sub-tasks on Ray Serve deployments, deploying each capability on first use.

    Args:
        out_of_dispatch: Why a capability is out of dispatch (failing health checks), or
            None when it takes sub-tasks; its attempts then fail fast with
            `agent_unavailable`, so retries and fallbacks apply.
    """

    def __init__(self, out_of_dispatch: Callable[[str], str | None] = lambda _cid: None) -> None:
        self._handles: dict[str, Any] = {}
        self._lock = asyncio.Lock()
        self._out = out_of_dispatch

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """One run per attempt (Serve routes and batches requests itself)."""
        return [([s.subtask_id], self._run_one(spec, s, on_result)) for s in subtasks]

    async def _run_one(self, spec: CapabilitySpec, subtask: SubTask, on_result: OnResult) -> None:
        why = self._out(spec.id)
        if why is not None:
            on_result(error_result(subtask, ErrorCode.AGENT_UNAVAILABLE, why))
            return
        on_result(await self.run(spec, subtask))

    async def _handle(self, spec: CapabilitySpec) -> Any:
        async with self._lock:
            if spec.id not in self._handles:
                from swarm_ray.runtime._serve_app import capability_app, deployment_names

                app_name, deployment = deployment_names(spec)
                await asyncio.to_thread(_serve_run, capability_app(spec), app_name)
                from ray import serve

                self._handles[spec.id] = serve.get_deployment_handle(deployment, app_name)
            return self._handles[spec.id]

    def deployed(self) -> list[str]:
        """Capabilities deployed so far (the ones worth probing)."""
        return sorted(self._handles)

    async def probe(
        self, capability_id: str, timeout_s: float = 5.0
    ) -> tuple[bool, dict[str, Any]]:
        """Ask a deployment for its health: (healthy, the replica's report or the error)."""
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
        """Run one attempt on the capability's deployment within its deadline."""
        handle = await self._handle(spec)
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
    """Runs a batch of sub-tasks as one streaming Ray Data stage."""

    def __init__(self) -> None:
        self.pipelines = 0

    def runs(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> list[RunSpec]:
        """The whole batch as one stage, each row held to its own deadline."""
        return [([s.subtask_id for s in subtasks], self._run_timed(spec, subtasks, on_result))]

    async def _run_timed(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> None:
        """`run_batch` with a timer per row: past its deadline a row is reported failed.

        The row also stops itself at its deadline (see `_data_row`); the timer here counts
        from dispatch, so a row that waited in the stage's queue is not waited for longer.
        """
        loop = asyncio.get_running_loop()
        timers = [
            loop.call_later(
                s.timeout_s,
                on_result,
                error_result(
                    s,
                    ErrorCode.TIMEOUT,
                    f"sub-task `{s.subtask_id}` ran past its {s.timeout_s} s deadline "
                    f"in the Ray Data stage of `{spec.id}`",
                ),
            )
            for s in subtasks
        ]
        try:
            await self.run_batch(spec, subtasks, on_result)
        finally:
            for timer in timers:
                timer.cancel()

    async def run_batch(
        self, spec: CapabilitySpec, subtasks: list[SubTask], on_result: OnResult
    ) -> None:
        """Stream each row's result to `on_result` as soon as it is produced."""
        loop = asyncio.get_running_loop()
        done = asyncio.Event()
        stop = threading.Event()
        seen: set[str] = set()
        self.pipelines += 1

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
            ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map(
                functools.partial(_data_row, spec=spec),
                compute=TaskPoolStrategy(size=spec.resources.max_concurrency),
                **spec.resources.ray_options(),
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
