"""Planning a task by asking a planning capability (the LLM planner) instead of a template.

A request chooses with `TaskRequest.planner`. A planning capability takes the request and
the catalogue (`llm.planning.plan`'s `PlanIn`) and answers a draft (`PlanOut`); the draft
becomes a plan checked exactly like a template's (`validate_plan`, input models). A
refused draft, or a planner that fails, hands the request to the template router and
leaves a warning on the task; when no template fits either, the task fails with both
reasons.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import ValidationError

from swarm_ray._capability import ExecutorKind
from swarm_ray._errors import (
    AgentExecutionError,
    InvalidSpecError,
    NoTemplateMatchedError,
    SwarmError,
)
from swarm_ray._executors import ServeExecutor
from swarm_ray._plan import Plan
from swarm_ray._registry import Registry
from swarm_ray._routing import TemplateRouter
from swarm_ray._subtask import SubTask, TokenUsage
from swarm_ray._task import TaskRequest
from swarm_ray._watermark import WatermarkKey, issue_watermark

__all__: list[str] = []

DEFAULT_PLANNER = "llm.planning.plan"
"""The planning capability `planner="auto"` asks when no template matches."""
PLAN_SUBTASK = "plan"
"""Sub-task id of the planning call (it precedes the plan, so it is not one of its nodes)."""


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


async def plan_with(
    planner: str,
    request: TaskRequest,
    *,
    task_id: str,
    trace_id: str,
    registry: Registry,
    router: TemplateRouter,
    key: WatermarkKey,
    serve: ServeExecutor,
) -> tuple[Plan, TokenUsage]:
    """Ask `planner` for a plan; fall back to the templates as the module says.

    Returns the plan and the tokens the planner spent. Raises `NoTemplateMatchedError`
    when the planner's plan is refused and no template fits.
    """
    from swarm_ray.llm._planner import CapabilityLine, PlanDraft, fallback_plan, plan_from_draft

    spec = registry.get(planner)
    lines = [line for line in CapabilityLine.catalogue(registry) if line.id != planner]
    data: dict[str, Any] = {
        "request": request.model_dump(mode="json"),
        "capabilities": [line.model_dump(mode="json") for line in lines],
    }
    payload = registry.validate_input(planner, data).model_dump(mode="json")
    now = time.time()
    subtask = SubTask(
        task_id=task_id,
        parent_task_id=request.parent_task_id,
        subtask_id=PLAN_SUBTASK,
        capability_id=planner,
        attempt=1,
        input=payload,
        watermark=issue_watermark(
            key,
            task_id=task_id,
            parent_task_id=request.parent_task_id,
            subtask_id=PLAN_SUBTASK,
            capability_id=planner,
            input=payload,
            issued_ms=int(now * 1000),
        ),
        trace_id=trace_id,
        timeout_s=spec.timeout_s,
        queued_at=now,
    )
    result = await serve.run(spec, subtask)
    try:
        if result.error is not None or result.output is None:
            message = result.error.message if result.error else "no output"
            raise AgentExecutionError(f"planner `{planner}` failed: {message}")
        draft = PlanDraft.model_validate(result.output["draft"])
        model = str(result.output.get("model", planner))
        plan = plan_from_draft(draft, model, request, task_id, registry)
    except (SwarmError, ValidationError) as exc:
        plan = fallback_plan(router, request, task_id, exc)
    return plan, result.usage
