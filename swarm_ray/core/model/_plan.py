"""Plans: a DAG of sub-tasks, expanded from a template and checked before anything runs.

`expand()` turns a template and a request into a `Plan`; `validate_plan()` refuses an
unknown capability, a missing dependency, a cycle, a duplicate id and nesting deeper
than the template allows, each with an error naming the sub-task. Templates and the
LLM planner both end here, so a plan is checked the same way whoever made it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from swarm_ray.core.model._errors import InvalidPlanError
from swarm_ray.core.model._human import ANSWER_MARKER
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._subtask import SubTaskSpec
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.model._template import (
    ANSWER,
    FOR_EACH,
    FanOut,
    Stage,
    TaskTemplate,
    _check_acyclic,
)
from swarm_ray.core.model._template import (
    PARAM_PLACEHOLDER as _PARAM,
)

__all__: list[str] = []

FROM_MARKER = "$from"
"""Key of the marker dict that a dispatch-time `$from.STAGE` placeholder becomes."""
TASK_MARKER = "$task"
"""Key of the marker dict for `$warnings` and `$costs`, filled from the task at dispatch."""

_MISSING = object()
"""An absent `$params.NAME`: the key is left out so the input model's default applies."""
_NO_EACH = object()
"""Not a `for_each` sub-task: `$each` stays as written."""
_FROM = re.compile(r"^\$from\.([A-Za-z_][A-Za-z0-9_]*)(?:\.(.+))?$")
_TASK_DIR = re.compile(r"^\$task_dir(?:/([A-Za-z0-9_][A-Za-z0-9_.\-/]*))?$")


class Plan(BaseModel):
    """A task's DAG of sub-tasks and the template that shaped it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task_id: str
    """The task it belongs to."""
    request: TaskRequest
    """The request it was expanded from (rule-triggered stages fill placeholders from it)."""
    template: TaskTemplate
    """The template (rules, loops and triggered stages are read from it at run time)."""
    subtasks: tuple[SubTaskSpec, ...]
    """Sub-tasks in a deterministic order (stage order, then item, then element)."""
    warnings: tuple[str, ...] = ()
    """How the plan was made, if it degraded (LLM planner fell back to a template)."""
    workdir: str | None = None
    """The task's own directory for outputs (`$task_dir`); None leaves such inputs out."""
    draft_subtask: str | None = None
    """The sub-task whose output drafts the task's real plan: set on the one-sub-task plan
    a planner's task starts with (`_planning.planning_plan`). Once it settles, the
    scheduler waits for that plan (`PlanAdopted`) rather than finishing."""

    def by_id(self) -> dict[str, SubTaskSpec]:
        """Sub-tasks keyed by id."""
        return {s.id: s for s in self.subtasks}


def _topological(template: TaskTemplate) -> list[Stage]:
    order: list[Stage] = []
    placed: set[str] = set()
    pending = list(template.stages)
    while pending:
        for stage in pending:
            if all(dep in placed for dep in stage.depends_on):
                order.append(stage)
                placed.add(stage.name)
                pending.remove(stage)
                break
        else:  # pragma: no cover - TaskTemplate validation rejects cycles first
            raise InvalidPlanError(f"template `{template.name}` has a dependency cycle")
    return order


def _key(item: int | None, element: str | None) -> str:
    if item is None:
        return ""
    return f"[{item}]" if element is None else f"[{item},{element}]"


def stage_subtask(
    stage: Stage,
    *,
    request: TaskRequest,
    item: int | None,
    element: str | None,
    depends_on: Mapping[str, tuple[list[str], bool]],
    parent: str | None = None,
    required: bool = False,
    workdir: str | None = None,
    each: Any = _NO_EACH,
    each_index: int | None = None,
) -> SubTaskSpec:
    """Build one sub-task of `stage`; `depends_on` maps stage -> (ids, many).

    A `for_each` stage's sub-task gets its element (`each`) and position (`each_index`);
    per item, `element` labels it (`SubTaskSpec.element`).
    """
    deps = [i for ids, _ in depends_on.values() for i in ids]
    many = {name: flag for name, (_, flag) in depends_on.items()}
    key = _key(item, element) if item is not None or each_index is None else f"[{each_index}]"
    return SubTaskSpec(
        id=stage.name + key,
        stage=stage.name,
        capability_id=stage.capability,
        input=_fill(
            stage.input,
            _Context(
                request=request,
                item=item,
                many=many,
                workdir=workdir,
                each=each,
                each_index=each_index,
            ),
        ),
        depends_on=tuple(deps),
        parent=parent,
        item=item,
        element=element,
        required=stage.required or required,
        partial_ok=stage.partial_ok,
        each=each_index,
    )


@dataclass(frozen=True, slots=True)
class _Context:
    """What expansion-time placeholders of one sub-task are filled from."""

    request: TaskRequest
    item: int | None
    many: Mapping[str, bool]
    workdir: str | None
    each: Any = _NO_EACH
    each_index: int | None = None


