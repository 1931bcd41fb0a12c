"""`LLMAgent`: a Ray Serve deployment holding one engine, sized by a capability's resources.

Each replica loads one engine (llama.cpp on CPU, vLLM on its GPU share) and serves
chat, structured output and, when built for a capability, the sub-task contract that the
`ServeExecutor` calls (`run(subtask) -> SubTaskResult`). Replicas get their
`ray_actor_options` from `Resources` (`num_gpus=0.25` puts four on one GPU, and vLLM's
memory share follows), scale between `min_replicas` and `max_replicas` on ongoing
requests, and report status, model, latency and tokens through `health()`.
`check_health` raises after repeated failures, so Serve replaces the replica.

Engine calls run in worker threads, so the replica's event loop keeps answering health
checks during a long generation, and vLLM can batch concurrent calls. An engine that
serves calls side by side (vLLM, an OpenAI-compatible endpoint) gets a thread per request
the replica takes, so a replica of an HTTP endpoint runs dozens of agents at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from ray import serve

from swarm_ray.core import CapabilitySpec, Resources, SubTask, SubTaskResult, TokenUsage
from swarm_ray.llm._engine import (
    Completion,
    EngineConfig,
    EngineKind,
    GenerationParams,
    Message,
)
from swarm_ray.llm._load import load_engine, use_engine
from swarm_ray.llm._structured import StructuredReply, Target, generate_structured

__all__ = [
    "ChatRequest",
    "LLMAgent",
    "LLMAppArgs",
    "LLMDeploymentOptions",
    "StructuredRequest",
    "build_llm_app",
    "capability_llm_app",
    "llm_app",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_T = TypeVar("_T")


class ChatRequest(BaseModel):
    """A chat call to an `LLMAgent`."""

    model_config = _FROZEN

    messages: tuple[Message, ...] = Field(min_length=1)
    """The conversation so far."""
    params: GenerationParams = Field(default_factory=GenerationParams)
    """Sampling settings."""


class StructuredRequest(ChatRequest):
    """A structured-output call: the answer must match `target`."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    target: Target
    """A Pydantic model class (importable in the replica) or a JSON Schema."""


class LLMDeploymentOptions(BaseModel):
    """Scaling of an `LLMAgent` deployment."""

    model_config = _FROZEN

    min_replicas: int = Field(default=1, ge=0)
    """Replicas kept when idle."""
    max_replicas: int = Field(default=1, ge=1)
    """Replicas at most; equal to `min_replicas` means a fixed count."""
    target_ongoing_requests: float = Field(default=2.0, gt=0)
    """Ongoing requests per replica the autoscaler aims for."""
    max_ongoing_requests: int = Field(default=8, ge=1)
    """Requests a replica takes at once (vLLM batches them; llama.cpp queues them)."""
    health_check_period_s: float = Field(default=10.0, gt=0)
    """How often Serve calls `check_health`."""
    initial_replicas: int | None = Field(default=None, ge=0)
    """Replicas the deployment starts with (default `min_replicas`). With `min_replicas`
    0, one makes starting the deployment wait for a replica, not its first request."""
    idle_s: float | None = Field(default=None, gt=0)
    """How long a deployment left with one idle replica keeps it before scaling to zero
    (with `min_replicas` 0). None: Serve's `downscale_delay_s`, 600 s."""

    def serve_options(self) -> dict[str, Any]:
        """Keyword options for `Deployment.options()`."""
        options: dict[str, Any] = {
            "max_ongoing_requests": self.max_ongoing_requests,
            "health_check_period_s": self.health_check_period_s,
        }
        if self.min_replicas == self.max_replicas:
            options["num_replicas"] = self.max_replicas
        else:
            scaling: dict[str, Any] = {
                "min_replicas": self.min_replicas,
                "max_replicas": self.max_replicas,
                "target_ongoing_requests": self.target_ongoing_requests,
            }
            if self.initial_replicas is not None:
                scaling["initial_replicas"] = self.initial_replicas
            if self.idle_s is not None:
                scaling["downscale_to_zero_delay_s"] = self.idle_s
            options["autoscaling_config"] = scaling
        return options


