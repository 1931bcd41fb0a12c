"""LLM layer without a model: scripted engine, structured output, planner, accounting."""

from __future__ import annotations

import asyncio
import importlib
import json
import pkgutil
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import BaseModel

import swarm_ray.llm as llm
from swarm_ray import TaskRequest
from swarm_ray.core.model._errors import ErrorCode, InvalidSpecError
from swarm_ray.core.model._plan import validate_plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._subtask import SubTaskResult, TokenUsage
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.llm import (
    EngineConfig,
    GenerationParams,
    LLMAgent,
    LLMAppArgs,
    LLMDeploymentOptions,
    LLMPlanner,
    Message,
    ScriptedEngine,
    StructuredReply,
    StructuredRequest,
    UsageReport,
    build_llm_app,
    generate_structured,
    load_engine,
)
from swarm_ray.llm._planner import draft_schema
from swarm_ray.llm._vllm import gpu_memory_share

ASK = [Message(role="user", content="rate this review")]


class Review(BaseModel):
    sentiment: Literal["positive", "negative"]
    stars: int


def test_llm_package_exports_every_private_name() -> None:
    missing = []
    for info in pkgutil.iter_modules(llm.__path__):
        module = importlib.import_module(f"swarm_ray.llm.{info.name}")
        missing += [n for n in getattr(module, "__all__", ()) if n not in llm.__all__]
    assert missing == []
    assert list(llm.__all__) == sorted(llm.__all__, key=lambda n: (not n[0].isupper(), n))


def test_scripted_engine_cycles_and_counts_words() -> None:
    engine = ScriptedEngine(["one two three", "four"])
    first = engine.complete(ASK, GenerationParams(max_tokens=2))
    second = engine.complete(ASK, GenerationParams())
    third = engine.complete(ASK, GenerationParams())
    assert (first.text, first.finish_reason) == ("one two", "length")
    assert (second.text, third.text) == ("four", "one two three")
    assert first.usage.prompt_tokens == 3 and first.usage.completion_tokens == 2
    assert first.usage.calls == 1
    assert len(engine.calls) == 3


def test_structured_output_validates_a_pydantic_model() -> None:
    engine = ScriptedEngine(['{"sentiment": "positive", "stars": 4}'])
    reply = generate_structured(engine, ASK, Review, GenerationParams())
    assert reply.ok and reply.value == {"sentiment": "positive", "stars": 4}
    assert engine.calls[0][1] == Review.model_json_schema()  # decoding was constrained


def test_an_answer_failing_validation_is_a_structured_error() -> None:
    engine = ScriptedEngine(['{"sentiment": "meh", "stars": "x"}'])
    reply = generate_structured(engine, ASK, Review, GenerationParams())
    assert reply.value is None and reply.error is not None
    assert reply.error.code is ErrorCode.INVALID_OUTPUT
    assert {e["field"] for e in reply.error.details["errors"]} == {"sentiment", "stars"}
    assert reply.error.details["raw"] == '{"sentiment": "meh", "stars": "x"}'
    assert reply.error.details["usage"]["calls"] == 1


def test_json_schema_targets_are_checked_with_jsonschema() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}},
        "required": ["n"],
    }

    def ask(reply: str, max_tokens: int = 16) -> StructuredReply:
        params = GenerationParams(max_tokens=max_tokens)
        return generate_structured(ScriptedEngine([reply]), ASK, schema, params)

    good, bad, cut = ask('{"n": 3}'), ask('{"n": -1}'), ask('{"n": 1 }', max_tokens=1)
    assert good.value == {"n": 3}
    assert bad.error is not None and bad.error.details["errors"][0]["field"] == "n"
    assert cut.error is not None and "cut at `max_tokens`" in cut.error.message


def test_an_invalid_schema_is_refused_before_any_call() -> None:
    engine = ScriptedEngine(["{}"])
    with pytest.raises(InvalidSpecError, match="JSON Schema is invalid"):
        generate_structured(engine, ASK, {"type": "nonsense"}, GenerationParams())
    assert engine.calls == []


