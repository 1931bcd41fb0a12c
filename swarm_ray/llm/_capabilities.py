"""The LLM capabilities: chat, JSON extraction, planning and the tool agent, on `LLMAgent`s.

Each is a `serve` capability whose deployment is an `LLMAgent`: its entrypoint runs in
the replica and calls the replica's engine (`current_engine()`), and reports the tokens
and seconds it spent so they roll up per agent, sub-task and task. A local model gets
one CPU per replica, one call at a time (`SWARM_RAY_LLM_NUM_GPUS=0.25` declares a GPU
share instead, and vLLM sizes its memory to it); an OpenAI-compatible endpoint gets a
quarter of a CPU and takes 64 sub-tasks at once, since the work is elsewhere.

`llm.generation.chat` and `llm.extraction.json` are tagged `tool`: tool agents may call
them (as child sub-tasks).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from swarm_ray.agent import AgentReply
from swarm_ray.core import (
    Catalog,
    ExecutorKind,
    InvalidOutputError,
    RetryPolicy,
    TaskRequest,
    TaskTemplate,
    TenantSchema,
    capability_maker,
)
from swarm_ray.llm._engine import GenerationParams, Message
from swarm_ray.llm._load import current_engine
from swarm_ray.llm._planner import CapabilityLine, PlanDraft, draft_plan
from swarm_ray.llm._settings import llm_resources
from swarm_ray.llm._structured import StructuredReply, generate_structured
from swarm_ray.llm._tool_agent import ToolAgentIn, ToolAgentOut

__all__ = [
    "ChatIn",
    "ChatOut",
    "ExtractIn",
    "ExtractOut",
    "PlanIn",
    "PlanOut",
    "chat",
    "extract_json",
    "llm_catalog",
    "plan",
]


class ChatIn(BaseModel):
    """Input of `llm.generation.chat`."""

    prompt: str = Field(min_length=1)
    """The user's message."""
    system: str | None = None
    """An optional system message."""
    max_tokens: int = Field(default=128, ge=1, le=4096)
    """Cap on generated tokens."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """0 is greedy (repeatable)."""


class ChatOut(BaseModel):
    """Output of `llm.generation.chat`."""

    text: str
    """The reply."""
    model: str
    """The model that wrote it."""
    finish_reason: str | None = None
    """`stop`, or `length` when `max_tokens` cut it."""


class ExtractIn(BaseModel):
    """Input of `llm.extraction.json`."""

    text: str = Field(min_length=1)
    """The text to read."""
    json_schema: TenantSchema
    """JSON Schema of the object to extract (held to `_schema_bounds`)."""
    instructions: str = "Extract the fields described by the schema from the text."
    """What to look for."""
    max_tokens: int = Field(default=256, ge=1, le=4096)
    """Cap on generated tokens."""


class ExtractOut(BaseModel):
    """Output of `llm.extraction.json`."""

    data: dict[str, Any]
    """The extracted object, valid against the schema."""
    model: str
    """The model that extracted it."""


class PlanIn(BaseModel):
    """Input of `llm.planning.plan`."""

    request: TaskRequest
    """What to plan."""
    capabilities: tuple[CapabilityLine, ...] = Field(min_length=1)
    """The catalogue the plan may use (the registry's, usually)."""
    max_tokens: int = Field(default=384, ge=16, le=4096)
    """Cap on generated tokens."""


class PlanOut(BaseModel):
    """Output of `llm.planning.plan`: a draft, still to be checked by `validate_plan`."""

    draft: PlanDraft
    """The proposed stages."""
    model: str
    """The model that planned."""


def _checked(reply: StructuredReply) -> dict[str, Any]:
    if reply.error is not None:
        raise InvalidOutputError(reply.error.message, **reply.error.details)
    assert reply.value is not None
    return reply.value


def chat(data: ChatIn) -> AgentReply:
    """Answer a prompt."""
    messages = [Message(role="user", content=data.prompt)]
    if data.system:
        messages.insert(0, Message(role="system", content=data.system))
    params = GenerationParams(max_tokens=data.max_tokens, temperature=data.temperature)
    completion = current_engine().complete(messages, params)
    output = ChatOut(
        text=completion.text, model=completion.model, finish_reason=completion.finish_reason
    )
    return AgentReply(output=output, usage=completion.usage)


def extract_json(data: ExtractIn) -> AgentReply:
    """Extract an object matching `data.json_schema` from `data.text` (validated)."""
    messages = [
        Message(
            role="system",
            content=f"{data.instructions} Answer with JSON matching this schema: "
            f"{json.dumps(data.json_schema)}",
        ),
        Message(role="user", content=data.text),
    ]
    params = GenerationParams(max_tokens=data.max_tokens)
    reply = generate_structured(current_engine(), messages, data.json_schema, params)
    output = ExtractOut(data=_checked(reply), model=reply.completion.model)
    return AgentReply(output=output, usage=reply.completion.usage)


def plan(data: PlanIn) -> AgentReply:
    """Draft a plan for `data.request` using only `data.capabilities`."""
    params = GenerationParams(max_tokens=data.max_tokens)
    reply = draft_plan(current_engine(), data.request, data.capabilities, params)
    draft = PlanDraft.model_validate(_checked(reply))
    output = PlanOut(draft=draft, model=reply.completion.model)
    return AgentReply(output=output, usage=reply.completion.usage)


def _agent_template() -> TaskTemplate:
    """`tool_agent`: the request's query is the task; tools and limits from `params`."""
    fields = ["tools", "mcp_servers", "endpoint", "output_schema", "max_steps"]
    fields += ["tool_timeout_s", "max_tokens", "protocol", "system"]
    return TaskTemplate.model_validate(
        {
            "name": "tool_agent",
            "description": "Answer the query with a tool-using agent.",
            "keywords": ["tool agent"],
            "aggregate": "agent",
            "stages": [
                {
                    "name": "agent",
                    "capability": "llm.agent.tools",
                    "input": {"task": "$query", **{f: f"$params.{f}" for f in fields}},
                }
            ],
        }
    )


def llm_catalog() -> Catalog:
    """The LLM capabilities; `llm_chat` (a chat per item) and `tool_agent` templates.

    The wide-research template (`wide_research`) and its aggregate live in
    `swarm_ray.llm._wide`; they are added here.
    """
    from swarm_ray.llm._wide import wide_capabilities, wide_template

    base = capability_maker(
        "swarm_ray.llm._capabilities",
        executor=ExecutorKind.SERVE,
        deployment="swarm_ray.llm._deployment:capability_llm_app",
        timeout_s=120.0,
        retry=RetryPolicy(max_attempts=2, backoff_s=0.5),
        tags=("llm",),
    )

    def make(capability_id: str, *args: Any, **fields: Any) -> Any:
        return base(capability_id, *args, **{"resources": llm_resources(capability_id), **fields})

    chat_template = TaskTemplate.model_validate(
        {
            "name": "llm_chat",
            "description": "Answer each item (a prompt) with the chat model.",
            "keywords": ["llm chat"],
            "stages": [
                {
                    "name": "chat",
                    "capability": "llm.generation.chat",
                    "fan_out": "per_item",
                    "input": {"prompt": "$item", "max_tokens": "$params.max_tokens"},
                }
            ],
        }
    )
    return Catalog(
        capabilities=(
            make(
                "llm.generation.chat",
                "Answer a prompt with a chat model.",
                "chat",
                ChatIn,
                ChatOut,
                tags=("llm", "tool"),
            ),
            make(
                "llm.extraction.json",
                "Extract an object matching a given JSON Schema from a text.",
                "extract_json",
                ExtractIn,
                ExtractOut,
                tags=("llm", "tool"),
            ),
            make(
                "llm.planning.plan",
                "Draft a plan (stages over registered capabilities) for a request.",
                "plan",
                PlanIn,
                PlanOut,
            ),
            make(
                "llm.agent.tools",
                "A tool-using agent: calls capabilities (as child sub-tasks) and MCP tools "
                "until it can answer, optionally as JSON under a given schema.",
                "run_tool_agent",
                ToolAgentIn,
                ToolAgentOut,
                entrypoint="swarm_ray.llm._tool_agent:run_tool_agent",
                timeout_s=600.0,
                tags=("llm", "agent"),
            ),
            *wide_capabilities(),
        ),
        templates=(chat_template, _agent_template(), wide_template()),
    )
