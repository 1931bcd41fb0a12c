"""Tasks stored by an older swarm-ray, read in today's record format (no Ray).

The stored records here are written by hand, as the older version wrote them, so the
tests keep holding whatever the code writes now.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from swarm_ray import TaskRequest, TaskState, TaskTemplate
from swarm_ray.core.driver._commands import Arrived, Resume, Run
from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.durability._journal import LogEntry, StateStore, TaskParts
from swarm_ray.core.guards._watermark import WatermarkKey
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._record import SCHEMA_VERSION
from swarm_ray.core.model._subtask import SubTask
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.runtime._migrations import (
    MIGRATIONS,
    request_v1_to_v2,
    template_v1_to_v2,
    v1_to_v2,
)
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._store import SQLiteStateStore
from swarm_ray.runtime._store_redis import RedisStateStore
from tests.conftest_redis import running_redis_server
from tests.support import PIPELINE_YAML, pipeline
from tests.test_driver import _done


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
    plan = {"task_id": "t1", "request": {"query": "q"}, "subtasks": [{"id": "shout[0]"}]}
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


def test_v1_the_retired_dimension_spellings_are_read_anew() -> None:
    """A request's top-level `dimensions`, a template's `per_item_dimension`, `$dimension`
    and `$dimensions`, and a sub-task's `dimension` label, wherever they are stored."""
    old_stage = {"name": "x", "capability": "a.b.c", "fan_out": "per_item_dimension"}
    old_stage["input"] = {"d": "$dimension", "all": ["$dimensions"], "q": "$query"}
    plain = {"name": "y", "capability": "a.b.c", "input": {"d": "$dimension"}}
    template = {"name": "t", "stages": [old_stage, plain]}
    request = {"template": "t", "dimensions": ["m"], "params": {"k": 1}}
    spec = {"id": "x[0,m]", "stage": "x", "capability_id": "a.b.c", "dimension": "m"}
    plan = {"task_id": "t1", "request": request, "template": template, "subtasks": [spec]}
    log = [
        _entry("spec", {"request": request, "plan": plan}, 1),
        _entry("sched", {"kind": "child", "at": 1.0, "spec": spec}, 2),
        _entry("sched", {"kind": "adopt", "at": 1.0, "plan": plan}, 3),
    ]
    migrated = v1_to_v2(_parts({}, *log))
    new_request = {"template": "t", "params": {"dimensions": ["m"], "k": 1}}
    new_stage = {
        "name": "x",
        "capability": "a.b.c",
        "fan_out": "per_item",
        "for_each": "$params.dimensions",
        "input": {"d": "$each", "all": ["$params.dimensions"], "q": "$query"},
    }
    new_plain = {**plain, "input": {"d": None}}
    new_spec = {"id": "x[0,m]", "stage": "x", "capability_id": "a.b.c", "element": "m"}
    new_plan = {
        "task_id": "t1",
        "request": new_request,
        "template": {"name": "t", "stages": [new_stage, new_plain]},
        "subtasks": [new_spec],
    }
    assert _payloads(migrated) == [
        ("spec", {"request": new_request, "plan": new_plan}),
        ("sched", {"kind": "child", "at": 1.0, "spec": new_spec}),
        ("sched", {"kind": "adopt", "at": 1.0, "plan": new_plan}),
    ]
    # A request naming its own `params.dimensions` keeps them; an empty list is dropped.
    both = {"query": "q", "dimensions": ["a"], "params": {"dimensions": ["b"]}}
    assert request_v1_to_v2(both) == {"query": "q", "params": {"dimensions": ["b"]}}
    assert request_v1_to_v2({"query": "q", "dimensions": []}) == {"query": "q"}


def test_v1_a_template_in_the_retired_spelling_expands_as_todays_does() -> None:
    old_yaml = PIPELINE_YAML.replace(
        "fan_out: per_item\n    for_each: $params.dimensions", "fan_out: per_item_dimension"
    )
    assert "per_item_dimension" in old_yaml
    old = template_v1_to_v2(yaml.safe_load(old_yaml))
    old_request = {"query": "compare", "items": ["a", "b"], "dimensions": ["x", "y"]}
    request = TaskRequest.model_validate(request_v1_to_v2(old_request))
    today = expand(pipeline(), request, task_id="t")
    assert expand(TaskTemplate.model_validate(old), request, task_id="t") == today
    assert [s.element for s in today.subtasks if s.stage == "extract"] == ["x", "y", "x", "y"]


# ---- a task stored in version 1, resumed by today's code -------------------------------

_V1_TASK = "v1-task"


