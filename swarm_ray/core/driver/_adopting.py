"""A task's plan, the driver's side: how a task comes to run one, a template's or a planner's.

A template's plan arrives made (`Planned`): the driver stores it, moves the task through
`routing` to `dispatching` and starts the task's one scheduler on it (`_start`). A task
planned by a planning capability starts instead on a one-sub-task DAG, the planner's call
(`AskPlanner`, `_planning.planning_plan`); when that sub-task settles (`DraftSettled`),
the plan made of its draft (`_planning.plan_from_output`), checked by the task's access
policy, is stored the same way and the DAG grows by it (`PlanAdopted`). A plan that
cannot be made or started fails the task.

What a plan is made of is `_planning`'s and `_request_plan`'s; this carries it out.
`Adopting` is mixed into `TaskDriver`; the driver alone sets its scheduler
(`TaskDriver._begin`).
"""

from __future__ import annotations

from swarm_ray.core.driver._commands import Step
from swarm_ray.core.driver._host import DriverHost
from swarm_ray.core.model._errors import SwarmUserError
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._signals import DraftSettled, Intent, PlanAdopted
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.planning._planning import plan_from_output, planning_plan

__all__: list[str] = []


class Adopting(DriverHost):
    """The driver's methods that give its task a plan and start the task on it."""

    def _start(self, plan: Plan, out: Step) -> None:
        """Run `plan` (a template's, or made of a draft); `executing` once its first leave."""
        try:
            intents = self._plan(plan)
        except SwarmUserError as exc:
            self._fail(exc, out)
            return
        self._carry(intents, out)
        if self.state is TaskState.DISPATCHING:
            self._ledger.move(TaskState.EXECUTING, "first sub-tasks dispatched", save=False)

    def _plan(self, plan: Plan) -> list[Intent]:
        """Run `plan`, validated where it was made. Raises user errors.

        The scheduler starts on it, or, when a planner drafted it, the DAG grows by it.
        """
        if self.state is TaskState.CREATED:
            self._ledger.move(TaskState.ROUTING, "routing the request to a template", save=False)
        if plan.workdir is None:
            plan = plan.model_copy(update={"workdir": self.record.workdir})
        self._ledger.update(plan=plan)
        if self.state is TaskState.ROUTING:
            summary = f"plan `{plan.template.name}`: {len(plan.subtasks)} sub-tasks"
            self._ledger.move(TaskState.DISPATCHING, summary)
        else:  # made again after a restart that came between its save and its adoption
            self._ledger.save()
        if self.scheduler is not None:
            return self._feed(PlanAdopted(at=self._clock(), plan=plan))
        return self._begin(plan)

    def _ask(self, planner: str, request: TaskRequest, out: Step) -> None:
        """Start on a one-sub-task DAG: `plan`, on the planning capability (`_planning`)."""
        try:
            planning = planning_plan(
                planner,
                request,
                self.registry,
                task_id=self.task_id,
                workdir=self.record.workdir,
            )
        except SwarmUserError as exc:
            self._fail(exc, out)
            return
        self._ledger.update(planning=planning)
        self._ledger.save()
        self._ledger.emit(
            "planning", "asking", agent=planner, summary=f"asking `{planner}` for a plan"
        )
        self._carry(self._begin(planning), out)

    def _planned(self, drafted: DraftSettled, out: Step) -> None:
        """The planning sub-task settled: make the plan of its draft; the DAG grows by it."""
        assert self.scheduler is not None and self.record.planning is not None
        result = self.scheduler.result(drafted.subtask_id)
        planner = self.record.planning.subtasks[0].capability_id
        try:
            plan = plan_from_output(
                None if result is None else result.output,
                self.record.planning,
                self.registry,
                self._router,
                failure=drafted.failure,
            )
            if self._access is not None:
                self._access.check_plan(plan, self.registry)
        except SwarmUserError as exc:
            self._fail(exc, out)
            return
        tokens = self.scheduler.usage().completion_tokens  # the planner's: nothing else ran
        self._ledger.emit(
            "planning",
            "planned",
            agent=planner,
            summary=f"plan `{plan.template.name}`, {len(plan.subtasks)} sub-tasks, "
            f"{tokens} planner tokens",
        )
        self._start(plan, out)
