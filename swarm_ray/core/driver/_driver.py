"""One task's owner: it decides everything that happens to its task.

`TaskDriver.step(input) -> Step` is its one method (see `_commands`); the rest is read-only
facts (state, error, output, usage). Its inputs: what starts the task (`plan_request`'s
answer), a result, a cancel, a timer, a restart, a person's answer, an agent's child
sub-task, a failure to take an input in. The driver checks every one itself: results at
its watermark gate (`_gate`), answers and children as `_admit` says, refused by notice,
never half taken.
The driver runs the state machine and the task's one scheduler (a planner's task starts
on the planner's sub-task alone, and the plan made of its draft grows the DAG: see
`_planning` and `_adopting`), announces events, and answers with commands (run these
attempts, stop those, arm a timer, plan again, close) and notices (for metrics and
audit). The orchestrator actor carries the commands out on Ray and feeds the results
back; it decides nothing about a task.

The driver matches and sequences; each verdict that needs none of its state is a small
module's: what an intent asks by itself (`_orders`), the `SubTask` an attempt leaves as
and the event its result becomes (`_dispatch`), the budget (`_budget`), what a restart
does with the attempts that were out (`_recovery`), the task's stored end (`_outcome`).
What needs its state but is an idea of its own is a mixin of `TaskDriver`'s, which sees
the driver as `_host` declares it: giving the task its plan and starting on it, a
template's or a planner's draft (`_adopting`); taking in a person's answer or an
agent's child sub-task, or refusing it (`_outside`); going on after a restart from where
the task's log says it was (`_resuming`).

No Ray here. The driver writes before it acts, through its `_ledger` (the task's record
and events) and the state store's interface: every transition updates the task's
snapshot and every scheduler event is appended to the task's log before the scheduler
sees it, so `TaskDriver.load()` after a crash replays the log and knows exactly what is
done and what was outstanding.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, assert_never

from swarm_ray.core.driver._adopting import Adopting
from swarm_ray.core.driver._announce import announce
from swarm_ray.core.driver._children import child_outcome
from swarm_ray.core.driver._commands import (
    Accepted,
    Answer,
    Arrived,
    AskChild,
    AskPlanner,
    Broken,
    Cancel,
    ChildSettled,
    Close,
    DriverInput,
    Halt,
    PlanFailed,
    Planned,
    Refused,
    Resume,
    Run,
    Step,
    Wake,
    WakeAt,
)
from swarm_ray.core.driver._dispatch import priced, result_event, subtask_for
from swarm_ray.core.driver._orders import orders
from swarm_ray.core.driver._outcome import failure, kept_output, read_output, task_output
from swarm_ray.core.driver._outside import Outside
from swarm_ray.core.driver._resuming import Resuming
from swarm_ray.core.durability._journal import Blobs, StateStore
from swarm_ray.core.durability._ledger import Ledger
from swarm_ray.core.durability._tasklog import TaskLog, output_text, record_of
from swarm_ray.core.guards._access import AccessPolicy
from swarm_ray.core.guards._gate import Gate
from swarm_ray.core.guards._watermark import WatermarkKey
from swarm_ray.core.model._errors import (
    BudgetExceededError,
    ErrorCode,
    StateStoreError,
    SwarmError,
    WatermarkRejectedError,
    error_for_code,
)
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._record import TaskRecord, new_record
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import (
    CancelRequested,
    Dispatch,
    DraftSettled,
    FailTask,
    Fallback,
    FinishTask,
    Intent,
    Retry,
    RunIntent,
    SchedulerEvent,
    Start,
    SubTaskDone,
    Tick,
)
from swarm_ray.core.model._subtask import (
    SubTask,
    SubTaskError,
    SubTaskResult,
    TokenUsage,
)
from swarm_ray.core.model._task import TaskEvent, TaskRequest
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.core.scheduling._budget import finishes_anyway, over_budget, spending_stopped
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__: list[str] = []

Clock = Callable[[], float]


def _summary(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= 160 else text[:157] + "..."


class TaskDriver(Adopting, Outside, Resuming):
    """Drives one task; single-threaded (the orchestrator's event loop)."""

    def __init__(
        self,
        record: TaskRecord,
        *,
        registry: Registry,
        store: StateStore,
        results: Blobs,
        key: WatermarkKey,
        clock: Clock = time.time,
        on_transition: Callable[[str, str], object] | None = None,
        on_event: Callable[[TaskEvent], object] | None = None,
        access_for: Callable[[TaskRecord], AccessPolicy | None] | None = None,
        router: TemplateRouter | None = None,
    ) -> None:
        self._ledger = Ledger(
            record,
            TaskLog(record.task_id, store, results),
            clock=clock,
            progress=lambda: self.scheduler.progress() if self.scheduler else 0.0,
            on_transition=on_transition,
            on_event=on_event,
        )
        """The task's record and events, each stored before it is told."""
        self._router = router or TemplateRouter()
        """Plans a task whose planner's draft was refused (`_planning.fallback_plan`)."""
        self._access = access_for(record) if access_for is not None else None
        """What the task's inputs may name (None: a trusted task's, anything)."""
        self.registry = registry
        self._results = results
        self._clock = clock
        self.scheduler: Scheduler | None = None
        """The task's one scheduler, from its first DAG on (a planner's task: the planner's
        sub-task alone, until the plan made of its draft is adopted)."""
        self._gate = Gate(key, record.task_id, record.request.parent_task_id)
        """The watermarks of the attempts out: only their results are let in."""
        self._watched: set[str] = set()
        """Child sub-tasks an agent waits on: each settling one becomes `ChildSettled`."""
        self.orchestrator: str | None = None
        """`namespace/name` of the orchestrator actor driving this task (set by it)."""
        self.compute_prices: Mapping[str, float] = {}
        """Capability id -> price per second of an attempt's run time (set by the
        orchestrator from the operator's `compute_prices`): added to the attempt's cost
        as its result arrives, so budgets and views count it."""
        self.allowance: Callable[[TaskDriver], BudgetExceededError | None] | None = None
        """Set by the orchestrator when the owner has a daily budget: the error once the
        owner's spend is past it (checked as results arrive, like `request.budget`)."""

    # ---- creation and recovery --------------------------------------------------------

    @classmethod
    def create(
        cls,
        request: TaskRequest,
        *,
        task_id: str | None = None,
        owner: str | None = None,
        workdir: str | None = None,
        **deps: Any,
    ) -> TaskDriver:
        """A new task in state `created`, persisted before anything else happens.

        `task_id` defaults to the request's own, else a new one; `owner` is the principal
        that submitted it (None for a trusted caller); `workdir` its output directory.
        """
        clock: Clock = deps.get("clock", time.time)
        record = new_record(request, clock(), task_id=task_id, owner=owner, workdir=workdir)
        driver = cls(record, **deps)
        driver._ledger.save()
        driver._ledger.emit("state", str(TaskState.CREATED), summary=request.query[:160])
        return driver

    @classmethod
    def load(cls, task_id: str, **deps: Any) -> TaskDriver | None:
        """Reload a task from the store and replay its scheduler log."""
        store: StateStore = deps["store"]
        loaded = store.load_task(task_id)
        if loaded is None:
            return None
        record = record_of(loaded)
        driver = cls(record, **deps)
        replayed = driver._ledger.log.replay(record, loaded)
        driver._ledger.events = replayed.events
        first = record.planning if record.planning is not None else record.plan
        if first is not None:  # the DAG it started with; the log grows it again
            driver.scheduler = Scheduler.replay(
                first, driver.registry, replayed.scheduled, access=driver._access
            )
        return driver

    # ---- facts -----------------------------------------------------------------------

    @property
    def record(self) -> TaskRecord:
        """The task as stored."""
        return self._ledger.record

    @property
    def events(self) -> list[TaskEvent]:
        """The task's numbered events, in order."""
        return self._ledger.events

    @property
    def task_id(self) -> str:
        """The task id."""
        return self.record.task_id

    @property
    def error(self) -> SwarmError | None:
        """Why the task failed, as the error class of its code (None while it has not)."""
        if self.record.error is None:
            return None
        error = self.record.error
        return error_for_code(error.code)(error.message, **error.details)

    @property
    def state(self) -> TaskState:
        """The task's state."""
        return self.record.machine.state

    def output(self) -> dict[str, Any] | None:
        """The task's output, read back from the result store when it was large."""
        return read_output(self.record, self._results)

    def usage(self) -> TokenUsage:
        """Tokens spent by every attempt so far, the planner's included."""
        return self.scheduler.usage() if self.scheduler is not None else TokenUsage()

    # ---- the one entry point ---------------------------------------------------------

    def step(self, event: DriverInput) -> Step:
        """Take one input; return what the orchestrator must do and what it should know.

        Raises `StateStoreError` when a write the driver must make before acting fails
        (after the store's own retries); the orchestrator then feeds `Broken`.
        """
        out = Step()
        match event:
            case Planned() | AskPlanner() | PlanFailed() if (
                self.state.terminal or self.scheduler is not None
            ):
                pass  # ended while it was being planned (a cancel during re-planning), or begun
            case Planned(plan=plan):
                self._start(plan, out)
            case AskPlanner(planner=planner, request=request):
                self._ask(planner, request, out)
            case PlanFailed(error=error):
                self._fail(error, out)
            case Arrived(result=result):
                self._arrived(result, out)
            case Cancel(reason=reason):
                if self.state.terminal:
                    return out
                cancel = CancelRequested(at=self._clock(), reason=reason)
                if self.scheduler is not None:  # a planner's call, too, stops
                    self._carry(self._feed(cancel), out)
                else:  # waiting to be planned: it ends cancelled, not failed
                    self._finish(FailTask(reason=reason, code=ErrorCode.CANCELLED))
                    out.commands.append(Close())
            case Wake():
                if not self.state.terminal and self.scheduler is not None:
                    now = self._clock()
                    self._carry(self._feed(Tick(at=now)), out)
                    # A timer may fire a hair before its deadline (the loop's clock is
                    # not the wall clock): a deadline still ahead is armed again.
                    ahead = self.scheduler.next_deadline()
                    if not self.state.terminal and ahead is not None and ahead > now:
                        out.commands.append(WakeAt(ahead))
            case Resume():
                self._resume(out)
            case AskChild():
                watch = self._ask_child(event, out)
                if watch is not None:
                    self._watched.add(watch)
            case Answer():
                self._answer(event, out)
            case Broken(error=error, subtask_id=subtask_id):
                self._broken(error, subtask_id, out)
            case _:
                assert_never(event)
        if self._watched:
            self._settle_children(out)
        return out

    def _settle_children(self, out: Step) -> None:
        """Tell of each watched child that settled (its task's end settles every one)."""
        assert self.scheduler is not None
        for child_id in sorted(self._watched):
            outcome = child_outcome(self.scheduler, child_id)
            if outcome is not None:
                self._watched.discard(child_id)
                out.notices.append(ChildSettled(child_id, outcome))

    def _begin(self, plan: Plan) -> list[Intent]:
        """Start the task's one scheduler on its first DAG (a template's, or a planner's)."""
        self.scheduler = Scheduler(plan, self.registry, access=self._access)
        return self._feed(Start(at=self._clock()))

    def _fail(self, error: SwarmError, out: Step) -> None:
        if not self.state.terminal:
            self._failed(error)
            out.commands.append(Close())

    def _arrived(self, result: SubTaskResult, out: Step) -> None:
        result = priced(result, self.compute_prices)
        if self.scheduler is None:
            out.notices.append(Refused("unknown_task"))
            return
        try:
            event = self._accept(result)
        except WatermarkRejectedError as exc:
            out.notices.append(Refused(str(exc.details.get("reason", "invalid"))))
            return
        out.notices.append(Accepted(result, self.record.trace_id))
        self._carry(self._feed(event), out)
        self._keep_to_budget(out)

    def _over_budget(self) -> BudgetExceededError | None:
        """The error of a task past its request's `budget` or its owner's `allowance`."""
        if self.state.terminal:
            return None
        budget = self.record.request.budget
        over = None if budget is None else over_budget(self.task_id, budget, self.usage())
        if over is not None:
            return over
        return None if self.allowance is None else self.allowance(self)

    def _keep_to_budget(self, out: Step) -> None:
        """Stop a task past its budget: it fails, or only what spends stops (`_budget`)."""
        error = self._over_budget()
        if error is None:
            return
        scheduler = self.scheduler
        if finishes_anyway(self.record.request.budget, scheduler):
            assert scheduler is not None
            if scheduler.stopped_spending is None:
                self._carry(self._feed(spending_stopped(error, self._clock())), out)
            return
        self._halt(error, out)

    def _broken(self, error: SwarmError, subtask_id: str | None, out: Step) -> None:
        """Stop the task in memory, then try to store that (the store may be what broke)."""
        if not self.state.terminal:
            self._halt(error, out, persist=False)

    def _halt(self, error: SwarmError, out: Step, *, persist: bool = True) -> None:
        """Fail the task, halt what runs, close it (`persist=False`: the store broke)."""
        scheduler = self.scheduler
        running = tuple(i.subtask_id for i in scheduler.outstanding()) if scheduler else ()
        self._failed(error, persist=persist)
        if not persist:  # stored if the store still can
            with contextlib.suppress(StateStoreError):
                self._ledger.save()
        if running:
            out.commands.append(Halt(running))
        out.commands.append(Close())

    def _carry(self, intents: Sequence[Intent], out: Step) -> None:
        """Announce what the scheduler decided and turn it into commands and notices."""
        for intent in intents:
            said = announce(intent)
            if said is not None:
                self._ledger.emit(
                    said.kind,
                    said.status,
                    subtask_id=said.subtask_id,
                    agent=said.agent,
                    summary=said.summary,
                )
            commands, notices = orders(intent)
            out.notices.extend(notices)
            match intent:
                case Dispatch() | Retry() | Fallback():
                    aggregate = self.record.plan.template.aggregate if self.record.plan else None
                    if intent.stage == aggregate and self.state is TaskState.EXECUTING:
                        self._ledger.move(
                            TaskState.AGGREGATING, f"aggregate `{intent.subtask_id}` dispatched"
                        )
                    out.commands.append(Run(self._subtask_for(intent), intent.delay_s))
                case DraftSettled():
                    self._planned(intent, out)
                case FinishTask() | FailTask():
                    self._finish(intent)
                    out.commands.append(Close())
                case _:
                    pass  # what it asks is all in its orders (`_orders`)
            out.commands.extend(commands)

    # ---- feeding and dispatching ------------------------------------------------------

    def _feed(self, event: SchedulerEvent) -> list[Intent]:
        """Log `event`, then let the scheduler decide.

        A succeeded attempt is announced with its output's summary.
        """
        scheduler = self.scheduler
        assert scheduler is not None
        text = output_text(event)
        self._ledger.log.append(event, text)
        intents = scheduler.handle(event)
        if isinstance(event, SubTaskDone):
            r = event.result
            self._ledger.emit(
                "subtask",
                "succeeded",
                subtask_id=r.subtask_id,
                agent=r.agent,
                summary=_summary(text),
            )
        return intents

    def _subtask_for(self, intent: RunIntent) -> SubTask:
        """Turn a run intent into a dispatchable sub-task with a fresh watermark."""
        now = self._clock()
        token = self._gate.issue(intent, now)
        effects = self.registry.get(intent.capability_id).side_effects
        return subtask_for(
            intent,
            self.record,
            watermark=token,
            now=now,
            orchestrator=self.orchestrator,
            record_effects=self._results.root_uri if effects else None,
        )

    def _accept(self, result: SubTaskResult) -> SchedulerEvent:
        """Check a result's watermark; return the event to feed, or raise the rejection.

        Raises:
            WatermarkRejectedError: forged or altered (bad signature or claims), replayed
                (its sub-task already settled) or unknown (never dispatched, or an older
                attempt); the reason is in the error and a `rejected` event.
        """
        scheduler = self.scheduler
        try:
            self._gate.let_in(
                result,
                self._clock(),
                lambda sid: scheduler is not None and scheduler.settled(sid),
            )
        except WatermarkRejectedError as exc:
            reason = str(exc.details.get("reason", "invalid"))
            self._ledger.emit("rejected", reason, subtask_id=result.subtask_id, summary=exc.message)
            raise
        return result_event(result, self._clock())

    # ---- announcing and finishing ----------------------------------------------------

    def _finish(self, outcome: FinishTask | FailTask) -> None:
        """Finalise: store the output and move to completed, failed or cancelled."""
        if self.state.terminal:
            return
        if isinstance(outcome, FailTask):
            to, error = failure(outcome)
            self._ledger.update(error=error, warnings=self._warnings())
            self._ledger.move(to, outcome.reason)
            return
        if self.state is TaskState.DISPATCHING:  # recovered before `executing` was saved
            self._ledger.move(TaskState.EXECUTING, "resumed", save=False)
        if self.state is TaskState.EXECUTING:
            self._ledger.move(TaskState.AGGREGATING, "every sub-task settled", save=False)
        self._ledger.move(TaskState.FINALIZING, "collecting the result", save=False)
        assert self.scheduler is not None and self.record.plan is not None
        output = task_output(self.scheduler, self.record.plan)
        warnings = self._warnings()
        update = {"warnings": warnings, **kept_output(self.task_id, output, self._results)}
        self._ledger.update(**update)
        self._ledger.move(TaskState.COMPLETED, f"done with {len(warnings)} warning(s)")

    def _failed(self, error: SwarmError, *, persist: bool = True) -> None:
        """Fail the task for a reason found outside the scheduler (routing, a bad plan).

        `persist=False` fails it in memory only, for when the state store is what failed:
        callers then see the failure and its reason instead of a task that never moves.
        """
        if self.state.terminal:
            return
        sub_error = SubTaskError.from_exception(error)
        self._ledger.update(error=sub_error)
        self._ledger.move(TaskState.FAILED, error.message, persist=persist)

    def _warnings(self) -> tuple[str, ...]:
        return tuple(self.scheduler.warnings) if self.scheduler else ()
