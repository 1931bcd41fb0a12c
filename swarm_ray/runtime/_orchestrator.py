"""The orchestrator: a detached, restartable Ray actor that is only wiring.

Who decides what happens next to a task: its `TaskDriver` (`_driver.py`), always. This
actor is the swarm's API (submit, follow, answer, cancel, report, trace) and its event
loop: it takes requests in (`_intake`), makes drivers and finds them (`_tasks`), and hands
each input to the `Runner` (`_runner`), which feeds the driver and carries out the
commands it answers (run attempts on the executors, stop them, arm timers, plan again,
tell the task's end to its observers). It is an async actor: everything runs on one
event loop, so no locks.

What it records and its background loops live in `_upkeep`.

Ray re-runs `__init__` after a crash; the actor then reloads every open task from the
state store and dispatches only what was outstanding.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import ray

from swarm_ray.core.driver._commands import (
    Accepted,
    Answer,
    AnswerRejected,
    AskChild,
    Cancel,
    ChildAdmitted,
    ChildRefused,
    PlanFailed,
    Resume,
)
from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.guards._access import Access
from swarm_ray.core.guards._limits import RequestLimits
from swarm_ray.core.guards._principal import LOCAL, Principal
from swarm_ray.core.model._capability import ExecutorKind
from swarm_ray.core.model._errors import (
    InputNotAllowedError,
    RecordUnreadableError,
    StateStoreError,
    SwarmError,
    SwarmUserError,
    TaskNotFoundError,
)
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._record import SCHEMA_VERSION, TaskRecord
from swarm_ray.core.model._subtask import SubTaskResult
from swarm_ray.core.model._task import TaskEvent, TaskRequest
from swarm_ray.core.planning._catalog import merge_catalogs, read_catalogs
from swarm_ray.core.views._trace import trace_tokens
from swarm_ray.core.views._views import TaskStatus, record_view, status_view
from swarm_ray.runtime._audit import AuditTrail
from swarm_ray.runtime._children import ChildBook, ChildOutcome
from swarm_ray.runtime._config import compute_prices, secure_state_dir, tune_gc, watermark_key
from swarm_ray.runtime._config import state_dir as default_state_dir
from swarm_ray.runtime._executors import ActorPoolExecutor, DataExecutor, Executor, ServeExecutor
from swarm_ray.runtime._health import HealthBook
from swarm_ray.runtime._intake import (
    Intake,
    Layout,
    failure_of,
    plan_again,
    take_in_each,
)
from swarm_ray.runtime._ledger import open_ledger
from swarm_ray.runtime._listing import Listing
from swarm_ray.runtime._metrics import SwarmMetrics
from swarm_ray.runtime._otel import TaskTraces
from swarm_ray.runtime._owners import Owners
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._rollout import RolloutWriter
from swarm_ray.runtime._runner import Runner
from swarm_ray.runtime._shards import shard_store_url
from swarm_ray.runtime._spend import DailySpend
from swarm_ray.runtime._store import open_state_store
from swarm_ray.runtime._tasks import TaskTable
from swarm_ray.runtime._upkeep import Observer, reported_states, start_upkeep
from swarm_ray.runtime._uploads import Uploads

__all__: list[str] = []


_log = logging.getLogger(__name__)


class Orchestrator:
    """Owns every task's driver and the executors. Create it with `swarm_ray.connect()`."""

    def __init__(
        self,
        catalogs: list[str],
        state_url: str | None = None,
        results_uri: str | None = None,
        state_dir: str | None = None,
        shard: int = 0,
        sharded: bool = False,
    ) -> None:
        # The executors read streamed results that are already here with `ray.get(ref,
        # timeout=0)`, which never blocks; Ray would still warn of a blocking get.
        os.environ.setdefault("RAY_WARN_BLOCKING_GET_INSIDE_ASYNC", "0")
        loaded = read_catalogs(catalogs)
        self._registry, self._router = merge_catalogs(loaded)
        home = Path(state_dir).expanduser() if state_dir is not None else default_state_dir()
        secure_state_dir(home)
        # Shard k > 0 keeps its tasks in a store of its own (`_shards`).
        self._shard = shard
        url, part = shard_store_url(state_url, shard)
        options: dict[str, Any] = {}
        if part is not None and url is None:
            url = str(home / part)  # SQLite beside the default `state.db`
        elif part is not None:
            options["namespace"] = part  # Redis keys of its own
        self._store = open_state_store(
            url, state_dir=state_dir, supported_schema_version=SCHEMA_VERSION, **options
        )
        if results_uri is None and state_dir is not None:
            results_uri = f"{state_dir.rstrip('/')}/results"
        self._results = ResultStore(results_uri)
        self._rollouts = RolloutWriter(self._results)
        self._layout = Layout(home, Uploads(self._results), shard=shard)
        counts = tuple(c.count_fields for c in loaded if c.count_fields is not None)
        self._limits = RequestLimits.from_env(count_fields=counts)
        self._compute_prices = compute_prices()
        self._key = watermark_key(state_dir)
        self._drivers = TaskTable(int(os.environ.get("SWARM_RAY_KEEP_FINISHED", "1000")))
        self._listing = Listing(self._read_back)
        # Shards share one count of each owner's open tasks and spend (`_ledger`).
        ledger = open_ledger(state_url, home, shard) if sharded else None
        self._owners = Owners(
            self._drivers,
            self._limits,
            DailySpend.from_env(self._store, book=ledger),
            self._layout.uploads,
            ledger,
        )
        self._metrics = SwarmMetrics()
        self._health = HealthBook(self._registry)
        self._pool = ActorPoolExecutor(namespace=ray.get_runtime_context().namespace)
        self._serve = ServeExecutor(out_of_dispatch=self._health.why_out_if_out)
        self._data = DataExecutor()
        executors: dict[ExecutorKind, Executor] = {
            ExecutorKind.ACTOR: self._pool,
            ExecutorKind.SERVE: self._serve,
            ExecutorKind.DATA: self._data,
        }
        audit = AuditTrail.from_env(home)
        self._observer = Observer(self._metrics, self._health, audit, TaskTraces.from_env())
        self._recovered: asyncio.Task[int] | None = None
        self._background: list[asyncio.Task[None]] = []
        self._children = ChildBook()
        self._runner = Runner(
            registry=self._registry,
            executors=executors,
            drivers=self._drivers,
            store=self._store,
            observer=self._observer,
            metrics=self._metrics,
            children=self._children,
            replan=self._replan,
            on_end=(  # what happens when a task ends, in order
                self._observer.ended,  # its root span
                self._owners.count,  # on its owner's daily tally
                self._ended,  # its waiters woken, its uploads freed if it asked
                self._rollouts.record,  # its rollout, Parquet under the result store
            ),
        )
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
            uploads=self._layout.uploads,
            uploads_in_use=self._owners.in_use,
        )
        resumed = 0
        for n, task_id in enumerate(self._store.list_tasks(open_only=True)):
            # Each task on its own: one that cannot be loaded or resumed is quarantined
            # (it fails alone, by name) and the others go on.
            try:
                driver = self._load(task_id)
                if driver is None:
                    continue
                self._track(driver)
                self._runner.step(driver, Resume())
            except RecordUnreadableError:
                continue
            except SwarmError as exc:
                self._quarantine(task_id, exc)
                continue
            resumed += 1
            if n % 50 == 49:
                await asyncio.sleep(0)
        self._owners.reseat()
        return resumed

    def _load(self, task_id: str) -> TaskDriver | None:
        """Load a stored task; a record that cannot be read is quarantined, by name."""
        try:
            return TaskDriver.load(task_id, **self._deps())
        except StateStoreError:
            raise
        except (ValueError, RecursionError, KeyError, TypeError) as exc:
            error = RecordUnreadableError(
                f"task `{task_id}` has a stored record that cannot be loaded "
                f"({type(exc).__name__}: {str(exc)[:200]}); it is quarantined",
                task_id=task_id,
            )
            self._quarantine(task_id, error)
            raise error from None

    def _read_back(self, task_id: str) -> tuple[str | None, TaskStatus] | None:
        """A stored task's owner and brief, read in any thread: no callbacks, not tracked."""
        deps = {**self._deps(), "on_transition": None, "on_event": None}
        driver = TaskDriver.load(task_id, **deps)
        return None if driver is None else (driver.record.owner, status_view(driver, brief=True))

    def _brief_in_memory(self, task_id: str) -> tuple[str | None, TaskStatus] | None:
        driver = self._drivers.get(task_id)
        return None if driver is None else (driver.record.owner, status_view(driver, brief=True))

    def _quarantine(self, task_id: str, error: SwarmError) -> None:
        with contextlib.suppress(StateStoreError):
            self._store.quarantine(task_id)
        self._observer.quarantined(task_id, error)

    def _deps(self) -> dict[str, Any]:
        return {
            "registry": self._registry,
            "store": self._store,
            "results": self._results,
            "key": self._key,
            "on_transition": self._metrics.transition,
            "on_event": self._observer.event,
            "access_for": self._layout.policy_of,
            "router": self._router,
        }

    def _track(self, driver: TaskDriver) -> None:
        driver.orchestrator = self._name  # agents call back here for child sub-tasks
        driver.compute_prices = self._compute_prices
        self._owners.watch(driver)
        self._drivers.track(driver)
        self._listing.forget(driver.task_id)  # back in memory (resumed): its view changes
        if driver.state.terminal:
            self._ended(driver)

    def _ended(self, driver: TaskDriver) -> None:
        """Wake the task's waiters and free what it asked to free."""
        self._drivers.ended(driver.task_id)
        self._owners.release(driver.record.owner, driver.task_id)
        self._owners.free(driver.record)

    def _driver(self, task_id: str, principal: Principal | None = None) -> TaskDriver:
        """The task's driver, if `principal` may see it (others' tasks are not known)."""
        driver = self._drivers.get(task_id)
        if driver is None:
            driver = self._load(task_id)
            if driver is not None:
                self._track(driver)
        if driver is None or not (principal or LOCAL).sees(driver.record.owner):
            raise TaskNotFoundError(f"task `{task_id}` is not known", task_id=task_id)
        return driver

    # ---- public API ------------------------------------------------------------------

    async def submit(self, request: TaskRequest, principal: Principal | None = None) -> str:
        """Plan a task and start it; returns its id at once. Raises user errors.

        With a template the plan is made (and refused) before this returns; a planning
        capability is asked in the background, so its task starts in state `created`.
        `principal` is who asks: None for a trusted caller (see `swarm_ray.core.guards._principal`).
        """
        (answer,) = await self.submit_many([request], [principal])
        if isinstance(answer, SwarmError):
            raise answer
        return answer

    async def submit_many(
        self, requests: list[TaskRequest], principals: list[Principal | None] | None = None
    ) -> list[str | SwarmError]:
        """`submit` for each request, in one call and one store commit (the gateway's).

        Each request gets its task id or its own error (a user error, or an internal one
        with an error id); the others go ahead. The checks and template expansion run
        off the event loop (`_intake`).
        """
        await self.recover()
        who = [p or LOCAL for p in (principals or [None] * len(requests))]
        intakes = await asyncio.to_thread(
            take_in_each,
            requests,
            who,
            registry=self._registry,
            router=self._router,
            store=self._store,
            layout=self._layout,
            limits=self._limits,
        )
        answers: list[str | SwarmError] = []
        with self._store.batch():
            for intake in intakes:
                if isinstance(intake, SwarmError):
                    answers.append(intake)
                    continue
                try:
                    answers.append(self._create(intake))
                except SwarmUserError as exc:
                    answers.append(exc)
                except StateStoreError:
                    raise  # the batch's commit is in doubt: every caller hears it
                except Exception as exc:  # a bug on one request must not fail its batch
                    answers.append(failure_of(exc, "creating the task"))
        return answers

    def _create(self, intake: Intake) -> str:
        """Create the task an intake describes and start it (on the event loop)."""
        if intake.existing or intake.task_id in self._drivers:
            return intake.task_id
        self._owners.admit(intake.owner, intake.task_id)
        try:
            driver = TaskDriver.create(
                intake.request,
                task_id=intake.task_id,
                owner=intake.owner,
                workdir=intake.workdir,
                **self._deps(),
            )
        except BaseException:
            self._owners.release(intake.owner, intake.task_id)
            raise
        self._track(driver)
        assert intake.start is not None
        self._runner.step(driver, intake.start)
        if isinstance(intake.start, PlanFailed):
            raise intake.start.error
        if driver.state.terminal and isinstance(driver.error, SwarmUserError):
            raise driver.error  # the plan could not start
        return driver.task_id

    async def _replan(self, driver: TaskDriver) -> None:
        """Carry out `Replan`: plan a stored task again as a new request would be planned."""
        start = await asyncio.to_thread(
            plan_again,
            driver.record,
            registry=self._registry,
            router=self._router,
            layout=self._layout,
        )
        self._runner.step(driver, start)

    async def wait(
        self, task_id: str, timeout_s: float | None = None, principal: Principal | None = None
    ) -> TaskRecord:
        """Wait until the task ends (or the timeout passes); returns its record."""
        await self.recover()
        driver = self._driver(task_id, principal)
        await self._drivers.until_ended(task_id, timeout_s)
        await self._runner.turns.committed()
        return record_view(driver)

    async def record(self, task_id: str, principal: Principal | None = None) -> TaskRecord:
        """The task's record: request, plan, state, audit log and scheduler log."""
        await self.recover()
        return record_view(self._driver(task_id, principal))

    async def output(
        self, task_id: str, principal: Principal | None = None
    ) -> dict[str, Any] | None:
        """The task's output (None until it completes), wherever it is stored."""
        await self.recover()
        return self._driver(task_id, principal).output()

    async def status(self, task_id: str, principal: Principal | None = None) -> TaskStatus:
        """A compact status: state, progress, each sub-task's status, warnings, error."""
        await self.recover()
        return status_view(self._driver(task_id, principal))

    async def tasks(self, limit: int = 100, principal: Principal | None = None) -> list[TaskStatus]:
        """The newest tasks `principal` may see (its own; all for admins), one line each."""
        await self.recover()
        who = principal or LOCAL
        owner = None if who.admin or who.trusted else who.id
        task_ids = await asyncio.to_thread(self._store.list_tasks, newest=limit, owner=owner)
        # Tasks out of memory are read back in a thread, not on this loop (`_listing`).
        views = await self._listing.views(reversed(task_ids), who, self._brief_in_memory)
        while self._listing.unreadable:
            task_id, exc = self._listing.unreadable.pop()
            error = RecordUnreadableError(
                f"task `{task_id}` has a stored record that cannot be loaded "
                f"({type(exc).__name__}: {str(exc)[:200]}); it is quarantined",
                task_id=task_id,
            )
            self._quarantine(task_id, error)
        return views

    async def events(
        self,
        task_id: str,
        after_seq: int = 0,
        wait_s: float = 0.0,
        principal: Principal | None = None,
    ) -> list[TaskEvent]:
        """Events after `after_seq`; waits up to `wait_s` for one when there are none."""
        await self.recover()
        driver = self._driver(task_id, principal)
        deadline = asyncio.get_running_loop().time() + wait_s
        while len(driver.events) <= after_seq and not driver.state.terminal:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                break
            await self._drivers.until_changed(task_id, left)
        return driver.events[after_seq:]

    async def cancel(
        self,
        task_id: str,
        reason: str = "cancelled by user",
        principal: Principal | None = None,
    ) -> TaskRecord:
        """Cancel a running task (no-op for an ended one)."""
        await self.recover()
        driver = self._driver(task_id, principal)
        self._runner.step(driver, Cancel(reason))
        await self._runner.turns.committed()
        return record_view(driver)

    async def answer(
        self,
        task_id: str,
        subtask_id: str,
        answer: dict[str, Any],
        principal: Principal | None = None,
    ) -> TaskStatus:
        """Answer a sub-task waiting for a person; the task's status once it is recorded.

        Only the task's owner (or a trusted caller) answers, with an answer matching the
        sub-task's schema; the answer and who gave it are written to the task's log
        before the sub-task runs with it.

        Raises:
            TaskNotFoundError: no such task, or not `principal`'s to see.
            AnswerRefusedError: not waiting (any more), or not the owner.
            InvalidInputError: the answer does not match the schema.
        """
        await self.recover()
        who = principal or LOCAL
        driver = self._driver(task_id, who)
        for notice in self._runner.step(driver, Answer(subtask_id, answer, who)).notices:
            if isinstance(notice, AnswerRejected):
                raise notice.error
        await self._runner.turns.committed()
        return status_view(driver)

    async def report(self, result: SubTaskResult) -> bool:
        """Accept a result from an external agent; False (and counted) when refused."""
        await self.recover()
        accepted = any(isinstance(n, Accepted) for n in self._runner.on_result(result).notices)
        await self._runner.turns.committed()
        return accepted

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

        See `swarm_ray.runtime._children`: the caller proves it is the running attempt of
        `parent_subtask_id` by its watermark; the child is dispatched like any sub-task.
        """
        await self.recover()
        driver = self._driver(task_id)
        ask = AskChild(parent_subtask_id, parent_watermark, capability_id, data, key)
        for notice in self._runner.step(driver, ask).notices:
            match notice:
                case ChildRefused(error=error):
                    raise error
                case ChildAdmitted(outcome=outcome) if outcome is not None:
                    return outcome  # settled already: a call asked again
                case ChildAdmitted(child_id=child_id):
                    settled = self._children.wait(driver.task_id, child_id)
                    await self._runner.turns.committed()
                    return await settled
        raise AssertionError("an AskChild is always admitted or refused")

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
            "open_tasks": sum(not d.state.terminal for d in self._drivers),
            "started_at": self.started_at,
        }

    async def health(self) -> dict[str, Any]:
        """Each capability's health and the swarm health score (see `swarm_ray.runtime._health`)."""
        await self.recover()
        report = self._health.report()
        report["open_tasks"] = sum(not d.state.terminal for d in self._drivers)
        report["uptime_s"] = round(time.time() - self.started_at, 3)
        audit = self._observer.audit
        if audit is not None and audit.failures:
            report["audit_error"] = f"{audit.failures} audit writes failed; {audit.last_error}"
        return report

    async def metrics(self) -> dict[str, Any]:
        """Swarm-level numbers for `GET /metrics` (this actor is their one owner)."""
        await self.recover()
        snapshot = self._metrics.snapshot()
        snapshot["tasks"] = self._task_counts()
        snapshot["health"] = self._health.report()
        snapshot.update(await reported_states())  # e.g. `llm_budgets`: endpoint budgets
        return snapshot

    def _task_counts(self) -> dict[str, int]:
        """Open tasks by state, and the tasks that ended since this orchestrator started."""
        states: dict[str, int] = defaultdict(int)
        for driver in self._drivers:
            if not driver.state.terminal:
                states[str(driver.state)] += 1
        ended = self._metrics.tally("swarm_task_transitions", "to_state")
        for state in TaskState:
            if state.terminal and ended.get(str(state)):
                states[str(state)] = int(ended[str(state)])
        return dict(states)

    async def trace_watermarks(
        self,
        tokens: list[str],
        principal: Principal | None = None,
        include_input: bool = False,
    ) -> list[dict[str, Any]]:
        """Trace watermark tokens (full or short, see `_trace`) back to their sub-tasks.

        Only tasks `principal` may see are looked up; a sub-task's input comes back only
        when asked for, and only to the task's owner (or a trusted caller).
        """
        await self.recover()
        who = principal or LOCAL

        def driver_of(task_id: str) -> TaskDriver | None:
            try:
                return self._driver(task_id, who)
            except (TaskNotFoundError, RecordUnreadableError):
                return None

        return trace_tokens(self._key, tokens, driver_of, who, include_input=include_input)

    async def flush_rollouts(self) -> None:
        """Wait until the rollouts of every task ended so far are written (see `_rollout`)."""
        await self._rollouts.drain()

    async def storage(self) -> dict[str, str]:
        """Where this orchestrator keeps results and tasks' own directories.

        The gateway streams uploads into the first, shows files in the second to HTTP
        callers by task id, and shows no path under any of them (`gateway._redact`).
        """
        return {
            "results_uri": self._results.root_uri,
            "tasks_dir": str(self._layout.state_dir / "tasks"),
            "state_dir": str(self._layout.state_dir),
        }

    async def markdown(self, task_id: str, principal: Principal | None = None) -> str | None:
        """The Markdown report of a completed task, read from its own directory.

        A report path outside the task's directory (possible only if its aggregate
        said so) is not read for an untrusted caller's task.
        """
        await self.recover()
        driver = self._driver(task_id, principal)
        path = (driver.output() or {}).get("markdown_path")
        if not isinstance(path, str):
            return None
        policy = self._layout.policy_of(driver.record)
        if policy is not None:
            try:
                path = policy.allows(Access.READ, path, "markdown_path")
            except InputNotAllowedError:
                return None
        file = Path(path)
        if not file.is_file():
            return None
        return await asyncio.to_thread(file.read_text, encoding="utf-8")

    async def catalogue(self, schemas: bool = False) -> list[dict[str, Any]]:
        """The registry's catalogue, with each capability's JSON Schemas if asked."""
        return self._registry.catalogue(schemas=schemas)

    async def capability(self, capability_id: str) -> dict[str, Any]:
        """One capability with its JSON Schemas; raises `UnknownCapabilityError`."""
        return self._registry.describe(capability_id)
