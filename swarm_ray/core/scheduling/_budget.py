"""A task's budget: whether its spending went past its request's bound, and what that stops.

A request may bound the tokens and money its task spends (`Budget`). The driver asks as
each result arrives and after a restart (the owner's daily allowance is the
orchestrator's to count, and is asked only when the request's own bound holds). Past a
bound the task fails and what still runs is halted; with `on_exceeded: finish`, only what
spends is stopped (`SpendingStopped`) and the rest of the plan finishes, unless the plan
is still being drafted: a draft has no rest, so that task fails.

Pure: no Ray, no I/O.
"""

from __future__ import annotations

from swarm_ray.core.model._errors import BudgetExceededError
from swarm_ray.core.model._signals import SpendingStopped
from swarm_ray.core.model._subtask import TokenUsage
from swarm_ray.core.model._task import Budget
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__: list[str] = []


def over_budget(task_id: str, budget: Budget, used: TokenUsage) -> BudgetExceededError | None:
    """The error of task `task_id` once `used` is past its request's `budget`, else None."""
    over = budget.breach(used.total_tokens, used.cost, "budget")
    if over is None:
        return None
    limit, value, maximum, unit = over
    return BudgetExceededError(
        f"task `{task_id}` spent {value:g} {unit}, over its `{limit}` of {maximum:g}; "
        "its running sub-tasks were stopped",
        limit=limit,
        value=value,
        maximum=maximum,
    )


def finishes_anyway(budget: Budget | None, scheduler: Scheduler | None) -> bool:
    """True when a task past its budget stops only what spends and finishes the rest.

    That is `on_exceeded: finish` on a plan no longer being drafted; any other task fails.
    """
    finish = budget is not None and budget.on_exceeded == "finish"
    return finish and scheduler is not None and not scheduler.drafting


def spending_stopped(error: BudgetExceededError, now: float) -> SpendingStopped:
    """The scheduler event that stops what spends, for the breach `error` names."""
    limit = str(error.details.get("limit", "budget"))
    return SpendingStopped(at=now, limit=limit, message=error.message)
