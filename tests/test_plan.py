import json

import pytest

from swarm_ray import (
    FanOut,
    InvalidPlanError,
    InvalidSpecError,
    NoTemplateMatchedError,
    Stage,
    TaskRequest,
    TaskTemplate,
    load_template,
    template_json_schema,
)
from swarm_ray.core.model._plan import expand, validate_plan
from swarm_ray.core.model._subtask import SubTaskSpec
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.runtime._migrations import request_v1_to_v2, template_v1_to_v2
from tests.support import PIPELINE_YAML, pipeline, registry

REQ = TaskRequest(
    query="compare", items=("a.pdf", "b.pdf"), params={"dimensions": ["battery", "motor"]}
)


def test_yaml_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE_YAML)
    template = load_template(path)
    assert [s.name for s in template.stages] == ["parse", "extract", "merge"]
    extract = template.stage("extract")  # per item, and over a parameter's list
    assert extract.fan_out is FanOut.PER_ITEM and extract.for_each == "$params.dimensions"


@pytest.mark.parametrize(
    ("yaml_text", "problem"),
    [
        ("name: x\nstages: []", "stages"),
        ("- just a list", "must be a mapping"),
        ("name: x\nstages: [{name: a, capability: a.b.c, depends_on: [zz]}]", "unknown stage `zz`"),
        (
            "name: x\nstages: [{name: a, capability: a.b.c, depends_on: [b]},"
            " {name: b, capability: a.b.c, depends_on: [a]}]",
            "cycle",
        ),
        (
            "name: x\nstages: [{name: a, capability: a.b.c}, {name: a, capability: a.b.c}]",
            "repeated",
        ),
        ("name: x\naggregate: q\nstages: [{name: a, capability: a.b.c}]", "aggregate"),
        (
            "name: x\nstages: [{name: a, capability: a.b.c}, {name: b, capability: a.b.c}]\n"
            "rules: [{name: r, when_stage: a, field: f, contains: z, trigger: b}]",
            "triggered: true",
        ),
        (
            "name: x\nstages: [{name: a, capability: a.b.c}, {name: b, capability: a.b.c}]\n"
            "loops: [{stage: a, judge: b}]",
            "must depend on",
        ),
        ("name: x\nstages: [{name: a, capability: a.b.c, fan_out: sometimes}]", "fan_out"),
        ("name: x\nstages: [{name: a, capability: a.b.c, when: yes}]", "`stages.0.when`"),
        (
            "name: x\naggregate: a\nstages: [{name: a, capability: a.b.c, when: $params.p}]",
            "`a` is the aggregate stage and cannot be conditional",
        ),
        (
            "name: x\nstages: [{name: a, capability: a.b.c},"
            " {name: b, capability: a.b.c, triggered: true, when: $params.p}]\n"
            "rules: [{name: r, when_stage: a, field: f, contains: z, trigger: b}]",
            "`b` is a triggered stage",
        ),
        (
            "name: x\nstages: [{name: a, capability: a.b.c, when: $params.p},"
            " {name: b, capability: a.b.c, depends_on: [a]}]\nloops: [{stage: a, judge: b}]",
            "`a` is a stage of a feedback loop",
        ),
        (
            "name: x\nstages: [{name: g, capability: a.b.c},"
            " {name: j, capability: a.b.c, depends_on: [g]},"
            " {name: w, capability: a.b.c, depends_on: [g], for_each: $from.g.items}]\n"
            "loops: [{stage: g, judge: j}]",
            "`w` fans out over `g`, which its feedback loop runs again each round",
        ),
        ("name: x\nstages: [{name: a, capability: a.b.c}]\n  bad: [", "not valid YAML"),
    ],
)
def test_invalid_templates_name_the_problem(yaml_text: str, problem: str) -> None:
    with pytest.raises(InvalidSpecError, match="template '<string>'") as info:
        TaskTemplate.from_yaml(yaml_text)
    assert problem in str(info.value)


def test_missing_template_file() -> None:
    with pytest.raises(InvalidSpecError, match="cannot read template file"):
        load_template("/nonexistent/t.yaml")


def test_template_json_schema_for_editors() -> None:
    schema = template_json_schema()
    assert schema["title"] == "TaskTemplate"
    assert {"stages", "rules", "loops", "aggregate"} <= set(schema["properties"])


def test_expansion_shapes_and_partial_rollout_dependencies() -> None:
    plan = expand(pipeline(), REQ, task_id="t1")
    by_id = plan.by_id()
    assert list(by_id) == [
        "parse[0]",
        "parse[1]",
        "extract[0,battery]",
        "extract[0,motor]",
        "extract[1,battery]",
        "extract[1,motor]",
        "merge",
    ]
    # per item: extract of item 1 waits only for parse of item 1, not the whole stage
    assert by_id["extract[1,motor]"].depends_on == ("parse[1]",)
    assert by_id["parse[0]"].input == {"text": "a.pdf"}
    assert by_id["extract[0,battery]"].input == {
        "text": {"$from": "parse", "path": "text", "many": False}
    }
    assert by_id["merge"].depends_on == tuple(i for i in by_id if i.startswith("extract"))
    assert by_id["merge"].input == {"parts": {"$from": "extract", "path": "text", "many": True}}
    assert by_id["merge"].required and by_id["merge"].partial_ok
    assert not by_id["parse[0]"].required
    validate_plan(plan, registry())


