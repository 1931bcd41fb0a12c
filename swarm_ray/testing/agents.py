"""Test doubles for agents: tool-tagged capabilities, a child-calling agent, scripted tool agents.

`agents_catalog` (pass `"swarm_ray.testing.agents:agents_catalog"` to `connect`) registers:

- `test.tool.echo`: `swarm_ray.testing.echo`, tagged `tool` (agents may call it);
- `test.agent.children`: calls `run_child` itself, for tests of the orchestrator's hook;
- `test.api.weather` (template `weather_once`): an `HttpAdapter` on the flaky weather
  API of `llm_stubs.flaky_api_app`, at the port in `SWARM_RAY_TEST_API_PORT`;
- `test.limits.run` (template `limits_fanout`): allocates, spins or forks without end
  under hard limits, or answers `ok`;
- `test.unsafe.say`: says its text unchanged, `repeat` times (the sanitizer's prey),
  falling back to `test.tool.echo`;
- `test.unsafe.code` (template `code_once`): says its text as a `CodeField`, the Python
  a model could be talked into writing (no fallback);
- `test.agent.scripted`: the tool agent on an `LLMAgent` whose model is the scripted
  brain (`llm_stubs.scripted_brain`: the request's task says which tools it calls), with the
  demo MCP server declared as `demo`;
- `test.research.row` and the template `wide_research_scripted`: wide research with the
  same scripted brain;
- templates `children_once` and `scripted_agent_once` running those agents once, their
  inputs taken from the request's `params`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel, Field

from swarm_ray import HttpAdapter
from swarm_ray.agent import ChildOutcome, CodeField, run_child
from swarm_ray.core.model._capability import CapabilitySpec, ExecutorKind, Resources, RetryPolicy
from swarm_ray.core.model._template import TaskTemplate
from swarm_ray.core.planning._catalog import Catalog
from swarm_ray.llm._settings import McpServer
from swarm_ray.llm._tool_agent import ToolAgentIn, ToolAgentOut
from swarm_ray.llm._wide import RowIn, RowOut, wide_template
from swarm_ray.testing import EchoIn, EchoOut
from swarm_ray.testing.llm_stubs import BRAIN

__all__: list[str] = []

DEMO = McpServer.stdio(sys.executable, "-m", "swarm_ray.testing.mcp_demo")
"""The project's demo MCP server over stdio."""


class ScriptedAgentIn(ToolAgentIn):
    """The tool agent's input, with the demo MCP server registered as `demo`."""

    MCP_SERVERS = {"demo": DEMO}


class ScriptedRowIn(RowIn):
    """The row agent's input, with the demo MCP server registered as `demo`."""

    MCP_SERVERS = {"demo": DEMO}


class ChildrenIn(BaseModel):
    """Input of `test.agent.children`."""

    calls: list[dict[str, Any]] = Field(default_factory=list)
    """`{"capability": ..., "input": {...}}` to run as children, in order."""
    key: str | None = None
    """Give every call this key (so the same child is asked for twice)."""


class ChildrenOut(BaseModel):
    """Output of `test.agent.children`."""

    outcomes: list[ChildOutcome]
    """Each child's outcome, or an error outcome when the orchestrator refused it."""
    refusals: list[str]
    """Errors raised by `run_child` (code: message)."""


def call_children(data: ChildrenIn) -> ChildrenOut:
    """Run each call as a child sub-task, one after another."""
    from swarm_ray.core.model._errors import SwarmError

    outcomes, refusals = [], []
    for call in data.calls:
        try:
            outcomes.append(run_child(call["capability"], call["input"], key=data.key))
        except SwarmError as exc:
            refusals.append(f"{exc.code}: {exc.message}")
    return ChildrenOut(outcomes=outcomes, refusals=refusals)


class SayIn(EchoIn):
    """Input of `test.unsafe.say`."""

    repeat: int = Field(default=1, ge=1, le=64)
    """Say the text this many times over (an output longer than a request's strings)."""


class SayOut(BaseModel):
    """Output of `test.unsafe.say`."""

    text: str
    """The input text, unchanged (whatever it holds), `repeat` times over."""


def say(data: SayIn) -> SayOut:
    """Say the text as given: a stand-in for a model talked into something dangerous."""
    return SayOut(text=data.text * data.repeat)


class CodeOut(BaseModel):
    """Output of `test.unsafe.code`."""

    code: CodeField
    """The input text as Python code (the sanitizer parses and checks it)."""


def say_code(data: EchoIn) -> CodeOut:
    """Say the text as code: a stand-in for a model that writes code it was told to."""
    return CodeOut(code=data.text)


class RunawayIn(BaseModel):
    """Input of `test.limits.run`."""

    action: str
    """`ok`, `alloc` (allocate without end), `spin` (burn CPU) or `bomb` (a fork bomb)."""


