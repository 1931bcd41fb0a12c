"""The DAG scheduler, sans I/O: events in, intents out.

A sub-task is dispatched as soon as its own dependencies have settled (partial rollout:
no barrier between stages). Only failed sub-tasks are retried, with backoff; when the
retries run out, or an output's confidence is under the capability's threshold, the
sub-task switches to the capability's fallback. Each capability has a circuit breaker.
Everything is decided from the events alone, so replaying a task's event log through a
fresh scheduler rebuilds the same state.

The scheduler is the one owner of the DAG's state. It keeps the results, the attempts in
flight, and three tables that alone write what they hold: the sub-tasks (`_dag`, one
`_node` record each), the breakers with what waits behind them (`_breakers`), the waits
for a person (`_wait_table`). What to do is decided by pure policies that read a record
and return a decision, and the scheduler applies it:

- `_failures`: after a failed attempt, retry (`RetryAfter`), switch to a fallback
  (`SwitchTo`), keep a low-confidence result (`Keep`) or fail for good (`FailForGood`);
  after a low-confidence one, a fallback or the best kept; what spends, the budget's error;
- `_breaker`: each capability's circuit breaker, a value each transition replaces;
- `_waits`: what a sub-task waits for a person, whether an answer answers it, which waits
  fall due and what they fail with (applied by the `_human_loop` steps mixed in here);
- `_expand`: the work an accepted result adds (`for_each`, dynamic rules, feedback
  rounds), written into the DAG by `_growth`; a planner's plan is made outside and
  adopted here (`PlanAdopted`).

Its input as filled at dispatch is `_inputs`'s; what it tells of the task, read only, is
`_sched_facts`'s (all modules of `core.scheduling`). Here stay the events it takes
(`handle`, `replay`), dispatch, and applying each decision: accepting a result, failing
a sub-task, switching it to a fallback, the budget's stop, and the task's end.

A task planned by a planner starts with one sub-task that drafts its plan
(`Plan.draft_subtask`). When it settles the scheduler says so (`DraftSettled`) and waits;
the driver makes the plan of the draft and feeds it back (`PlanAdopted`), and the DAG
grows by it like any other expansion.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, assert_never, cast

from pydantic import TypeAdapter

from swarm_ray.core.guards._access import AccessPolicy
from swarm_ray.core.model._errors import ErrorCode, InputNotAllowedError, InvalidInputError
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import (
    BreakerClosed,
    BreakerHalfOpened,
    CancelRequested,
    CancelSubTasks,
    ChildAdded,
    Dispatch,
    DraftSettled,
    FailTask,
    Fallback,
    FinishTask,
    HumanAnswered,
    Intent,
    PlanAdopted,
    Retry,
    ReviewRequested,
    RunIntent,
    SchedulerEvent,
    SkipSubTask,
    SpendingStopped,
    Start,
    SubTaskDone,
    SubTaskFailed,
    SubTaskTimedOut,
    Tick,
    Warn,
)
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult
from swarm_ray.core.scheduling._breakers import Breakers
from swarm_ray.core.scheduling._dag import Dag
from swarm_ray.core.scheduling._failures import (
    FailForGood,
    Keep,
    RetryAfter,
    SwitchTo,
    after_failure,
    after_success,
    budget_error,
    failed_message,
    next_fallback,
    spends,
    stopped_by_budget,
)
from swarm_ray.core.scheduling._growth import Grown, fire_rules, grow_each, next_round
from swarm_ray.core.scheduling._human_loop import HumanLoop
from swarm_ray.core.scheduling._inputs import resolve
from swarm_ray.core.scheduling._node import SubTaskStatus, _Node
from swarm_ray.core.scheduling._sched_facts import SchedulerFacts
from swarm_ray.core.scheduling._wait_table import WaitTable
from swarm_ray.core.scheduling._waits import MAX_ASKS as MAX_ASKS  # where it is enforced

__all__: list[str] = []

EVENT_ADAPTER: TypeAdapter[SchedulerEvent] = TypeAdapter(SchedulerEvent)
"""Serialises scheduler events to and from JSON (the persisted log)."""

_S = SubTaskStatus


class Scheduler(HumanLoop, SchedulerFacts):
    """Drives one task's plan. Not thread-safe: one driver feeds it events in order."""

    def __init__(
        self, plan: Plan, registry: Registry, *, access: AccessPolicy | None = None
    ) -> None:
        self.plan = plan
        self._registry = registry
        self._access = access
        """What an untrusted task's inputs may name (None: a trusted task, anything)."""
        self._dag = Dag()
        """Every sub-task's record, in the order added (`core.scheduling._dag`)."""
        self._results: dict[str, SubTaskResult] = {}
        """Accepted results, in the order accepted (`$costs` and `final_results` keep it)."""
        self._running: dict[str, Dispatch | Retry | Fallback] = {}
        """Attempts in flight, in the order dispatched (`outstanding()` keeps it)."""
        self._breakers = Breakers(registry)
        """Each capability's breaker and the sub-tasks held behind one (`_breakers`)."""
        self._received: list[SubTaskResult] = []
        self._spenders: set[str] = set()
        """Capabilities whose attempts spent tokens or money in this task."""
        self.stopped_spending: SubTaskError | None = None
        """Set once the task reached its budget and finishes with what it has: the error
        each spending sub-task fails with (`SpendingStopped`)."""
        self._waits = WaitTable()
        """Sub-tasks waiting for a person, and what the stages ask (`_wait_table`)."""
        self.warnings: list[str] = []
        self.log: list[SchedulerEvent] = []
        self.outcome: FinishTask | FailTask | None = None
        self._draft = plan.draft_subtask
        """The sub-task that drafts (or drafted) the task's plan, if a planner plans it: its
        result is the planner's, not the plan's (`final_results`, `progress`)."""
        self.drafted: DraftSettled | None = None
        """Set when the draft settled, until its plan is adopted (a restarted driver that
        finds it set makes the plan again: the planner is not asked twice)."""
        self.started = False
        """Whether it took its `Start` (a restarted driver whose log lost it starts it)."""
        self._take(plan)

    @property
    def _nodes(self) -> dict[str, _Node]:
        """Every sub-task's record, in the order added (read it; `_dag` changes it)."""
        return self._dag.nodes

    # ---- public ----------------------------------------------------------------------

    @classmethod
    def replay(
        cls,
        plan: Plan,
        registry: Registry,
        events: Iterable[SchedulerEvent],
        *,
        access: AccessPolicy | None = None,
    ) -> Scheduler:
        """Rebuild a scheduler from a task's event log (its intents are dropped)."""
        scheduler = cls(plan, registry, access=access)
        for event in events:
            scheduler.handle(event)
        return scheduler

    def handle(self, event: SchedulerEvent) -> list[Intent]:
        """Take one event; return what to do next, in order."""
        self.log.append(event)
        if self.outcome is not None:
            return self._late(event)
        out: list[Intent] = self._cool(event.at)
        if self._waits.waits:
            out += self._expire(event.at)
            if self.outcome is not None:
                return out
        match event:
            case Start():
                self.started = True
                out += self._dispatch_ready(event.at)
            case SubTaskDone(result=result) | SubTaskFailed(result=result):
                self._received.append(result)
                if result.usage.total_tokens or result.usage.cost:
                    self._spenders.add(result.capability_id)
                if (reject := self._reject(result.subtask_id, result.attempt)) is not None:
                    return [*out, reject]
                if isinstance(event, SubTaskDone):
                    out += self._on_done(result, event.at)
                else:
                    assert result.error is not None
                    if result.error.code is ErrorCode.ASKED_HUMAN:
                        out += self._paused(result, event.at)
                    else:
                        out += self._on_failure(result.subtask_id, result.error, event.at)
            case SubTaskTimedOut(subtask_id=sid, attempt=attempt):
                if (reject := self._reject(sid, attempt)) is not None:
                    return [*out, reject]
                error = SubTaskError(
                    code=ErrorCode.TIMEOUT,
                    message=f"sub-task `{sid}` attempt {attempt} on "
                    f"`{self._nodes[sid].capability}` passed its deadline",
                )
                out += self._on_failure(sid, error, event.at)
            case Tick():
                pass
            case CancelRequested(reason=reason):
                return [*out, *self._end(reason, ErrorCode.CANCELLED, None)]
            case ChildAdded(spec=spec):
                if spec.id not in self._nodes:  # asked twice (a retried call): once
                    self._dag.add(spec, origin="child")
                    out += self._launch(spec.id, event.at, Dispatch, reason="child")
            case HumanAnswered():
                out += self._on_answer(event)
            case SpendingStopped():
                out += self._stop_spending(event)
            case PlanAdopted(plan=plan):
                out += self._adopt(plan, event.at)
            case ReviewRequested(subtask_id=sid, attempt=attempt):
                running = self._running.get(sid)
                if running is not None and running.attempt == attempt:
                    out.append(self._hold_for_review(sid, attempt, event.at))
            case _:
                assert_never(event)
        return out + self._check_finished()

    # ---- bookkeeping -----------------------------------------------------------------

    def _take(self, plan: Plan) -> None:
        """Run `plan` from now on: its template, its warnings, its sub-tasks in the DAG."""
        self.plan = plan
        self.warnings += plan.warnings
        self._waits.take(plan)
        for spec in plan.subtasks:
            self._dag.add(spec, origin="ready", link=False)
        for spec in plan.subtasks:  # once all are in: a dependency listed later is found too
            self._dag.link(spec)

    def _warn(self, message: str, subtask_id: str | None = None) -> Warn:
        self.warnings.append(message)
        return Warn(message=message, subtask_id=subtask_id)

    def _end_attempt(self, sid: str) -> None:
        """`sid`'s attempt is no longer in flight (answered, paused, switched, failed)."""
        self._running.pop(sid, None)

    # ---- dispatch --------------------------------------------------------------------

    def _launch(self, sid: str, at: float, kind: type[RunIntent], **extra: Any) -> list[Intent]:
        node = self._nodes[sid]
        capability_id = node.capability
        if self.stopped_spending is not None and self._spends(capability_id):
            return self._settle_failed(sid, self.stopped_spending, at)
        if not self._breakers.admits(capability_id, sid):
            fallback = next_fallback(self._registry, capability_id, node.tried)
            if fallback is not None:
                return self._switch(sid, fallback, at, f"circuit open for `{capability_id}`")
            self._dag.set(node, _S.HELD)
            self._breakers.hold(sid)
            return []
        spec = node.spec
        try:
            data = resolve(spec, self._nodes, self._results, self.warnings)
            model = self._registry.validate_input(capability_id, data)
            checked = model.model_dump(mode="json")
            if self._access is not None:  # dispatch the canonical form that was checked
                checked = self._access.check(type(model), checked, where=f"{sid}.input")
        except (InvalidInputError, InputNotAllowedError) as exc:
            self._breakers.release_trial(capability_id, sid)
            # Refused before dispatch: the same input fails the same way again, whatever
            # the capability's `retry_on` says (a fallback, with its own model, may take it).
            return self._on_failure(sid, SubTaskError.from_exception(exc), at, retry=False)
        node.attempt += 1
        node.cap_attempts += 1
        self._dag.set(node, _S.RUNNING)
        intent = cast(
            "Dispatch | Retry | Fallback",
            kind(
                subtask_id=sid,
                stage=spec.stage,
                capability_id=capability_id,
                attempt=node.attempt,
                input=checked,
                timeout_s=self._registry.get(capability_id).timeout_s,
                resume=node.resume,
                **extra,
            ),
        )
        self._running[sid] = intent
        return [intent]

    def _dispatch_ready(self, at: float, settled: str | None = None) -> list[Intent]:
        """Dispatch what became ready: everything pending, or what waited on `settled`."""
        nodes = self._nodes
        fresh = self._dag.take_fresh()
        candidates = list(nodes) if settled is None else fresh + self._dag.waiting_on(settled)
        queue = sorted(set(candidates), key=lambda k: nodes[k].index)
        out: list[Intent] = []
        position = 0
        while position < len(queue):
            sid = queue[position]
            position += 1
            node = nodes[sid]
            spec = node.spec
            if node.status is not _S.PENDING:
                continue
            deps = self._dag.settled_deps(node)
            if deps is None:
                continue
            broken = [d.spec.id for d in deps if d.status is not _S.SUCCEEDED]
            if broken and not spec.partial_ok:
                self._dag.set(node, _S.SKIPPED)
                reason = f"sub-task `{sid}` skipped: `{broken[0]}` did not succeed"
                out += [SkipSubTask(subtask_id=sid, reason=reason), self._warn(reason, sid)]
                if spec.required:
                    return out + self._end(reason, ErrorCode.SKIPPED, sid)
                queue += self._dag.waiting_on(sid)
                continue
            if self._waits.asks(spec.stage) and node.answer is None:
                out.append(self._wait(sid, at))
                continue
            out += self._launch(sid, at, Dispatch, reason=node.origin)
            if self.outcome is not None:
                return out
        return out

    # ---- an accepted result ------------------------------------------------------------

    def _on_done(self, result: SubTaskResult, at: float) -> list[Intent]:
        sid = result.subtask_id
        node = self._nodes[sid]
        capability_id = node.capability
        out: list[Intent] = []
        freed = self._breakers.success(capability_id, self._capability_of)
        if freed is not None:  # its breaker closed
            out.append(BreakerClosed(capability_id=capability_id))
            for h in freed:
                out += self._launch(h, at, Dispatch, reason="ready")
        decision = after_success(node, result, self._registry)
        node.low = decision.low
        match decision:
            case SwitchTo(fallback=fallback, reason=reason):
                return out + self._switch(sid, fallback, at, reason)
            case Keep(result=kept, warning=warning):
                if warning is not None:
                    out.append(self._warn(warning, sid))
                return out + self._accept(kept, at)
            case _:
                assert_never(decision)

    def _accept(self, result: SubTaskResult, at: float) -> list[Intent]:
        sid = result.subtask_id
        self._end_attempt(sid)
        self._dag.set(self._nodes[sid], _S.SUCCEEDED)
        self._results[sid] = result
        # What the agent flagged about an accepted result (a unit it could not read, a
        # page it skipped) is the task's to report, like any other degradation.
        out: list[Intent] = [self._warn(f"sub-task `{sid}`: {w}", sid) for w in result.warnings]
        if sid == self._draft:
            self.drafted = DraftSettled(subtask_id=sid)
            return [*out, self.drafted]
        out += self._told(sid, fire_rules(self._dag, self.plan, sid, result))
        out += self._told(sid, next_round(self._dag, self.plan, sid, result))
        grown, problem = grow_each(self._dag, self.plan, sid, result)
        out += self._told(sid, grown)
        if problem is not None:
            return out + self._end(problem, ErrorCode.INVALID_PLAN, sid)
        return out + self._dispatch_ready(at, sid)

    # ---- the DAG grows (decided by `_expand`, written by `_growth`) -------------------

    def _adopt(self, plan: Plan, at: float) -> list[Intent]:
        """Grow the DAG by the plan made of the settled draft, and dispatch what is ready.

        From now on the task runs `plan`'s template (its stages, rules, loops, aggregate).
        Ignored when no draft waits for a plan (it was adopted already).
        """
        if self.drafted is None:
            return []
        self.drafted = None
        self._take(plan)
        return self._dispatch_ready(at)

    def _told(self, sid: str, grown: Grown) -> list[Intent]:
        """The intents of what grew, its warnings given (the task's warnings are ours)."""
        return [self._warn(g, sid) if isinstance(g, str) else g for g in grown]

    # ---- failures, breakers, the budget's stop (`_failures`, `_breakers`) ---------------

    def _on_failure(
        self, sid: str, error: SubTaskError, at: float, *, retry: bool = True
    ) -> list[Intent]:
        node = self._nodes[sid]
        self._end_attempt(sid)
        opened = self._breakers.failure(node.capability, sid, error.code, at)
        out: list[Intent] = [] if opened is None else [opened]
        decision = after_failure(node, error, self._registry, retry=retry)
        match decision:
            case RetryAfter(delay_s=delay):
                return out + self._launch(sid, at, Retry, delay_s=delay, error_code=error.code)
            case SwitchTo(fallback=fallback, reason=reason):
                return out + self._switch(sid, fallback, at, reason)
            case Keep(result=kept, warning=warning, low=low):
                node.low = low
                if warning is not None:
                    out.append(self._warn(warning, sid))
                return out + self._accept(kept, at)
            case FailForGood():
                return out + self._settle_failed(sid, error, at)
            case _:
                assert_never(decision)

    def _settle_failed(self, sid: str, error: SubTaskError, at: float) -> list[Intent]:
        """Fail `sid` for good: a required one fails the task, a draft says so."""
        node = self._nodes[sid]
        self._dag.set(node, _S.FAILED)
        node.error = error
        message = failed_message(node, error)
        if sid == self._draft:  # no draft: the template router plans, and says why
            self.drafted = DraftSettled(subtask_id=sid, failure=message)
            return [self.drafted]
        out: list[Intent] = [self._warn(message, sid)]
        if node.spec.required:
            return out + self._end(message, error.code, sid)
        return out + self._dispatch_ready(at, sid)

    def _switch(self, sid: str, fallback: str, at: float, reason: str) -> list[Intent]:
        node = self._nodes[sid]
        previous = node.capability
        node.capability = fallback
        node.tried.append(fallback)
        node.cap_attempts = 0
        self._end_attempt(sid)
        warn = self._warn(
            f"sub-task `{sid}` switched from `{previous}` to fallback `{fallback}`: {reason}", sid
        )
        return [warn, *self._launch(sid, at, Fallback, from_capability=previous, reason=reason)]

    def _capability_of(self, sid: str) -> str:
        return self._nodes[sid].capability

    def _cool(self, at: float) -> list[Intent]:
        """Half-open the breakers whose cool-down passed, each letting one trial go."""
        out: list[Intent] = []
        for capability_id, trial in self._breakers.cool(at, self._capability_of):
            out.append(BreakerHalfOpened(capability_id=capability_id))
            if trial is not None:
                out += self._launch(trial, at, Dispatch, reason="half_open")
        return out

    def _spends(self, capability_id: str) -> bool:
        return spends(self._registry, capability_id, self._spenders)

    def _stop_spending(self, event: SpendingStopped) -> list[Intent]:
        """The budget is reached: fail what spends and runs; nothing that spends starts."""
        if self.stopped_spending is not None or self.outcome is not None:
            return []
        error = budget_error(event)
        self.stopped_spending = error
        halted = stopped_by_budget(self._running, self._nodes, self._registry, self._spenders)
        out: list[Intent] = [
            self._warn(
                f"budget reached (`{event.limit}`): {len(halted)} running sub-tasks stopped, "
                "no new model calls; the task finishes with what it has",
                None,
            )
        ]
        if halted:
            out.append(CancelSubTasks(subtask_ids=halted))
        for sid in halted:
            del self._running[sid]
            out += self._settle_failed(sid, error, event.at)
            if self.outcome is not None:
                break
        return out + self._check_finished()

    # ---- the task's end ---------------------------------------------------------------

    def _end(self, reason: str, code: ErrorCode, sid: str | None) -> list[Intent]:
        nodes = self._nodes
        running = tuple(k for k, n in nodes.items() if n.status in (_S.RUNNING, _S.HELD))
        for k in running:
            self._dag.set(nodes[k], _S.CANCELLED)
        for node in nodes.values():
            if node.status in (_S.PENDING, _S.WAITING):
                self._dag.set(node, _S.CANCELLED)
        self._running.clear()
        self._breakers.let_go()
        self._waits.clear()
        self.outcome = FailTask(reason=reason, code=code, subtask_id=sid)
        out: list[Intent] = [CancelSubTasks(subtask_ids=running)] if running else []
        return [*out, self.outcome]

    def _check_finished(self) -> list[Intent]:
        if self.outcome is not None:
            return []
        if self._dag.settled < len(self._nodes):  # kept by `Dag.set`: no scan per event
            return []
        if self.plan.draft_subtask is not None:  # the draft settled: its plan comes next
            return []
        if len(self._results) == (self._draft in self._results):  # none of the plan's
            return self._end("no sub-task succeeded", ErrorCode.AGENT_ERROR, None)
        self.outcome = FinishTask(warnings=tuple(self.warnings))
        return [self.outcome]