def test_vllm_memory_share_follows_the_gpu_fraction() -> None:
    assert gpu_memory_share(0.25, 0.9) == 0.225
    assert gpu_memory_share(2, 0.9) == 0.9  # vLLM's share is per GPU
    with pytest.raises(InvalidSpecError, match="needs a GPU share"):
        load_engine(EngineConfig(kind="vllm", model="/models/x"), num_gpus=0)
    with pytest.raises(InvalidSpecError, match="local model directory"):
        load_engine(EngineConfig(kind="vllm", model="/no/such/dir"), num_gpus=0.25)


def test_deployment_options_fixed_or_autoscaling() -> None:
    fixed = LLMDeploymentOptions(min_replicas=4, max_replicas=4).serve_options()
    scaled = LLMDeploymentOptions(min_replicas=1, max_replicas=3).serve_options()
    assert fixed["num_replicas"] == 4 and "autoscaling_config" not in fixed
    assert scaled["autoscaling_config"]["max_replicas"] == 3 and "num_replicas" not in scaled


def test_agent_reports_health_and_fails_its_check_after_three_bad_answers() -> None:
    agent = LLMAgent.func_or_class(EngineConfig(kind="scripted", script=("not json",)))
    request = StructuredRequest(messages=tuple(ASK), target=Review)
    for _ in range(3):
        reply = asyncio.run(agent.generate_json(request))
        assert reply.error is not None
    health = agent.health()
    assert health["status"] == "unhealthy" and health["model"] == "scripted"
    assert health["calls"] == 3 and health["consecutive_failures"] == 3
    with pytest.raises(RuntimeError, match="failed 3 calls in a row"):
        agent.check_health()


def test_usage_rolls_up_per_agent_subtask_and_task() -> None:
    def result(sid: str, agent: str, attempt: int, tokens: int) -> SubTaskResult:
        usage = TokenUsage(prompt_tokens=1, completion_tokens=tokens, calls=1, seconds=0.5)
        ids = {"task_id": "t", "subtask_id": sid, "capability_id": "c"}
        return SubTaskResult(**ids, attempt=attempt, agent=agent, usage=usage)

    report = UsageReport.of(
        [result("a", "r1", 1, 5), result("a", "r2", 2, 7), result("b", "r1", 1, 11)]
    )
    assert report.task == TokenUsage(prompt_tokens=3, completion_tokens=23, calls=3, seconds=1.5)
    assert report.subtasks["a"].completion_tokens == 12 and report.subtasks["a"].calls == 2
    assert report.agents["r1"].completion_tokens == 16 and report.agents["r2"].calls == 1


# ---- planner -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def testing() -> tuple[Registry, TemplateRouter]:
    return load_catalogs(["swarm_ray.testing:testing_catalog"])


REQUEST = TaskRequest(query="echo fanout", items=("a", "b"))


def _draft(*stages: dict[str, Any]) -> str:
    return json.dumps({"stages": list(stages)})


ECHO = {
    "name": "echo",
    "capability": "test.echo.text",
    "fan_out": "per_item",
    "depends_on": [],
    "input": {"text": "$item"},
}
JOIN = {
    "name": "join",
    "capability": "test.join.texts",
    "fan_out": "once",
    "depends_on": ["echo"],
    "input": {"parts": "$from.echo.text"},
}


def test_draft_schema_limits_capabilities_to_registered_ids(
    testing: tuple[Registry, TemplateRouter],
) -> None:
    registry, _ = testing
    schema = draft_schema(registry.ids())
    assert schema["properties"]["stages"]["items"]["properties"]["capability"]["enum"] == (
        registry.ids()
    )


def test_planner_accepts_a_valid_draft(testing: tuple[Registry, TemplateRouter]) -> None:
    registry, router = testing
    planner = LLMPlanner(ScriptedEngine([_draft(ECHO, JOIN)]), registry, router)
    plan = planner.plan(REQUEST, task_id="t1")
    validate_plan(plan, registry)
    assert plan.template.name == "llm-plan" and plan.warnings == ()
    assert [s.id for s in plan.subtasks] == ["echo[0]", "echo[1]", "join"]
    assert planner.usage.calls == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (_draft({**ECHO, "depends_on": ["join"]}, JOIN), "dependency cycle"),
        (_draft({**ECHO, "capability": "test.nope.x"}), "is not one of"),
        (_draft({**ECHO, "fan_out": "once", "input": {"text": 3}}), "`text`"),
        (_draft({**JOIN, "depends_on": ["ghost"]}), "unknown stage `ghost`"),
        ('{"stages": [', "not JSON"),
    ],
    ids=["cycle", "unknown-capability", "bad-input", "missing-dependency", "cut-json"],
)
def test_a_refused_plan_falls_back_to_the_template_router_with_a_warning(
    testing: tuple[Registry, TemplateRouter], reply: str, reason: str
) -> None:
    registry, router = testing
    plan = LLMPlanner(ScriptedEngine([reply]), registry, router).plan(REQUEST, task_id="t2")
    validate_plan(plan, registry)
    assert plan.template.name == "echo_fanout"
    (warning,) = plan.warnings
    assert "fell back to template `echo_fanout`" in warning and reason in warning


