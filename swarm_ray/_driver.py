"""One task's durable driver: state machine, scheduler, watermarks, events and storage.

No Ray here: the orchestrator actor owns one `TaskDriver` per task and carries out the
intents it returns. The driver writes before it acts: every transition updates the
task's snapshot and every scheduler event is appended to the task's log before the
scheduler sees it, so `TaskDriver.load()` after a crash replays the log and knows exactly
what is done and what was outstanding.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from swarm_ray._errors import ErrorCode, SwarmError, WatermarkRejectedError
from swarm_ray._fsm import TaskMachine, TaskState, transition
from swarm_ray._plan import Plan, expand, validate_plan
from swarm_ray._record import SCHEMA_VERSION, TaskRecord
from swarm_ray._registry import Registry
from swarm_ray._results import ResultStore, should_offload
from swarm_ray._routing import TemplateRouter
from swarm_ray._scheduler import EVENT_ADAPTER, Scheduler
from swarm_ray._signals import (
    BreakerClosed,
    BreakerHalfOpened,
    BreakerOpened,
    CancelSubTasks,
    ChildAdded,
    Dispatch,
    FailTask,
    Fallback,
    FeedbackRoundStarted,
    FinishTask,
    Intent,
    ResultRejected,
    Retry,
    RuleFired,
    RunIntent,
    SchedulerEvent,
    SkipSubTask,
    Start,
    SubTaskDone,
    SubTaskFailed,
    SubTaskTimedOut,
    Warn,
)
from swarm_ray._store import StateStore
from swarm_ray._subtask import SubTask, SubTaskError, SubTaskResult
from swarm_ray._task import TaskEvent, TaskRequest
from swarm_ray._watermark import WatermarkKey, issue_watermark, verify_watermark

__all__ = ["TaskDriver"]

_SCHED, _EVENT = "sched", "event"
Clock = Callable[[], float]


def _summary(output: dict[str, Any] | None) -> str:
    text = json.dumps(output, default=str) if output is not None else ""
    return text if len(text) <= 160 else text[:157] + "..."


class TaskDriver:
    """Drives one task; single-threaded (the orchestrator's event loop)."""

    def __init__(
        self,
        record: TaskRecord,
        *,
        registry: Registry,
        store: StateStore,
        results: ResultStore,
        key: WatermarkKey,
        clock: Clock = time.time,
        on_transition: Callable[[str, str], object] | None = None,
        on_event: Callable[[TaskEvent], object] | None = None,
    ) -> None:
        self.record = record
        self._on_transition = on_transition
        self._on_event = on_event
        self.registry = registry
        self._store = store
        self._results = results
        self._key = key
        self._clock = clock
        self.events: list[TaskEvent] = []
        self.scheduler: Scheduler | None = None
        self._issued: dict[str, tuple[int, str]] = {}
        self.orchestrator: str | None = None
        """`namespace/name` of the orchestrator actor driving this task (set by it)."""

    # ---- creation and recovery --------------------------------------------------------

    @classmethod
    def create(cls, request: TaskRequest, **deps: Any) -> TaskDriver:
        """A new task in state `created`, persisted before anything else happens."""
        clock: Clock = deps.get("clock", time.time)
        now = clock()
        task_id = request.task_id or uuid.uuid4().hex[:16]
        record = TaskRecord(
            task_id=task_id,
            trace_id=uuid.uuid4().hex,
            request=request,
            machine=TaskMachine(task_id=task_id),
            created_at=now,
            updated_at=now,
        )
        driver = cls(record, **deps)
        driver._save()
        driver.emit("state", str(TaskState.CREATED), summary=request.query[:160])
        return driver

    @classmethod
    def load(cls, task_id: str, **deps: Any) -> TaskDriver | None:
        """Reload a task from the store and replay its scheduler log."""
        store: StateStore = deps["store"]
        stored = store.get_task(task_id)
        if stored is None:
            return None
        driver = cls(TaskRecord.model_validate_json(stored.record_json), **deps)
        log: list[SchedulerEvent] = []
        for entry in store.read_log(task_id):
            if entry.kind == _EVENT:
                driver.events.append(TaskEvent.model_validate_json(entry.payload_json))
            elif entry.kind == _SCHED:
                log.append(driver._rehydrate(EVENT_ADAPTER.validate_json(entry.payload_json)))
        if driver.record.plan is not None:
            driver.scheduler = Scheduler.replay(driver.record.plan, driver.registry, log)
        return driver

    # ---- facts -----------------------------------------------------------------------

    @property
    def task_id(self) -> str:
        """The task id."""
        return self.record.task_id

    @property
    def state(self) -> TaskState:
        """The task's state."""
        return self.record.machine.state

    def output(self) -> dict[str, Any] | None:
        """The task's output, read back from the result store when it was large."""
        if self.record.output is not None or self.record.output_ref is None:
            return self.record.output
        output: dict[str, Any] = self._results.get_json(self.record.output_ref)
        return output

    def view(self) -> TaskRecord:
        """The record with its scheduler log filled in (for `show`)."""
        log = tuple(self.scheduler.log) if self.scheduler else ()
        return self.record.model_copy(update={"log": log})

    # ---- persistence -----------------------------------------------------------------

    def _save(self) -> None:
        self.record = self.record.model_copy(update={"updated_at": self._clock()})
        self._store.put_task(
            self.task_id,
            self.record.model_dump_json(),
            is_open=not self.state.terminal,
            schema_version=SCHEMA_VERSION,
        )

    def _offload(self, event: SchedulerEvent) -> SchedulerEvent:
        if not isinstance(event, SubTaskDone) or event.result.output is None:
            return event
        text = json.dumps(event.result.output)
        if not should_offload(text):
            return event
        r = event.result
        ref = self._results.put_bytes(
            f"{self.task_id}/{r.subtask_id}-{r.attempt}.json", text.encode()
        )
        return event.model_copy(
            update={"result": r.model_copy(update={"output": None, "output_ref": ref})}
        )

    def _rehydrate(self, event: SchedulerEvent) -> SchedulerEvent:
        if (
            isinstance(event, SubTaskDone)
            and event.result.output_ref
            and event.result.output is None
        ):
            output = self._results.get_json(event.result.output_ref)
            return event.model_copy(
                update={"result": event.result.model_copy(update={"output": output})}
            )
        return event

    def emit(
        self,
        kind: str,
        status: str,
        *,
        subtask_id: str | None = None,
        agent: str | None = None,
        summary: str = "",
    ) -> TaskEvent:
        """Append a TaskEvent (persisted, numbered) and return it."""
        progress = self.scheduler.progress() if self.scheduler else 0.0
        if self.state is TaskState.COMPLETED:
            progress = 1.0
        event = TaskEvent(
            task_id=self.task_id,
            seq=len(self.events) + 1,
            at=self._clock(),
            trace_id=self.record.trace_id,
            kind=kind,
            status=status,
            subtask_id=subtask_id,
            agent=agent,
            progress=progress,
            summary=summary,
        )
        self._store.append(
            self.task_id, _EVENT, event.model_dump_json(), dedupe_key=f"e{event.seq}"
        )
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def move(self, to: TaskState, reason: str, *, save: bool = True) -> None:
        """Transition the state machine, persist, then announce it.

        `save=False` is for a state left again before control returns to the event loop
        (nothing acts on it): the next save records it in the machine's audit log.
        """
        before = self.state
        machine = transition(
            self.record.machine, to, reason=reason, at=self._clock(), trace_id=self.record.trace_id
        )
        self.record = self.record.model_copy(update={"machine": machine})
        if self._on_transition is not None:
            self._on_transition(str(before), str(to))
        if save:
            self._save()
        self.emit("state", str(to), summary=reason)

    # ---- planning and feeding --------------------------------------------------------

    def plan(self, router: TemplateRouter, plan: Plan | None = None) -> list[Intent]:
        """Route, expand and validate, then start the scheduler. Raises user errors."""
        self.move(TaskState.ROUTING, "routing the request to a template", save=False)
        if plan is None:
            template = router.route(self.record.request)
            plan = expand(template, self.record.request, task_id=self.task_id)
        validate_plan(plan, self.registry)
        self.record = self.record.model_copy(update={"plan": plan})
        self.move(
            TaskState.DISPATCHING, f"plan `{plan.template.name}`: {len(plan.subtasks)} sub-tasks"
        )
        self.scheduler = Scheduler(plan, self.registry)
        intents = self.feed(Start(at=self._clock()))
        if not self.state.terminal and self.state is TaskState.DISPATCHING:
            self.move(TaskState.EXECUTING, "first sub-tasks dispatched", save=False)
        return intents

    def feed(self, event: SchedulerEvent) -> list[Intent]:
        """Persist `event`, then let the scheduler decide; announce what it decided."""
        assert self.scheduler is not None
        dedupe = None
        if isinstance(event, ChildAdded):
            dedupe = f"{event.kind}:{event.spec.id}"
        elif isinstance(event, SubTaskDone | SubTaskFailed):
            dedupe = f"{event.kind}:{event.result.subtask_id}:{event.result.attempt}"
        elif isinstance(event, SubTaskTimedOut):
            dedupe = f"{event.kind}:{event.subtask_id}:{event.attempt}"
        stored = self._offload(event)
        self._store.append(
            self.task_id, _SCHED, EVENT_ADAPTER.dump_json(stored).decode(), dedupe_key=dedupe
        )
        intents = self.scheduler.handle(event)
        if isinstance(event, SubTaskDone):
            r = event.result
            self.emit(
                "subtask",
                "succeeded",
                subtask_id=r.subtask_id,
                agent=r.agent,
                summary=_summary(r.output),
            )
        for intent in intents:
            self._announce(intent)
        return intents

    def subtask_for(self, intent: RunIntent) -> SubTask:
        """Turn a run intent into a dispatchable sub-task with a fresh watermark."""
        now = self._clock()
        token = issue_watermark(
            self._key,
            task_id=self.task_id,
            parent_task_id=self.record.request.parent_task_id,
            subtask_id=intent.subtask_id,
            capability_id=intent.capability_id,
            input=intent.input,
            issued_ms=int(now * 1000),
        )
        self._issued[intent.subtask_id] = (intent.attempt, token)
        return SubTask(
            task_id=self.task_id,
            parent_task_id=self.record.request.parent_task_id,
            subtask_id=intent.subtask_id,
            capability_id=intent.capability_id,
            attempt=intent.attempt,
            input=intent.input,
            watermark=token,
            trace_id=self.record.trace_id,
            timeout_s=intent.timeout_s,
            queued_at=now,
            orchestrator=self.orchestrator,
        )

    def outstanding_watermark(self, subtask_id: str) -> str | None:
        """The watermark of the attempt of `subtask_id` now running, if one is."""
        issued = self._issued.get(subtask_id)
        return None if issued is None else issued[1]

    def accept(self, result: SubTaskResult) -> SchedulerEvent:
        """Check a result's watermark; return the event to feed, or raise the rejection.

        Raises:
            WatermarkRejectedError: forged or altered (bad signature or claims), replayed
                (its sub-task already settled) or unknown (never dispatched, or an older
                attempt); the reason is in the error and a `rejected` event.
        """
        try:
            verify_watermark(
                self._key,
                result.watermark,
                now_ms=int(self._clock() * 1000),
                task_id=self.task_id,
                subtask_id=result.subtask_id,
                capability_id=result.capability_id,
            )
            if self._issued.get(result.subtask_id) != (result.attempt, result.watermark):
                settled = self.scheduler is not None and self.scheduler.settled(result.subtask_id)
                reason = "replayed" if settled else "unknown"
                raise WatermarkRejectedError(
                    f"result for sub-task `{result.subtask_id}` attempt {result.attempt} "
                    f"is not outstanding ({reason})",
                    reason=reason,
                    subtask_id=result.subtask_id,
                )
        except WatermarkRejectedError as exc:
            reason = str(exc.details.get("reason", "invalid"))
            self.emit("rejected", reason, subtask_id=result.subtask_id, summary=exc.message)
            raise
        del self._issued[result.subtask_id]
        now = self._clock()
        if result.ok:
            return SubTaskDone(at=now, result=result)
        assert result.error is not None
        if result.error.code is ErrorCode.TIMEOUT:
            return SubTaskTimedOut(at=now, subtask_id=result.subtask_id, attempt=result.attempt)
        return SubTaskFailed(at=now, result=result)

    def reissue(self, intents: list[RunIntent]) -> None:
        """Forget watermarks of attempts being sent again after a restart."""
        for intent in intents:
            self._issued.pop(intent.subtask_id, None)

    # ---- announcing and finishing ----------------------------------------------------

    def _announce(self, intent: Intent) -> None:
        match intent:
            case Dispatch() | Retry() | Fallback():
                kind = type(intent).__name__.lower()
                self.emit(
                    "subtask",
                    "running",
                    subtask_id=intent.subtask_id,
                    agent=intent.capability_id,
                    summary=f"{kind}, attempt {intent.attempt}",
                )
                aggregate = self.record.plan.template.aggregate if self.record.plan else None
                if intent.stage == aggregate and self.state is TaskState.EXECUTING:
                    self.move(TaskState.AGGREGATING, f"aggregate `{intent.subtask_id}` dispatched")
            case SkipSubTask():
                self.emit("subtask", "skipped", subtask_id=intent.subtask_id, summary=intent.reason)
            case Warn():
                self.emit(
                    "warning", "warning", subtask_id=intent.subtask_id, summary=intent.message
                )
            case BreakerOpened() | BreakerHalfOpened() | BreakerClosed():
                status = type(intent).__name__.removeprefix("Breaker").lower()
                self.emit("breaker", status, agent=intent.capability_id)
            case RuleFired():
                self.emit(
                    "rule",
                    "fired",
                    subtask_id=intent.source,
                    summary=f"{intent.rule}: {intent.added}",
                )
            case FeedbackRoundStarted():
                self.emit("feedback", f"round {intent.round}", subtask_id=intent.judge_subtask)
            case ResultRejected():
                self.emit(
                    "rejected",
                    "not outstanding",
                    subtask_id=intent.subtask_id,
                    summary=intent.reason,
                )
            case CancelSubTasks() | FinishTask() | FailTask():
                pass

    def finish(self, outcome: FinishTask | FailTask) -> None:
        """Finalise: store the output and move to completed, failed or cancelled."""
        if self.state.terminal:
            return
        if isinstance(outcome, FailTask):
            error = SubTaskError(code=outcome.code, message=outcome.reason)
            to = TaskState.CANCELLED if outcome.code is ErrorCode.CANCELLED else TaskState.FAILED
            self.record = self.record.model_copy(
                update={"error": error, "warnings": self._warnings()}
            )
            self.move(to, outcome.reason)
            return
        if self.state is TaskState.DISPATCHING:  # recovered before `executing` was saved
            self.move(TaskState.EXECUTING, "resumed", save=False)
        if self.state is TaskState.EXECUTING:
            self.move(TaskState.AGGREGATING, "every sub-task settled", save=False)
        self.move(TaskState.FINALIZING, "collecting the result", save=False)
        output = self._output()
        text = json.dumps(output, default=str)
        update: dict[str, Any] = {"warnings": self._warnings()}
        if should_offload(text):
            update["output_ref"] = self._results.put_bytes(
                f"{self.task_id}/output.json", text.encode()
            )
        else:
            update["output"] = output
        self.record = self.record.model_copy(update=update)
        self.move(TaskState.COMPLETED, f"done with {len(update['warnings'])} warning(s)")

    def fail(self, error: SwarmError) -> None:
        """Fail the task for a reason found outside the scheduler (routing, a bad plan)."""
        if self.state.terminal:
            return
        sub_error = SubTaskError.from_exception(error)
        self.record = self.record.model_copy(update={"error": sub_error})
        self.move(TaskState.FAILED, error.message)

    def _warnings(self) -> tuple[str, ...]:
        return tuple(self.scheduler.warnings) if self.scheduler else ()

    def _output(self) -> dict[str, Any]:
        assert self.scheduler is not None and self.record.plan is not None
        finals = self.scheduler.final_results()
        aggregate = self.record.plan.template.aggregate
        if aggregate is not None:
            current = self.scheduler.current(aggregate)
            if current in finals and finals[current].output is not None:
                return finals[current].output  # type: ignore[return-value]
        return {"results": {k: v.output for k, v in finals.items()}}
