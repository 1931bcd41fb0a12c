"""The sans-I/O scheduler whole: every intent, partial rollout, recovery by replay. No Ray.

Its policies (retry and fallback, breakers, waits, expansion, the budget's stop) are asked
alone in `tests/test_sched_policies.py`; here the scheduler applies them to events.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from swarm_ray import BreakerPolicy, TaskRequest, TaskTemplate, TokenUsage
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._signals import (
    BreakerClosed,
    BreakerHalfOpened,
    BreakerOpened,
    CancelRequested,
    CancelSubTasks,
    Dispatch,
    DraftSettled,
    FailTask,
    Fallback,
    FeedbackRoundStarted,
    FinishTask,
    Intent,
    PlanAdopted,
    ResultRejected,
    Retry,
    RuleFired,
    RunIntent,
    SchedulerEvent,
    SkipSubTask,
    SpendingStopped,
    Start,
    SubTaskTimedOut,
    Tick,
    Warn,
)
from swarm_ray.core.scheduling._scheduler import EVENT_ADAPTER, Scheduler, SubTaskStatus
from tests.support import ManyIn, done, failed, pipeline, registry, spec

REQ = TaskRequest(query="compare", items=("a", "b"), params={"dimensions": ["battery", "motor"]})


def make(template: TaskTemplate | None = None, req: TaskRequest = REQ, reg=None) -> Scheduler:  # type: ignore[no-untyped-def]
    return Scheduler(expand(template or pipeline(), req, task_id="t1"), reg or registry())


def runs(intents: list[Intent]) -> list[RunIntent]:
    return [i for i in intents if isinstance(i, RunIntent)]


def ids(intents: list[Intent]) -> list[str]:
    return [i.subtask_id for i in runs(intents)]


def of(intents: list[Intent], kind: type) -> list:  # type: ignore[type-arg]
    return [i for i in intents if isinstance(i, kind)]


def answer_all(
    s: Scheduler, queue: list[RunIntent], answer: Callable[[RunIntent], SchedulerEvent]
) -> list[Intent]:
    """Answer `queue` and every run intent that follows, oldest first, until the task ends."""
    seen: list[Intent] = []
    while queue and s.outcome is None:
        out = s.handle(answer(queue.pop(0)))
        seen += out
        queue += runs(out)
    return seen


def drive(
    s: Scheduler, answer: Callable[[RunIntent], SchedulerEvent], start: float = 0.0
) -> list[Intent]:
    """Answer every run intent, oldest first, until the task ends. Returns all intents."""
    seen: list[Intent] = s.handle(Start(at=start))
    return seen + answer_all(s, runs(seen), answer)


def test_an_accepted_results_warnings_become_the_tasks() -> None:
    s = make()

    def answer(intent: RunIntent) -> SchedulerEvent:
        if intent.subtask_id == "parse[1]":
            return done(intent, warnings=("page 3: unknown unit 'kWhr'",))
        return done(intent)

    out = drive(s, answer)
    message = "sub-task `parse[1]`: page 3: unknown unit 'kWhr'"
    assert [w.message for w in of(out, Warn)] == [message]
    assert isinstance(out[-1], FinishTask) and out[-1].warnings == (message,)


# ---- dispatch and partial rollout ---------------------------------------------------------


def test_start_dispatches_only_what_is_ready_with_resolved_inputs() -> None:
    s = make()
    out = s.handle(Start(at=0))
    assert ids(out) == ["parse[0]", "parse[1]"]
    first = runs(out)[0]
    assert isinstance(first, Dispatch) and first.reason == "ready"
    assert first.input == {"text": "a", "feedback": None} and first.attempt == 1
    assert first.timeout_s == 60.0


def test_partial_rollout_downstream_starts_before_the_stage_finishes() -> None:
    s = make()
    p0, _p1 = runs(s.handle(Start(at=0)))
    out = s.handle(done(p0, "battery 75 kWh"))
    # item 0's extraction starts while parse[1] still runs: no barrier between stages
    assert ids(out) == ["extract[0,battery]", "extract[0,motor]"]
    assert runs(out)[0].input["text"] == "battery 75 kWh"
    assert s.status("parse[1]") is SubTaskStatus.RUNNING
    assert s.status("merge") is SubTaskStatus.PENDING


def test_aggregate_gets_all_upstream_outputs_and_task_finishes() -> None:
    s = make()
    out = drive(s, lambda i: done(i, f"out:{i.subtask_id}"))
    merge = next(i for i in runs(out) if i.subtask_id == "merge")
    assert merge.input["parts"] == [
        f"out:extract[{i},{d}]" for i in (0, 1) for d in ("battery", "motor")
    ]
    assert isinstance(out[-1], FinishTask) and out[-1].warnings == ()
    assert s.progress() == 1.0
    assert s.final_results()["merge"].output == {"text": "out:merge"}


# ---- retries, fallbacks, confidence -------------------------------------------------------


def test_retry_with_exponential_backoff_then_degrade_and_skip() -> None:
    s = make()
    p0, _ = runs(s.handle(Start(at=0)))
    r2 = s.handle(failed(p0))
    assert isinstance(r2[0], Retry) and r2[0].attempt == 2 and r2[0].delay_s == 0.5
    assert r2[0].error_code is ErrorCode.AGENT_ERROR
    r3 = s.handle(SubTaskTimedOut(at=2, subtask_id="parse[0]", attempt=2))
    assert isinstance(r3[0], Retry) and r3[0].attempt == 3 and r3[0].delay_s == 1.0
    assert r3[0].error_code is ErrorCode.TIMEOUT
    out = s.handle(failed(runs(r3)[0]))
    assert runs(out) == []  # retries exhausted, no fallback for parse
    skipped = [i.subtask_id for i in of(out, SkipSubTask)]
    assert skipped == ["extract[0,battery]", "extract[0,motor]"]
    assert s.status("parse[0]") is SubTaskStatus.FAILED
    assert s.error("parse[0]").code is ErrorCode.AGENT_ERROR  # type: ignore[union-attr]
    assert any("parse[0]" in w.message for w in of(out, Warn))


def test_only_failed_subtasks_are_retried_finished_results_are_reused() -> None:
    counts: dict[str, int] = {}

    def answer(i: RunIntent):  # type: ignore[no-untyped-def]
        counts[i.subtask_id] = counts.get(i.subtask_id, 0) + 1
        if i.subtask_id == "extract[1,motor]" and i.attempt == 1:
            return failed(i)
        return done(i)

    out = drive(make(), answer)
    assert isinstance(out[-1], FinishTask)
    assert counts.pop("extract[1,motor]") == 2
    assert set(counts.values()) == {1}


def test_invalid_output_is_not_retried_but_falls_back() -> None:
    reg = registry(spec("doc.extract.text", fallback="doc.extract.backup"))
    s = make(reg=reg)
    p0, _ = runs(s.handle(Start(at=0)))
    e0 = runs(s.handle(done(p0)))[0]
    out = s.handle(failed(e0, ErrorCode.INVALID_OUTPUT))
    fb = of(out, Fallback)
    assert len(fb) == 1 and fb[0].capability_id == "doc.extract.backup"
    assert fb[0].from_capability == "doc.extract.text" and fb[0].attempt == 2
    assert "invalid_output after 1 attempt" in fb[0].reason


def test_fallback_after_retries_run_out() -> None:
    reg = registry(spec("doc.extract.text", fallback="doc.extract.backup"))

    def answer(i: RunIntent):  # type: ignore[no-untyped-def]
        return failed(i) if i.capability_id == "doc.extract.text" else done(i, "backup")

    out = drive(make(reg=reg), answer)
    fallbacks = of(out, Fallback)
    assert len(fallbacks) == 4 and all(f.attempt == 4 for f in fallbacks)
    assert len(of(out, Retry)) == 8
    assert isinstance(out[-1], FinishTask)
    assert sum("fallback `doc.extract.backup`" in w for w in out[-1].warnings) == 4


def test_low_confidence_switches_to_fallback_and_keeps_the_better_result() -> None:
    reg = registry(
        spec("doc.extract.text", fallback="doc.extract.backup", confidence_threshold=0.8),
        spec("doc.extract.backup", confidence_threshold=0.8),
    )
    s = make(reg=reg)
    p0, _ = runs(s.handle(Start(at=0)))
    e0, e1 = runs(s.handle(done(p0)))
    out = s.handle(done(e0, "rules", confidence=0.5))
    (fb,) = of(out, Fallback)
    assert "confidence 0.50 under threshold 0.80" in fb.reason
    s.handle(done(fb, "llm", confidence=0.95))
    assert s.result("extract[0,battery]").output == {"text": "llm"}  # type: ignore[union-attr]
    (fb2,) = of(s.handle(done(e1, "rules", confidence=0.6)), Fallback)
    out = s.handle(done(fb2, "llm", confidence=0.3))
    assert s.result("extract[0,motor]").output == {"text": "rules"}  # type: ignore[union-attr]
    assert any("under its threshold" in w.message for w in of(out, Warn))


def test_low_confidence_without_fallback_is_kept_with_a_warning() -> None:
    reg = registry(spec("doc.parse.text", confidence_threshold=0.9))
    s = make(reg=reg)
    p0, _ = runs(s.handle(Start(at=0)))
    out = s.handle(done(p0, confidence=0.2))
    assert any("confidence 0.20" in w.message for w in of(out, Warn))
    assert s.status("parse[0]") is SubTaskStatus.SUCCEEDED


def test_fallback_that_also_fails_keeps_the_low_confidence_result() -> None:
    reg = registry(
        spec("doc.extract.text", fallback="doc.extract.backup", confidence_threshold=0.8),
        spec("doc.extract.backup", retry={"max_attempts": 1}),
    )
    s = make(reg=reg)
    p0, _ = runs(s.handle(Start(at=0)))
    e0 = runs(s.handle(done(p0)))[0]
    (fb,) = of(s.handle(done(e0, "rules", confidence=0.4)), Fallback)
    out = s.handle(failed(fb))
    assert any("kept the low-confidence result" in w.message for w in of(out, Warn))
    assert s.result("extract[0,battery]").output == {"text": "rules"}  # type: ignore[union-attr]


def test_invalid_input_is_refused_before_dispatch() -> None:
    s = make(req=TaskRequest(query="q", items=("ok", 42), params={"dimensions": ["d"]}))
    out = s.handle(Start(at=0))
    assert ids(out) == ["parse[0]"]  # parse[1] never dispatched: its text is an int
    assert s.status("parse[1]") is SubTaskStatus.FAILED
    err = s.error("parse[1]")
    assert err is not None and err.code is ErrorCode.INVALID_INPUT
    assert "`doc.parse.text`" in err.message and "field `text`" in err.message
    assert [i.subtask_id for i in of(out, SkipSubTask)] == ["extract[1,d]"]


# ---- circuit breaker ----------------------------------------------------------------------


def breaker_registry(fallback: str | None = None):  # type: ignore[no-untyped-def]
    return registry(
        spec(
            "doc.parse.text",
            retry={"max_attempts": 1},
            fallback=fallback,
            breaker=BreakerPolicy(failure_threshold=2, cooldown_s=10),
        )
    )


def test_breaker_opens_holds_half_opens_and_closes() -> None:
    req = TaskRequest(query="q", items=("a", "b", "c", "d"), params={"dimensions": ["x"]})
    s = make(req=req, reg=breaker_registry())
    p = runs(s.handle(Start(at=0)))
    assert len(p) == 4
    s.handle(failed(p[0], at=1))
    out = s.handle(failed(p[1], at=2))
    (opened,) = of(out, BreakerOpened)
    assert (opened.capability_id, opened.failures, opened.until) == ("doc.parse.text", 2, 12)
    assert of(s.handle(Tick(at=5)), BreakerHalfOpened) == []
    # a user error (bad input) says nothing about the capability: not counted, not retried
    out = s.handle(failed(p[2], ErrorCode.INVALID_INPUT, at=6))
    assert of(out, BreakerOpened) == [] and runs(out) == []
    assert s.status("parse[2]") is SubTaskStatus.FAILED
    out = s.handle(Tick(at=12))
    assert of(out, BreakerHalfOpened)[0].capability_id == "doc.parse.text"
    assert runs(out) == []  # nothing was held: p[3] was already running
    out = s.handle(done(p[3], at=13))  # a success while half-open closes it
    assert of(out, BreakerClosed)[0].capability_id == "doc.parse.text"


def test_held_subtask_is_the_half_open_trial() -> None:
    reg = registry(
        spec(
            "doc.parse.text",
            retry={"max_attempts": 2, "backoff_s": 0},
            breaker=BreakerPolicy(failure_threshold=2, cooldown_s=10),
        )
    )
    s = make(req=TaskRequest(query="q", items=("a", "b"), params={"dimensions": ["x"]}), reg=reg)
    p0, p1 = runs(s.handle(Start(at=0)))
    retry0 = runs(s.handle(failed(p0, at=1)))
    assert len(retry0) == 1  # first failure: retried
    out = s.handle(failed(p1, at=2))  # second failure opens the breaker; p1's retry is held
    assert of(out, BreakerOpened) and runs(out) == []
    assert s.status("parse[1]") is SubTaskStatus.HELD
    out = s.handle(Tick(at=12))
    (trial,) = runs(out)
    assert (
        trial.subtask_id == "parse[1]"
        and isinstance(trial, Dispatch)
        and trial.reason == "half_open"
    )
    out = s.handle(done(trial, at=13))
    assert of(out, BreakerClosed)[0].capability_id == "doc.parse.text"


def test_failed_trial_reopens_the_breaker() -> None:
    reg = registry(
        spec(
            "doc.parse.text",
            retry={"max_attempts": 3, "backoff_s": 0},
            breaker=BreakerPolicy(failure_threshold=1, cooldown_s=10),
        )
    )
    s = make(req=TaskRequest(query="q", items=("a",), params={"dimensions": ["x"]}), reg=reg)
    (p0,) = runs(s.handle(Start(at=0)))
    assert of(s.handle(failed(p0, at=1)), BreakerOpened)
    (trial,) = runs(s.handle(Tick(at=11)))
    out = s.handle(failed(trial, at=12))
    assert of(out, BreakerOpened)[0].until == 22
    assert s.status("parse[0]") is SubTaskStatus.HELD


def test_a_half_open_trial_that_settles_its_sub_task_may_start_other_capabilities() -> None:
    """The held trial of a spending capability fails at once once the budget is reached;
    what it settles starts a capability that had no breaker yet, while the breakers are
    being cooled (it raised "dictionary changed size during iteration")."""
    reg = registry(
        spec(
            "doc.parse.text",
            tags=("llm",),
            retry={"max_attempts": 3, "backoff_s": 0},
            breaker=BreakerPolicy(failure_threshold=1, cooldown_s=10),
        )
    )
    s = make(req=TaskRequest(query="q", items=("a",), params={"dimensions": ["x"]}), reg=reg)
    (p0,) = runs(s.handle(Start(at=0)))
    assert of(s.handle(failed(p0, at=1)), BreakerOpened)
    assert s.status("parse[0]") is SubTaskStatus.HELD
    s.handle(SpendingStopped(at=2, limit="budget.max_cost", message="budget reached"))
    out = s.handle(Tick(at=11))  # half-open: the trial fails for the budget, not dispatched
    assert of(out, BreakerHalfOpened) and s.status("parse[0]") is SubTaskStatus.FAILED
    assert [r.subtask_id for r in runs(out)] == ["merge"]  # partial_ok: runs on what it has


def test_open_breaker_sends_work_to_the_fallback() -> None:
    s = make(
        req=TaskRequest(query="q", items=("a", "b", "c"), params={"dimensions": ["x"]}),
        reg=breaker_registry(fallback="doc.extract.backup"),
    )
    p = runs(s.handle(Start(at=0)))
    s.handle(failed(p[0], at=1))  # -> fallback (no retries left)
    out = s.handle(failed(p[1], at=2))  # opens the breaker, then -> fallback
    assert of(out, BreakerOpened)
    assert [f.capability_id for f in of(out, Fallback)] == ["doc.extract.backup"]


# ---- rules and feedback loops -------------------------------------------------------------

RULES_YAML = """
name: licences
max_depth: 1
aggregate: merge
stages:
  - {name: parse, capability: doc.parse.text, fan_out: per_item, input: {text: $item}}
  - {name: review, capability: doc.review.safety, triggered: true, input: {text: $from.parse.text}}
  - {name: merge, capability: doc.merge.all, depends_on: [parse], partial_ok: true,
     input: {parts: $from.parse.text}}
