"""Picking and loading the engine a process calls (its one idea).

`load_engine()` builds the engine an `EngineConfig` names (importing only that engine's
module), and `current_engine()` is the one this process's LLM capabilities call. The
engines import the vocabulary in `swarm_ray.llm._engine`; only this module imports the
engines, so the vocabulary and the factory form no import circle.
"""

from __future__ import annotations

import os
import time
from typing import Any

from swarm_ray.agent import current_subtask, record_call
from swarm_ray.core import CallRecord, InvalidSpecError, load_entrypoint
from swarm_ray.llm._engine import Completion, Engine, EngineConfig, EngineKind, Prices
from swarm_ray.llm._settings import engine_config_for

__all__ = ["current_engine", "load_engine", "use_engine"]


def _gpu_visible() -> bool:
    try:
        import ray

        if ray.is_initialized() and ray.get_runtime_context().get_accelerator_ids().get("GPU"):
            return True
    except Exception:  # not inside a Ray worker: fall through to the environment
        pass
    devices = os.environ.get("CUDA_VISIBLE_DEVICES")
    return bool(devices) and devices not in ("-1", "NoDevFiles")


class _Accounted:
    """An engine whose completions carry their cost and are noted on the attempt.

    Each completion gets its cost from `EngineConfig.prices` (when set) and is recorded
    as a call of the attempt being served (`swarm_ray.agent.record_call`: a `chat` span
    of the task's trace). Everything else is the wrapped engine's: its attributes
    (`model`, `concurrent`, `complete_tools` where it has one) are looked up on it.
    """

    def __init__(self, engine: Engine, prices: Prices | None, provider: str) -> None:
        self._engine = engine
        self._prices = prices
        self._provider = provider

    @property
    def wrapped(self) -> Engine:
        """The engine itself (an `OpenAIEngine`, a `LlamaCppEngine`, ...)."""
        return self._engine

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._engine, name)
        if not callable(found) or not name.startswith("complete"):
            return found

        def accounted(*args: Any, **kwargs: Any) -> Any:
            started = time.time()
            try:
                answer = found(*args, **kwargs)
            except Exception as exc:
                self._record(started, None, f"{type(exc).__name__}: {exc}"[:200])
                raise
            if isinstance(answer, Completion):
                if self._prices is not None:
                    cost = self._prices.cost(answer.usage)
                    answer = answer.model_copy(
                        update={"usage": answer.usage.model_copy(update={"cost": cost})}
                    )
                self._record(started, answer, None)
            return answer

        return accounted

    def _record(self, started: float, answer: Completion | None, error: str | None) -> None:
        usage = answer.usage if answer is not None else None
        record_call(
            CallRecord(
                kind="llm",
                name=str(getattr(self._engine, "model", "model")),
                provider=self._provider,
                started_at=started,
                finished_at=time.time(),
                input_tokens=usage.prompt_tokens if usage is not None else 0,
                output_tokens=usage.completion_tokens if usage is not None else 0,
                error=error,
            )
        )


def load_engine(config: EngineConfig, *, num_gpus: float = 0.0) -> Engine:
    """Load the engine `config` names (its completions priced by `config.prices`).

    Args:
        config: Which engine and model.
        num_gpus: The GPU share of the process that loads it (a Serve replica's
            `num_gpus`); vLLM's memory share is sized from it.

    Raises:
        InvalidSpecError: the engine's package or model is missing.
    """
    engine = _load(config, num_gpus)
    accounted: Engine = _Accounted(engine, config.prices, _provider(config, engine))
    return accounted


def _provider(config: EngineConfig, engine: Engine) -> str:
    """The `gen_ai.provider.name` of an engine: the kind it was loaded as."""
    if config.kind is not EngineKind.AUTO:
        return str(config.kind.value)
    return "vllm" if "vllm" in type(engine).__module__ else "llama_cpp"


def _load(config: EngineConfig, num_gpus: float) -> Engine:
    kind = config.kind
    if kind is EngineKind.AUTO:
        kind = EngineKind.VLLM if num_gpus > 0 and _gpu_visible() else EngineKind.LLAMA_CPP
    if kind is EngineKind.SCRIPTED:
        from swarm_ray.llm._scripted import ScriptedEngine

        # `call:package.module:function` is a reply function (messages, schema) -> text.
        return ScriptedEngine(
            [
                load_entrypoint(r.removeprefix("call:")) if r.startswith("call:") else r
                for r in config.script
            ]
        )
    if kind is EngineKind.LLAMA_CPP:
        from swarm_ray.llm._llama_cpp import LlamaCppEngine

        return LlamaCppEngine(config)
    if kind is EngineKind.OPENAI:
        from swarm_ray.llm._openai import OpenAIEngine

        return OpenAIEngine(config)
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

    Outside an `LLMAgent` replica (actor or Ray Data executors), the engine is loaded on
    first use and kept for the process: the endpoint registered for the running
    capability (`SWARM_RAY_LLM_CONFIG`), else `EngineConfig.from_env()`.
    """
    if _current is None:
        subtask = current_subtask()
        use_engine(load_engine(engine_config_for(subtask.capability_id if subtask else None)))
    assert _current is not None
    return _current
