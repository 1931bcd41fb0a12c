"""Carrying out what drivers decide: the orchestrator's one way to feed a task's driver.

`Runner.step(driver, input)` feeds one input to a task's `TaskDriver` and carries out the
`Step` it answers: notices go to the metrics, the health book and the child book; commands
run attempts on the executors (once the turn that decided them is committed, after a
retry's backoff), stop them, arm timers, plan a stored task again, and tell the task's end
to its observers. A write the driver could not make, or a bug in taking an input, stops
that task by name (`Broken`), never the orchestrator and never the other tasks.

Everything runs on the orchestrator's event loop; nothing here decides about a task.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, assert_never

from swarm_ray.core.driver._commands import (
    Accepted,
    AnswerRejected,
    Arrived,
    BreakerMoved,
    Broken,
    ChildAdmitted,
    ChildRefused,
    ChildSettled,
    Close,
    DriverInput,
    Halt,
    Refused,
    Replan,
    Retrying,
    Run,
    Step,
    Wake,
    WakeAt,
)
from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.durability._journal import StateStore
from swarm_ray.core.model._capability import ExecutorKind
from swarm_ray.core.model._errors import StateStoreError, SwarmError, SwarmRuntimeError
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._subtask import SubTask, SubTaskResult
from swarm_ray.core.planning._planning import PLAN_SUBTASK
from swarm_ray.runtime._children import ChildBook
from swarm_ray.runtime._executors import Executor
from swarm_ray.runtime._metrics import SwarmMetrics
from swarm_ray.runtime._tasks import InFlight, TaskTable
from swarm_ray.runtime._turns import Turns
from swarm_ray.runtime._upkeep import Observer

__all__: list[str] = []


class Runner:
    """Feeds drivers and carries out their commands (see the module docstring).

    Args:
        replan: Plans a stored task again (`Replan`: a task stored before its plan).
        on_end: What happens when a task ends, in order; each keeps its own failures.
    """

    def __init__(
        self,
        *,
        registry: Registry,
        executors: Mapping[ExecutorKind, Executor],
        drivers: TaskTable,
        store: StateStore,
        observer: Observer,
        metrics: SwarmMetrics,
        children: ChildBook,
        replan: Callable[[TaskDriver], Coroutine[Any, Any, None]],
        on_end: Sequence[Callable[[TaskDriver], None]],
    ) -> None:
        self._registry = registry
        self._executors = executors
        self._drivers = drivers
        self.turns = Turns(store, self._commit_failed)
        """The store batch of each event-loop turn (callers wait on `turns.committed()`)."""
        self.inflight = InFlight()
        """The asyncio tasks running attempts, by task (halted on `Halt`)."""
        self._observer = observer
        self._metrics = metrics
        self._children = children
        self._replan = replan
        self._on_end = tuple(on_end)

    def step(self, driver: TaskDriver, event: DriverInput) -> Step:
        """Feed one input to a task's driver and carry out what it answers."""
        gate = self.turns.gate_for(driver.task_id)
        try:
            step = driver.step(event)
        except Exception as exc:  # a failed write, or a bug: the task stops, named
            why = exc.message if isinstance(exc, SwarmError) else f"{type(exc).__name__}: {exc}"
            subtask_id = None
            if isinstance(event, Arrived):
                r = event.result
                subtask_id = r.subtask_id
                why = (
                    f"the result of sub-task `{r.subtask_id}` (attempt {r.attempt}) could not "
                    f"be taken in, so the task stopped rather than lose it: {why}"
                )
            kind = StateStoreError if isinstance(exc, StateStoreError) else SwarmRuntimeError
            self._metrics.error("orchestrator", type(exc).__name__)
            step = driver.step(Broken(kind(why, task_id=driver.task_id), subtask_id))
        self._apply(driver, step, gate)
        return step

    def on_result(self, result: SubTaskResult) -> Step:
        """An executor's (or an external agent's) result for its task's driver; never raises."""
        driver = self._drivers.get(result.task_id)
        if driver is None:
            self._metrics.rejection("unknown_task")
            return Step()
        return self.step(driver, Arrived(result))

    def _commit_failed(self, touched: set[str], exc: StateStoreError) -> None:
        """A turn's commit failed: every task that wrote in it stops, by name."""
        for task_id in touched:
            driver = self._drivers.get(task_id)
            if driver is not None and not driver.state.terminal:
                error = StateStoreError(
                    f"task `{task_id}` stopped: its state could not be committed: {exc.message}",
                    task_id=task_id,
                )
                self._apply(driver, driver.step(Broken(error)), None)

    def _apply(self, driver: TaskDriver, step: Step, gate: asyncio.Future[bool] | None) -> None:
        for notice in step.notices:
            match notice:
                case Accepted(result=result, trace_id=trace_id):
                    self._observer.result(result, trace_id)
                case Retrying(capability_id=cid, kind=kind):
                    self._metrics.retry(cid, kind)
                case BreakerMoved(capability_id=cid, state=state):
                    self._metrics.breaker(cid, state)
                case Refused(reason=reason):
                    self._metrics.rejection(reason)
                case ChildSettled(child_id=child_id, outcome=outcome):
                    self._children.settle(driver.task_id, child_id, outcome)
                case AnswerRejected() | ChildAdmitted() | ChildRefused():
                    pass  # answered by the orchestrator's `answer` and `run_child`, which asked
                case _:
                    assert_never(notice)
        batches: dict[tuple[str, float], list[SubTask]] = defaultdict(list)
        for command in step.commands:
            match command:
                case Run(subtask=subtask, delay_s=delay):
                    batches[(subtask.capability_id, delay)].append(subtask)
                case Halt(subtask_ids=halted):
                    self.inflight.halt(driver.task_id, set(halted))
                case WakeAt(at=at):
                    delay = max(0.0, at - time.time())
                    asyncio.get_running_loop().call_later(delay, self._wake, driver.task_id)
                case Replan():
                    self.inflight.spawn(driver.task_id, [PLAN_SUBTASK], self._replan(driver))
                case Close():
                    for observer in self._on_end:
                        observer(driver)
                case _:
                    assert_never(command)
        for (cid, delay), subtasks in batches.items():
            spec = self._registry.get(cid)
            for ids, run in self._executors[spec.executor].runs(spec, subtasks, self.on_result):
                self.inflight.spawn(driver.task_id, ids, self._after(delay, driver, run, gate))
        self._drivers.notify(driver.task_id)

    async def _after(
        self, delay_s: float, driver: TaskDriver, run: Any, gate: asyncio.Future[bool] | None
    ) -> None:
        """Start `run` once its dispatch is committed, after a retry's backoff.

        Not at all when the commit failed or the task ended meanwhile.
        """
        committed = True if gate is None else await asyncio.shield(gate)
        if delay_s and committed:
            await asyncio.sleep(delay_s)
        if not committed or driver.state.terminal:
            run.close()
            return
        await run

    def _wake(self, task_id: str) -> None:
        driver = self._drivers.get(task_id)
        if driver is not None and not driver.state.terminal:
            self.step(driver, Wake())