rules:
  - {name: hazardous, when_stage: parse, field: text, contains: hazardous chemicals,
     trigger: review}
"""


def test_dynamic_rule_adds_work_and_the_aggregator_waits_for_it() -> None:
    s = make(
        TaskTemplate.from_yaml(RULES_YAML),
        req=TaskRequest(query="q", items=("Scope: HAZARDOUS chemicals", "Scope: bakery")),
    )
    p0, p1 = runs(s.handle(Start(at=0)))
    out = s.handle(done(p0, "scope: hazardous chemicals trading"))
    (fired,) = of(out, RuleFired)
    assert (fired.rule, fired.source, fired.added) == (
        "hazardous",
        "parse[0]",
        ("review@parse[0]",),
    )
    (review,) = runs(out)
    assert isinstance(review, Dispatch) and review.reason == "rule"
    assert review.input["text"] == "scope: hazardous chemicals trading"
    assert of(s.handle(done(p1, "scope: bakery")), RuleFired) == []
    assert s.status("merge") is SubTaskStatus.PENDING  # waits for the triggered review
    out = s.handle(done(review, "safe enough"))
    assert ids(out) == ["merge"]
    assert s.specs()[-1].parent == "parse[0]"


def test_rule_over_the_depth_limit_is_not_run() -> None:
    template = TaskTemplate.from_yaml(RULES_YAML).model_copy(update={"max_depth": 0})
    s = make(template, req=TaskRequest(query="q", items=("x",)))
    (p0,) = runs(s.handle(Start(at=0)))
    out = s.handle(done(p0, "hazardous chemicals"))
    assert of(out, RuleFired) == []
    assert any("over the limit of 0" in w.message for w in of(out, Warn))
    assert ids(out) == ["merge"]


LOOP_YAML = """
name: drafts
aggregate: publish
stages:
  - {name: draft, capability: doc.extract.text, input: {text: $query}}
  - {name: judge, capability: doc.judge.text, depends_on: [draft], input: {text: $from.draft.text}}
  - {name: publish, capability: doc.merge.all, depends_on: [judge, draft],
     input: {parts: [$from.draft.text]}}
