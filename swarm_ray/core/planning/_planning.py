"""Planning by a planning capability (the LLM planner), as the first sub-task of its task.

A request chooses with `TaskRequest.planner`. A task planned by a capability starts with
a one-sub-task DAG: `plan`, on that capability, whose input is the request and the
catalogue (`planning_plan`) and whose output is a draft (`PlanDraft`: a list of stages).
Being a sub-task of the task's one scheduler, the planner's call is durable (its result
is in the task's log), watermarked, retried, traced and accounted like any other. When
it settles, the driver turns the draft into the task's plan (`plan_from_output`), checked
exactly like a template's (`validate_plan`, input models), and the DAG grows by that
plan as it does by a `for_each` (`PlanAdopted`); a refused draft, or a planner that
failed for good, hands the request to the template router with a warning on the task
(`fallback_plan`); when no template fits either, the task fails with both reasons.

No Ray, no model here: a planning capability is any registered Serve capability whose
output has a `draft`, so the runtime imports no LLM code.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from swarm_ray.core.model._capability import ExecutorKind
from swarm_ray.core.model._errors import (
    InvalidPlanError,
    InvalidSpecError,
    NoTemplateMatchedError,
    SwarmError,
)
from swarm_ray.core.model._plan import FROM_MARKER, TASK_MARKER, Plan, expand, validate_plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._subtask import SubTaskSpec
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.model._template import FanOut, Stage, TaskTemplate
from swarm_ray.core.planning._routing import TemplateRouter

__all__: list[str] = []

logger = logging.getLogger(__name__)
_FROZEN = ConfigDict(frozen=True, extra="forbid")

DEFAULT_PLANNER = "llm.planning.plan"
"""The planning capability `planner="auto"` asks when no template matches."""
PLAN_SUBTASK = "plan"
"""Sub-task id of the planning call: the first node of its task's DAG, not one of the plan's
(no stage may take its name)."""
PLAN_TEMPLATE = "llm-plan"
"""Name of the template a planner-made plan carries."""
PLANNING_TEMPLATE = "planning"
"""Name of the one-stage template of the planning call."""


def planner_for(request: TaskRequest, router: TemplateRouter) -> str | None:
    """The planning capability to ask for `request`, or None for the template router."""
    if request.planner == "template" or request.template is not None:
        return None
    if request.planner == "auto":
        try:
            router.route(request)
        except NoTemplateMatchedError:
            return DEFAULT_PLANNER
        return None
    return request.planner


def check_planner(registry: Registry, planner: str) -> None:
    """Refuse, before anything runs, a planner that is not a registered planning capability.

    Raises:
        UnknownCapabilityError: `planner` is not registered.
        InvalidSpecError: it is not served by Serve or does not answer a plan `draft`.
    """
    spec = registry.get(planner)
    if spec.executor is not ExecutorKind.SERVE or "draft" not in spec.output_model.model_fields:
        raise InvalidSpecError(
            f"capability `{planner}` cannot plan: a planner is a Serve capability whose "
            "output has a `draft` (like `llm.planning.plan`)"
        )


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
    """`once` or `per_item`."""
    depends_on: tuple[str, ...] = ()
    """Names of earlier stages it needs."""
    input: dict[str, Any] = Field(default_factory=dict)
    """Input with template placeholders (`$item`, `$query`, `$from.STAGE`)."""


class PlanDraft(BaseModel):
    """A plan as the model proposes it, before any check."""

    model_config = _FROZEN

    stages: tuple[DraftStage, ...] = Field(min_length=1)
    """The stages."""


def planning_plan(
    planner: str, request: TaskRequest, registry: Registry, *, task_id: str, workdir: str | None
) -> Plan:
    """The one-sub-task plan that asks `planner` for the task's plan."""
    lines = [line for line in CapabilityLine.catalogue(registry) if line.id != planner]
    data: dict[str, Any] = {
        "request": request.model_dump(mode="json"),
        "capabilities": [line.model_dump(mode="json") for line in lines],
    }
    payload = registry.validate_input(planner, data).model_dump(mode="json")
    stage = Stage(name=PLAN_SUBTASK, capability=planner, required=True)
    template = TaskTemplate(name=PLANNING_TEMPLATE, stages=(stage,), aggregate=PLAN_SUBTASK)
    spec = SubTaskSpec(
        id=PLAN_SUBTASK, stage=PLAN_SUBTASK, capability_id=planner, input=payload, required=True
    )
    return Plan(
        task_id=task_id,
        request=request,
        template=template,
        subtasks=(spec,),
        workdir=workdir,
        draft_subtask=PLAN_SUBTASK,
    )


def plan_from_output(
    output: dict[str, Any] | None,
    planning: Plan,
    registry: Registry,
    router: TemplateRouter,
    *,
    failure: str | None = None,
) -> Plan:
    """The task's plan from the planning sub-task's output, or the router's with a warning.

    `failure` is why the planning sub-task failed for good (no output). Raises
    `NoTemplateMatchedError` when the draft is refused and no template fits, and
    `InvalidPlanError` when the template's plan is invalid.
    """
    request, task_id = planning.request, planning.task_id
    try:
        if output is None:
            raise SwarmError(f"planner `{planning.subtasks[0].capability_id}` failed: {failure}")
        draft = PlanDraft.model_validate(output.get("draft"))
        model = str(output.get("model", planning.subtasks[0].capability_id))
        plan = plan_from_draft(draft, model, request, task_id, registry)
    except (SwarmError, ValidationError) as exc:
        plan = fallback_plan(router, request, task_id, exc)
        validate_plan(plan, registry)
        _beside_the_planner(plan)
    return plan.model_copy(update={"workdir": planning.workdir})


def _beside_the_planner(plan: Plan) -> None:
    """Refuse a plan with a stage named like the planner's sub-task: they share one DAG."""
    if any(stage.name == PLAN_SUBTASK for stage in plan.template.stages):
        raise InvalidPlanError(
            f"stage `{PLAN_SUBTASK}` of template `{plan.template.name}` would take the id "
            "of the planner's own sub-task; name it otherwise"
        )


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
    _beside_the_planner(plan)
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
