"""The scheduler's pure policies, each alone: a sub-task's record in, a decision out. No Ray.

`Scheduler` applies what these decide (`tests/test_scheduler.py` drives it whole); here
each policy is asked directly, and a last test checks that the scheduler's and the
driver's classes each write only the state they declare.
"""

from __future__ import annotations

from pathlib import Path

from swarm_ray.core._errors import ErrorCode
from swarm_ray.core._failures import (
    FailForGood,
    Keep,
    RetryAfter,
    SwitchTo,
    after_failure,
    after_success,
    budget_error,
    next_fallback,
    spends,
)
from swarm_ray.core._human import HumanAsk
from swarm_ray.core._node import _Node
from swarm_ray.core._signals import HumanAnswered, SpendingStopped
from swarm_ray.core._subtask import SubTaskError, SubTaskResult, SubTaskSpec
from swarm_ray.core._waits import (
    MAX_ASKS,
    answers,
    ask_of,
    due,
    next_deadline,
    question,
    review_wait,
    stage_wait,
    unanswered,
)
from tests.support import registry, spec

CORE = Path(__file__).resolve().parent.parent / "swarm_ray" / "core"


def node(capability: str = "doc.extract.text", **kw: object) -> _Node:
    sub = SubTaskSpec(id="s1", stage="extract", capability_id=capability, input={"text": "x"})
    made = _Node(spec=sub, origin="ready", index=0, capability=capability, tried=[capability])
    for name, value in kw.items():
        setattr(made, name, value)
    return made


def result(confidence: float = 1.0, capability: str = "doc.extract.text") -> SubTaskResult:
    return SubTaskResult(
        task_id="t1",
        subtask_id="s1",
        capability_id=capability,
        output={"text": "x"},
        confidence=confidence,
    )


def error(code: ErrorCode = ErrorCode.AGENT_ERROR) -> SubTaskError:
    return SubTaskError(code=code, message="broke")


# ---- failures: retry, fallback, keep, fail for good -----------------------------------

WITH_BACKUP = registry(
    spec("doc.extract.text", fallback="doc.extract.backup", confidence_threshold=0.5),
    spec("doc.extract.backup"),
)


def test_a_retryable_error_is_retried_with_the_policys_backoff() -> None:
    assert after_failure(node(cap_attempts=1), error(), registry()) == RetryAfter(0.5)
    assert after_failure(node(cap_attempts=2), error(), registry()) == RetryAfter(1.0)


def test_an_input_refused_before_dispatch_is_not_retried() -> None:
    assert isinstance(
        after_failure(node(cap_attempts=1), error(), registry(), retry=False), FailForGood
    )


def test_retries_spent_switch_to_the_first_fallback_not_tried() -> None:
    decision = after_failure(node(cap_attempts=3), error(), WITH_BACKUP)
    assert decision == SwitchTo("doc.extract.backup", "agent_error after 3 attempt(s)", None)
    tried = node(
        "doc.extract.backup", cap_attempts=3, tried=["doc.extract.text", "doc.extract.backup"]
    )
    assert next_fallback(WITH_BACKUP, "doc.extract.backup", tried.tried) is None
    assert isinstance(after_failure(tried, error(), WITH_BACKUP), FailForGood)


def test_a_failed_fallback_keeps_the_low_confidence_result_with_a_warning() -> None:
    low = result(0.2)
    kept = after_failure(
        node(
            "doc.extract.backup",
            cap_attempts=3,
            low=low,
            tried=["doc.extract.text", "doc.extract.backup"],
        ),
        error(),
        WITH_BACKUP,
    )
    assert isinstance(kept, Keep) and kept.result is low and kept.low is None
    assert kept.warning is not None and "kept the low-confidence result" in kept.warning


def test_a_result_under_its_threshold_tries_the_fallback_keeping_the_best_aside() -> None:
    decision = after_success(node(), result(0.3), WITH_BACKUP)
    assert isinstance(decision, SwitchTo) and decision.fallback == "doc.extract.backup"
    assert decision.low is not None and decision.low.confidence == 0.3
    better = after_success(node(low=result(0.4)), result(0.3), WITH_BACKUP)
    assert isinstance(better, SwitchTo) and better.low is not None and better.low.confidence == 0.4


