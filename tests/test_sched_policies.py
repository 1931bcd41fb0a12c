"""The scheduler's pure policies, each alone: a sub-task's record in, a decision out. No Ray.

`Scheduler` applies what these decide (`tests/test_scheduler.py` drives it whole); here
each policy is asked directly, and a last test checks that the scheduler's and the
driver's classes each write only the state they declare.
"""

from __future__ import annotations

import ast
from pathlib import Path

from swarm_ray import BreakerPolicy, TaskRequest, TaskTemplate
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._human import HumanAsk
from swarm_ray.core.model._plan import Plan, expand
from swarm_ray.core.model._signals import HumanAnswered, SpendingStopped
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult, SubTaskSpec
from swarm_ray.core.scheduling._breaker import Breaker, BreakerState
from swarm_ray.core.scheduling._breakers import Breakers
from swarm_ray.core.scheduling._dag import Dag
from swarm_ray.core.scheduling._expand import NextRound, depends_on, fan_outs, feedback, rule_fires
from swarm_ray.core.scheduling._failures import (
    FailForGood,
    Keep,
    RetryAfter,
    SwitchTo,
    after_failure,
    after_success,
    budget_error,
    next_fallback,
    spends,
    stopped_by_budget,
)
from swarm_ray.core.scheduling._node import SubTaskStatus, _Node
from swarm_ray.core.scheduling._wait_table import WaitTable
from swarm_ray.core.scheduling._waits import (
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


def _source(name: str) -> str:
    """The text of `core`'s module `name`, in whichever of its sub-packages it sits."""
    [path] = CORE.rglob(f"{name}.py")
    return path.read_text()


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
    nodes = {"a": node("doc.llm.ask"), "b": node("doc.parse.text"), "c": node("doc.parse.text")}
    assert stopped_by_budget(["c", "b", "a"], nodes, reg, {"doc.parse.text"}) == ("c", "b", "a")
    assert stopped_by_budget(["c", "b", "a"], nodes, reg, set()) == ("a",)
    stopped = budget_error(SpendingStopped(at=1.0, message="over", limit="tokens"))
    assert stopped.code is ErrorCode.BUDGET_EXCEEDED and stopped.details == {"limit": "tokens"}


# ---- breakers: a value per capability, each transition returns the next ----------------


def test_a_breaker_opens_at_its_threshold_cools_to_one_trial_and_closes_on_success() -> None:
    closed = Breaker(BreakerPolicy(failure_threshold=2, cooldown_s=10))
    opened, once = closed.failure(1.0)
    assert not opened and once.failures == 1 and closed.failures == 0  # a value
    opened, tripped = once.failure(2.0)
    assert opened and (tripped.state, tripped.until) == (BreakerState.OPEN, 12.0)
    assert tripped.admits("a") == (False, tripped) and tripped.cool(11.0) is None
    half = tripped.cool(12.0)
    assert half is not None and half.state is BreakerState.HALF_OPEN
    admitted, trial = half.admits("a")
    assert admitted and trial.trial == "a" and not trial.admits("b")[0]
    assert trial.release_trial("a").trial is None and trial.release_trial("b") is trial
    again, reopened = trial.failure(13.0)
    assert again and reopened.state is BreakerState.OPEN
    shut, ok = trial.success()
    assert shut and (ok.state, ok.failures, ok.trial) == (BreakerState.CLOSED, 0, None)


def test_the_breaker_table_holds_behind_an_open_breaker_and_lets_go_as_it_heals() -> None:
    table = Breakers(
        registry(spec("doc.flaky.one", breaker=BreakerPolicy(failure_threshold=1, cooldown_s=10)))
    )
    capability_of = {"a": "doc.flaky.one", "b": "doc.flaky.one", "c": "doc.parse.text"}.get
    opened = table.failure("doc.flaky.one", "a", ErrorCode.AGENT_ERROR, 1.0)
    assert opened is not None and opened.until == 11.0
    assert table.failure("doc.parse.text", "c", ErrorCode.INVALID_INPUT, 1.0) is None
    assert not table.admits("doc.flaky.one", "a") and table.admits("doc.parse.text", "c")
    table.hold("a")
    table.hold("b")
    assert list(table.cool(5.0, capability_of)) == []  # still cooling
    assert list(table.cool(11.0, capability_of)) == [("doc.flaky.one", "a")]  # one trial
    assert list(table.held) == ["b"] and table.admits("doc.flaky.one", "a")
    assert table.success("doc.parse.text", capability_of) is None  # it was closed
    assert table.success("doc.flaky.one", capability_of) == ["b"] and list(table.held) == []


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


def test_the_wait_table_keeps_each_wait_until_it_is_answered_or_falls_due() -> None:
    table = WaitTable()
    plan = planned(
        EACH_YAML.replace("triggered: true,", "triggered: true, await_human: {prompt: go on},")
    )[0]
    table.take(plan)
    assert table.asks("check") and not table.asks("split")
    late = HumanAsk(prompt="later?", timeout_s=5.0, default={"ok": False})
    first = node(asked=(late, None))
    awaits = table.begin(first, 10.0, asked_in=1)
    assert (awaits.subtask_id, awaits.deadline) == ("s1", 15.0) and list(table.waits) == ["s1"]
    wrong = HumanAnswered(at=11.0, subtask_id="s1", answer={}, principal="p", asked_in=2)
    assert table.answered(wrong) is None and "s1" in table.waits
    [(sid, wait, ask)] = list(table.fall_due(15.0, {"s1": first}))
    assert (sid, wait.asked_in, ask) == ("s1", 1, late) and dict(table.waits) == {}


# ---- expansion: what an accepted result adds -----------------------------------------

EACH_YAML = """
name: each
stages:
  - {name: split, capability: doc.parse.text, input: {text: $query}}
  - {name: work, capability: doc.parse.text, depends_on: [split], for_each: $from.split.parts,
     max_each: 2, input: {text: $each}}
  - {name: join, capability: doc.merge.all, depends_on: [split, work], partial_ok: true,
     input: {parts: $from.work.text}}
  - {name: check, capability: doc.review.safety, triggered: true, input: {text: $from.split.text}}
rules:
  - {name: odd, when_stage: split, field: text, contains: odd, trigger: check}
"""


def planned(yaml: str = EACH_YAML) -> tuple[Plan, dict[str, _Node]]:
    plan = expand(TaskTemplate.from_yaml(yaml), TaskRequest(query="q"), task_id="t1")
    nodes = {
        s.id: _Node(spec=s, origin="ready", index=i, capability=s.capability_id, tried=[])
        for i, s in enumerate(plan.subtasks)
    }
    return plan, nodes


def output(sid: str, **out: object) -> SubTaskResult:
    return SubTaskResult(task_id="t1", subtask_id=sid, capability_id="doc.parse.text", output=out)


def test_a_for_each_stage_fans_out_over_the_list_and_says_who_waits() -> None:
    plan, nodes = planned()
    (adds,), problem = fan_outs(plan, nodes["split"].spec, output("split", parts=["a", "b"]))
    assert problem is None and adds.stage == "work" and adds.waiting == {"join"}
    assert [s.input["text"] for s in adds.specs] == ["a", "b"]
    assert all(s.depends_on == ("split",) for s in adds.specs)


def test_a_list_over_max_each_is_the_tasks_failure_naming_the_stage() -> None:
    plan, nodes = planned()
    adds, problem = fan_outs(plan, nodes["split"].spec, output("split", parts=["a", "b", "c"]))
    assert adds == [] and problem is not None and "split" in problem


def test_a_rule_fires_once_and_not_past_the_depth_limit() -> None:
    plan, nodes = planned()
    (rule,) = plan.template.rules
    source = nodes["split"].spec
    assert rule_fires(plan, rule, source, output("split", text="plain"), nodes) is None
    added = rule_fires(plan, rule, source, output("split", text="an odd one"), nodes)
    assert isinstance(added, SubTaskSpec) and added.parent == "split"
    nodes[added.id] = node()
    assert rule_fires(plan, rule, source, output("split", text="an odd one"), nodes) is None
    shallow = plan.model_copy(
        update={"template": plan.template.model_copy(update={"max_depth": 0})}
    )
    del nodes[added.id]
    warning = rule_fires(shallow, rule, source, output("split", text="odd"), nodes)
    assert isinstance(warning, str) and "over the limit of 0" in warning


LOOP_YAML = """
name: drafts
stages:
  - {name: draft, capability: doc.extract.text, input: {text: $query}}
  - {name: judge, capability: doc.judge.text, depends_on: [draft], input: {text: $from.draft.text}}
loops:
  - {stage: draft, judge: judge, max_rounds: 2}
"""


def test_a_judge_that_finds_fault_starts_the_next_round_until_the_limit() -> None:
    plan, nodes = planned(LOOP_YAML)
    judge = nodes["judge"].spec
    assert feedback(plan, judge, output("judge", passed=True), nodes) is None
    again = feedback(plan, judge, output("judge", passed=False, feedback="more"), nodes)
    assert isinstance(again, NextRound) and again.generator in judge.depends_on
    assert again.new_judge.round == 2 and again.new_generator.stage == "draft"
    last = again.new_judge
    assert "after 2 round(s)" in str(feedback(plan, last, output(last.id, passed=False), nodes))


def test_depends_on_follows_dependencies_through_other_sub_tasks() -> None:
    _, nodes = planned()
    assert depends_on(nodes, "join", "split") and not depends_on(nodes, "split", "join")


# ---- the table: one record per sub-task ----------------------------------------------


def test_the_table_counts_what_settled_and_what_became_unsettled_again() -> None:
    plan, _ = planned(LOOP_YAML)
    dag = Dag()
    for sub in plan.subtasks:
        dag.add(sub, origin="ready")
    assert dag.take_fresh() == ["draft", "judge"] and dag.take_fresh() == []
    assert dag.nodes["draft"].dependents == ["judge"]
    draft = dag.nodes["draft"]
    dag.set(draft, SubTaskStatus.SUCCEEDED)
    assert (dag.settled, dag.unsettled) == (1, 0)
    dag.set(draft, SubTaskStatus.PENDING)
    assert (dag.settled, dag.unsettled) == (0, 1)


def test_a_new_round_stands_in_for_the_old_one_for_what_waited_on_it() -> None:
    plan, _ = planned(LOOP_YAML)
    dag = Dag()
    for sub in plan.subtasks:
        dag.add(sub, origin="ready")
    assert dag.settled_deps(dag.nodes["judge"]) is None  # the draft runs
    again = feedback(plan, dag.nodes["judge"].spec, output("judge", passed=False), dag.nodes)
    assert isinstance(again, NextRound)
    dag.add(again.new_generator, origin="feedback")
    dag.new_round("draft", again.new_generator.id)
    assert dag.waiting_on(again.new_generator.id) == dag.waiting_on("draft") == ["judge"]
    dag.set(dag.nodes[again.new_generator.id], SubTaskStatus.SUCCEEDED)
    dag.rounds_replaced()
    deps = dag.settled_deps(dag.nodes["judge"])
    assert deps is not None and [d.spec.id for d in deps] == [again.new_generator.id]


# ---- one owner of each piece of state ---------------------------------------------------

OWNERS = (
    "_scheduler",
    "_dag",
    "_sched_facts",
    "_failures",
    "_waits",
    "_expand",
    "_node",
    "_breaker",
    "_breakers",
    "_wait_table",
    "_growth",
    "_driver",
    "_host",
    "_adopting",
    "_outside",
    "_resuming",
)
"""The scheduler's and the driver's modules: their classes and the records they keep."""
POLICIES = ("_failures", "_waits", "_expand", "_breaker")
"""The scheduler's pure policies: decisions out, nothing written."""
MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "add", "discard"}
    | {"update", "setdefault", "sort", "reverse"}
)
CONTAINERS = ("dict", "list", "set", "deque")


