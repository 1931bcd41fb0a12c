"""Record migrations: a task stored by an older swarm-ray, read in today's format.

One function a version step, `MIGRATIONS[N]` from record version N to N + 1, each a
pure transform of a task's parsed snapshot and log entries (`core.durability._journal.TaskParts`).
The stores apply them as they load a task (`StateStore.load_task`), so the core only
ever reads today's format; nothing stored is rewritten.

Beside the stores rather than in `_store.py`: the stores keep opaque JSON, while these
know what the records hold.

Version 1: everything written before 4 December 2026. Version 2: planning is a node of
the task's one scheduler, the request and plans live in the log alone, and the core
knows nothing of the document workload's dimensions.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from swarm_ray.core.durability._journal import LogEntry, Migration, TaskParts
from swarm_ray.core.durability._tasklog import joined_spec

__all__: list[str] = []

_SPEC, _SCHED, _OLD_PLAN = "spec", "sched", "plan"
_SPEC_FIELDS = ("request", "plan", "planning")


def v1_to_v2(task: TaskParts) -> TaskParts:
    """Version 1 -> 2 (the parts in version 1; the others are left as they are).

    - A snapshot that holds the request and plans inline (written before they moved to
      the log) gives them up to a `spec` entry made at the end of the log.
    - A planning plan names its drafting sub-task, its one sub-task
      (`Plan.draft_subtask`).
    - A log written while the planning sub-task had a scheduler of its own: its `plan`
      entries are `sched` ones, and the `Start` of the second scheduler that began once
      the plan was made is the `PlanAdopted` of the task's plan.
    - The retired spellings of the document workload's dimensions, wherever a request, a
      template or a sub-task is stored (`request_v1_to_v2`, `template_v1_to_v2`,
      `subtask_v1_to_v2`).
    """
    snapshot = dict(task.snapshot)
    entries = list(task.entries)
    if task.snapshot_version == 1:
        snapshot["schema_version"] = 2
        inline = {name: snapshot.pop(name) for name in _SPEC_FIELDS if name in snapshot}
        if inline:
            at = float(snapshot.get("updated_at", 0.0))
            entries.append((1, LogEntry(0, _SPEC, json.dumps(inline), None, at)))
    entries = [(v, _entry_v1(e) if v == 1 else e) for v, e in entries]
    plan = _last_plan(entries)
    planned_apart = False  # the planning sub-task had a scheduler of its own
    for n, (version, entry) in enumerate(entries):
        if version != 1:
            continue
        if entry.kind == _OLD_PLAN:
            planned_apart = True
            entries[n] = (version, dataclasses.replace(entry, kind=_SCHED))
        elif entry.kind == _SCHED and planned_apart and plan is not None:
            event = json.loads(entry.payload_json)
            if event.get("kind") == "start":
                adopted = {"kind": "adopt", "at": event["at"], "plan": plan}
                entries[n] = (version, _with(entry, adopted))
    return TaskParts(snapshot, task.snapshot_version, tuple(entries))


def _entry_v1(entry: LogEntry) -> LogEntry:
    """A `spec` or scheduler entry with what it holds in version 2's format."""
    if entry.kind == _SPEC:
        spec = json.loads(entry.payload_json)
        if spec.get("request") is not None:
            spec["request"] = request_v1_to_v2(spec["request"])
        if spec.get("plan") is not None:
            spec["plan"] = _plan_v1(spec["plan"])
        planning = spec.get("planning")
        if planning is not None:
            planning = _plan_v1(planning)
            if planning.get("draft_subtask") is None:  # it names its one sub-task
                planning["draft_subtask"] = planning["subtasks"][0]["id"]
            spec["planning"] = planning
        return _with(entry, spec)
    if entry.kind in (_SCHED, _OLD_PLAN):
        event = json.loads(entry.payload_json)
        if event.get("kind") == "child":
            return _with(entry, {**event, "spec": subtask_v1_to_v2(event["spec"])})
        if event.get("kind") == "adopt":
            return _with(entry, {**event, "plan": _plan_v1(event["plan"])})
    return entry


def _plan_v1(plan: dict[str, Any]) -> dict[str, Any]:
    """A stored `Plan`: its request, template and sub-tasks."""
    migrated = dict(plan)
    if "request" in plan:
        migrated["request"] = request_v1_to_v2(plan["request"])
    if "template" in plan:
        migrated["template"] = template_v1_to_v2(plan["template"])
    migrated["subtasks"] = [subtask_v1_to_v2(s) for s in plan.get("subtasks", [])]
    return migrated


def request_v1_to_v2(request: dict[str, Any]) -> dict[str, Any]:
    """A `TaskRequest`: the retired top-level `dimensions` is `params.dimensions`.

    That is what the document template fans out over; `params` may name its own.
    """
    if "dimensions" not in request:
        return request
    migrated = dict(request)
    dimensions = migrated.pop("dimensions")
    if dimensions:
        migrated["params"] = {"dimensions": list(dimensions), **(request.get("params") or {})}
    return migrated


def template_v1_to_v2(template: dict[str, Any]) -> dict[str, Any]:
    """A `TaskTemplate`: each stage's retired spellings (`_stage_v1`)."""
    stages = template.get("stages")
    if not isinstance(stages, list):
        return template
    return {**template, "stages": [_stage_v1(s) for s in stages]}


def _stage_v1(stage: dict[str, Any]) -> dict[str, Any]:
    """A stage of a template.

    `fan_out: per_item_dimension` is `per_item` over `for_each: $params.dimensions`. In its
    input, `$dimensions` is `$params.dimensions` (left out, rather than `[]`, when the
    request has none: the input model's default applies) and `$dimension` is `$each` in a
    stage that fans out over a list; elsewhere it was the sub-task's label, which only a
    triggered stage's sub-task had (its source's), and is null.
    """
    migrated = dict(stage)
    if stage.get("fan_out") == "per_item_dimension":
        migrated.update(fan_out="per_item", for_each="$params.dimensions")
    each = "$each" if migrated.get("for_each") is not None else None
    if "input" in stage:
        migrated["input"] = _placeholders_v1(stage["input"], each)
    return migrated


def _placeholders_v1(value: Any, each: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _placeholders_v1(v, each) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders_v1(v, each) for v in value]
    if value == "$dimension":
        return each
    if value == "$dimensions":
        return "$params.dimensions"
    return value


def subtask_v1_to_v2(spec: dict[str, Any]) -> dict[str, Any]:
    """A `SubTaskSpec`: its per-item element label was `dimension`, and is `element`."""
    if "dimension" not in spec:
        return spec
    migrated = {k: v for k, v in spec.items() if k != "dimension"}
    migrated["element"] = spec["dimension"]
    return migrated


def _last_plan(entries: list[tuple[int, LogEntry]]) -> dict[str, Any] | None:
    """The task's plan (set once, so the newest `spec` entry's with one), today's format."""
    plan: dict[str, Any] | None = joined_spec(
        e.payload_json for _, e in entries if e.kind == _SPEC
    ).get("plan")
    return plan


def _with(entry: LogEntry, payload: Any) -> LogEntry:
    return dataclasses.replace(entry, payload_json=json.dumps(payload))


MIGRATIONS: Mapping[int, Migration] = {1: v1_to_v2}
"""Record version N -> the step to N + 1, for every version before today's."""
