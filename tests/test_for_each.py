"""Fan-out over a list computed along the way (`for_each`), without Ray."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from swarm_ray import InvalidPlanError, InvalidSpecError, TaskRequest, TaskTemplate
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._signals import Dispatch, FailTask, FannedOut, FinishTask, Start
from swarm_ray.core.scheduling._scheduler import Scheduler
from tests.support import done, failed, registry, spec


class ListOut(BaseModel):
    parts: list[str]


class OutcomesIn(BaseModel):
    parts: list[Any]


SPLIT_THEN_EACH = """
name: each
aggregate: join
stages:
  - name: split
    capability: doc.split.text
    input: {text: $query}
  - name: work
    capability: doc.parse.text
    depends_on: [split]
    for_each: $from.split.parts
    max_each: 5
    input: {text: $each}
  - name: join
    capability: doc.merge.all
    depends_on: [split, work]
    partial_ok: true
    input: {parts: $from.work.@outcome}
"""


def _scheduler(text: str = SPLIT_THEN_EACH, **request: Any) -> Scheduler:
    reg = registry(
        spec("doc.split.text", output_model=ListOut),
        spec("doc.merge.all", input_model=OutcomesIn),
    )
    template = TaskTemplate.from_yaml(text)
    req = TaskRequest(template=template.name, query=request.pop("query", "a b c"), **request)
    return Scheduler(expand(template, req, task_id="t1"), reg)


def _runs(intents: list[Any]) -> list[Dispatch]:
    return [i for i in intents if isinstance(i, Dispatch)]


def test_a_stage_fans_out_over_an_upstream_list_when_it_arrives() -> None:
    s = _scheduler()
    assert [i.subtask_id for i in _runs(s.handle(Start(at=0)))] == ["split"]
    [split] = s.outstanding()
    out = s.handle(done(split, output={"parts": ["a", "b", "c"]}))
    [fanned] = [i for i in out if isinstance(i, FannedOut)]
    assert fanned.added == ("work[0]", "work[1]", "work[2]") and fanned.source == "split"
    works = _runs(out)
    assert [(w.subtask_id, w.input) for w in works] == [
        ("work[0]", {"text": "a", "feedback": None}),
        ("work[1]", {"text": "b", "feedback": None}),
        ("work[2]", {"text": "c", "feedback": None}),
    ]
    s.handle(done(works[0], "A"))
    s.handle(failed(works[1], ErrorCode.INVALID_INPUT))  # not retried: settles failed
    out = s.handle(done(works[2], "C"))
    [join] = _runs(out)  # waited for every element, the failed one included
    outcomes = join.input["parts"]
    assert [(o["each"], o["status"], o["output"]) for o in outcomes] == [
        (0, "succeeded", {"text": "A"}),
        (1, "failed", None),
        (2, "succeeded", {"text": "C"}),
    ]
    assert "work[1] broke" in outcomes[1]["error"] and outcomes[0]["watermark"] == ""
    assert isinstance(s.handle(done(join, output={"text": "ok"}))[-1], FinishTask)


def test_an_expansion_replays_to_the_same_state() -> None:
    s = _scheduler()
    s.handle(Start(at=0))
    [split] = s.outstanding()
    s.handle(done(split, output={"parts": ["x", "y"]}))
    replayed = Scheduler.replay(s.plan, s._registry, s.log)
    assert replayed.snapshot() == s.snapshot()


def test_an_empty_list_runs_the_dependents_at_once() -> None:
    s = _scheduler()
    s.handle(Start(at=0))
    [split] = s.outstanding()
    [join] = _runs(s.handle(done(split, output={"parts": []})))
    assert join.subtask_id == "join" and join.input["parts"] == []


@pytest.mark.parametrize(
    ("parts", "problem"),
    [("not a list", "must be a list, got str"), (list("abcdef"), "6 elements")],
)
def test_a_bad_or_too_long_list_fails_the_task_by_name(parts: Any, problem: str) -> None:
    s = _scheduler()
    s.handle(Start(at=0))
    [split] = s.outstanding()
    out = s.handle(done(split, output={"parts": parts}))
    [fail] = [i for i in out if isinstance(i, FailTask)]
    assert "stage `work`" in fail.reason and problem in fail.reason


def test_for_each_over_a_parameter_expands_with_the_plan() -> None:
    text = """
name: params_each
stages:
  - name: work
    capability: doc.parse.text
    for_each: $params.words
    input: {text: $each}
"""
    s = _scheduler(text, params={"words": ["p", "q"]})
    assert [(i.subtask_id, i.input) for i in _runs(s.handle(Start(at=0)))] == [
        ("work[0]", {"text": "p", "feedback": None}),
        ("work[1]", {"text": "q", "feedback": None}),
    ]
    with pytest.raises(InvalidPlanError, match="must be a list"):
        _scheduler(text, params={"words": "p"})


@pytest.mark.parametrize(
    ("yaml_stages", "problem"),
    [
        (
            "  - {name: a, capability: x.y.z}\n"
            "  - {name: b, capability: x.y.z, for_each: $from.a.parts}\n",
            "must depend on it",
        ),
        (
            "  - {name: a, capability: x.y.z, fan_out: per_item}\n"
            "  - {name: b, capability: x.y.z, depends_on: [a], for_each: $from.a.parts}\n",
            "must be a once-stage",
        ),
        (
            "  - {name: a, capability: x.y.z}\n"
            "  - {name: b, capability: x.y.z, depends_on: [a], for_each: $from.a.parts}\n"
            "  - {name: c, capability: x.y.z, depends_on: [b], fan_out: per_item}\n",
            "its `fan_out` must be `once`",
        ),
    ],
)
def test_for_each_templates_that_cannot_expand_are_refused(yaml_stages: str, problem: str) -> None:
    with pytest.raises(InvalidSpecError, match=problem):
        TaskTemplate.from_yaml(f"name: bad\nstages:\n{yaml_stages}")
