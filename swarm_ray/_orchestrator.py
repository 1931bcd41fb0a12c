"""The orchestrator: a detached, restartable Ray actor that is only wiring.

All decisions are made by the pure state machine and scheduler inside each `TaskDriver`;
this actor carries out their intents on Ray (executors, timers, cancellation) and feeds
results back. It is an async actor: everything runs on one event loop, so no locks.

What it records and its background loops live in `_upkeep`.

Ray re-runs `__init__` after a crash; the actor then reloads every open task from the
state store and dispatches only what was outstanding.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from collections import OrderedDict, defaultdict
from typing import Any

import ray

from swarm_ray._audit import AuditTrail
from swarm_ray._capability import ExecutorKind
from swarm_ray._catalog import load_catalogs
from swarm_ray._children import ChildBook, ChildOutcome
from swarm_ray._config import state_dir as default_state_dir
from swarm_ray._config import tune_gc
from swarm_ray._driver import TaskDriver
from swarm_ray._errors import (
    ErrorCode,
    SwarmError,
    SwarmUserError,
    TaskNotFoundError,
    WatermarkRejectedError,
)
from swarm_ray._executors import ActorPoolExecutor, DataExecutor, ServeExecutor, error_result
from swarm_ray._fsm import TaskState
from swarm_ray._health import HealthBook
from swarm_ray._metrics import SwarmMetrics
from swarm_ray._plan import Plan
from swarm_ray._planning import PLAN_SUBTASK, check_planner, plan_with, planner_for
from swarm_ray._record import SCHEMA_VERSION, TaskRecord
from swarm_ray._results import ResultStore
from swarm_ray._signals import (
    BreakerClosed,
    BreakerHalfOpened,
    BreakerOpened,
    CancelRequested,
    CancelSubTasks,
    Dispatch,
    FailTask,
    Fallback,
    FinishTask,
    Intent,
    ResultRejected,
    Retry,
    RunIntent,
    Tick,
)
from swarm_ray._store import open_state_store
from swarm_ray._subtask import SubTaskResult
from swarm_ray._task import TaskEvent, TaskRequest
from swarm_ray._trace import find_tokens, trace_token
from swarm_ray._upkeep import Observer, start_upkeep
from swarm_ray._views import status_view
from swarm_ray._watermark import WatermarkKey

__all__: list[str] = []

_MAX_CHUNK = 16
"""Most sub-tasks sent to one agent in one streaming call."""


class Orchestrator:
    """Owns every task's driver and the executors. Create it with `swarm_ray.connect()`."""

    def __init__(
        self,
        catalogs: list[str],
        state_url: str | None = None,
        results_uri: str | None = None,
        state_dir: str | None = None,
    ) -> None:
        self._registry, self._router = load_catalogs(catalogs)
        self._store = open_state_store(
            state_url, state_dir=state_dir, supported_schema_version=SCHEMA_VERSION
        )
        if results_uri is None and state_dir is not None:
            results_uri = f"{state_dir.rstrip('/')}/results"
        self._results = ResultStore(results_uri)
        self._key = WatermarkKey.from_config(state_dir)
        self._drivers: dict[str, TaskDriver] = {}
        self._finished: dict[str, asyncio.Event] = {}
        self._changed: dict[str, asyncio.Condition] = {}
        self._done: OrderedDict[str, None] = OrderedDict()
        self._keep_finished = max(1, int(os.environ.get("SWARM_RAY_KEEP_FINISHED", "1000")))
        self._inflight: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._members: dict[tuple[str, str], set[str]] = {}
        self._serial = itertools.count()
        self._pool = ActorPoolExecutor(namespace=ray.get_runtime_context().namespace)
        self._serve = ServeExecutor()
        self._data = DataExecutor()
        self._metrics = SwarmMetrics()
        self._health = HealthBook(self._registry)
        audit = AuditTrail.from_env(state_dir or default_state_dir())
        self._observer = Observer(self._metrics, self._health, audit)
        self._recovered: asyncio.Task[int] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._children = ChildBook()
        context = ray.get_runtime_context()
        self._name = f"{context.namespace}/{context.get_actor_name()}"
        self.started_at = time.time()
        tune_gc()
        # Recovery needs the event loop, which __init__ does not run on: ask ourselves.
        ray.get_runtime_context().current_actor.recover.remote()

    # ---- recovery --------------------------------------------------------------------

    async def recover(self) -> int:
        """Reload open tasks and resume them (idempotent); returns how many were resumed."""
        if self._recovered is None:
            self._recovered = asyncio.get_running_loop().create_task(self._recover())
        return await asyncio.shield(self._recovered)

    async def _recover(self) -> int:
        self._background += start_upkeep(
            self._pool,
            self._serve,
            self._observer,
            agent_idle_s=float(os.environ.get("SWARM_RAY_AGENT_IDLE_S", "60")),
            health_interval_s=float(os.environ.get("SWARM_RAY_HEALTH_INTERVAL_S", "10")),
        )
        resumed = 0
        for task_id in self._store.list_tasks(open_only=True):
            driver = TaskDriver.load(task_id, **self._deps())
            if driver is None:
                continue
            self._track(driver)
            resumed += 1
            if driver.record.plan is None or driver.scheduler is None:
                self._start(driver)
            elif driver.scheduler.outcome is not None:
                self._execute(driver, [driver.scheduler.outcome])
            else:
                outstanding = driver.scheduler.outstanding()
                driver.reissue(outstanding)
                driver.emit(
                    "state", str(driver.state), summary=f"resumed {len(outstanding)} sub-tasks"
                )
                if driver.state is TaskState.DISPATCHING:
                    driver.move(TaskState.EXECUTING, "resumed after a restart")
                self._execute(driver, list(outstanding))  # type: ignore[arg-type]
        return resumed

    def _deps(self) -> dict[str, Any]:
        return {
            "registry": self._registry,
            "store": self._store,
            "results": self._results,
            "key": self._key,
            "on_transition": self._metrics.transition,
            "on_event": self._observer.event,
        }

    def _track(self, driver: TaskDriver) -> None:
        driver.orchestrator = self._name  # agents call back here for child sub-tasks
        self._drivers[driver.task_id] = driver
        self._finished.setdefault(driver.task_id, asyncio.Event())
        self._changed.setdefault(driver.task_id, asyncio.Condition())
        if driver.state.terminal:
            self._ended(driver)

    def _ended(self, driver: TaskDriver) -> None:
        """Wake the task's waiters; forget the oldest ended tasks past the memory bound.

        An ended task is reloaded from the store when asked for again, so memory stays
        bounded however many tasks a long-lived orchestrator sees.
        """
        self._finished[driver.task_id].set()
        self._done[driver.task_id] = None
        self._done.move_to_end(driver.task_id)
        while len(self._done) > self._keep_finished:
            old, _ = self._done.popitem(last=False)
            self._drivers.pop(old, None)
            self._finished.pop(old, None)
            self._changed.pop(old, None)

    def _driver(self, task_id: str) -> TaskDriver:
        if task_id not in self._drivers:
            driver = TaskDriver.load(task_id, **self._deps())
            if driver is None:
                raise TaskNotFoundError(f"task `{task_id}` is not known", task_id=task_id)
            self._track(driver)
        return self._drivers[task_id]

    # ---- public API ------------------------------------------------------------------

    async def submit(self, request: TaskRequest) -> str:
        """Plan a task and start it; returns its id at once. Raises user errors.

        With a template the plan is made (and refused) before this returns; a planning
        capability is asked in the background, so its task starts in state `created`.
        """
        (answer,) = await self.submit_many([request])
        if isinstance(answer, SwarmUserError):
            raise answer
        return answer

    async def submit_many(self, requests: list[TaskRequest]) -> list[str | SwarmUserError]:
        """`submit` for each request, in one call and one store commit (the gateway's).

        Each request gets its task id or its own user error; the others go ahead.
        """
        await self.recover()
        answers: list[str | SwarmUserError] = []
        with self._store.batch():
            for request in requests:
                try:
                    answers.append(self._submit(request))
                except SwarmUserError as exc:
                    answers.append(exc)
        return answers

    def _submit(self, request: TaskRequest) -> str:
        if request.task_id is not None and self._store.get_task(request.task_id) is not None:
            return request.task_id
        planner = planner_for(request, self._router)
        if planner is not None:
            check_planner(self._registry, planner)
        driver = TaskDriver.create(request, **self._deps())
        self._track(driver)
        error = self._start(driver, planner)
        if error is not None:
            raise error
        return driver.task_id

    def _start(self, driver: TaskDriver, planner: str | None = None) -> SwarmUserError | None:
        """Plan from a template now, or ask `planner` (found from the request if not given)."""
        if planner is None:
            planner = planner_for(driver.record.request, self._router)
        if planner is None:
            return self._plan(driver)
        self._spawn(driver, [PLAN_SUBTASK], self._plan_with(driver, planner))
        return None

    async def _plan_with(self, driver: TaskDriver, planner: str) -> None:
        driver.emit("planning", "asking", agent=planner, summary=f"asking `{planner}` for a plan")
        try:
            plan, usage = await plan_with(
                planner,
                driver.record.request,
                task_id=driver.task_id,
                trace_id=driver.record.trace_id,
                registry=self._registry,
                router=self._router,
                key=self._key,
                serve=self._serve,
            )
        except SwarmError as exc:
            if not driver.state.terminal:
                driver.fail(exc)
                self._ended(driver)
            return
        if driver.state.terminal:  # cancelled while the planner thought
            return
        driver.emit(
            "planning",
            "planned",
            agent=planner,
            summary=f"plan `{plan.template.name}`, {len(plan.subtasks)} sub-tasks, "
            f"{usage.completion_tokens} planner tokens",
        )
        self._plan(driver, plan)

    def _plan(self, driver: TaskDriver, plan: Plan | None = None) -> SwarmUserError | None:
        try:
            intents = driver.plan(self._router, plan)
        except SwarmUserError as exc:
            driver.fail(exc)
            self._ended(driver)
            return exc
        self._execute(driver, intents)
        return None

    async def wait(self, task_id: str, timeout_s: float | None = None) -> TaskRecord:
        """Wait until the task ends (or the timeout passes); returns its record."""
        await self.recover()
        driver = self._driver(task_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._finished[task_id].wait(), timeout_s)
        return driver.view()

    async def record(self, task_id: str) -> TaskRecord:
        """The task's record: request, plan, state, audit log and scheduler log."""
        await self.recover()
        return self._driver(task_id).view()

    async def output(self, task_id: str) -> dict[str, Any] | None:
        """The task's output (None until it completes), wherever it is stored."""
        await self.recover()
        return self._driver(task_id).output()

    async def status(self, task_id: str) -> dict[str, Any]:
        """A compact status: state, progress, each sub-task's status, warnings, error."""
        await self.recover()
        return status_view(self._driver(task_id))

    async def tasks(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest tasks, one summary line each."""
        await self.recover()
        views = []
        for n, task_id in enumerate(reversed(self._store.list_tasks(newest=limit))):
            # Ended tasks out of memory are read back but not kept (a long listing would
            # push out the ones clients are following); other calls go between reads.
            driver = self._drivers.get(task_id) or TaskDriver.load(task_id, **self._deps())
            if driver is not None:
                views.append(status_view(driver, brief=True))
            if n % 50 == 49:
                await asyncio.sleep(0)
        return views

    async def events(
        self, task_id: str, after_seq: int = 0, wait_s: float = 0.0
    ) -> list[TaskEvent]:
        """Events after `after_seq`; waits up to `wait_s` for one when there are none."""
        await self.recover()
        driver = self._driver(task_id)
        if wait_s > 0 and len(driver.events) <= after_seq and not driver.state.terminal:
            condition = self._changed[task_id]
            async with condition:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        condition.wait_for(lambda: len(driver.events) > after_seq), wait_s
                    )
        return driver.events[after_seq:]

    async def cancel(self, task_id: str, reason: str = "cancelled by user") -> TaskRecord:
        """Cancel a running task (no-op for an ended one)."""
        await self.recover()
        driver = self._driver(task_id)
        if not driver.state.terminal:
            if driver.scheduler is None:
                driver.fail(SwarmUserError(reason))
                self._ended(driver)
            else:
                self._execute(driver, driver.feed(CancelRequested(at=time.time(), reason=reason)))
        return driver.view()

    async def report(self, result: SubTaskResult) -> bool:
        """Accept a result from an external agent; False (and counted) when refused."""
        await self.recover()
        return self._on_result(result)

    async def run_child(
        self,
        task_id: str,
        parent_subtask_id: str,
        parent_watermark: str,
        capability_id: str,
        data: dict[str, Any],
        key: str,
    ) -> ChildOutcome:
        """Run a child sub-task for a running attempt's agent; answer when it settles.

        See `swarm_ray._children`: the caller proves it is the running attempt of
        `parent_subtask_id` by its watermark; the child is dispatched like any sub-task.
        """
        await self.recover()
        driver = self._driver(task_id)
        child_id, event = self._children.request(
            driver, parent_subtask_id, parent_watermark, capability_id, data, key
        )
        if event is not None:
            with self._store.batch():
                self._execute(driver, driver.feed(event))
        return await self._children.wait(driver, child_id)

    async def info(self) -> dict[str, Any]:
        """Capabilities, templates, agents and counters of this orchestrator."""
        await self.recover()
        rejections = {
            reason: int(n)
            for reason, n in self._metrics.tally("swarm_watermark_rejections", "reason").items()
        }
        return {
            "capabilities": self._registry.ids(),
            "templates": [t.name for t in self._router],
            "agents": self._pool.agent_names(),
            "data_pipelines": self._data.pipelines,
            "watermark_rejections": dict(rejections),
            "open_tasks": sum(not d.state.terminal for d in self._drivers.values()),
            "started_at": self.started_at,
        }

    async def health(self) -> dict[str, Any]:
        """Each capability's health and the swarm health score (see `swarm_ray._health`)."""
        await self.recover()
        report = self._health.report()
        report["open_tasks"] = sum(not d.state.terminal for d in self._drivers.values())
        report["uptime_s"] = round(time.time() - self.started_at, 3)
        return report

    async def metrics(self) -> dict[str, Any]:
        """Swarm-level numbers for `GET /metrics` (this actor is their one owner)."""
        await self.recover()
        snapshot = self._metrics.snapshot()
        snapshot["tasks"] = self._task_counts()
        snapshot["health"] = self._health.report()
        from swarm_ray.llm._budget import budget_states  # LLM endpoints' budget actors

        snapshot["llm_budgets"] = await budget_states()
        return snapshot

    def _task_counts(self) -> dict[str, int]:
        """Open tasks by state, and the tasks that ended since this orchestrator started."""
        states: dict[str, int] = defaultdict(int)
        for driver in self._drivers.values():
            if not driver.state.terminal:
                states[str(driver.state)] += 1
        ended = self._metrics.tally("swarm_task_transitions", "to_state")
        for state in TaskState:
            if state.terminal and ended.get(str(state)):
                states[str(state)] = int(ended[str(state)])
        return dict(states)

    async def trace_watermarks(self, text: str) -> list[dict[str, Any]]:
        """Trace every watermark token found in `text` (a passage, a cell or a token)."""
        await self.recover()

        def scheduler_of(task_id: str) -> Any:
            try:
                return self._driver(task_id).scheduler
            except TaskNotFoundError:
                return None

        return [trace_token(self._key, token, scheduler_of) for token in find_tokens(text)]

    async def catalogue(self, schemas: bool = False) -> list[dict[str, Any]]:
        """The registry's catalogue, with each capability's JSON Schemas if asked."""
        return self._registry.catalogue(schemas=schemas)

    async def capability(self, capability_id: str) -> dict[str, Any]:
        """One capability with its JSON Schemas; raises `UnknownCapabilityError`."""
        return self._registry.describe(capability_id)

    # ---- carrying out intents --------------------------------------------------------

    def _execute(self, driver: TaskDriver, intents: list[Intent]) -> None:
        batches: dict[tuple[str, float], list[RunIntent]] = defaultdict(list)
        for intent in intents:
            match intent:
                case Dispatch() | Retry() | Fallback():
                    if isinstance(intent, Retry | Fallback):
                        self._metrics.retry(intent.capability_id, type(intent).__name__.lower())
                    if self._registry.get(intent.capability_id).executor is ExecutorKind.SERVE:
                        self._spawn(driver, [intent.subtask_id], self._run_serve(driver, intent))
                    else:
                        batches[(intent.capability_id, intent.delay_s)].append(intent)
                case CancelSubTasks(subtask_ids=ids):
                    cancelled = set(ids)
                    for key, members in list(self._members.items()):
                        if key[0] == driver.task_id and cancelled & members:
                            task = self._inflight.pop(key, None)
                            if task is not None:
                                task.cancel()
                case BreakerOpened(capability_id=cid, until=until):
                    self._metrics.breaker(cid, 2)
                    delay = max(0.0, until - time.time())
                    asyncio.get_running_loop().call_later(delay, self._tick, driver.task_id)
                case BreakerHalfOpened(capability_id=cid):
                    self._metrics.breaker(cid, 1)
                case BreakerClosed(capability_id=cid):
                    self._metrics.breaker(cid, 0)
                case ResultRejected():
                    self._metrics.rejection("not_outstanding")
                case FinishTask() | FailTask():
                    self._end(driver, intent)
                case _:
                    pass
        for (cid, _delay), batch in batches.items():
            spec = self._registry.get(cid)
            if spec.executor is ExecutorKind.DATA:
                chunks = [batch]  # one streaming Ray Data stage per batch
            else:  # spread over the pool; small chunks keep results streaming back
                size = min(_MAX_CHUNK, -(-len(batch) // spec.resources.max_concurrency))
                chunks = [batch[i : i + size] for i in range(0, len(batch), size)]
            for chunk in chunks:
                chunk_ids = [i.subtask_id for i in chunk]
                self._spawn(driver, chunk_ids, self._run_batch(driver, cid, chunk))
        self._children.settle(driver)
        self._notify(driver.task_id)

    def _spawn(self, driver: TaskDriver, ids: list[str], coro: Any) -> None:
        key = (driver.task_id, f"{ids[0]}+{len(ids)}:{next(self._serial)}")
        task = asyncio.get_running_loop().create_task(coro)
        self._inflight[key] = task
        self._members[key] = set(ids)

        def forget(_task: asyncio.Task[None]) -> None:
            self._inflight.pop(key, None)
            self._members.pop(key, None)

        task.add_done_callback(forget)

    def _end(self, driver: TaskDriver, outcome: FinishTask | FailTask) -> None:
        driver.finish(outcome)
        self._ended(driver)

    def _tick(self, task_id: str) -> None:
        driver = self._drivers.get(task_id)
        if driver is not None and driver.scheduler is not None and not driver.state.terminal:
            self._execute(driver, driver.feed(Tick(at=time.time())))

    def _notify(self, task_id: str) -> None:
        condition = self._changed.get(task_id)
        if condition is None:
            return

        async def wake() -> None:
            async with condition:
                condition.notify_all()

        asyncio.get_running_loop().create_task(wake())

    async def _run_serve(self, driver: TaskDriver, intent: RunIntent) -> None:
        if intent.delay_s:
            await asyncio.sleep(intent.delay_s)
        if driver.state.terminal:
            return
        subtask = driver.subtask_for(intent)
        cid = intent.capability_id
        if not self._health.in_dispatch(cid):
            self._on_result(
                error_result(subtask, ErrorCode.AGENT_UNAVAILABLE, self._health.why_out(cid))
            )
            return
        self._on_result(await self._serve.run(self._registry.get(cid), subtask))

    async def _run_batch(self, driver: TaskDriver, cid: str, intents: list[RunIntent]) -> None:
        delay = max(i.delay_s for i in intents)
        if delay:
            await asyncio.sleep(delay)
        if driver.state.terminal:
            return
        spec = self._registry.get(cid)
        subtasks = [driver.subtask_for(i) for i in intents]
        if spec.executor is ExecutorKind.ACTOR:
            await self._pool.run_many(spec, subtasks, self._on_result)
            return
        loop = asyncio.get_running_loop()
        timers = [
            loop.call_later(
                s.timeout_s,
                self._on_result,
                error_result(
                    s,
                    ErrorCode.TIMEOUT,
                    f"sub-task `{s.subtask_id}` ran past its "
                    f"{s.timeout_s} s deadline in the Ray Data stage of `{cid}`",
                ),
            )
            for s in subtasks
        ]
        try:
            await self._data.run_batch(spec, subtasks, self._on_result)
        finally:
            for timer in timers:
                timer.cancel()

    def _on_result(self, result: SubTaskResult) -> bool:
        with self._store.batch():
            return self._accept(result)

    def _accept(self, result: SubTaskResult) -> bool:
        driver = self._drivers.get(result.task_id)
        if driver is None or driver.scheduler is None:
            self._metrics.rejection("unknown_task")
            return False
        try:
            event = driver.accept(result)
        except WatermarkRejectedError as exc:
            self._metrics.rejection(str(exc.details.get("reason", "invalid")))
            return False
        self._observer.result(result, driver.record.trace_id)
        self._execute(driver, driver.feed(event))
        return True