@pytest.mark.parametrize("flag", [None, False, True])
def test_a_conditional_stage_is_expanded_only_when_its_parameter_is_true(
    flag: bool | None,
) -> None:
    template = TaskTemplate.from_yaml(PIPELINE_YAML)
    stages = [
        s.model_copy(update={"when": "$params.deep"}) if s.name == "extract" else s
        for s in template.stages
    ]
    template = template.model_copy(update={"stages": tuple(stages)})
    params = {**REQ.params, **({} if flag is None else {"deep": flag})}
    plan = expand(template, REQ.model_copy(update={"params": params}), task_id="t")
    by_id = plan.by_id()
    extracts = [i for i in by_id if i.startswith("extract")]
    assert len(extracts) == (4 if flag else 0)
    # The stage after it waits for exactly the sub-tasks that exist: none when left out.
    assert by_id["merge"].depends_on == tuple(extracts)
    validate_plan(plan, registry())


def test_placeholders() -> None:
    # Written with the retired `$dimensions` and top-level `dimensions`, read through the
    # record migration (the core no longer reads them).
    stage = {
        "name": "a",
        "capability": "doc.parse.text",
        "input": {
            "text": "$query",
            "k": "$params.k",
            "all": "$items",
            "d": "$dimensions",
            "lit": "plain",
            "nested": [{"x": "$query"}],
        },
    }
    template = TaskTemplate.model_validate(template_v1_to_v2({"name": "p", "stages": [stage]}))
    old = {"query": "q", "items": (1, 2), "dimensions": ("x",), "params": {"k": 5}}
    plan = expand(template, TaskRequest.model_validate(request_v1_to_v2(old)), task_id="t")
    assert plan.subtasks[0].input == {
        "text": "q",
        "k": 5,
        "all": [1, 2],
        "d": ["x"],
        "lit": "plain",
        "nested": [{"x": "q"}],
    }


def test_an_unknown_one_word_placeholder_is_refused() -> None:
    stage = {"name": "a", "capability": "doc.parse.text", "input": {"d": ["$dimension"]}}
    with pytest.raises(InvalidSpecError, match=r"unknown placeholder '\$dimension'"):
        TaskTemplate.from_yaml(json.dumps({"name": "p", "stages": [stage]}))


def test_from_placeholder_must_name_a_dependency() -> None:
    template = TaskTemplate(
        name="p",
        stages=(
            Stage(name="a", capability="doc.parse.text"),
            Stage(name="b", capability="doc.parse.text", input={"text": "$from.a"}),
        ),
    )
    with pytest.raises(InvalidPlanError, match="not depended on"):
        expand(template, TaskRequest(query="q"), task_id="t")


def _plan_with(*subtasks: SubTaskSpec, max_depth: int = 3):  # type: ignore[no-untyped-def]
    base = expand(pipeline(), REQ, task_id="t1")
    template = base.template.model_copy(update={"max_depth": max_depth})
    return base.model_copy(update={"subtasks": subtasks, "template": template})


def test_plan_validator_errors() -> None:
    reg = registry()
    a = SubTaskSpec(id="a", stage="s", capability_id="doc.parse.text")
    with pytest.raises(InvalidPlanError, match="unknown capability `no.such.cap`"):
        validate_plan(_plan_with(a.model_copy(update={"capability_id": "no.such.cap"})), reg)
    with pytest.raises(InvalidPlanError, match="depends on missing `zz`"):
        validate_plan(_plan_with(a.model_copy(update={"depends_on": ("zz",)})), reg)
    b = SubTaskSpec(id="b", stage="s", capability_id="doc.parse.text", depends_on=("a",))
    with pytest.raises(InvalidPlanError, match="cycle"):
        validate_plan(_plan_with(a.model_copy(update={"depends_on": ("b",)}), b), reg)
    with pytest.raises(InvalidPlanError, match="repeated"):
        validate_plan(_plan_with(a, a), reg)
    with pytest.raises(InvalidPlanError, match="no sub-tasks"):
        validate_plan(_plan_with(), reg)
    with pytest.raises(InvalidPlanError, match="missing parent"):
        validate_plan(_plan_with(a.model_copy(update={"parent": "ghost"})), reg)
    chain = [
        SubTaskSpec(
            id=f"n{i}", stage="s", capability_id="doc.parse.text", parent=f"n{i - 1}" if i else None
        )
        for i in range(4)
    ]
    validate_plan(_plan_with(*chain, max_depth=3), reg)
    with pytest.raises(InvalidPlanError, match="nests 3 deep, over the limit of 2"):
        validate_plan(_plan_with(*chain, max_depth=2), reg)
    loop = [
        SubTaskSpec(id="x", stage="s", capability_id="doc.parse.text", parent="y"),
        SubTaskSpec(id="y", stage="s", capability_id="doc.parse.text", parent="x"),
    ]
    with pytest.raises(InvalidPlanError, match="parent cycle"):
        validate_plan(_plan_with(*loop), reg)


def test_router_by_name_and_keywords() -> None:
    other = TaskTemplate(
        name="video",
        keywords=("video", "boss fights"),
        stages=(Stage(name="a", capability="doc.parse.text"),),
    )
    router = TemplateRouter([pipeline(), other])
    assert router.route(TaskRequest(query="please compare these brochures")).name == "pipeline"
    assert router.route(TaskRequest(query="rate the boss fights in this clip")).name == "video"
    assert router.route(TaskRequest(query="anything", template="video")).name == "video"
    with pytest.raises(NoTemplateMatchedError, match="known templates: pipeline, video"):
        router.route(TaskRequest(query="bake a cake"))
    with pytest.raises(NoTemplateMatchedError, match="`nope` is not registered"):
        router.route(TaskRequest(template="nope"))
    with pytest.raises(InvalidSpecError, match="already registered"):
        router.add(pipeline())


def test_request_needs_query_or_template() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="`query` or a `template`"):
        TaskRequest()
