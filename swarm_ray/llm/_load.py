"""Picking and loading the engine a process calls (its one idea).

`load_engine()` builds the engine an `EngineConfig` names (importing only that engine's
module), and `current_engine()` is the one this process's LLM capabilities call. The
engines import the vocabulary in `swarm_ray.llm._engine`; only this module imports the
engines, so the vocabulary and the factory form no import circle.
"""

from __future__ import annotations

import os
from typing import Any

from swarm_ray.agent import current_subtask
from swarm_ray.core._catalog import load_entrypoint
from swarm_ray.core._errors import InvalidSpecError
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


class _Priced:
    """An engine whose completions carry their cost (`EngineConfig.prices`).

    Everything else is the wrapped engine's: its attributes (`model`, `concurrent`,
    `complete_tools` where it has one) are looked up on it.
    """

    def __init__(self, engine: Engine, prices: Prices) -> None:
        self._engine = engine
        self._prices = prices

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._engine, name)
        if not callable(found):
            return found

        def priced(*args: Any, **kwargs: Any) -> Any:
            answer = found(*args, **kwargs)
            if isinstance(answer, Completion):
                usage = answer.usage.model_copy(update={"cost": self._prices.cost(answer.usage)})
                return answer.model_copy(update={"usage": usage})
            return answer

        return priced


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
    if config.prices is None:
        return engine
    priced: Engine = _Priced(engine, config.prices)
    return priced


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
