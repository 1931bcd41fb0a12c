"""How a request becomes a plan: one pure function, `plan_request`.

Every way a task gets its first plan goes through it: a new request (`runtime._intake`),
and a stored task planned again after a restart (`Replan`). Its answer is the driver
input that starts the task, so what was decided is what is carried out:

- `Planned(plan)`: a template's plan, expanded and validated (the one validation; the
  driver does not check it again);
- `AskPlanner(planner)`: a planning capability plans it, as the task's first sub-task
  (`_planning`); its draft is checked the same way when it arrives;
- `PlanFailed(error)`: no template fits, or its plan is invalid. The task is recorded
  as failed with that error.

A request that must be refused before any task exists raises instead: an unknown or
unusable planner, or a plan naming a path or URL the caller's access policy refuses.

No Ray, no I/O: the caller resolves file ids and chooses the task's id and directory.
"""

from __future__ import annotations

from swarm_ray.core.driver._commands import AskPlanner, PlanFailed, Planned
from swarm_ray.core.guards._access import AccessPolicy
from swarm_ray.core.model._errors import SwarmUserError
from swarm_ray.core.model._plan import expand, validate_plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.planning._planning import check_planner, planner_for
from swarm_ray.core.planning._routing import TemplateRouter

__all__: list[str] = []


def plan_request(
    request: TaskRequest,
    *,
    registry: Registry,
    router: TemplateRouter,
    policy: AccessPolicy | None,
    task_id: str,
    workdir: str,
) -> Planned | AskPlanner | PlanFailed:
    """The input that starts a task for `request` (its file ids already resolved).

    `policy` is what the task's inputs may name (None: a trusted caller, anything).
    Raises `SwarmUserError` for a request refused outright (see the module docstring).
    """
    planner = planner_for(request, router)
    if planner is not None:
        check_planner(registry, planner)
        return AskPlanner(planner, request)
    try:
        plan = expand(router.route(request), request, task_id=task_id, workdir=workdir)
        validate_plan(plan, registry)
    except SwarmUserError as exc:
        return PlanFailed(exc)
    if policy is not None:
        policy.check_plan(plan, registry)
    return Planned(plan)