loops:
  - {stage: draft, judge: judge, max_rounds: 3}
"""


def test_feedback_loop_generate_judge_revise() -> None:
    s = make(TaskTemplate.from_yaml(LOOP_YAML), req=TaskRequest(query="write it"))
    (d1,) = runs(s.handle(Start(at=0)))
    (j1,) = runs(s.handle(done(d1, "v1")))
    out = s.handle(done(j1, output={"passed": False, "feedback": "too short"}))
    (round2,) = of(out, FeedbackRoundStarted)
    assert (round2.round, round2.added) == (2, ("draft@r2", "judge@r2"))
    (d2,) = runs(out)
    assert d2.subtask_id == "draft@r2" and d2.input == {"text": "write it", "feedback": "too short"}
    (j2,) = runs(s.handle(done(d2, "v2 longer")))
    assert j2.input["text"] == "v2 longer"
    out = s.handle(done(j2, output={"passed": True}))
    (publish,) = runs(out)
    assert publish.input == {"parts": ["v2 longer"]}
    assert s.current("draft") == "draft@r2"
    assert "draft" not in s.final_results() and "draft@r2" in s.final_results()


def test_feedback_loop_stops_at_the_round_limit() -> None:
    s = make(TaskTemplate.from_yaml(LOOP_YAML), req=TaskRequest(query="q"))
    verdict = {"passed": False, "feedback": "no"}
    out = drive(s, lambda i: done(i, output=verdict) if i.stage == "judge" else done(i))
    assert len(of(out, FeedbackRoundStarted)) == 2
    assert isinstance(out[-1], FinishTask)
    assert any("after 3 round(s)" in w for w in out[-1].warnings)


# ---- task outcome, cancellation, rejections -----------------------------------------------


def test_required_failure_fails_the_task_and_cancels_running_work() -> None:
    reg = registry(spec("doc.merge.all", input_model=ManyIn, retry={"max_attempts": 1}))
    s = make(reg=reg)
    out = drive(s, lambda i: failed(i) if i.subtask_id == "merge" else done(i))
    assert isinstance(out[-1], FailTask) and out[-1].subtask_id == "merge"
    assert out[-1].code is ErrorCode.AGENT_ERROR


def test_cancel_stops_running_subtasks() -> None:
    s = make()
    s.handle(Start(at=0))
    out = s.handle(CancelRequested(at=1))
    assert of(out, CancelSubTasks)[0].subtask_ids == ("parse[0]", "parse[1]")
    assert isinstance(out[-1], FailTask) and out[-1].code is ErrorCode.CANCELLED
    assert s.status("merge") is SubTaskStatus.CANCELLED


def test_all_failed_without_required_work_fails_the_task() -> None:
    template = TaskTemplate.from_yaml(
        "name: one\nstages: [{name: parse, capability: doc.parse.text, fan_out: per_item,"
        " input: {text: $item}}]"
    )
    reg = registry(spec("doc.parse.text", retry={"max_attempts": 1}))
    out = drive(make(template, reg=reg), failed)
    assert isinstance(out[-1], FailTask) and out[-1].reason == "no sub-task succeeded"


def test_replayed_stale_unknown_and_late_results_are_rejected() -> None:
    s = make()
    p0, p1 = runs(s.handle(Start(at=0)))
    s.handle(done(p0))
    (replayed,) = s.handle(done(p0))
    assert isinstance(replayed, ResultRejected) and "succeeded, not running" in replayed.reason
    retry = runs(s.handle(failed(p1)))[0]
    (stale,) = s.handle(done(p1))  # attempt 1 answers after attempt 2 was sent
    assert isinstance(stale, ResultRejected) and stale.reason == "stale attempt 1, expecting 2"
    ghost = p1.model_copy(update={"subtask_id": "ghost"})
    (unknown,) = s.handle(done(ghost))
    assert isinstance(unknown, ResultRejected) and unknown.reason == "unknown sub-task"
    s.handle(CancelRequested(at=3))
    (late,) = s.handle(done(retry))
    assert isinstance(late, ResultRejected) and late.reason == "task ended"


def test_token_usage_rolls_up_including_failed_attempts() -> None:
    s = make()
    p0, p1 = runs(s.handle(Start(at=0)))
    s.handle(done(p0, usage=TokenUsage(prompt_tokens=10, completion_tokens=5)))
    s.handle(done(p1, usage=TokenUsage(prompt_tokens=1, completion_tokens=2)))
    assert s.usage() == TokenUsage(prompt_tokens=11, completion_tokens=7)


# ---- determinism and recovery -------------------------------------------------------------

OUTCOMES = st.sampled_from(["ok", "ok", "ok", "fail", "timeout", "low", "invalid_output"])


def _answer_with(choices: list[str], clock: list[float]):  # type: ignore[no-untyped-def]
    def answer(i: RunIntent) -> SchedulerEvent:
        clock[0] += 1.0
        pick = choices.pop(0) if choices else "ok"
        if pick == "fail":
            return failed(i, at=clock[0])
        if pick == "invalid_output":
            return failed(i, ErrorCode.INVALID_OUTPUT, at=clock[0])
        if pick == "timeout":
            return SubTaskTimedOut(at=clock[0], subtask_id=i.subtask_id, attempt=i.attempt)
        conf = 0.3 if pick == "low" else 0.95
        return done(i, f"{i.subtask_id}/{i.capability_id}", at=clock[0], confidence=conf)

    return answer


def _rich_registry():  # type: ignore[no-untyped-def]
    return registry(
        spec(
            "doc.extract.text",
            fallback="doc.extract.backup",
            confidence_threshold=0.5,
            breaker=BreakerPolicy(failure_threshold=3, cooldown_s=2),
        ),
        spec("doc.extract.backup", retry={"max_attempts": 2}),
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(OUTCOMES, max_size=40), st.integers(min_value=1, max_value=60))
def test_replaying_the_event_log_rebuilds_the_same_state(choices: list[str], cut: int) -> None:
    req = TaskRequest(query="q", items=("a", "b", "c"), params={"dimensions": ["x", "y"]})
    s = make(req=req, reg=_rich_registry())
    drive(s, _answer_with(list(choices), [0.0]))
    assert s.outcome is not None
    # the whole log, through JSON as the state store keeps it
    log = [EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(e)) for e in s.log]
    replayed = Scheduler.replay(s.plan, _rich_registry(), log)
    assert replayed.snapshot() == s.snapshot()
    # a prefix (a crash in the middle): same state as the original had at that point
    prefix = s.log[: min(cut, len(s.log))]
    live = Scheduler(s.plan, _rich_registry())
    for event in prefix:
        live.handle(event)
    stored = json.loads(json.dumps([e.model_dump(mode="json") for e in prefix]))
    replayed_prefix = Scheduler.replay(
        s.plan, _rich_registry(), [EVENT_ADAPTER.validate_python(e) for e in stored]
    )
    assert replayed_prefix.snapshot() == live.snapshot()
    assert replayed_prefix.outstanding() == live.outstanding()


def test_recovery_redispatches_only_outstanding_work() -> None:
    s = make()
    p0, _p1 = runs(s.handle(Start(at=0)))
    e = runs(s.handle(done(p0)))
    s.handle(done(e[0]))
    recovered = Scheduler.replay(s.plan, registry(), s.log)
    again = recovered.outstanding()
    assert sorted(i.subtask_id for i in again) == ["extract[0,motor]", "parse[1]"]
    assert all(i.delay_s == 0 for i in again)
    # finishing the recovered run computes nothing twice
    computed: list[str] = []
    queue = list(again)
    while queue:
        i = queue.pop(0)
        computed.append(i.subtask_id)
        queue += runs(recovered.handle(done(i)))
    assert isinstance(recovered.outcome, FinishTask)
    assert "parse[0]" not in computed and "extract[0,battery]" not in computed
    assert len(computed) == len(set(computed))


def test_success_while_open_closes_the_breaker_and_releases_held_work() -> None:
    reg = registry(
        spec(
            "doc.parse.text",
            retry={"max_attempts": 2, "backoff_s": 0},
            breaker=BreakerPolicy(failure_threshold=1, cooldown_s=100),
        )
    )
    s = make(req=TaskRequest(query="q", items=("a", "b"), params={"dimensions": ["x"]}), reg=reg)
    p0, p1 = runs(s.handle(Start(at=0)))
    assert of(s.handle(failed(p0, at=1)), BreakerOpened)
    assert s.status("parse[0]") is SubTaskStatus.HELD
    out = s.handle(done(p1, at=2))  # dispatched before the breaker opened, and it worked
    assert of(out, BreakerClosed)
    assert "parse[0]" in ids(out)


def test_provenance_warnings_and_costs_are_filled_at_dispatch() -> None:
    template = TaskTemplate.model_validate(
        {
            "name": "prov",
            "aggregate": "merge",
            "stages": [
                {
                    "name": "parse",
                    "capability": "doc.parse.text",
                    "fan_out": "per_item",
                    "input": {"text": "$item"},
                },
                {
                    "name": "merge",
                    "capability": "doc.merge.all",
                    "depends_on": ["parse"],
                    "partial_ok": True,
                    "input": {"parts": ["$from.parse.@watermark", "$warnings", "$costs"]},
                },
            ],
        }
    )
    reg = registry(spec("doc.parse.text", retry={"max_attempts": 1}))
    s = make(template, req=TaskRequest(query="q", items=("a", "b")), reg=reg)
    p0, p1 = runs(s.handle(Start(at=0)))
    s.handle(done(p0, watermark="wm-0"))
    (merge,) = runs(s.handle(failed(p1)))
    marks, warnings, costs = merge.input["parts"]
    assert marks == ["wm-0"]
    assert len(warnings) == 1 and "`parse[1]`" in warnings[0]
    assert costs == [{"sub_task_id": "parse[0]", "seconds": 0.0, "calls": 1}]


# ---- a planner's draft grows the DAG -----------------------------------------------------


def _drafting(template_name: str = "planning") -> Scheduler:
    """A scheduler on the one-sub-task DAG a planner's task starts with."""
    draft = TaskTemplate.model_validate(
        {
            "name": template_name,
            "stages": [
                {
                    "name": "draft",
                    "capability": "doc.parse.text",
                    "required": True,
                    "input": {"text": "$query"},
                }
            ],
        }
    )
    plan = expand(draft, REQ, task_id="t1").model_copy(update={"draft_subtask": "draft"})
    return Scheduler(plan, registry())