def _write_v1_task(store: StateStore) -> None:
    """A task as version 1 stored it, before the request and plan moved to the log.

    Its request named `dimensions` at the top, its template fanned out with
    `per_item_dimension` into `$dimension`, its sub-tasks carried a `dimension` label;
    `echo[0,x]` succeeded, and the rest of `echo` was out when it stopped.
    """
    template = {
        "name": "old_dims",
        "aggregate": "join",
        "stages": [
            {
                "name": "echo",
                "capability": "test.echo.text",
                "fan_out": "per_item_dimension",
                "input": {"text": "$dimension"},
            },
            {
                "name": "join",
                "capability": "test.join.texts",
                "depends_on": ["echo"],
                "partial_ok": True,
                "input": {"parts": "$from.echo.text"},
            },
        ],
    }
    request = {"template": "old_dims", "items": ["a", "b"], "dimensions": ["x", "y"]}
    echoes = [
        {
            "id": f"echo[{item},{label}]",
            "stage": "echo",
            "capability_id": "test.echo.text",
            "input": {"text": label},
            "item": item,
            "dimension": label,
        }
        for item in (0, 1)
        for label in ("x", "y")
    ]
    join = {
        "id": "join",
        "stage": "join",
        "capability_id": "test.join.texts",
        "input": {"parts": {"$from": "echo", "path": "text", "many": True}},
        "depends_on": [e["id"] for e in echoes],
        "dimension": None,
        "required": True,
        "partial_ok": True,
    }
    plan = {
        "task_id": _V1_TASK,
        "request": request,
        "template": template,
        "subtasks": [*echoes, join],
    }
    snapshot = {
        "schema_version": 1,
        "task_id": _V1_TASK,
        "trace_id": "trace",
        "request": request,
        "machine": {"task_id": _V1_TASK, "state": "executing", "audit": []},
        "plan": plan,
        "created_at": 1.0,
        "updated_at": 2.0,
    }
    store.put_task(_V1_TASK, json.dumps(snapshot), is_open=True, schema_version=1)
    created = {"task_id": _V1_TASK, "seq": 1, "at": 1.0, "trace_id": "trace"}
    store.append(_V1_TASK, "event", json.dumps({**created, "kind": "state", "status": "created"}))
    store.append(_V1_TASK, "sched", json.dumps({"kind": "start", "at": 2.0}))
    result = {
        "task_id": _V1_TASK,
        "subtask_id": "echo[0,x]",
        "capability_id": "test.echo.text",
        "attempt": 1,
        "output": {"text": "X", "pid": 1},
        "watermark": "w",
    }
    done = {"kind": "done", "at": 3.0, "result": result}
    store.append(_V1_TASK, "sched", json.dumps(done), dedupe_key="done:echo[0,x]:1")


def _resume_v1_task(store: StateStore, tmp_path: Path) -> None:
    registry, _ = load_catalogs(["swarm_ray.testing:testing_catalog"])
    deps = {
        "registry": registry,
        "store": store,
        "results": ResultStore(str(tmp_path / "results")),
        "key": WatermarkKey.generate(),
    }
    _write_v1_task(store)
    driver = TaskDriver.load(_V1_TASK, **deps)
    assert driver is not None and driver.state is TaskState.EXECUTING
    plan = driver.record.plan
    assert driver.record.request.params == {"dimensions": ["x", "y"]}
    assert plan is not None and plan.template.stage("echo").for_each == "$params.dimensions"
    assert plan.by_id()["echo[1,y]"].element == "y"
    runs = [c.subtask for c in driver.step(Resume()).commands if isinstance(c, Run)]
    assert [r.subtask_id for r in runs] == ["echo[0,y]", "echo[1,x]", "echo[1,y]"]
    joins: list[SubTask] = []
    for run in runs:
        step = driver.step(Arrived(_done(run)))
        joins += [c.subtask for c in step.commands if isinstance(c, Run)]
    [join] = joins
    assert join.input["parts"] == ["X", "Y", "X", "Y"]
    driver.step(Arrived(_done(join, output={"text": "X Y X Y", "count": 4})))
    assert driver.state is TaskState.COMPLETED
    # Read again: the version 1 entries through the migration, today's after the mark.
    again = TaskDriver.load(_V1_TASK, **deps)
    assert again is not None and again.state is TaskState.COMPLETED
    assert again.output() == {"text": "X Y X Y", "count": 4}
    assert again.record.request == driver.record.request and again.record.plan == plan
    stored = store.get_task(_V1_TASK)
    assert stored is not None and stored.schema_version == SCHEMA_VERSION
    kinds = [e.kind for e in store.read_log(_V1_TASK)]
    assert kinds[:4] == ["event", "sched", "sched", "version"] and "spec" in kinds


def test_a_v1_task_in_sqlite_loads_migrated_and_resumes_to_completion(tmp_path: Path) -> None:
    with SQLiteStateStore(tmp_path / "state.db") as store:
        _resume_v1_task(store, tmp_path)


@pytest.mark.redis
def test_a_v1_task_in_redis_loads_migrated_and_resumes_to_completion(tmp_path: Path) -> None:
    with (
        running_redis_server(tmp_path) as url,
        RedisStateStore(url, namespace=f"test-{uuid.uuid4().hex}") as store,
    ):
        _resume_v1_task(store, tmp_path)
