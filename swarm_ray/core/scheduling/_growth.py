"""The DAG grows: what an accepted result adds, written into the task's `Dag`.

`core.scheduling._expand` decides, purely, what a result adds: the sub-tasks of each
`for_each` stage fanning out over it, the stage of each dynamic rule it matches, the next
round of a feedback loop whose judge found fault. Here those decisions are applied to the
one table of sub-tasks, through its own methods (`Dag.add`, `wait_also`, `new_round`):
the `Dag` alone adds records. Each function returns, in order, the intents that tell of
what grew and the warnings to give (plain strings); the scheduler gives them, as it owns
the task's warnings.
"""

from __future__ import annotations

from typing import assert_never

from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._signals import FannedOut, FeedbackRoundStarted, Intent, RuleFired
from swarm_ray.core.model._subtask import SubTaskResult
from swarm_ray.core.scheduling._dag import Dag
from swarm_ray.core.scheduling._expand import NextRound, depends_on, fan_outs, feedback, rule_fires
from swarm_ray.core.scheduling._node import SubTaskStatus

__all__: list[str] = []

Grown = list[Intent | str]
"""What a growth tells, in order: an intent, or a warning to give."""


def grow_each(dag: Dag, plan: Plan, sid: str, result: SubTaskResult) -> tuple[Grown, str | None]:
    """Add the sub-tasks of each `for_each` stage fanning out over `sid`'s output.

    Returns what grew and, when the fan-out cannot be made, why (the task fails).
    """
    each, problem = fan_outs(plan, dag.nodes[sid].spec, result)
    out: Grown = []
    for adds in each:
        for spec in adds.specs:
            dag.add(spec, origin="each")
        added = tuple(spec.id for spec in adds.specs)
        for other in dag.nodes.values():
            if other.spec.stage in adds.waiting and other.status is SubTaskStatus.PENDING:
                dag.wait_also(other, added)
        out.append(FannedOut(stage=adds.stage, source=sid, added=added))
    return out, problem


def fire_rules(dag: Dag, plan: Plan, sid: str, result: SubTaskResult) -> Grown:
    """Add the stage of each dynamic rule that `sid`'s output matches (once per rule)."""
    out: Grown = []
    nodes = dag.nodes
    source = nodes[sid].spec
    for rule in plan.template.rules:
        match rule_fires(plan, rule, source, result, nodes):
            case None:
                pass
            case str() as warning:
                out.append(warning)
            case spec:
                dag.add(spec, origin="rule")
                for other in nodes.values():
                    if (
                        other.spec.partial_ok
                        and other.status is SubTaskStatus.PENDING
                        and depends_on(nodes, other.spec.id, sid)
                    ):
                        dag.wait_also(other, (spec.id,))
                out.append(RuleFired(rule=rule.name, source=sid, added=(spec.id,)))
    return out


def next_round(dag: Dag, plan: Plan, sid: str, result: SubTaskResult) -> Grown:
    """Start the next round of the loop whose judge `sid` is, if its verdict finds fault."""
    match feedback(plan, dag.nodes[sid].spec, result, dag.nodes):
        case None:
            return []
        case str() as warning:
            return [warning]
        case NextRound(stage=stage, generator=gen_id, new_generator=gen, new_judge=judge):
            for spec in (gen, judge):
                dag.add(spec, origin="feedback")
            dag.new_round(gen_id, gen.id)
            dag.new_round(sid, judge.id)
            dag.rounds_replaced()  # what waited on them waits on the new round
            added = (gen.id, judge.id)
            return [
                FeedbackRoundStarted(stage=stage, judge_subtask=sid, round=judge.round, added=added)
            ]
        case _ as unreachable:
            assert_never(unreachable)