def test_a_settled_draft_waits_for_its_plan_and_the_dag_grows_by_it() -> None:
    s = _drafting()
    [ask] = runs(s.handle(Start(at=0)))
    assert ask.subtask_id == "draft" and s.drafting
    assert s.handle(PlanAdopted(at=0.5, plan=expand(pipeline(), REQ, task_id="t1"))) == []
    settled = s.handle(done(ask, "a plan", usage=TokenUsage(completion_tokens=9)))
    assert settled == [DraftSettled(subtask_id="draft")] and s.drafted == settled[0]
    assert s.outcome is None and s.progress() == 0.0  # not finished: its plan comes next
    plan = expand(pipeline(), REQ, task_id="t1")
    grown = s.handle(PlanAdopted(at=2.0, plan=plan))
    assert ids(grown) == ["parse[0]", "parse[1]"] and not s.drafting and s.drafted is None
    assert s.plan.template.name == "pipeline" and s.progress() == 0.0
    assert s.handle(PlanAdopted(at=2.5, plan=plan)) == []  # adopted once
    answer_all(s, runs(grown), lambda i: done(i, f"{i.subtask_id}!"))
    assert isinstance(s.outcome, FinishTask) and s.progress() == 1.0
    assert "draft" not in s.final_results() and "merge" in s.final_results()
    assert s.usage().completion_tokens == 9  # the planner's tokens are the task's
    log = [EVENT_ADAPTER.validate_json(EVENT_ADAPTER.dump_json(e)) for e in s.log]
    first = _drafting().plan
    assert Scheduler.replay(first, registry(), log).snapshot() == s.snapshot()
    halfway = Scheduler.replay(first, registry(), log[:3])  # a crash before the adoption
    assert halfway.drafted == DraftSettled(subtask_id="draft") and halfway.outstanding() == []


