"""Work added at run time: sub-tasks of dynamic rules and of feedback rounds.

Pure functions that build the new `SubTaskSpec`s from a finished sub-task and its output;
`core.scheduling._expand` decides when to call them and does the bookkeeping (dependencies, rounds).
"""

from __future__ import annotations

import re
from typing import Any

from swarm_ray.core.model._plan import Plan, stage_subtask
from swarm_ray.core.model._subtask import SubTaskResult, SubTaskSpec
from swarm_ray.core.model._template import DynamicRule, FeedbackLoop

__all__: list[str] = []

_ROUND = re.compile(r"@r\d+$")


def output_path(value: Any, path: str | None) -> Any:
    """The value at a dotted `path` in an output (None where a part is missing)."""
    for part in (path or "").split("."):
        if not part:
            continue
        value = value.get(part) if isinstance(value, dict) else None
    return value


def result_field(result: SubTaskResult, path: str | None) -> Any:
    """A field of a result's output, or `@watermark` / `@subtask_id` of the result itself."""
    if path is not None and path.startswith("@"):
        return getattr(result, path[1:], None) if path[1:] in ("watermark", "subtask_id") else None
    return output_path(result.output, path)


def rule_matches(rule: DynamicRule, output: dict[str, Any] | None) -> bool:
    """Whether `rule`'s condition holds for `output` (text contains, any list element, equals)."""
    value = output_path(output, rule.field)
    if rule.equals is not None:
        return bool(value == rule.equals)
    needle = (rule.contains or "").lower()
    values = value if isinstance(value, list) else [value]
    return any(v is not None and needle in str(v).lower() for v in values)


def rule_subtask(plan: Plan, rule: DynamicRule, source: SubTaskSpec) -> SubTaskSpec:
    """The sub-task `rule` adds for `source`: its triggered stage, depending on `source`."""
    return stage_subtask(
        plan.template.stage(rule.trigger),
        request=plan.request,
        item=source.item,
        element=source.element,
        depends_on={source.stage: ([source.id], False)},
        parent=source.id,
        workdir=plan.workdir,
    ).model_copy(update={"id": f"{rule.trigger}@{source.id}"})


def next_round(
    loop: FeedbackLoop, judge: SubTaskSpec, generator: SubTaskSpec, verdict: dict[str, Any] | None
) -> tuple[SubTaskSpec, SubTaskSpec]:
    """The generator and judge of the next round, the judge's feedback in the input."""
    nxt = judge.round + 1
    new_gen = generator.model_copy(
        update={
            "id": f"{_ROUND.sub('', generator.id)}@r{nxt}",
            "round": nxt,
            "input": {
                **generator.input,
                loop.feedback_input: output_path(verdict, loop.feedback_field),
            },
        }
    )
    new_judge = judge.model_copy(
        update={
            "id": f"{_ROUND.sub('', judge.id)}@r{nxt}",
            "round": nxt,
            "depends_on": tuple(new_gen.id if d == generator.id else d for d in judge.depends_on),
        }
    )
    return new_gen, new_judge