class RunawayOut(BaseModel):
    """Output of `test.limits.run` (only `ok` gets here)."""

    pid: int
    """The limited child process that ran it."""
    uid: int
    """Its user (`nobody` when the agent runs as root)."""


def runaway(data: RunawayIn) -> RunawayOut:
    """Misbehave as asked: what hard limits must stop without harm to anything else."""
    import os

    if data.action == "alloc":
        blocks = []
        while True:
            blocks.append(bytearray(8 * 2**20))
    if data.action == "spin":
        while True:
            pass
    if data.action == "bomb":
        while True:
            os.fork()
    return RunawayOut(pid=os.getpid(), uid=os.getuid())


class WeatherIn(BaseModel):
    """Input of `test.api.weather`: the request schema of the flaky weather API."""

    city: str
    """The city (goes into the URL's path, quoted)."""
    units: str = "metric"
    """Sent in the query string."""


class Weather(BaseModel):
    """Output of `test.api.weather`: the answer schema."""

    city: str | None
    """The city the API answered for (None in the fallback)."""
    temp_c: float | None
    """The temperature (None in the fallback)."""
    source: str = "api"
    """`api`, or `fallback` while the API is down."""


weather = HttpAdapter(
    url="http://127.0.0.1:${SWARM_RAY_TEST_API_PORT}/v1/current/{city}",
    method="GET",
    query=("units",),
    response_model=Weather,
    response_path="data",
    timeout_s=1.0,
    failure_threshold=2,
    cooldown_s=2.0,
    fallback={"city": None, "temp_c": None, "source": "fallback"},
)
"""The flaky weather API (`llm_stubs.flaky_api_app`) on the port the tests chose."""


def scripted_agent_app(spec: CapabilitySpec) -> Any:
    """An `LLMAgent` whose engine is the scripted brain, running `spec`'s sub-tasks."""
    from swarm_ray.agent import deployment_names
    from swarm_ray.llm._deployment import LLMDeploymentOptions, llm_app
    from swarm_ray.llm._engine import EngineConfig

    config = EngineConfig(kind="scripted", script=("call:" + BRAIN,))
    options = LLMDeploymentOptions(max_ongoing_requests=16)
    name = deployment_names(spec)[1]
    return llm_app(config, resources=spec.resources, options=options, name=name, spec=spec)


def agents_catalog() -> Catalog:
    """The capabilities and template above."""
    scripted = {
        "executor": ExecutorKind.SERVE,
        "deployment": "swarm_ray.testing.agents:scripted_agent_app",
        "resources": Resources(num_cpus=0.1),
        "retry": RetryPolicy(max_attempts=1),
        "timeout_s": 120.0,
        "tags": ("llm", "agent"),
    }
    return Catalog(
        capabilities=(
            CapabilitySpec(
                id="test.tool.echo",
                description="Echo a text upper-cased (a tool for agents; for tests).",
                input_model=EchoIn,
                output_model=EchoOut,
                entrypoint="swarm_ray.testing:echo",
                resources=Resources(num_cpus=0.1, max_concurrency=4),
                retry=RetryPolicy(max_attempts=2, backoff_s=0.05),
                tags=("tool",),
            ),
            CapabilitySpec(
                id="test.unsafe.say",
                description="Say a text unchanged; falls back to `test.tool.echo` (for tests).",
                input_model=SayIn,
                output_model=SayOut,
                entrypoint="swarm_ray.testing.agents:say",
                resources=Resources(num_cpus=0.1),
                retry=RetryPolicy(max_attempts=2, backoff_s=0.05),
                fallback="test.tool.echo",
            ),
            CapabilitySpec(
                id="test.unsafe.code",
                description="Say a text as Python code (for tests).",
                input_model=EchoIn,
                output_model=CodeOut,
                entrypoint="swarm_ray.testing.agents:say_code",
                resources=Resources(num_cpus=0.1),
                retry=RetryPolicy(max_attempts=1),
            ),
            weather.spec(
                "test.api.weather",
                "Current weather of a city from a third-party API (for tests).",
                WeatherIn,
                "swarm_ray.testing.agents:weather",
                retry=RetryPolicy(max_attempts=1),
            ),
            CapabilitySpec(
                id="test.limits.run",
                description="Misbehave under hard limits (for tests).",
                input_model=RunawayIn,
                output_model=RunawayOut,
                entrypoint="swarm_ray.testing.agents:runaway",
                resources=Resources(
                    num_cpus=0.1,
                    # Small enough that filling it costs far less than the CPU limit:
                    # 256 MiB took 0.2 s of CPU here alone, and over 1 s once in a full
                    # run, where zeroing pages competes for a loaded machine's memory.
                    max_memory_bytes=64 * 2**20,
                    max_cpu_s=1.0,
                    max_processes=16,
                ),
                retry=RetryPolicy(max_attempts=1),
                timeout_s=60.0,
            ),
            CapabilitySpec(
                id="test.agent.children",
                description="Run child sub-tasks through the orchestrator (for tests).",
                input_model=ChildrenIn,
                output_model=ChildrenOut,
                entrypoint="swarm_ray.testing.agents:call_children",
                resources=Resources(num_cpus=0.1, max_concurrency=2),
                retry=RetryPolicy(max_attempts=1),
                timeout_s=60.0,
            ),
            CapabilitySpec(
                id="test.agent.scripted",
                description="The tool agent with a scripted model (for tests).",
                input_model=ScriptedAgentIn,
                output_model=ToolAgentOut,
                entrypoint="swarm_ray.llm._tool_agent:run_tool_agent",
                **scripted,
            ),
            CapabilitySpec(
                id="test.research.row",
                description="A wide-research row agent with a scripted model (for tests).",
                input_model=ScriptedRowIn,
                output_model=RowOut,
                entrypoint="swarm_ray.llm._wide:research_row",
                **scripted,
            ),
        ),
        templates=(
            wide_template("wide_research_scripted", "test.research.row"),
            _once("children_once", "test.agent.children", ("calls", "key")),
            _once("say_once", "test.unsafe.say", ("text", "repeat")),
            _once("code_once", "test.unsafe.code", ("text",)),
            _once("weather_once", "test.api.weather", ("city", "units")),
            TaskTemplate.model_validate(
                {
                    "name": "limits_fanout",
                    "stages": [
                        {
                            "name": "run",
                            "capability": "test.limits.run",
                            "fan_out": "per_item",
                            "input": {"action": "$item"},
                        }
                    ],
                }
            ),
            _once(
                "scripted_agent_once",
                "test.agent.scripted",
                (
                    "task",
                    "tools",
                    "mcp_servers",
                    "endpoint",
                    "output_schema",
                    "max_steps",
                    "tool_timeout_s",
                    "ask_human",
                    "human_timeout_s",
                    "human_default",
                ),
            ),
        ),
    )


