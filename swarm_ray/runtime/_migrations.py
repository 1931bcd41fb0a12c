"""Record migrations: a task stored by an older swarm-ray, read in today's format.

One function a version step, `MIGRATIONS[N]` from record version N to N + 1, each a
pure transform of a task's parsed snapshot and log entries (`core._journal.TaskParts`).
The stores apply them as they load a task (`StateStore.load_task`), so the core only
ever reads today's format; nothing stored is rewritten.

Beside the stores rather than in `_store.py`: the stores keep opaque JSON, while these
know what the records hold.

Version 1: everything written before 4 December 2026. Version 2: planning is a node of
the task's one scheduler, and the request and plans live in the log alone.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from swarm_ray.core._journal import LogEntry, Migration, TaskParts

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
    """
    snapshot = dict(task.snapshot)
    entries = list(task.entries)
    if task.snapshot_version == 1:
        snapshot["schema_version"] = 2
        inline = {name: snapshot.pop(name) for name in _SPEC_FIELDS if name in snapshot}
        if inline:
            at = float(snapshot.get("updated_at", 0.0))
            entries.append((1, LogEntry(0, _SPEC, json.dumps(inline), None, at)))
    entries = [(v, _spec_v1(e) if v == 1 and e.kind == _SPEC else e) for v, e in entries]
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


def _spec_v1(entry: LogEntry) -> LogEntry:
    """A `spec` entry whose planning plan names its drafting sub-task."""
    spec = json.loads(entry.payload_json)
    planning = spec.get("planning")
    if planning is None or planning.get("draft_subtask") is not None:
        return entry
    spec["planning"] = {**planning, "draft_subtask": planning["subtasks"][0]["id"]}
    return _with(entry, spec)


def _last_plan(entries: list[tuple[int, LogEntry]]) -> dict[str, Any] | None:
    """The task's plan (set once, so the last `spec` entry's), in today's format."""
    for _, entry in reversed(entries):
        if entry.kind == _SPEC:
            plan: dict[str, Any] | None = json.loads(entry.payload_json).get("plan")
            return plan
    return None


def _with(entry: LogEntry, payload: Any) -> LogEntry:
    return dataclasses.replace(entry, payload_json=json.dumps(payload))


MIGRATIONS: Mapping[int, Migration] = {1: v1_to_v2}
"""Record version N -> the step to N + 1, for every version before today's."""
