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

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from swarm_ray._errors import InvalidOutputError, NoTemplateMatchedError, SwarmError
from swarm_ray._plan import FROM_MARKER, TASK_MARKER, Plan, expand, validate_plan
from swarm_ray._registry import Registry
from swarm_ray._routing import TemplateRouter
from swarm_ray._subtask import TokenUsage
from swarm_ray._task import TaskRequest
from swarm_ray._template import FanOut, TaskTemplate
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
PLAN_TEMPLATE = "llm-plan"
"""Name of the template an LLM-made plan carries."""


class CapabilityLine(BaseModel):
    """What the planner is told about one capability."""

    model_config = _FROZEN

    id: str
    """The capability id (the only values the draft may use)."""
    description: str
    """What it does."""
    inputs: tuple[str, ...] = ()
    """Its input fields."""

    @classmethod
    def catalogue(cls, registry: Registry) -> list[CapabilityLine]:
        """One line per registered capability."""
        return [
            cls(id=s.id, description=s.description, inputs=tuple(s.input_model.model_fields))
            for s in registry
        ]


class DraftStage(BaseModel):
    """One stage of a plan draft, as the model writes it."""

    model_config = _FROZEN

    name: str
    """Stage name (letters, digits, underscores)."""
    capability: str
    """A registered capability id."""
    fan_out: FanOut = FanOut.ONCE
    """`once`, `per_item` or `per_item_dimension`."""
    depends_on: tuple[str, ...] = ()
    """Names of earlier stages it needs."""
    input: dict[str, Any] = Field(default_factory=dict)
    """Input with template placeholders (`$item`, `$query`, `$from.STAGE`)."""


class PlanDraft(BaseModel):
    """A plan as the model proposes it, before any check."""

    model_config = _FROZEN

    stages: tuple[DraftStage, ...] = Field(min_length=1)
    """The stages."""


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


def _concrete(value: Any) -> bool:
    """True when an input holds no dispatch-time marker (so it can be checked now)."""
    if isinstance(value, dict):
        return (
            FROM_MARKER not in value
            and TASK_MARKER not in value
            and all(_concrete(v) for v in value.values())
        )
    if isinstance(value, list):
        return all(_concrete(v) for v in value)
    return True


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


def plan_from_draft(
    draft: PlanDraft, model: str, request: TaskRequest, task_id: str, registry: Registry
) -> Plan:
    """Turn a draft into a plan checked like a template's; raises what refuses it."""
    # The one stage nothing depends on, if there is one, gives the task its output.
    needed = {dep for stage in draft.stages for dep in stage.depends_on}
    sinks = [stage.name for stage in draft.stages if stage.name not in needed]
    template = TaskTemplate.model_validate(
        {
            "name": PLAN_TEMPLATE,
            "description": f"planned by `{model}`",
            "stages": [s.model_dump(mode="json") for s in draft.stages],
            "aggregate": sinks[0] if len(sinks) == 1 and len(draft.stages) > 1 else None,
        }
    )
    plan = expand(template, request, task_id=task_id)
    validate_plan(plan, registry)
    for spec in plan.subtasks:
        if _concrete(spec.input):
            registry.validate_input(spec.capability_id, spec.input)
    return plan


def fallback_plan(
    router: TemplateRouter, request: TaskRequest, task_id: str, why: SwarmError | ValidationError
) -> Plan:
    """The template router's plan, carrying a warning that says why the LLM's was refused.

    Raises `NoTemplateMatchedError` (with the refusal in its message) when no template
    fits either.
    """
    reason = why.message if isinstance(why, SwarmError) else _first_error(why)
    try:
        template = router.route(request)
    except NoTemplateMatchedError as exc:
        raise NoTemplateMatchedError(
            f"LLM planner's plan was refused ({reason[:300]}) and {exc.message}", **exc.details
        ) from None
    warning = (
        f"LLM planner's plan was refused ({reason[:300]}); fell back to template `{template.name}`"
    )
    logger.warning(warning)
    plan = expand(template, request, task_id=task_id)
    return plan.model_copy(update={"warnings": (*plan.warnings, warning)})


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(root)"
    return f"`{where}`: {err['msg']}"
