"""The DAG grows at run time: what an accepted result adds to its task's plan.

Three things add sub-tasks once a sub-task succeeds, all decided from its output alone
(so a replayed log grows the same DAG): a `for_each` stage fans out over a list in it,
a dynamic rule whose condition it matches adds the rule's stage, and a feedback loop's
judge that finds fault starts the next round of generator and judge. Pending sub-tasks
that waited on the source wait on what was added too (`for_each`, and rules for
`partial_ok` stages); a new round stands in for the one it reruns (`Scheduler.current`).

A fourth is decided outside, because it needs the template router and the access policy:
a planner's draft. The driver makes the plan of it and the log keeps that plan
(`PlanAdopted`), so a replay grows the same DAG from the event alone.

`Expansion` is mixed into `Scheduler`; `_dynamic` builds the new specs, this decides when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from swarm_ray.core._dynamic import next_round, output_path, rule_matches, rule_subtask
from swarm_ray.core._errors import ErrorCode, InvalidPlanError
from swarm_ray.core._node import SubTaskStatus, _Node
from swarm_ray.core._plan import Plan, each_elements, nesting_depth, stage_subtask
from swarm_ray.core._signals import (
    DraftSettled,
    FannedOut,
    FeedbackRoundStarted,
    Intent,
    RuleFired,
    Warn,
)
from swarm_ray.core._subtask import SubTaskResult, SubTaskSpec
from swarm_ray.core._template import FOR_EACH

__all__: list[str] = []


class Expansion:
    """The scheduler's methods that add sub-tasks for an accepted result."""

    if TYPE_CHECKING:  # what of the scheduler they use
        plan: Plan
        _nodes: dict[str, _Node]
        _unsettled: int
        drafted: DraftSettled | None

        def _add(self, spec: SubTaskSpec, *, origin: str, link: bool = True) -> None: ...

        def _take(self, plan: Plan) -> None: ...

        def _dispatch_ready(self, at: float, settled: str | None = None) -> list[Intent]: ...

        def _warn(self, message: str, subtask_id: str | None = None) -> Warn: ...

        def _end(self, reason: str, code: ErrorCode, sid: str | None) -> list[Intent]: ...

    def _adopt(self, plan: Plan, at: float) -> list[Intent]:
        """Grow the DAG by the plan made of the settled draft, and dispatch what is ready.

        From now on the task runs `plan`'s template (its stages, rules, loops, aggregate).
        Ignored when no draft waits for a plan (it was adopted already).
        """
        if self.drafted is None:
            return []
        self.drafted = None
        self._take(plan)
        return self._dispatch_ready(at)

    def _expand_each(self, sid: str, result: SubTaskResult) -> list[Intent]:
        """Add the sub-tasks of each `for_each` stage fanning out over `sid`'s output.

        Stages depending on such a stage waited on `sid` until now; they wait on the new
        sub-tasks too. A value that is not a list, or a list over the stage's `max_each`,
        fails the task naming the stage.
        """
        source = self._nodes[sid].spec
        out: list[Intent] = []
        for stage in self.plan.template.stages:
            found = FOR_EACH.match(stage.for_each or "")
            if found is None or found.group("stage") != source.stage:
                continue
            try:
                elements = each_elements(
                    stage,
                    output_path(result.output, found.group("path")),
                    where=f"`{stage.for_each}` (the output of `{sid}`)",
                )
            except InvalidPlanError as exc:
                return out + self._end(exc.message, ErrorCode.INVALID_PLAN, sid)
            added = []
            for index, element in enumerate(elements):
                spec = stage_subtask(
                    stage,
                    request=self.plan.request,
                    item=None,
                    element=None,
                    depends_on={source.stage: ([sid], False)},
                    workdir=self.plan.workdir,
                    each=element,
                    each_index=index,
                )
                self._add(spec, origin="each")
                added.append(spec.id)
            waiting = {s.name for s in self.plan.template.stages if stage.name in s.depends_on}
            for other in self._nodes.values():
                if other.spec.stage in waiting and other.status is SubTaskStatus.PENDING:
                    other.spec = other.spec.model_copy(
                        update={"depends_on": (*other.spec.depends_on, *added)}
                    )
                    for new in added:
                        self._nodes[new].dependents.append(other.spec.id)
            out.append(FannedOut(stage=stage.name, source=sid, added=tuple(added)))
        return out

    def _fire_rules(self, sid: str, result: SubTaskResult) -> list[Intent]:
        """Add the stage of each dynamic rule that `sid`'s output matches (once per rule)."""
        out: list[Intent] = []
        source = self._nodes[sid].spec
        template = self.plan.template
        for rule in template.rules:
            if rule.when_stage != source.stage or not rule_matches(rule, result.output):
                continue
            spec = rule_subtask(self.plan, rule, source)
            if spec.id in self._nodes:
                continue
            specs = {k: node.spec for k, node in self._nodes.items()}
            depth = nesting_depth({**specs, spec.id: spec}, spec.id)
            if depth > template.max_depth:
                out.append(
                    self._warn(
                        f"rule `{rule.name}` matched `{sid}` but `{spec.id}` would nest "
                        f"{depth} deep, over the limit of {template.max_depth}; not run",
                        sid,
                    )
                )
                continue
            self._add(spec, origin="rule")
            for other in self._nodes.values():
                if (
                    other.spec.partial_ok
                    and other.status is SubTaskStatus.PENDING
                    and _depends_on(self._nodes, other.spec.id, sid)
                ):
                    deps = (*other.spec.depends_on, spec.id)
                    other.spec = other.spec.model_copy(update={"depends_on": deps})
                    self._nodes[spec.id].dependents.append(other.spec.id)
            out.append(RuleFired(rule=rule.name, source=sid, added=(spec.id,)))
        return out

    def _feedback(self, sid: str, result: SubTaskResult) -> list[Intent]:
        """Start the next round of the loop whose judge `sid` is, if its verdict finds fault."""
        judge = self._nodes[sid].spec
        for loop in self.plan.template.loops:
            if loop.judge != judge.stage or output_path(result.output, loop.verdict_field):
                continue
            if judge.round >= loop.max_rounds:
                message = (
                    f"judge `{sid}` still finds fault after {judge.round} round(s); "
                    "kept the last version"
                )
                return [self._warn(message, sid)]
            gen_id = next(d for d in judge.depends_on if self._nodes[d].spec.stage == loop.stage)
            new_gen, new_judge = next_round(loop, judge, self._nodes[gen_id].spec, result.output)
            for spec in (new_gen, new_judge):
                self._add(spec, origin="feedback")
            self._nodes[gen_id].replaced_by = new_gen.id
            self._nodes[sid].replaced_by = new_judge.id
            self._unsettled += 1  # what waited on them waits on the new round
            self._nodes[new_gen.id].previous = gen_id
            self._nodes[new_judge.id].previous = sid
            return [
                FeedbackRoundStarted(
                    stage=loop.stage,
                    judge_subtask=sid,
                    round=new_judge.round,
                    added=(new_gen.id, new_judge.id),
                )
            ]
        return []


def _depends_on(nodes: dict[str, _Node], sid: str, target: str) -> bool:
    """Whether `sid` depends on `target`, directly or through other sub-tasks."""
    stack, seen = [sid], set()
    while stack:
        for dep in nodes[stack.pop()].spec.depends_on:
            if dep == target:
                return True
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return False