@serve.deployment
class LLMAgent:
    """A Serve replica with one loaded engine."""

    def __init__(
        self,
        config: EngineConfig,
        num_gpus: float = 0.0,
        spec: CapabilitySpec | None = None,
        threads: int = 8,
    ) -> None:
        started = time.perf_counter()
        self._engine = load_engine(config, num_gpus=num_gpus)
        use_engine(self._engine)  # capability entrypoints in this process call this engine
        self._load_s = time.perf_counter() - started
        self._spec = spec
        # An engine that runs one call at a time (llama.cpp) would make concurrent
        # sub-tasks wait inside their run, counting the wait as run time; they wait here
        # instead, so each result's timings say when it had the engine. vLLM batches
        # concurrent calls, so its sub-tasks go in together.
        concurrent = getattr(self._engine, "concurrent", False)
        self._one_at_a_time = None if concurrent else asyncio.Lock()
        # asyncio's default pool has cpu_count + 4 threads: six agents at once on 2 cores.
        self._threads = ThreadPoolExecutor(max(1, threads if concurrent else 2), "llm-agent")
        self._usage = TokenUsage()
        self._failures = 0
        self._consecutive_failures = 0
        self._last_latency_s = 0.0
        self._last_error: str | None = None

    async def _in_thread(self, function: Callable[..., _T], *args: Any) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._threads, function, *args)

    def _account(
        self, usage: TokenUsage, seconds: float, ok: bool | None, error: str | None
    ) -> None:
        """Count a call; `ok` None: an outcome that says nothing of this replica."""
        self._usage = self._usage + usage
        self._last_latency_s = seconds
        if ok is None:
            return
        self._failures += not ok
        self._consecutive_failures = 0 if ok else self._consecutive_failures + 1
        self._last_error = error if not ok else self._last_error

    async def chat(self, request: ChatRequest) -> Completion:
        """Generate a reply to `request.messages`."""
        started = time.perf_counter()
        try:
            completion = await self._in_thread(
                self._engine.complete, request.messages, request.params
            )
        except Exception as exc:
            self._account(TokenUsage(), time.perf_counter() - started, False, repr(exc))
            raise
        self._account(completion.usage, time.perf_counter() - started, True, None)
        return completion

    async def generate_json(self, request: StructuredRequest) -> StructuredReply:
        """Constrained JSON matching `request.target`, validated (or a structured error)."""
        started = time.perf_counter()
        try:
            reply = await self._in_thread(
                generate_structured,
                self._engine,
                request.messages,
                request.target,
                request.params,
            )
        except Exception as exc:
            self._account(TokenUsage(), time.perf_counter() - started, False, repr(exc))
            raise
        error = reply.error.message if reply.error else None
        self._account(reply.completion.usage, time.perf_counter() - started, reply.ok, error)
        return reply

    async def run(self, subtask: SubTask) -> SubTaskResult:
        """Run one attempt of a sub-task of this replica's capability (`ServeExecutor`)."""
        from swarm_ray.agent import run_subtask

        if self._spec is None:
            raise RuntimeError("this LLMAgent was built without a capability; call `chat`")
        agent = f"serve:{self._spec.id}:{serve.get_replica_context().replica_id.unique_id}"
        async with self._one_at_a_time or contextlib.nullcontext():
            started = time.perf_counter()
            run = functools.partial(run_subtask, self._spec, subtask, agent=agent)
            result = await self._in_thread(run)
        error = result.error
        # A request's own mistake (a tool not granted to its tenant) is not the replica's:
        # counted, one tenant's three bad requests would take it down for every tenant.
        ok = None if error is not None and error.callers_mistake else result.ok
        message = error.message if error else None
        self._account(result.usage, time.perf_counter() - started, ok, message)
        return result

    def health(self) -> dict[str, Any]:
        """Status, model, version, latency and tokens served by this replica."""
        unhealthy = self._consecutive_failures >= 3
        return {
            "status": "unhealthy" if unhealthy else "ok",
            "error": self._last_error if unhealthy else None,
            "capability": self._spec.id if self._spec else None,
            "version": self._spec.version if self._spec else None,
            "model": self._engine.model,
            "load_s": round(self._load_s, 3),
            "latency_ms": round(self._last_latency_s * 1000, 3),
            "calls": self._usage.calls,
            "prompt_tokens": self._usage.prompt_tokens,
            "completion_tokens": self._usage.completion_tokens,
            "tokens_per_s": round(self._usage.completion_tokens / self._usage.seconds, 2)
            if self._usage.seconds
            else 0.0,
            "failures": self._failures,
            "consecutive_failures": self._consecutive_failures,
            "last_error": self._last_error,
        }

    def check_health(self) -> None:
        """Raise (so Serve replaces the replica) after 3 failed calls in a row.

        Only its own failures count: a sub-task failing for its request's mistake (a user
        error) says nothing of the replica (`SubTaskError.callers_mistake`).
        """
        if self._consecutive_failures >= 3:
            raise RuntimeError(
                f"LLM replica of model `{self._engine.model}` failed "
                f"{self._consecutive_failures} calls in a row; last: {self._last_error}"
            )

    def __del__(self) -> None:
        engine = getattr(self, "_engine", None)
        if engine is not None:
            with contextlib.suppress(Exception):  # the process is going away anyway
                engine.close()


