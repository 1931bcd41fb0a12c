"""`ScriptedEngine`: a test double that replies from a script, like pydantic-ai's TestModel.

It lets tests of planning and extraction logic choose exactly what the "model" says (a
plan naming an unknown capability, JSON that breaks the schema) without loading one.
Token counts are words, so accounting can still be checked.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from swarm_ray.core import TokenUsage
from swarm_ray.llm._engine import Completion, GenerationParams, Message

__all__ = ["ScriptedEngine"]

Reply = str | Callable[[Sequence[Message], dict[str, Any] | None], str]
"""A fixed reply, or a function of the messages and the JSON Schema asked for."""


class ScriptedEngine:
    """Replies with the next entry of `script`, cycling when it runs out."""

    def __init__(self, script: Sequence[Reply], *, model: str = "scripted") -> None:
        if not script:
            raise ValueError("`script` needs at least one reply")
        self._replies = itertools.cycle(list(script))
        self._model = model
        self._lock = threading.Lock()
        self.calls: list[tuple[tuple[Message, ...], dict[str, Any] | None]] = []
        """Every call's messages and schema, for tests to inspect."""

    @property
    def model(self) -> str:
        """The name given at construction."""
        return self._model

    def complete(
        self,
        messages: Sequence[Message],
        params: GenerationParams,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """The next scripted reply, cut to `params.max_tokens` words."""
        started = time.perf_counter()
        with self._lock:
            reply = next(self._replies)
            self.calls.append((tuple(messages), json_schema))
        text = reply if isinstance(reply, str) else reply(messages, json_schema)
        words = text.split()
        finish = "length" if len(words) > params.max_tokens else "stop"
        if finish == "length":
            text = " ".join(words[: params.max_tokens])
        usage = TokenUsage(
            prompt_tokens=sum(len(m.content.split()) for m in messages),
            completion_tokens=min(len(words), params.max_tokens),
            calls=1,
            seconds=time.perf_counter() - started,
        )
        return Completion(text=text, model=self._model, usage=usage, finish_reason=finish)

    def close(self) -> None:
        """Nothing to free."""
