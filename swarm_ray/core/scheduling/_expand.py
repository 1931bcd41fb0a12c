"""The DAG grows at run time, as a pure policy: what an accepted result adds to its plan.

Three things add sub-tasks once a sub-task succeeds, all decided from its output alone
(so a replayed log grows the same DAG): a `for_each` stage fans out over a list in it
(`fan_outs`), a dynamic rule whose condition it matches adds the rule's stage
(`rule_fires`), and a feedback loop's judge that finds fault starts the next round of
generator and judge (`feedback`). Pending sub-tasks that waited on the source wait on
what was added too (`for_each`, and rules for `partial_ok` stages: `depends_on`); a new
round stands in for the one it reruns (`Scheduler.current`).

A fourth is decided outside, because it needs the template router and the access policy:
a planner's draft. The driver makes the plan of it and the log keeps that plan
(`PlanAdopted`), so a replay grows the same DAG from the event alone.

Every function here reads the plan, the source's spec and output and the sub-tasks'
records, and returns what to add; it changes nothing. `Scheduler` adds it and links it;
`_dynamic` builds the new specs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from swarm_ray.core.model._errors import InvalidPlanError
from swarm_ray.core.model._plan import Plan, each_elements, nesting_depth, stage_subtask
from swarm_ray.core.model._subtask import SubTaskResult, SubTaskSpec
from swarm_ray.core.model._template import FOR_EACH, DynamicRule
from swarm_ray.core.scheduling._dynamic import next_round, output_path, rule_matches, rule_subtask
from swarm_ray.core.scheduling._node import _Node

__all__: list[str] = []


@dataclass(frozen=True, slots=True)
class EachAdds:
    """A `for_each` stage's sub-tasks over the source's output."""

    stage: str
    specs: tuple[SubTaskSpec, ...]
    waiting: frozenset[str]
    """The stages that depend on `stage`: their pending sub-tasks wait on `specs` too."""


@dataclass(frozen=True, slots=True)
class NextRound:
    """A feedback loop's next round: a new generator and judge standing in for the last."""

    stage: str
    generator: str
    """The generator sub-task the new round reruns (the judge is the source)."""
    new_generator: SubTaskSpec
    new_judge: SubTaskSpec


def fan_outs(
    plan: Plan, source: SubTaskSpec, result: SubTaskResult
) -> tuple[list[EachAdds], str | None]:
    """The `for_each` stages fanning out over `source`'s output, in the template's order.

    A value that is not a list, or a list over the stage's `max_each`, stops there: the
    fan-outs before it, and the message the task fails with naming the stage.
    """
    sid = source.id
    found_all: list[EachAdds] = []
    for stage in plan.template.stages:
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
            return found_all, exc.message
        specs = tuple(
            stage_subtask(
                stage,
                request=plan.request,
                item=None,
                element=None,
                depends_on={source.stage: ([sid], False)},
                workdir=plan.workdir,
                each=element,
                each_index=index,
            )
            for index, element in enumerate(elements)
        )
        waiting = frozenset(s.name for s in plan.template.stages if stage.name in s.depends_on)
        found_all.append(EachAdds(stage.name, specs, waiting))
    return found_all, None


def rule_fires(
    plan: Plan,
    rule: DynamicRule,
    source: SubTaskSpec,
    result: SubTaskResult,
    nodes: Mapping[str, _Node],
) -> SubTaskSpec | str | None:
    """The sub-task `rule` adds for `source`'s output, a warning why not, or None.

    None when it does not match or added its sub-task already (once per rule); a warning
    when the sub-task would nest deeper than the template's `max_depth`.
    """
    if rule.when_stage != source.stage or not rule_matches(rule, result.output):
        return None
    spec = rule_subtask(plan, rule, source)
    if spec.id in nodes:
        return None
    specs = {k: node.spec for k, node in nodes.items()}
    depth = nesting_depth({**specs, spec.id: spec}, spec.id)
    limit = plan.template.max_depth
    if depth > limit:
        return (
            f"rule `{rule.name}` matched `{source.id}` but `{spec.id}` would nest "
            f"{depth} deep, over the limit of {limit}; not run"
        )
    return spec


def feedback(
    plan: Plan, judge: SubTaskSpec, result: SubTaskResult, nodes: Mapping[str, _Node]
) -> NextRound | str | None:
    """The next round of the loop whose judge `judge` is, if its verdict finds fault.

    A warning instead once the loop ran its `max_rounds`; None when no loop's judge finds
    fault.
    """
    for loop in plan.template.loops:
        if loop.judge != judge.stage or output_path(result.output, loop.verdict_field):
            continue
        if judge.round >= loop.max_rounds:
            return (
                f"judge `{judge.id}` still finds fault after {judge.round} round(s); "
                "kept the last version"
            )
        gen_id = next(d for d in judge.depends_on if nodes[d].spec.stage == loop.stage)
        new_gen, new_judge = next_round(loop, judge, nodes[gen_id].spec, result.output)
        return NextRound(loop.stage, gen_id, new_gen, new_judge)
    return None


def depends_on(nodes: Mapping[str, _Node], sid: str, target: str) -> bool:
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