@pytest.mark.parametrize("name", ["llm-vllm.yaml", "llm-cpu.yaml"])
def test_serve_configs_build_the_declared_llm_apps(name: str) -> None:
    import yaml
    from ray.serve.schema import ServeDeploySchema

    root = Path(__file__).resolve().parent.parent
    config = ServeDeploySchema.model_validate(
        yaml.safe_load((root / "deployments" / name).read_text())
    )
    (app_config,) = config.applications
    assert app_config.import_path == "swarm_ray.llm:build_llm_app"
    args = LLMAppArgs.model_validate(app_config.args)
    deployment = build_llm_app(args)._bound_deployment
    assert deployment.ray_actor_options == args.resources.ray_options()
    if name == "llm-vllm.yaml":
        assert args.engine.kind == "vllm" and deployment.num_replicas == 4
        assert deployment.ray_actor_options["num_gpus"] == 0.25
        assert gpu_memory_share(0.25, args.engine.gpu_memory_headroom) == 0.225
    else:
        assert args.engine.kind == "llama_cpp"
        assert deployment._deployment_config.autoscaling_config.max_replicas == 4


def test_an_endpoints_prices_give_each_completion_its_cost() -> None:
    from swarm_ray.llm import (
        EngineConfig,
        EngineKind,
        GenerationParams,
        Message,
        Prices,
        load_engine,
    )

    script = ("four words of reply",)
    plain = load_engine(EngineConfig(kind=EngineKind.SCRIPTED, script=script))
    prices = Prices(prompt_per_million=2_000_000, completion_per_million=4_000_000)
    priced = load_engine(EngineConfig(kind=EngineKind.SCRIPTED, script=script, prices=prices))
    messages = [Message(role="user", content="one two three")]
    free = plain.complete(messages, GenerationParams())
    paid = priced.complete(messages, GenerationParams())
    assert free.usage.cost == 0 and paid.text == free.text and priced.model == plain.model
    tokens = (free.usage.prompt_tokens, free.usage.completion_tokens)
    assert tokens[0] > 0 and tokens[1] > 0
    assert paid.usage.cost == pytest.approx(2 * tokens[0] + 4 * tokens[1])
    assert (paid.usage + paid.usage).cost == pytest.approx(2 * paid.usage.cost)
    assert hasattr(priced, "complete_tools") == hasattr(plain, "complete_tools")


def test_an_attempt_keeps_its_engines_calls_for_the_trace_and_no_more_than_its_bound() -> None:
    """Inside an attempt every completion of a loaded engine is noted (`SubTaskResult.calls`);
    outside one, nothing is; past `MAX_CALL_RECORDS` the rest are dropped."""
    from swarm_ray.core.model._subtask import MAX_CALL_RECORDS, CallRecord
    from swarm_ray.llm import EngineConfig, EngineKind, GenerationParams, Message, load_engine
    from swarm_ray.runtime import _agent

    engine = load_engine(EngineConfig(kind=EngineKind.SCRIPTED, script=("two words",)))
    messages = [Message(role="user", content="hi")]
    engine.complete(messages, GenerationParams())  # outside an attempt: not kept anywhere
    calls: list[CallRecord] = []
    token = _agent._CALLS.set(calls)
    try:
        for _ in range(MAX_CALL_RECORDS + 5):
            engine.complete(messages, GenerationParams())
    finally:
        _agent._CALLS.reset(token)
    assert len(calls) == MAX_CALL_RECORDS
    first = calls[0]
    assert (first.kind, first.name, first.provider) == ("llm", "scripted", "scripted")
    assert first.error is None
    assert first.output_tokens == 2 and first.started_at <= first.finished_at