def _fill(value: Any, ctx: _Context) -> Any:
    """Replace expansion-time placeholders; turn `$from.X` into a dispatch-time marker."""
    if isinstance(value, dict):
        filled = {k: _fill(v, ctx) for k, v in value.items()}
        return {k: v for k, v in filled.items() if v is not _MISSING}
    if isinstance(value, list):
        return [None if v is _MISSING else v for v in (_fill(v, ctx) for v in value)]
    if not isinstance(value, str) or not value.startswith("$"):
        return value
    request = ctx.request
    if value == "$item":
        return None if ctx.item is None else request.items[ctx.item]
    if value == "$items":
        return list(request.items)
    if value == "$query":
        return request.query
    if value in ("$each", "$each_index") and ctx.each is not _NO_EACH:
        return ctx.each if value == "$each" else ctx.each_index
    if value in ("$warnings", "$costs"):
        return {TASK_MARKER: value[1:]}
    if match := ANSWER.match(value):  # a person's answer, filled in at dispatch
        return {ANSWER_MARKER: match.group(1) or ""}
    if match := _PARAM.match(value):
        return request.params.get(match.group(1), _MISSING)
    if match := _TASK_DIR.match(value):
        if ctx.workdir is None:
            return _MISSING
        sub = match.group(1)
        if sub is not None and ".." in sub.split("/"):
            raise InvalidPlanError(f"input placeholder {value!r} leaves the task directory")
        return ctx.workdir if sub is None else f"{ctx.workdir.rstrip('/')}/{sub}"
    if match := _FROM.match(value):
        stage, path = match.group(1), match.group(2)
        if stage not in ctx.many:
            raise InvalidPlanError(f"input placeholder {value!r} names a stage not depended on")
        return {FROM_MARKER: stage, "path": path, "many": ctx.many[stage]}
    return value


def _dependency_ids(
    stage: Stage,
    dep: Stage,
    ids: Mapping[str, list[tuple[str, int | None, str | None]]],
    item: int | None,
    element: str | None,
) -> tuple[list[str], bool]:
    """Which sub-tasks of `dep` one sub-task of `stage` waits for, and whether many.

    `element` is the element label of a per-item `for_each` sub-task (`extract[0,battery]`).
    """
    upstream = ids[dep.name]
    if dep.for_each is not None and dep.fan_out is FanOut.ONCE:
        return [i for i, _, _ in upstream], True  # all of it (until it exists, its source)
    if dep.fan_out is FanOut.ONCE:
        return [i for i, _, _ in upstream], False
    if stage.fan_out is FanOut.ONCE:
        return [i for i, _, _ in upstream], True
    if dep.for_each is None:  # a plain per-item stage: this item's sub-task
        return [i for i, it, _ in upstream if it == item], False
    if stage.for_each is not None:  # per item and element, both: the same pair
        return [i for i, it, e in upstream if it == item and e == element], False
    return [i for i, it, _ in upstream if it == item], True


def expand(
    template: TaskTemplate, request: TaskRequest, *, task_id: str, workdir: str | None = None
) -> Plan:
    """Expand `template` against `request` into a plan (triggered stages are left out).

    `workdir` is the task's own directory, filled into `$task_dir` inputs.
    """
    subtasks: list[SubTaskSpec] = []
    ids: dict[str, list[tuple[str, int | None, str | None]]] = {}
    by_name = {s.name: s for s in template.stages}
    for stage in _topological(template):
        if stage.triggered:
            continue
        condition = _PARAM.match(stage.when) if stage.when is not None else None
        if condition is not None and not request.params.get(condition.group(1)):
            ids[stage.name] = []  # left out: dependents wait for none of it
            continue
        if stage.for_each is not None and stage.fan_out is FanOut.ONCE:
            ids[stage.name] = _expand_each(stage, request, ids, subtasks, by_name, workdir)
            continue
        elements: list[tuple[str | None, int | None, Any]] = [(None, None, _NO_EACH)]
        if stage.for_each is not None:  # per item and element of `$params.NAME`
            found = FOR_EACH.match(stage.for_each)
            assert found is not None and found.group("param") is not None
            name = found.group("param")
            listed = each_elements(stage, request.params.get(name, []), where=f"`$params.{name}`")
            elements = [(_label(e, j), j, e) for j, e in enumerate(listed)]
        if stage.fan_out is FanOut.ONCE:
            keys: list[tuple[int | None, str | None, int | None, Any]] = [
                (None, None, None, _NO_EACH)
            ]
        else:
            keys = [(i, lab, j, e) for i in range(len(request.items)) for lab, j, e in elements]
        ids[stage.name] = []
        for item, label, index, element in keys:
            depends = {
                d: _dependency_ids(stage, by_name[d], ids, item, label) for d in stage.depends_on
            }
            spec = stage_subtask(
                stage,
                request=request,
                item=item,
                element=label,
                depends_on=depends,
                required=stage.name == template.aggregate,
                workdir=workdir,
                each=element,
                each_index=index,
            )
            subtasks.append(spec)
            ids[stage.name].append((spec.id, item, label))
    return Plan(
        task_id=task_id,
        request=request,
        template=template,
        subtasks=tuple(subtasks),
        workdir=workdir,
    )


