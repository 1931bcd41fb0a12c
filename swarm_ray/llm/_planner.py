"""The LLM planner: a request and the catalogue in, a validated `Plan` out, or a fallback.

The model writes a plan draft, a list of stages, under a JSON Schema whose `capability`
field is an enum of the registered ids, so decoding cannot name a capability that does
not exist. The draft becomes a `TaskTemplate`, is expanded against the request and is
checked by `validate_plan`, the same validator template plans pass; concrete inputs are
also checked against their capabilities' input models. Whatever fails (JSON that breaks
the schema, a cycle, a missing dependency, a bad input), the template router plans the
request instead and the plan carries a warning saying why, so the task shows it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict, ValidationError

from swarm_ray.core import (
    CapabilityLine,
    DraftStage,
    FanOut,
    InvalidOutputError,
    Plan,
    PlanDraft,
    Registry,
    SwarmError,
    TaskRequest,
    TemplateRouter,
    TokenUsage,
    fallback_plan,
    plan_from_draft,
)
from swarm_ray.llm._engine import Engine, GenerationParams, Message
from swarm_ray.llm._structured import StructuredReply, generate_structured

__all__ = [
    "CapabilityLine",
    "DraftStage",
    "LLMPlanner",
    "PlanDraft",
    "draft_plan",
    "fallback_plan",
    "plan_from_draft",
]

logger = logging.getLogger(__name__)
_FROZEN = ConfigDict(frozen=True, extra="forbid")


def draft_schema(capability_ids: Sequence[str], max_stages: int = 6) -> dict[str, Any]:
    """The JSON Schema of a draft, with `capability` limited to `capability_ids`."""
    stage = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "capability": {"enum": sorted(capability_ids)},
            "fan_out": {"enum": [str(f) for f in FanOut]},
            "depends_on": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
            "input": {"type": "object"},
        },
        "required": ["name", "capability", "fan_out", "depends_on", "input"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "stages": {"type": "array", "items": stage, "minItems": 1, "maxItems": max_stages}
        },
        "required": ["stages"],
        "additionalProperties": False,
    }


def _messages(request: TaskRequest, capabilities: Sequence[CapabilityLine]) -> list[Message]:
    lines = "\n".join(
        f"- {c.id}: {c.description} (inputs: {', '.join(c.inputs) or 'none'})" for c in capabilities
    )
    system = (
        "You plan work for a swarm of agents. Answer with JSON: a list of stages, each "
        "running one capability from this list:\n"
        f"{lines}\n"
        "Inputs may use $item (one request item), $query (the request) and $from.STAGE "
        "(an earlier stage's output; list that stage in depends_on)."
    )
    asked = {"query": request.query, "items": list(request.items)[:10]}
    return [
        Message(role="system", content=system),
        Message(role="user", content=json.dumps(asked, default=str)),
    ]


def draft_plan(
    engine: Engine,
    request: TaskRequest,
    capabilities: Sequence[CapabilityLine],
    params: GenerationParams | None = None,
) -> StructuredReply:
    """Ask `engine` for a plan draft limited to `capabilities` (validated, not yet checked)."""
    schema = draft_schema([c.id for c in capabilities])
    params = params or GenerationParams(max_tokens=384)
    return generate_structured(engine, _messages(request, capabilities), schema, params)


class LLMPlanner:
    """Plans with an engine; falls back to the template router when the plan is refused."""

    def __init__(
        self,
        engine: Engine,
        registry: Registry,
        router: TemplateRouter,
        *,
        params: GenerationParams | None = None,
    ) -> None:
        self._engine = engine
        self._registry = registry
        self._router = router
        self._params = params or GenerationParams(max_tokens=384)
        self.usage = TokenUsage()
        """Tokens and time of every planning call so far."""

    def draft(self, request: TaskRequest, *, task_id: str) -> Plan:
        """The model's plan, checked; raises the error that refused it."""
        reply = draft_plan(
            self._engine, request, CapabilityLine.catalogue(self._registry), self._params
        )
        self.usage = self.usage + reply.completion.usage
        if reply.error is not None:
            raise InvalidOutputError(reply.error.message, **reply.error.details)
        assert reply.value is not None
        draft = PlanDraft.model_validate(reply.value)
        return plan_from_draft(draft, reply.completion.model, request, task_id, self._registry)

    def plan(self, request: TaskRequest, *, task_id: str) -> Plan:
        """The model's plan if it passes every check, else the router's, with a warning."""
        try:
            return self.draft(request, task_id=task_id)
        except (SwarmError, ValidationError) as exc:
            return fallback_plan(self._router, request, task_id, exc)