def llm_app(
    config: EngineConfig,
    *,
    resources: Resources | None = None,
    options: LLMDeploymentOptions | None = None,
    name: str = "LLMAgent",
    spec: CapabilitySpec | None = None,
) -> Any:
    """A Serve application of `LLMAgent` replicas.

    Args:
        config: The engine each replica loads.
        resources: Per-replica resources; `num_gpus` also sizes vLLM's memory share.
        options: Replica counts, autoscaling and concurrency.
        name: The deployment's name (the `ServeExecutor` looks capabilities up by it).
        spec: The capability whose sub-tasks `run()` executes, if any.
    """
    resources = resources or Resources()
    options = options or LLMDeploymentOptions()
    return LLMAgent.options(  # type: ignore[attr-defined]
        name=name, ray_actor_options=resources.ray_options(), **options.serve_options()
    ).bind(config, resources.num_gpus, spec, options.max_ongoing_requests)


def capability_llm_app(spec: CapabilitySpec) -> Any:
    """The Serve app of an LLM capability (its spec's `deployment` builder).

    The engine is the capability's registered endpoint, else the global one from the
    environment (`SWARM_RAY_LLM_URL` or `SWARM_RAY_LLM_ENGINE`, `SWARM_RAY_LLM_MODEL`) of
    the process deploying it. A local model scales up to the spec's `max_concurrency`
    replicas, one call at a time each; an HTTP endpoint needs no more than one replica,
    which takes `max_concurrency` requests at once.

    Either scales to zero when idle, like pooled agents: a replica holds what its spec
    reserves (a CPU, a GPU share), which an idle one must not keep from the stages and
    agents of later jobs. It starts with one replica (so deploying waits for it, not the
    first request) and lets it go `SWARM_RAY_AGENT_IDLE_S` (60 s) after Serve's look-back
    (30 s) last saw a request. A request to a deployment at zero starts a replica again:
    about 3 s for a llama.cpp replica here, against 0.15 s for a warm call.
    """
    from swarm_ray.agent import deployment_names
    from swarm_ray.llm._settings import engine_config_for

    _, name = deployment_names(spec)
    config = engine_config_for(spec.id)
    idle = {
        "min_replicas": 0,
        "initial_replicas": 1,
        "idle_s": float(os.environ.get("SWARM_RAY_AGENT_IDLE_S", "60")),
    }
    if config.kind is EngineKind.OPENAI:
        options = LLMDeploymentOptions(
            max_replicas=1, max_ongoing_requests=max(8, spec.resources.max_concurrency), **idle
        )
    else:
        options = LLMDeploymentOptions(max_replicas=spec.resources.max_concurrency, **idle)
    return llm_app(config, resources=spec.resources, options=options, name=name, spec=spec)


class LLMAppArgs(BaseModel):
    """Arguments of `build_llm_app`, the builder a Serve config file names (`args:`)."""

    model_config = _FROZEN

    engine: EngineConfig = Field(default_factory=EngineConfig)
    """The engine each replica loads."""
    resources: Resources = Field(default_factory=Resources)
    """Per-replica resources (`num_gpus: 0.25` puts four replicas on one GPU)."""
    options: LLMDeploymentOptions = Field(default_factory=LLMDeploymentOptions)
    """Replica counts, autoscaling and concurrency."""
    name: str = "LLMAgent"
    """The deployment's name."""


def build_llm_app(args: LLMAppArgs | dict[str, Any]) -> Any:
    """Serve application builder: `import_path: swarm_ray.llm:build_llm_app` in a config.

    Serve hands a builder a plain dict when it cannot resolve the annotation (this module
    uses postponed annotations), so the arguments are validated here either way.
    """
    args = LLMAppArgs.model_validate(args)
    return llm_app(args.engine, resources=args.resources, options=args.options, name=args.name)