_LABEL = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")


def _label(element: Any, index: int) -> str:
    """How an element names its sub-task: a short word as itself (`battery`), else its index."""
    return element if isinstance(element, str) and _LABEL.match(element) else str(index)


def each_elements(stage: Stage, value: Any, *, where: str) -> list[Any]:
    """The list a `for_each` stage fans out over; `InvalidPlanError` unless it is one."""
    if not isinstance(value, list | tuple):
        raise InvalidPlanError(
            f"stage `{stage.name}` fans out over {where}, which must be a list, "
            f"got {type(value).__name__}"
        )
    if len(value) > stage.max_each:
        raise InvalidPlanError(
            f"stage `{stage.name}` would fan out over {len(value)} elements of {where}, "
            f"over its limit of {stage.max_each} (`max_each`)"
        )
    return list(value)


def _expand_each(
    stage: Stage,
    request: TaskRequest,
    ids: dict[str, list[tuple[str, int | None, str | None]]],
    subtasks: list[SubTaskSpec],
    by_name: Mapping[str, Stage],
    workdir: str | None,
) -> list[tuple[str, int | None, str | None]]:
    """Sub-tasks of a `for_each: $params.NAME` stage now; of `$from.X`, none yet.

    A stage fanning out over an upstream output stands, until that output exists, for
    its source: its dependents wait on the source, and the scheduler adds the sub-tasks
    (and the dependents' waits on them) when the source succeeds.
    """
    found = FOR_EACH.match(stage.for_each or "")
    assert found is not None
    if found.group("stage") is not None:
        return list(ids[found.group("stage")])
    name = found.group("param")
    elements = each_elements(stage, request.params.get(name), where=f"`$params.{name}`")
    made: list[tuple[str, int | None, str | None]] = []
    depends = {d: _dependency_ids(stage, by_name[d], ids, None, None) for d in stage.depends_on}
    for index, element in enumerate(elements):
        spec = stage_subtask(
            stage,
            request=request,
            item=None,
            element=None,
            depends_on=depends,
            workdir=workdir,
            each=element,
            each_index=index,
        )
        subtasks.append(spec)
        made.append((spec.id, None, None))
    return made


def nesting_depth(specs: Mapping[str, SubTaskSpec], subtask_id: str) -> int:
    """How many `parent` links lead from `subtask_id` to a first-level sub-task."""
    depth, seen = 0, {subtask_id}
    parent = specs[subtask_id].parent
    while parent is not None:
        if parent in seen:
            raise InvalidPlanError(f"sub-task `{subtask_id}` has a parent cycle through `{parent}`")
        if parent not in specs:
            break
        seen.add(parent)
        depth += 1
        parent = specs[parent].parent
    return depth


def validate_plan(plan: Plan, registry: Registry, *, extra: Iterable[SubTaskSpec] = ()) -> None:
    """Refuse a plan that cannot run, with an error naming the sub-task at fault.

    Raises:
        InvalidPlanError: duplicate id, unknown capability, missing dependency or parent,
            a cycle, or nesting deeper than `plan.template.max_depth`.
    """
    specs: dict[str, SubTaskSpec] = {}
    for spec in (*plan.subtasks, *extra):
        if spec.id in specs:
            raise InvalidPlanError(f"plan `{plan.task_id}`: sub-task id `{spec.id}` is repeated")
        specs[spec.id] = spec
    if not specs:
        raise InvalidPlanError(f"plan `{plan.task_id}` has no sub-tasks", task_id=plan.task_id)
    for spec in specs.values():
        if spec.capability_id not in registry:
            raise InvalidPlanError(
                f"plan `{plan.task_id}`: sub-task `{spec.id}` uses unknown capability "
                f"`{spec.capability_id}`",
                subtask_id=spec.id,
            )
        for dep in spec.depends_on:
            if dep not in specs:
                raise InvalidPlanError(
                    f"plan `{plan.task_id}`: sub-task `{spec.id}` depends on missing `{dep}`",
                    subtask_id=spec.id,
                )
        if spec.parent is not None and spec.parent not in specs:
            raise InvalidPlanError(
                f"plan `{plan.task_id}`: sub-task `{spec.id}` has missing parent `{spec.parent}`",
                subtask_id=spec.id,
            )
    try:
        _check_acyclic({s.id: s.depends_on for s in specs.values()})
    except ValueError as exc:
        raise InvalidPlanError(f"plan `{plan.task_id}`: {exc}") from None
    for spec in specs.values():
        depth = nesting_depth(specs, spec.id)
        if depth > plan.template.max_depth:
            raise InvalidPlanError(
                f"plan `{plan.task_id}`: sub-task `{spec.id}` nests {depth} deep, "
                f"over the limit of {plan.template.max_depth}",
                subtask_id=spec.id,
            )
