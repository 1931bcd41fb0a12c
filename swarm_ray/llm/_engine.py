"""The vocabulary of LLM engines: one interface, its messages, and the config naming one.

An `Engine` turns chat messages into a `Completion` (text, tokens, seconds), optionally
constrained to a JSON Schema. Three real engines implement it, vLLM on GPUs, llama.cpp
on CPUs and `OpenAIEngine` for any OpenAI-compatible endpoint (a hosted API, a vLLM or
llama.cpp server), plus `ScriptedEngine`, a test double. Engines are built from an
`EngineConfig` (`swarm_ray.llm._load` builds them), which is frozen data so it pickles
to the Serve replica that loads the model; the replica's fractional `num_gpus` is passed
in at load time so vLLM can size its share of GPU memory from it. A config never holds
an API key, only where to read one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import TokenUsage

__all__ = [
    "Completion",
    "EndpointLimits",
    "Engine",
    "EngineConfig",
    "EngineKind",
    "GenerationParams",
    "Message",
    "Prices",
    "ToolCall",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ToolCall(BaseModel):
    """A model's request to call one tool (OpenAI's `tool_calls[i]`)."""

    model_config = _FROZEN

    id: str
    """Names the call; the tool's answer quotes it (`Message.tool_call_id`)."""
    name: str
    """The tool."""
    arguments: str
    """The arguments as the model wrote them: JSON text, not yet parsed or checked."""


class Message(BaseModel):
    """One chat message."""

    model_config = _FROZEN

    role: Literal["system", "user", "assistant", "tool"]
    """Who speaks (`tool`: a tool's answer to an assistant's call)."""
    content: str
    """What they say."""
    tool_calls: tuple[ToolCall, ...] = ()
    """An assistant's calls of tools."""
    tool_call_id: str | None = None
    """For a `tool` message: the call it answers."""

    def wire(self) -> dict[str, Any]:
        """The OpenAI chat-completions form (what llama.cpp and vLLM templates read too)."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class GenerationParams(BaseModel):
    """Sampling settings of one call; greedy and seeded by default, so runs repeat."""

    model_config = _FROZEN

    max_tokens: int = Field(default=256, ge=1)
    """Cap on generated tokens."""
    temperature: float = Field(default=0.0, ge=0.0)
    """0 is greedy decoding."""
    seed: int | None = 0
    """Sampling seed (ignored when greedy)."""
    stop: tuple[str, ...] = ()
    """Strings that end the generation."""


class Completion(BaseModel):
    """What an engine returns for one call."""

    model_config = _FROZEN

    text: str
    """The generated text."""
    model: str
    """The model that wrote it (a file or directory name)."""
    usage: TokenUsage
    """Tokens, one call and the seconds it took."""
    finish_reason: str | None = None
    """`stop` when the model ended, `length` when `max_tokens` cut it, `tool_calls`."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tools the model asked to call (engines with native function calling)."""


