"""One interface for every LLM engine, and the config that picks one.

An `Engine` turns chat messages into a `Completion` (text, tokens, seconds), optionally
constrained to a JSON Schema. Two real engines implement it, vLLM on GPUs and llama.cpp
on CPUs, plus `ScriptedEngine`, a test double. Engines are built from an `EngineConfig`,
which is frozen data so it pickles to the Serve replica that loads the model; the
replica's fractional `num_gpus` is passed in at load time so vLLM can size its share of
GPU memory from it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray._errors import InvalidSpecError
from swarm_ray._subtask import TokenUsage

__all__ = [
    "Completion",
    "Engine",
    "EngineConfig",
    "EngineKind",
    "GenerationParams",
    "Message",
    "current_engine",
    "load_engine",
    "use_engine",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Message(BaseModel):
    """One chat message."""

    model_config = _FROZEN

    role: Literal["system", "user", "assistant"]
    """Who speaks."""
    content: str
    """What they say."""


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
    """`stop` when the model ended, `length` when `max_tokens` cut it."""


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
    SCRIPTED = "scripted"
    """`ScriptedEngine` replaying `EngineConfig.script` (tests)."""


class EngineConfig(BaseModel):
    """How to build an engine; frozen, so it pickles to Serve replicas."""

    model_config = _FROZEN

    kind: EngineKind = EngineKind.AUTO
    """Which implementation."""
    model: str | None = None
    """A GGUF file (llama.cpp) or a model directory (vLLM); None is the packaged SmolLM2."""
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
    """Replies of the scripted engine, in order (repeated from the start when used up)."""

    @classmethod
    def from_env(cls, **overrides: Any) -> EngineConfig:
        """Read `SWARM_RAY_LLM_ENGINE` and `SWARM_RAY_LLM_MODEL`, then apply `overrides`."""
        values: dict[str, Any] = {}
        if kind := os.environ.get("SWARM_RAY_LLM_ENGINE"):
            values["kind"] = kind
        if model := os.environ.get("SWARM_RAY_LLM_MODEL"):
            values["model"] = model
        return cls.model_validate({**values, **overrides})


def _gpu_visible() -> bool:
    try:
        import ray

        if ray.is_initialized() and ray.get_runtime_context().get_accelerator_ids().get("GPU"):
            return True
    except Exception:  # not inside a Ray worker: fall through to the environment
        pass
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    return bool(devices) and devices not in ("-1", "NoDevFiles")


def load_engine(config: EngineConfig, *, num_gpus: float = 0.0) -> Engine:
    """Load the engine `config` names.

    Args:
        config: Which engine and model.
        num_gpus: The GPU share of the process that loads it (a Serve replica's
            `num_gpus`); vLLM's memory share is sized from it.

    Raises:
        InvalidSpecError: the engine's package or model is missing.
    """
    kind = config.kind
    if kind is EngineKind.AUTO:
        kind = EngineKind.VLLM if num_gpus > 0 and _gpu_visible() else EngineKind.LLAMA_CPP
    if kind is EngineKind.SCRIPTED:
        from swarm_ray.llm._scripted import ScriptedEngine

        return ScriptedEngine(config.script)
    if kind is EngineKind.LLAMA_CPP:
        from swarm_ray.llm._llama_cpp import LlamaCppEngine

        return LlamaCppEngine(config)
    if num_gpus <= 0:
        raise InvalidSpecError(f"engine `vllm` needs a GPU share, got `num_gpus`={num_gpus!r}")
    from swarm_ray.llm._vllm import VLLMEngine

    return VLLMEngine(config, num_gpus=num_gpus)


_current: Engine | None = None


def use_engine(engine: Engine | None) -> None:
    """Make `engine` the one this process's LLM capabilities call (a replica sets its own)."""
    global _current
    _current = engine


def current_engine() -> Engine:
    """The engine of this process: the one set by `use_engine`, else one from the environment.

    Outside an `LLMAgent` replica (actor or Ray Data executors), the engine is loaded from
    `EngineConfig.from_env()` on first use and kept for the process.
    """
    if _current is None:
        use_engine(load_engine(EngineConfig.from_env()))
    assert _current is not None
    return _current
