"""Tasks stored by an older swarm-ray, read in today's record format (no Ray).

The stored records here are written by hand, as the older version wrote them, so the
tests keep holding whatever the code writes now.
"""

from __future__ import annotations

import json
from typing import Any

from swarm_ray.core._journal import LogEntry, TaskParts
from swarm_ray.core._record import SCHEMA_VERSION
from swarm_ray.runtime._migrations import MIGRATIONS, v1_to_v2


def _entry(kind: str, payload: Any, seq: int = 1) -> LogEntry:
    return LogEntry(seq, kind, json.dumps(payload), None, 1.0)


def _parts(snapshot: dict[str, Any], *entries: LogEntry, version: int = 1) -> TaskParts:
    return TaskParts(snapshot, version, tuple((version, e) for e in entries))


def _payloads(parts: TaskParts) -> list[tuple[str, Any]]:
    return [(e.kind, json.loads(e.payload_json)) for _, e in parts.entries]


# ---- the steps -----------------------------------------------------------------------


def test_every_record_version_before_todays_has_its_step() -> None:
    assert SCHEMA_VERSION == 2
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


def test_v1_a_snapshot_with_the_request_and_plans_inline_gives_them_to_the_log() -> None:
    request = {"template": "t", "items": ["a"]}
    snapshot = {"schema_version": 1, "task_id": "t1", "request": request, "plan": None}
    migrated = v1_to_v2(_parts(snapshot, _entry("event", {"seq": 1})))
    assert migrated.snapshot == {"schema_version": 2, "task_id": "t1"}
    assert _payloads(migrated) == [
        ("event", {"seq": 1}),
        ("spec", {"request": request, "plan": None}),
    ]
    assert migrated.entries[-1][1].seq == 0  # made here, not stored
    today = {"schema_version": 1, "task_id": "t1"}  # the request already in the log
    assert v1_to_v2(_parts(today)).snapshot == {"schema_version": 2, "task_id": "t1"}


def test_v1_a_planning_plan_names_its_one_sub_task_as_the_draft() -> None:
    planning = {"task_id": "t1", "subtasks": [{"id": "plan"}]}
    spec = {"request": {"query": "q"}, "planning": planning}
    migrated = v1_to_v2(_parts({}, _entry("spec", spec)))
    [(_, got)] = _payloads(migrated)
    assert got["planning"]["draft_subtask"] == "plan"
    named = {**planning, "draft_subtask": "plan"}
    unchanged = _entry("spec", {"planning": named})
    assert v1_to_v2(_parts({}, unchanged)).entries[0][1] == unchanged


def test_v1_the_planners_own_scheduler_becomes_the_tasks_one() -> None:
    plan = {"task_id": "t1", "subtasks": [{"id": "shout[0]"}]}
    log = [
        _entry("plan", {"kind": "start", "at": 1.0}, 1),
        _entry("plan", {"kind": "done", "at": 2.0}, 2),
        _entry("spec", {"request": {"query": "q"}, "plan": plan}, 3),
        _entry("sched", {"kind": "start", "at": 3.0}, 4),
        _entry("sched", {"kind": "done", "at": 4.0}, 5),
    ]
    migrated = v1_to_v2(_parts({}, *log))
    assert [(k, p.get("kind")) for k, p in _payloads(migrated)] == [
        ("sched", "start"),
        ("sched", "done"),
        ("spec", None),
        ("sched", "adopt"),
        ("sched", "done"),
    ]
    assert _payloads(migrated)[3][1] == {"kind": "adopt", "at": 3.0, "plan": plan}
    # A task planned by a template had one scheduler all along: its `Start` stays.
    plain = v1_to_v2(_parts({}, *log[2:]))
    assert [p.get("kind") for _, p in _payloads(plain)] == [None, "start", "done"]


def test_a_step_leaves_the_parts_of_later_versions_alone() -> None:
    old = _entry("plan", {"kind": "start", "at": 1.0})
    later = _entry("spec", {"planning": {"subtasks": [{"id": "p"}]}}, 2)
    snapshot = {"schema_version": 2, "request": {"query": "q"}}
    parts = TaskParts(snapshot, 2, ((1, old), (2, later)))
    migrated = v1_to_v2(parts)
    assert migrated.snapshot == snapshot and migrated.entries[1] == (2, later)
    assert migrated.entries[0][1].kind == "sched"