@runtime_checkable
class Engine(Protocol):
    """A loaded model. Implementations are safe to call from several threads.

    One that gains from concurrent calls (vLLM batches them) says so with a class
    attribute `concurrent = True`; `LLMAgent` then lets sub-tasks in together instead of
    one at a time.
    """

    @property
    def model(self) -> str:
        """Name of the loaded model, reported by health checks."""
        ...

    def complete(
        self,
        messages: Sequence[Message],
        params: GenerationParams,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Generate a reply; with `json_schema`, decoding is constrained to match it."""
        ...

    def close(self) -> None:
        """Free the model's memory."""
        ...


class EngineKind(StrEnum):
    """Which engine implementation to load."""

    AUTO = "auto"
    """vLLM when a GPU is assigned to this process, llama.cpp otherwise."""
    LLAMA_CPP = "llama_cpp"
    """llama.cpp on CPU (a GGUF file)."""
    VLLM = "vllm"
    """vLLM on a GPU (a model directory)."""
    OPENAI = "openai"
    """Any OpenAI-compatible chat-completions endpoint over HTTP (`base_url`)."""
    SCRIPTED = "scripted"
    """`ScriptedEngine` replaying `EngineConfig.script` (tests)."""


class EndpointLimits(BaseModel):
    """A provider's limits on one endpoint, kept cluster-wide by its budget actor.

    Every replica and sub-agent calling the endpoint asks the one budget actor for a slot
    before each request and waits its turn (first come, first served), so a fan-out of
    hundreds of agents stays under the provider's limits instead of failing on 429s.
    Nothing set means no budget actor (calls go straight out).
    """

    model_config = _FROZEN

    requests_per_minute: float | None = Field(default=None, gt=0)
    """Requests started per minute, spread evenly (600 is one every 100 ms)."""
    tokens_per_minute: int | None = Field(default=None, gt=0)
    """Prompt plus completion tokens per sliding minute (requests reserve an estimate)."""
    max_concurrent: int | None = Field(default=None, ge=1)
    """Requests in flight at once."""

    @property
    def any(self) -> bool:
        """True when at least one limit is set."""
        return any(
            v is not None
            for v in (self.requests_per_minute, self.tokens_per_minute, self.max_concurrent)
        )


class Prices(BaseModel):
    """What an endpoint charges, per million tokens (in any one currency, used throughout)."""

    model_config = _FROZEN

    prompt_per_million: float = Field(default=0.0, ge=0)
    """Per million prompt (input) tokens."""
    completion_per_million: float = Field(default=0.0, ge=0)
    """Per million completion (output) tokens."""

    def cost(self, usage: TokenUsage) -> float:
        """What `usage`'s tokens cost."""
        return (
            usage.prompt_tokens * self.prompt_per_million
            + usage.completion_tokens * self.completion_per_million
        ) / 1_000_000


class EngineConfig(BaseModel):
    """How to build an engine; frozen, so it pickles to Serve replicas."""

    model_config = _FROZEN

    kind: EngineKind = EngineKind.AUTO
    """Which implementation."""
    model: str | None = None
    """A GGUF file (llama.cpp), a model directory (vLLM) or the model's name on an
    OpenAI-compatible endpoint; None is the packaged SmolLM2, or for an endpoint the
    first model its `/models` lists."""
    base_url: str | None = None
    """OpenAI-compatible endpoint (`https://api.openai.com/v1`, `http://gpu:8000/v1`)."""
    api_key_env: str | None = "SWARM_RAY_LLM_API_KEY"
    """Environment variable holding the endpoint's API key (read where the engine loads)."""
    api_key_file: str | None = None
    """A file holding the API key (a mounted secret); wins over `api_key_env`."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Deadline of one HTTP request to the endpoint."""
    max_retries: int = Field(default=6, ge=0)
    """Retries of a request refused with 429 or 5xx, or cut by a connection error."""
    limits: EndpointLimits = Field(default_factory=EndpointLimits)
    """The endpoint's cluster-wide budget (requests and tokens per minute, concurrency)."""
    prices: Prices | None = None
    """What its tokens cost; every call's `TokenUsage.cost` comes from it (None: 0)."""
    n_ctx: int = Field(default=2048, ge=128)
    """Context window in tokens."""
    n_threads: int | None = Field(default=None, ge=1)
    """llama.cpp threads; None uses the process's share (`OMP_NUM_THREADS`, else all cores)."""
    gpu_memory_headroom: float = Field(default=0.9, gt=0.0, le=1.0)
    """vLLM takes this share of the replica's GPU fraction (the rest is CUDA overhead)."""
    max_num_seqs: int = Field(default=64, ge=1)
    """vLLM's cap on sequences batched together."""
    enforce_eager: bool = False
    """vLLM: skip CUDA graph capture (slower, but starts faster and uses less memory)."""
    script: tuple[str, ...] = ()
    """Replies of the scripted engine, in order (repeated from the start when used up);
    `call:package.module:function` names a function of the messages and schema."""

    @classmethod
    def from_env(cls, **overrides: Any) -> EngineConfig:
        """The global engine from the environment, then `overrides` applied.

        `SWARM_RAY_LLM_URL` selects an OpenAI-compatible endpoint (unless
        `SWARM_RAY_LLM_ENGINE` names another engine), `SWARM_RAY_LLM_MODEL` the model,
        `SWARM_RAY_LLM_API_KEY_FILE` a key file (else the key is read from
        `SWARM_RAY_LLM_API_KEY` where the engine loads), and `SWARM_RAY_LLM_RPM`,
        `SWARM_RAY_LLM_TPM`, `SWARM_RAY_LLM_MAX_CONCURRENT` the endpoint's budget.
        """
        env = os.environ
        values: dict[str, Any] = {}
        if url := env.get("SWARM_RAY_LLM_URL"):
            values["kind"] = EngineKind.OPENAI
            values["base_url"] = url
        if kind := env.get("SWARM_RAY_LLM_ENGINE"):
            values["kind"] = kind
        if model := env.get("SWARM_RAY_LLM_MODEL"):
            values["model"] = model
        if key_file := env.get("SWARM_RAY_LLM_API_KEY_FILE"):
            values["api_key_file"] = key_file
        limits = {
            name: env[var]
            for name, var in (
                ("requests_per_minute", "SWARM_RAY_LLM_RPM"),
                ("tokens_per_minute", "SWARM_RAY_LLM_TPM"),
                ("max_concurrent", "SWARM_RAY_LLM_MAX_CONCURRENT"),
            )
            if env.get(var)
        }
        if limits:
            values["limits"] = limits
        return cls.model_validate({**values, **overrides})