def test_with_no_fallback_left_the_best_low_result_is_kept_with_a_warning() -> None:
    both = ["doc.extract.text", "doc.extract.backup"]
    decision = after_success(node(low=result(0.4), tried=both), result(0.3), WITH_BACKUP)
    assert isinstance(decision, Keep) and decision.result.confidence == 0.4
    assert decision.low is None and decision.warning is not None


def test_a_confident_result_is_kept_as_it_is() -> None:
    good = result(0.9)
    assert after_success(node(), good, WITH_BACKUP) == Keep(good, None, None)


def test_what_spends_and_the_budgets_error() -> None:
    reg = registry(spec("doc.llm.ask", tags=("llm",)))
    assert spends(reg, "doc.llm.ask", set())
    assert not spends(reg, "doc.parse.text", set())
    assert spends(reg, "doc.parse.text", {"doc.parse.text"})
    stopped = budget_error(SpendingStopped(at=1.0, message="over", limit="tokens"))
    assert stopped.code is ErrorCode.BUDGET_EXCEEDED and stopped.details == {"limit": "tokens"}


# ---- waits: what a sub-task waits for, and when it stops -----------------------------

ASK = HumanAsk(prompt="go on?", timeout_s=30.0, default={"ok": True})


def test_a_stage_wait_has_its_deadline_from_when_it_began() -> None:
    wait = stage_wait("s1", ASK, 100.0)
    assert (wait.since, wait.deadline, wait.has_default, wait.asked_in) == (
        100.0,
        130.0,
        True,
        None,
    )
    forever = stage_wait("s1", HumanAsk(prompt="go on?", timeout_s=None), 100.0)
    assert forever.deadline is None and next_deadline({"s1": forever}) is None


def test_the_question_is_the_agents_when_it_asked_else_the_stages() -> None:
    mine = HumanAsk(prompt="which one?")
    assert ask_of(node(), {"extract": ASK}, None) is ASK
    assert ask_of(node(asked=(mine, {"saved": 1})), {"extract": ASK}, 2) is mine


def paused(ask: object) -> SubTaskResult:
    details = {"ask": ask, "state": {"page": 3}}
    return SubTaskResult(
        task_id="t1",
        subtask_id="s1",
        capability_id="doc.extract.text",
        error=SubTaskError(code=ErrorCode.ASKED_HUMAN, message="asks", details=details),
    )


def test_a_question_is_taken_until_the_sub_task_asked_too_often() -> None:
    asked = question(paused({"prompt": "which one?"}), 0)
    assert isinstance(asked, HumanAsk) and asked.prompt == "which one?"
    over = question(paused({"prompt": "which one?"}), MAX_ASKS)
    assert isinstance(over, SubTaskError) and over.code is ErrorCode.INVALID_OUTPUT
    bad = question(paused({"prompt": ""}), 0)
    assert isinstance(bad, SubTaskError) and "may not ask" in bad.message


def test_an_answer_answers_only_the_wait_it_was_given_for() -> None:
    def given(**kw: object) -> HumanAnswered:
        return HumanAnswered(at=1.0, subtask_id="s1", answer={}, principal="ann", **kw)

    asked = stage_wait("s1", ASK, 0.0, asked_in=2)
    assert answers(asked, given(asked_in=2)) and not answers(asked, given(asked_in=1))
    assert not answers(None, given(asked_in=2))
    review = review_wait("s1", "doc.extract.text", 3, 0.0)
    assert answers(review, given(review_of=3)) and not answers(review, given(review_of=2))
    assert review.deadline is None and "attempt 3" in review.prompt


def test_waits_fall_due_at_their_deadline_in_the_order_they_began() -> None:
    waits = {
        "b": stage_wait("b", ASK, 10.0),
        "a": stage_wait("a", ASK, 0.0),
        "c": stage_wait("c", HumanAsk(prompt="later", timeout_s=None), 0.0),
    }
    assert due(waits, 29.0) == [] and due(waits, 30.0) == ["a"] and due(waits, 40.0) == ["b", "a"]
    assert next_deadline(waits) == 30.0
    assert unanswered("a").code is ErrorCode.HUMAN_TIMEOUT