def _once(name: str, capability: str, params: tuple[str, ...]) -> TaskTemplate:
    """A template running `capability` once, its input fields taken from `params`."""
    return TaskTemplate.model_validate(
        {
            "name": name,
            "aggregate": "agent",
            "stages": [
                {
                    "name": "agent",
                    "capability": capability,
                    "input": {p: f"$params.{p}" for p in params},
                }
            ],
        }
    )


# ---- scripted planners -----------------------------------------------------------

_PLAN_DRAFTS = {
    # echo every item, then join: a plan the checks accept
    "test.planning.good": json.dumps(
        {
            "stages": [
                {
                    "name": "shout",
                    "capability": "test.echo.text",
                    "fan_out": "per_item",
                    "depends_on": [],
                    "input": {"text": "$item"},
                },
                {
                    "name": "join",
                    "capability": "test.join.texts",
                    "fan_out": "once",
                    "depends_on": ["shout"],
                    "input": {"parts": "$from.shout.text"},
                },
            ]
        }
    ),
    # two stages waiting on each other: refused by `validate_plan`
    "test.planning.cyclic": json.dumps(
        {
            "stages": [
                {
                    "name": name,
                    "capability": "test.echo.text",
                    "fan_out": "once",
                    "depends_on": [other],
                    "input": {"text": "$query"},
                }
                for name, other in (("a", "b"), ("b", "a"))
            ]
        }
    ),
}


def planning_catalog() -> Catalog:
    """Scripted planners on real `LLMAgent` replicas (the LLM layer, but no model).

    `test.planning.good` answers a valid echo-and-join draft, `test.planning.cyclic` a
    draft with a cycle.
    """
    from swarm_ray.llm import PlanIn, PlanOut

    return Catalog(
        capabilities=tuple(
            CapabilitySpec(
                id=cid,
                description="A scripted planner (for tests).",
                input_model=PlanIn,
                output_model=PlanOut,
                entrypoint="swarm_ray.llm._capabilities:plan",
                executor=ExecutorKind.SERVE,
                deployment="swarm_ray.testing.agents:scripted_planner_app",
                resources=Resources(num_cpus=0.1),
                retry=RetryPolicy(max_attempts=1),
                timeout_s=60,
            )
            for cid in _PLAN_DRAFTS
        )
    )


def scripted_planner_app(spec: CapabilitySpec) -> Any:
    """The Serve app of a scripted planner: an `LLMAgent` whose engine answers its draft."""
    from swarm_ray.agent import deployment_names
    from swarm_ray.llm import EngineConfig, llm_app

    config = EngineConfig(kind="scripted", script=(_PLAN_DRAFTS[spec.id],))
    return llm_app(config, resources=spec.resources, name=deployment_names(spec)[1], spec=spec)