def test_a_draft_that_failed_for_good_waits_for_the_routers_plan_not_failing_the_task() -> None:
    s = _drafting()
    [ask] = runs(s.handle(Start(at=0)))
    settled = s.handle(failed(ask, ErrorCode.INVALID_OUTPUT))  # not retried; required
    assert s.outcome is None and not of(settled, Warn)  # the router's plan says why
    [drafted] = settled
    assert isinstance(drafted, DraftSettled) and "draft broke" in (drafted.failure or "")
    grown = s.handle(PlanAdopted(at=2.0, plan=expand(pipeline(), REQ, task_id="t1")))
    answer_all(s, runs(grown), lambda i: done(i, f"{i.subtask_id}!"))
    assert isinstance(s.outcome, FinishTask) and s.warnings == []


def test_a_plan_none_of_whose_sub_tasks_succeeded_fails_whatever_its_draft_did() -> None:
    s = _drafting()
    [ask] = runs(s.handle(Start(at=0)))
    s.handle(done(ask, "a plan"))
    only = TaskTemplate.model_validate(
        {
            "name": "only",
            "stages": [
                {
                    "name": "parse",
                    "capability": "doc.parse.text",
                    "fan_out": "per_item",
                    "input": {"text": "$item"},
                },
            ],
        }
    )
    plan = expand(only, TaskRequest(query="q", items=("a",)), task_id="t1")
    [parse] = runs(s.handle(PlanAdopted(at=2.0, plan=plan)))
    s.handle(failed(parse, ErrorCode.INVALID_OUTPUT))
    assert isinstance(s.outcome, FailTask) and s.outcome.reason == "no sub-task succeeded"


def test_cancelled_while_drafting_the_task_ends_and_a_later_plan_is_ignored() -> None:
    s = _drafting()
    runs(s.handle(Start(at=0)))
    ended = s.handle(CancelRequested(at=1.0))
    assert of(ended, CancelSubTasks) == [CancelSubTasks(subtask_ids=("draft",))]
    assert isinstance(s.outcome, FailTask) and s.outcome.code is ErrorCode.CANCELLED
    assert s.handle(PlanAdopted(at=2.0, plan=expand(pipeline(), REQ, task_id="t1"))) == []
    assert s.plan.template.name == "planning"
