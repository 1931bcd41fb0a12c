"""Dispatch-time placeholders: a sub-task's input filled from what its task has done so far.

`expand` fills what is known when the plan is made (`$item`, `$params`, `$each`) and
leaves a marker for the rest, which `resolve` fills at each dispatch from the scheduler's
state: `$from.STAGE[.FIELD]` (the accepted outputs of its dependencies in that stage, the
latest feedback round of each), `$from.STAGE.@outcome` (how each of them ended, failures
included), `$task.warnings` and `$task.costs`, and `$answer[.FIELD]` (what a person
answered its `await_human` stage). Pure: it only reads the state it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from swarm_ray.core.model._human import ANSWER_MARKER
from swarm_ray.core.model._plan import FROM_MARKER, TASK_MARKER
from swarm_ray.core.model._subtask import SubTaskResult, SubTaskSpec
from swarm_ray.core.scheduling._dynamic import output_path, result_field
from swarm_ray.core.scheduling._node import _Node, latest

__all__: list[str] = []


def resolve(
    spec: SubTaskSpec,
    nodes: Mapping[str, _Node],
    results: Mapping[str, SubTaskResult],
    warnings: Sequence[str],
) -> dict[str, Any]:
    """`spec`'s input with every run-time marker filled (`results` in the order accepted)."""
    deps = [latest(nodes, d) for d in spec.depends_on]

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            if FROM_MARKER in value and value.get("path") == "@outcome":
                found = [
                    _outcome(nodes[d], results.get(d))
                    for d in deps
                    if nodes[d].spec.stage == value[FROM_MARKER]
                ]
                return found if value.get("many") else (found[0] if found else None)
            if FROM_MARKER in value:
                outputs = [
                    result_field(results[d], value.get("path"))
                    for d in deps
                    if nodes[d].spec.stage == value[FROM_MARKER] and d in results
                ]
                return outputs if value.get("many") else (outputs[0] if outputs else None)
            if TASK_MARKER in value:
                return _task_value(value[TASK_MARKER], nodes, results, warnings)
            if ANSWER_MARKER in value:
                return output_path(nodes[spec.id].answer, value[ANSWER_MARKER])
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return value

    return fill(spec.input)  # type: ignore[no-any-return]


def _outcome(node: _Node, result: SubTaskResult | None) -> dict[str, Any]:
    """How one sub-task ended, for `$from.STAGE.@outcome` (failures included)."""
    return {
        "subtask_id": node.spec.id,
        "each": node.spec.each,
        "status": str(node.status),
        "output": None if result is None else result.output,
        "error": None if node.error is None else node.error.message,
        "watermark": None if result is None else result.watermark,
        "attempts": node.attempt,
    }


def _task_value(
    name: str,
    nodes: Mapping[str, _Node],
    results: Mapping[str, SubTaskResult],
    warnings: Sequence[str],
) -> Any:
    """`$task.warnings` (every warning so far) or `$task.costs` (each accepted result's)."""
    if name == "warnings":
        return list(warnings)
    return [
        {"sub_task_id": sid, "seconds": result.timings.duration_s, "calls": nodes[sid].attempt}
        for sid, result in results.items()
    ]
