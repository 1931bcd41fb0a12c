"""vLLM on a GPU share: the engine of Serve replicas declared with fractional `num_gpus`.

vLLM is imported only here and only when this engine is built, so the CPU path never
needs it (`import vllm` fails where it is not installed). Its GPU memory share is the
replica's `num_gpus` times a headroom factor: four replicas at `num_gpus=0.25` each
take about 22 % of the GPU's memory, and fit side by side.

vLLM batches concurrent requests continuously only through its async engine, while the
`Engine` interface is synchronous (Serve calls it from worker threads). So the async
engine runs on a private event loop in a background thread and each `complete()` call
submits one request to it and waits: concurrent calls are batched together on the GPU.
Nothing is downloaded: `model` must be a local model directory (the hub is set offline).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
import uuid
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any, TypeVar

from swarm_ray.core import InvalidSpecError, TokenUsage
from swarm_ray.llm._engine import Completion, EngineConfig, GenerationParams, Message

__all__ = ["VLLMEngine", "gpu_memory_share"]

_T = TypeVar("_T")


def gpu_memory_share(num_gpus: float, headroom: float) -> float:
    """The `gpu_memory_utilization` of vLLM for a replica holding `num_gpus` of one GPU."""
    if num_gpus <= 0:
        raise InvalidSpecError(f"`num_gpus` must be positive for vLLM, got {num_gpus!r}")
    return round(min(num_gpus, 1.0) * headroom, 4)


class VLLMEngine:
    """A model directory under vLLM's async engine, sized to a GPU fraction."""

    concurrent = True
    """Concurrent calls are batched on the GPU, so `LLMAgent` lets sub-tasks in together."""

    def __init__(self, config: EngineConfig, *, num_gpus: float) -> None:
        if not config.model or not Path(config.model).is_dir():
            raise InvalidSpecError(
                f"engine `vllm` needs `model`, a local model directory, got {config.model!r}"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never download
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
            from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        except ImportError:
            raise InvalidSpecError(
                "engine `vllm` needs the `vllm` package (`pip install swarm-ray[gpu]`)"
            ) from None
        self._sampling = SamplingParams
        self._structured = StructuredOutputsParams
        self._model = Path(config.model).name
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm", daemon=True)
        self._thread.start()
        args = AsyncEngineArgs(
            model=config.model,
            gpu_memory_utilization=gpu_memory_share(num_gpus, config.gpu_memory_headroom),
            max_model_len=config.n_ctx,
            max_num_seqs=config.max_num_seqs,
            enforce_eager=config.enforce_eager,
            seed=0,
        )

        async def build() -> tuple[Any, Any]:
            engine = AsyncLLMEngine.from_engine_args(args)
            tokenizer = engine.get_tokenizer()
            if inspect.isawaitable(tokenizer):
                tokenizer = await tokenizer
            return engine, tokenizer

        self._engine, self._tokenizer = self._run(build())

    def _run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    @property
    def model(self) -> str:
        """The model directory's name."""
        return self._model

    def complete(
        self,
        messages: Sequence[Message],
        params: GenerationParams,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; with `json_schema`, vLLM structured outputs."""
        prompt = self._tokenizer.apply_chat_template(
            [m.wire() for m in messages], tokenize=False, add_generation_prompt=True
        )
        sampling = self._sampling(
            max_tokens=params.max_tokens,
            temperature=params.temperature,
            seed=params.seed,
            stop=list(params.stop) or None,
            structured_outputs=None if json_schema is None else self._structured(json=json_schema),
        )
        started = time.perf_counter()
        final = self._run(self._generate(prompt, sampling))
        seconds = time.perf_counter() - started
        output = final.outputs[0]
        return Completion(
            text=output.text,
            model=self._model,
            usage=TokenUsage(
                prompt_tokens=len(final.prompt_token_ids or ()),
                completion_tokens=len(output.token_ids),
                calls=1,
                seconds=seconds,
            ),
            finish_reason=output.finish_reason,
        )

    async def _generate(self, prompt: str, sampling: Any) -> Any:
        final = None
        async for output in self._engine.generate(prompt, sampling, uuid.uuid4().hex):
            final = output
        return final

    def close(self) -> None:
        """Shut the engine down and stop its loop."""
        self._engine.shutdown()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