def _self_attr(node: ast.expr) -> str | None:
    """`X` of `self.X`, `self.X[...]` (a write to either writes `self.X`)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.attr if node.value.id == "self" else None
    return None


def _targets(node: ast.AST) -> list[ast.expr]:
    found: list[ast.expr]
    match node:
        case ast.Assign(targets=targets) | ast.Delete(targets=targets):
            found = list(targets)
        case ast.AugAssign(target=target) | ast.AnnAssign(target=target):
            found = [target]
        case _:
            return []
    flat: list[ast.expr] = []
    while found:
        item = found.pop()
        if isinstance(item, ast.Tuple | ast.List):
            found += item.elts
        else:
            flat.append(item)
    return flat


def _is_container(value: ast.expr | None, annotation: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp):
        return True
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in CONTAINERS
    ):
        return True
    text = "" if annotation is None else ast.unparse(annotation)
    return text.startswith(CONTAINERS)


def _declared(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """What `cls` declares (its body, outside `if TYPE_CHECKING`, and its `__init__`)."""
    names: set[str] = set()
    containers: set[str] = set()
    for item in cls.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            names.add(item.target.id)
            if _is_container(item.value, item.annotation):
                containers.add(item.target.id)
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            for node in ast.walk(item):
                for target in _targets(node):
                    if isinstance(target, ast.Attribute) and _self_attr(target):
                        names.add(target.attr)
                        annotation = node.annotation if isinstance(node, ast.AnnAssign) else None
                        if _is_container(getattr(node, "value", None), annotation):
                            containers.add(target.attr)
    return names, containers


def _written(cls: ast.ClassDef, containers: set[str]) -> dict[str, int]:
    """Attributes of `self` that `cls`'s methods write, with a line of each."""
    found: dict[str, int] = {}
    for node in ast.walk(cls):
        for target in _targets(node):
            name = _self_attr(target)
            if name is not None:
                found.setdefault(name, getattr(node, "lineno", 0))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MUTATORS
            and (name := _self_attr(node.func.value)) in containers
        ):
            found.setdefault(name, node.lineno)
    return found


