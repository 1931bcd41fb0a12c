"""`DeploymentEngine`: the `Engine` interface over a Serve handle to an `LLMAgent`.

Code written against `Engine` (the planner, extraction) runs unchanged against a model
served by Serve replicas elsewhere in the cluster: this adapter sends each call to the
deployment, which may sit on another node's GPU share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from swarm_ray.llm._deployment import ChatRequest, StructuredRequest
from swarm_ray.llm._engine import Completion, GenerationParams, Message

__all__ = ["DeploymentEngine"]


class DeploymentEngine:
    """Calls an `LLMAgent` deployment through its handle (blocking; not in an event loop)."""

    def __init__(self, handle: Any, *, timeout_s: float = 300.0) -> None:
        self._handle = handle
        self._timeout_s = timeout_s
        self._model: str | None = None

    @property
    def model(self) -> str:
        """The model of a replica (asked once, then remembered)."""
        if self._model is None:
            health = self._handle.health.remote().result(timeout_s=self._timeout_s)
            self._model = str(health["model"])
        return self._model

    def complete(
        self,
        messages: Sequence[Message],
        params: GenerationParams,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """One call on the deployment (the raw completion, before any validation)."""
        if json_schema is None:
            request = ChatRequest(messages=tuple(messages), params=params)
            completion: Completion = self._handle.chat.remote(request).result(
                timeout_s=self._timeout_s
            )
            return completion
        structured = StructuredRequest(messages=tuple(messages), params=params, target=json_schema)
        reply = self._handle.generate_json.remote(structured).result(timeout_s=self._timeout_s)
        return reply.completion  # type: ignore[no-any-return]

    def close(self) -> None:
        """Nothing to free: the replicas own the model."""