def violations(sources: dict[str, str]) -> list[str]:
    """Each `self.X` a class writes that it does not declare itself."""
    classes = [
        (module, cls)
        for module, source in sources.items()
        for cls in ast.walk(ast.parse(source))
        if isinstance(cls, ast.ClassDef)
    ]
    declared = {cls.name: _declared(cls) for _, cls in classes}
    containers = set().union(*(c for _, c in declared.values()))
    return [
        f"{module}.{cls.name} writes `self.{name}` (line {line}), declared by "
        + (", ".join(sorted(k for k, (n, _) in declared.items() if name in n)) or "no class")
        for module, cls in classes
        for name, line in sorted(_written(cls, containers).items())
        if name not in declared[cls.name][0]
    ]


def test_no_class_of_the_scheduler_or_driver_writes_state_another_declares() -> None:
    sources = {name: _source(name) for name in OWNERS}
    assert violations(sources) == []


def test_the_ownership_check_sees_a_mixin_writing_its_hosts_state() -> None:
    host = (
        "class Host(Mixin):\n    def __init__(self):\n"
        "        self.items = []\n        self.s = None\n"
    )
    mixin = (
        "class Mixin:\n    def grow(self):\n        self.items.append(1)\n"
        "    def swap(self, s):\n        self.s = s\n"
    )
    found = violations({"host": host, "mixin": mixin})
    assert found == [
        "mixin.Mixin writes `self.items` (line 3), declared by Host",
        "mixin.Mixin writes `self.s` (line 5), declared by Host",
    ]


def test_the_policies_write_nothing_and_their_decisions_are_frozen() -> None:
    for name in POLICIES:
        tree = ast.parse(_source(name))
        for node in ast.walk(tree):
            for target in _targets(node):
                assert not isinstance(target, ast.Attribute | ast.Subscript), (
                    f"`{name}` writes `{ast.unparse(target)}` (line {getattr(node, 'lineno', 0)})"
                )
            assert not isinstance(node, ast.Global | ast.Nonlocal), name
            if isinstance(node, ast.ClassDef):
                enum = any(ast.unparse(b).endswith("Enum") for b in node.bases)
                frozen = enum or any(
                    isinstance(d, ast.Call)
                    and any(
                        k.arg == "frozen" and ast.unparse(k.value) == "True" for k in d.keywords
                    )
                    for d in node.decorator_list
                )
                assert frozen, f"`{name}.{node.name}` is not a frozen dataclass"
