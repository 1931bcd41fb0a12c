"""The task driver as the one owner of a task: inputs in, commands and notices out (no Ray).

Its mixins (`_adopting`, `_outside`, `_resuming`) are driven through `step` here; that
none of them writes the driver's fields is checked in `tests/test_sched_policies.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarm_ray import Budget, TaskRequest, TaskState
from swarm_ray.core.driver._commands import (
    Accepted,
    Arrived,
    AskPlanner,
    Broken,
    Cancel,
    Close,
    Halt,
    PlanFailed,
    Planned,
    Refused,
    Replan,
    Resume,
    Run,
)
from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.guards._principal import LOCAL
from swarm_ray.core.guards._watermark import WatermarkKey
from swarm_ray.core.model._errors import InvalidInputError, InvalidPlanError, StateStoreError
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._subtask import SubTask, SubTaskResult, Timings, TokenUsage, effects_keys
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.core.views._views import waiting_of
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._store import SQLiteStateStore


@pytest.fixture
def deps(tmp_path: Path) -> dict[str, object]:
    registry, router = load_catalogs(
        ["swarm_ray.testing:testing_catalog", "swarm_ray.testing.agents:planning_catalog"]
    )
    return {
        "registry": registry,
        "store": SQLiteStateStore(tmp_path / "state.db"),
        "results": ResultStore(str(tmp_path / "results")),
        "key": WatermarkKey.generate(),
        "router": router,
    }


def _driver(deps: dict[str, object], request: TaskRequest) -> TaskDriver:
    return TaskDriver.create(request, **deps)


def _plan(deps: dict[str, object], driver: TaskDriver):  # type: ignore[no-untyped-def]
    router = deps["router"]
    request = driver.record.request
    return expand(router.route(request), request, task_id=driver.task_id)  # type: ignore[attr-defined]


def _done(subtask: SubTask, **changes: object) -> SubTaskResult:
    fields: dict[str, object] = {
        "task_id": subtask.task_id,
        "subtask_id": subtask.subtask_id,
        "capability_id": subtask.capability_id,
        "attempt": subtask.attempt,
        "output": {"text": subtask.input.get("text", "").upper(), "pid": 1},
        "timings": Timings(started_at=1.0, finished_at=1.1),
        "watermark": subtask.watermark,
    }
    fields.update(changes)
    return SubTaskResult(**fields)  # type: ignore[arg-type]


def test_a_task_runs_to_completion_through_steps(deps: dict[str, object]) -> None:
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a", "b")))
    step = driver.step(Planned(_plan(deps, driver)))
    runs = [c for c in step.commands if isinstance(c, Run)]
    assert [r.subtask.subtask_id for r in runs] == ["echo[0]", "echo[1]"]
    assert driver.state is TaskState.EXECUTING
    for run in runs:
        step = driver.step(Arrived(_done(run.subtask)))
        assert any(isinstance(n, Accepted) for n in step.notices)
    [join] = [c for c in step.commands if isinstance(c, Run)]
    final = driver.step(Arrived(_done(join.subtask, output={"text": "A B", "count": 2})))
    assert any(isinstance(c, Close) for c in final.commands)
    assert driver.state is TaskState.COMPLETED and driver.output() == {"text": "A B", "count": 2}


def test_a_forged_or_replayed_result_is_refused_and_changes_nothing(
    deps: dict[str, object],
) -> None:
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a",)))
    [run, *_] = driver.step(Planned(_plan(deps, driver))).commands
    assert isinstance(run, Run)
    forged = driver.step(Arrived(_done(run.subtask, watermark=run.subtask.watermark[:-4] + "AAAA")))
    assert forged.notices == [Refused("forged")] and forged.commands == []
    driver.step(Arrived(_done(run.subtask)))
    replayed = driver.step(Arrived(_done(run.subtask)))
    assert replayed.notices == [Refused("replayed")]


def test_the_planner_is_the_first_sub_task(deps: dict[str, object]) -> None:
    driver = _driver(deps, TaskRequest(query="shout", items=("hi",), planner="test.planning.good"))
    [ask] = driver.step(AskPlanner("test.planning.good", driver.record.request)).commands
    assert isinstance(ask, Run) and ask.subtask.subtask_id == "plan"
    assert ask.subtask.capability_id == "test.planning.good" and ask.subtask.watermark
    assert ask.subtask.input["request"]["items"] == ["hi"]
    assert [e.status for e in driver.events if e.kind == "planning"] == ["asking"]
    from swarm_ray.testing.agents import _PLAN_DRAFTS

    draft = json.loads(_PLAN_DRAFTS["test.planning.good"])  # what the scripted planner says
    step = driver.step(Arrived(_done(ask.subtask, output={"draft": draft, "model": "m"})))
    runs = [c.subtask.subtask_id for c in step.commands if isinstance(c, Run)]
    assert runs == ["shout[0]"] and driver.state is TaskState.EXECUTING
    assert driver.record.plan is not None and driver.record.plan.template.name == "llm-plan"
    assert [e.status for e in driver.events if e.kind == "planning"] == ["asking", "planned"]
    reloaded = TaskDriver.load(driver.task_id, **deps)
    assert reloaded is not None and reloaded.scheduler is not None
    assert reloaded.scheduler.result("plan") is not None  # durable: not asked again
    resent = [c.subtask.subtask_id for c in reloaded.step(Resume()).commands if isinstance(c, Run)]
    assert resent == ["shout[0]"]


def test_cancelling_while_the_planner_thinks_ends_cancelled(deps: dict[str, object]) -> None:
    driver = _driver(deps, TaskRequest(query="anything", planner="test.planning.good"))
    [ask] = driver.step(AskPlanner("test.planning.good", driver.record.request)).commands
    assert isinstance(ask, Run)
    cancelled = driver.step(Cancel("changed my mind"))
    assert cancelled.commands == [Halt(("plan",)), Close()]
    assert driver.state is TaskState.CANCELLED
    late = driver.step(Arrived(_done(ask.subtask, output={})))
    assert late.commands == [] and driver.state is TaskState.CANCELLED


def test_a_task_cancelled_while_it_is_planned_again_ignores_the_plan_that_follows(
    deps: dict[str, object],
) -> None:
    """A restart re-plans a task that had no stored plan (`Replan`); a cancel landing
    while that runs ends the task, and the plan or planner that arrives after starts
    nothing."""
    request = TaskRequest(query="shout", items=("hi",), planner="test.planning.good")
    created = _driver(deps, request)
    reloaded = TaskDriver.load(created.task_id, **deps)
    assert reloaded is not None and reloaded.step(Resume()).commands == [Replan()]
    assert reloaded.step(Cancel("changed my mind")).commands == [Close()]
    router = deps["router"]
    plain = TaskRequest(template="echo_fanout", items=("hi",))
    plan = expand(router.route(plain), plain, task_id=reloaded.task_id)  # type: ignore[attr-defined]
    failed = PlanFailed(InvalidPlanError("no way to plan `this`"))
    for late in (AskPlanner("test.planning.good", request), Planned(plan), failed):
        step = reloaded.step(late)
        assert step.commands == [] and reloaded.state is TaskState.CANCELLED
        assert reloaded.scheduler is None
    again = TaskDriver.load(created.task_id, **deps)  # and so it stays after a restart
    assert again is not None and again.state is TaskState.CANCELLED
    assert again.step(Resume()).commands == [Close()]


def _write_old_planning_log(deps: dict[str, object], *, planned: bool) -> tuple[str, int]:
    """A task's log as written before planning became a node of the one scheduler.

    The planning sub-task's scheduler events were `plan` entries, the task's own `sched`
    entries began with a second `Start`, and the planning plan had no `draft_subtask`.
    Written by hand here, so the test keeps holding whatever the code writes now. With
    `planned`, the draft arrived and `shout[0]` was out (the plan's first sub-task);
    without, the planner's call was out. Returns the task id and the planner's tokens.
    """
    from swarm_ray.core.model._fsm import TaskMachine, transition
    from swarm_ray.core.model._record import TaskRecord
    from swarm_ray.core.model._registry import Registry
    from swarm_ray.core.model._signals import Start, SubTaskDone
    from swarm_ray.core.planning._planning import plan_from_output, planning_plan
    from swarm_ray.core.planning._routing import TemplateRouter
    from swarm_ray.testing.agents import _PLAN_DRAFTS

    store, registry, router = deps["store"], deps["registry"], deps["router"]
    assert isinstance(store, SQLiteStateStore) and isinstance(registry, Registry)
    assert isinstance(router, TemplateRouter)
    task_id, tokens = "old-planning-log", 7
    request = TaskRequest(query="shout", items=("hi",), planner="test.planning.good")
    planning = planning_plan("test.planning.good", request, registry, task_id=task_id, workdir=None)
    planning_json = json.loads(planning.model_dump_json(exclude={"draft_subtask"}))
    draft = {"draft": json.loads(_PLAN_DRAFTS["test.planning.good"]), "model": "m"}
    machine = TaskMachine(task_id=task_id)
    plan = None
    store.append(task_id, "spec", json.dumps({"request": request.model_dump(mode="json")}))
    store.append(
        task_id,
        "spec",
        json.dumps({"request": request.model_dump(mode="json"), "planning": planning_json}),
    )
    store.append(task_id, "plan", Start(at=1.0).model_dump_json())
    if planned:
        answer = SubTaskResult(
            task_id=task_id,
            subtask_id="plan",
            capability_id="test.planning.good",
            attempt=1,
            output=draft,
            usage=TokenUsage(prompt_tokens=3, completion_tokens=tokens),
            watermark="w",
        )
        done = SubTaskDone(at=2.0, result=answer)
        store.append(task_id, "plan", done.model_dump_json(), dedupe_key="done:plan:1")
        plan = plan_from_output(draft, planning, registry, router)
        for to in (TaskState.ROUTING, TaskState.DISPATCHING, TaskState.EXECUTING):
            machine = transition(machine, to, reason="old", at=3.0, trace_id="t")
        spec = {
            "request": request.model_dump(mode="json"),
            "plan": plan.model_dump(mode="json"),
            "planning": planning_json,
        }
        store.append(task_id, "spec", json.dumps(spec))
        store.append(task_id, "sched", Start(at=3.0).model_dump_json())
    record = TaskRecord(
        task_id=task_id,
        trace_id="t",
        request=request,
        machine=machine,
        plan=plan,
        created_at=0.0,
        updated_at=3.0,
    )
    store.put_task(
        task_id,
        record.model_dump_json(exclude={"request", "plan", "planning"}),
        is_open=True,
        schema_version=1,
    )
    return task_id, tokens


def test_a_planned_task_logged_in_the_old_format_resumes_without_asking_again(
    deps: dict[str, object],
) -> None:
    task_id, tokens = _write_old_planning_log(deps, planned=True)
    driver = TaskDriver.load(task_id, **deps)
    assert driver is not None and driver.state is TaskState.EXECUTING
    assert driver.record.plan is not None and driver.record.plan.template.name == "llm-plan"
    step = driver.step(Resume())
    assert [c.subtask.subtask_id for c in step.commands if isinstance(c, Run)] == ["shout[0]"]
    assert driver.usage().completion_tokens == tokens  # the planner's, from the old log
    [shout] = [c.subtask for c in step.commands if isinstance(c, Run)]
    [join] = [c.subtask for c in driver.step(Arrived(_done(shout))).commands if isinstance(c, Run)]
    assert join.subtask_id == "join" and join.input["parts"] == ["HI"]
    driver.step(Arrived(_done(join, output={"text": "HI", "count": 1})))
    assert driver.state is TaskState.COMPLETED and driver.output() == {"text": "HI", "count": 1}
    again = TaskDriver.load(task_id, **deps)  # old entries and new ones, replayed together
    assert again is not None and again.state is TaskState.COMPLETED
    assert again.usage().completion_tokens == tokens


def test_a_task_logged_mid_planning_in_the_old_format_asks_its_planner_again(
    deps: dict[str, object],
) -> None:
    task_id, _ = _write_old_planning_log(deps, planned=False)
    driver = TaskDriver.load(task_id, **deps)
    assert driver is not None and driver.state is TaskState.CREATED
    [ask] = [c.subtask for c in driver.step(Resume()).commands if isinstance(c, Run)]
    assert ask.subtask_id == "plan" and ask.capability_id == "test.planning.good"
    from swarm_ray.testing.agents import _PLAN_DRAFTS

    draft = json.loads(_PLAN_DRAFTS["test.planning.good"])
    step = driver.step(Arrived(_done(ask, output={"draft": draft, "model": "m"})))
    assert [c.subtask.subtask_id for c in step.commands if isinstance(c, Run)] == ["shout[0]"]
    assert [e.status for e in driver.events if e.kind == "planning"] == ["planned"]
    again = TaskDriver.load(task_id, **deps)  # old entries and new ones, replayed together
    assert again is not None and again.record.plan is not None
    assert again.record.plan.template.name == "llm-plan"
    resent = [c.subtask.subtask_id for c in again.step(Resume()).commands if isinstance(c, Run)]
    assert resent == ["shout[0]"]  # the planner is not asked a third time


def _planner_task(deps: dict[str, object], request: TaskRequest) -> tuple[TaskDriver, SubTask]:
    """A planner's task, asked: its driver and the planner's dispatched sub-task."""
    driver = _driver(deps, request)
    [ask] = driver.step(AskPlanner(str(request.planner), request)).commands
    assert isinstance(ask, Run) and ask.subtask.subtask_id == "plan"
    return driver, ask.subtask


def _good_draft() -> dict[str, object]:
    from swarm_ray.testing.agents import _PLAN_DRAFTS

    return {"draft": json.loads(_PLAN_DRAFTS["test.planning.good"]), "model": "m"}


@pytest.mark.parametrize("lost", ["the plan", "its adoption"])
def test_a_restart_after_the_draft_was_logged_makes_its_plan_without_asking_again(
    deps: dict[str, object], lost: str
) -> None:
    """The restart came after the planner's result was logged, but before the plan made of
    it was stored (`the plan`) or before the log took that plan in (`its adoption`)."""
    store = deps["store"]
    assert isinstance(store, SQLiteStateStore)
    request = TaskRequest(query="shout", items=("hi",), planner="test.planning.good")
    driver, ask = _planner_task(deps, request)
    tid = driver.task_id
    unplanned = store.get_task(tid).record_json  # type: ignore[union-attr]
    spent = TokenUsage(completion_tokens=5)
    driver.step(Arrived(_done(ask, output=_good_draft(), usage=spent)))
    entries = store.read_log(tid)
    [done] = [e.seq for e in entries if e.payload_json.startswith('{"kind":"done"')]
    [adopted] = [e.seq for e in entries if e.payload_json.startswith('{"kind":"adopt"')]
    with store._lock, store._conn:  # type: ignore[attr-defined]
        if lost == "the plan":
            store._conn.execute("DELETE FROM log WHERE task_id = ? AND seq > ?", (tid, done))  # type: ignore[attr-defined]
            store._conn.execute(  # type: ignore[attr-defined]
                "UPDATE tasks SET record_json = ? WHERE task_id = ?", (unplanned, tid)
            )
        else:
            store._conn.execute("DELETE FROM log WHERE task_id = ? AND seq >= ?", (tid, adopted))  # type: ignore[attr-defined]
    again = TaskDriver.load(tid, **deps)
    assert again is not None and (again.record.plan is None) == (lost == "the plan")
    step = again.step(Resume())
    [shout] = [c.subtask for c in step.commands if isinstance(c, Run)]  # not `plan`
    assert shout.subtask_id == "shout[0]" and again.events[-1].kind != "planning"
    assert again.record.plan is not None and again.record.plan.template.name == "llm-plan"
    assert again.usage().completion_tokens == 5
    [join] = [c.subtask for c in again.step(Arrived(_done(shout))).commands if isinstance(c, Run)]
    again.step(Arrived(_done(join, output={"text": "HI", "count": 1})))
    assert again.state is TaskState.COMPLETED and again.output() == {"text": "HI", "count": 1}
    final = TaskDriver.load(tid, **deps)
    assert final is not None and final.state is TaskState.COMPLETED


def test_the_planners_tokens_count_toward_the_tasks_budget(deps: dict[str, object]) -> None:
    request = TaskRequest(
        query="shout", items=("hi",), planner="test.planning.good", budget=Budget(max_tokens=10)
    )
    driver, ask = _planner_task(deps, request)
    spent = TokenUsage(prompt_tokens=8, completion_tokens=4)
    step = driver.step(Arrived(_done(ask, output=_good_draft(), usage=spent)))
    assert driver.state is TaskState.FAILED
    assert driver.error is not None and driver.error.code == "budget_exceeded"
    assert step.commands[-2:] == [Halt(("shout[0]",)), Close()]  # the plan's first run stops


@pytest.mark.parametrize("answer", ["failed", "a stage named plan"])
def test_a_planner_without_a_usable_draft_leaves_the_task_to_a_template_saying_why(
    deps: dict[str, object], answer: str
) -> None:
    """The planner failed for good, or drafted a stage named like its own sub-task (one DAG
    holds both): the template router plans, and the task's one warning says why."""
    from swarm_ray.core.model._errors import ErrorCode
    from swarm_ray.core.model._subtask import SubTaskError

    request = TaskRequest(query="echo fanout", items=("x",), planner="test.planning.good")
    driver, ask = _planner_task(deps, request)
    if answer == "failed":  # its retry policy allows one attempt
        error = SubTaskError(code=ErrorCode.AGENT_ERROR, message="the model fell over")
        result = _done(ask, output=None, error=error)
        why = "the model fell over"
    else:
        stage = {"name": "plan", "capability": "test.echo.text", "input": {"text": "$query"}}
        result = _done(ask, output={"draft": {"stages": [stage]}, "model": "m"})
        why = "stage `plan`"
    step = driver.step(Arrived(result))
    [echo] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert echo.subtask_id == "echo[0]" and driver.state is TaskState.EXECUTING
    assert driver.record.plan is not None and driver.record.plan.template.name == "echo_fanout"
    [join] = [c.subtask for c in driver.step(Arrived(_done(echo))).commands if isinstance(c, Run)]
    driver.step(Arrived(_done(join, output={"text": "X", "count": 1})))
    assert driver.state is TaskState.COMPLETED and driver.output() == {"text": "X", "count": 1}
    (warning,) = driver.record.warnings
    assert why in warning and "fell back to template `echo_fanout`" in warning


def test_a_plan_for_a_task_already_begun_is_ignored(deps: dict[str, object]) -> None:
    request = TaskRequest(query="echo fanout", items=("x",), planner="test.planning.good")
    driver, _ask = _planner_task(deps, request)
    plain = TaskRequest(template="echo_fanout", items=("x",))
    plan = expand(deps["router"].route(plain), plain, task_id=driver.task_id)  # type: ignore[attr-defined]
    for late in (Planned(plan), AskPlanner("test.planning.good", request)):
        step = driver.step(late)
        assert step.commands == [] and driver.record.plan is None
    assert driver.state is TaskState.CREATED and driver.scheduler is not None
    assert [s.id for s in driver.scheduler.specs()] == ["plan"]


def test_a_refused_plan_fails_the_task(deps: dict[str, object]) -> None:
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a",)))
    step = driver.step(PlanFailed(InvalidPlanError("no way to plan `this`")))
    assert step.commands == [Close()] and driver.state is TaskState.FAILED
    assert isinstance(driver.error, InvalidPlanError) and "`this`" in driver.error.message


def test_a_broken_input_halts_the_running_attempts_and_names_the_cause(
    deps: dict[str, object],
) -> None:
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a", "b")))
    driver.step(Planned(_plan(deps, driver)))
    step = driver.step(Broken(StateStoreError("disk full while storing `echo[0]`")))
    assert step.commands == [Halt(("echo[0]", "echo[1]")), Close()]
    assert driver.state is TaskState.FAILED and "disk full" in str(driver.error)


def test_a_restarted_driver_plans_again_or_resends_what_was_out(deps: dict[str, object]) -> None:
    driver_deps = deps
    unplanned = _driver(deps, TaskRequest(template="echo_fanout", items=("a",)))
    reloaded = TaskDriver.load(unplanned.task_id, **driver_deps)
    assert reloaded is not None and reloaded.step(Resume()).commands == [Replan()]
    planned = _driver(deps, TaskRequest(template="echo_fanout", items=("a",)))
    [first] = planned.step(Planned(_plan(deps, planned))).commands
    again = TaskDriver.load(planned.task_id, **driver_deps)
    assert again is not None
    [resent] = [c for c in again.step(Resume()).commands if isinstance(c, Run)]
    assert isinstance(first, Run) and resent.subtask.subtask_id == first.subtask.subtask_id
    accepted = again.step(Arrived(_done(resent.subtask)))
    assert any(isinstance(n, Accepted) for n in accepted.notices)


def test_the_request_and_plan_are_logged_once_and_left_out_of_snapshots(
    deps: dict[str, object],
) -> None:
    store = deps["store"]
    assert isinstance(store, SQLiteStateStore)
    items = tuple(f"item-{i}" for i in range(50))
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=items))
    runs = [c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)]
    for run in runs[:10]:
        driver.step(Arrived(_done(run.subtask)))
    specs = [e for e in store.read_log(driver.task_id) if e.kind == "spec"]
    # One entry when the request was taken in, one when the plan was set: not one per result.
    assert len(specs) == 2
    # The second holds the plan alone, without the request it was made of (the task's).
    second = json.loads(specs[1].payload_json)
    assert set(second) == {"plan"} and "request" not in second["plan"]
    assert second["plan"]["subtasks"] and "item-49" in specs[0].payload_json
    snapshot = json.loads(store.get_task(driver.task_id).record_json)  # type: ignore[union-attr]
    assert "request" not in snapshot and "plan" not in snapshot
    assert "item-49" not in json.dumps(snapshot)
    reloaded = TaskDriver.load(driver.task_id, **deps)
    assert reloaded is not None
    assert reloaded.record.request.items == items
    assert reloaded.record.plan == driver.record.plan
    resent = [c for c in reloaded.step(Resume()).commands if isinstance(c, Run)]
    assert {r.subtask.subtask_id for r in resent} == {r.subtask.subtask_id for r in runs[10:]}


def test_a_plan_made_of_another_request_than_the_tasks_keeps_its_own(
    deps: dict[str, object],
) -> None:
    # An upload's plan is made of the request with its file ids resolved to paths.
    store = deps["store"]
    assert isinstance(store, SQLiteStateStore)
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("file-id",)))
    resolved = TaskRequest(template="echo_fanout", items=("/srv/uploads/a.pdf",))
    plan = expand(deps["router"].route(resolved), resolved, task_id=driver.task_id)  # type: ignore[attr-defined]
    driver.step(Planned(plan))
    reloaded = TaskDriver.load(driver.task_id, **deps)
    assert reloaded is not None and reloaded.record.plan is not None
    assert reloaded.record.request.items == ("file-id",)
    assert reloaded.record.plan.request.items == ("/srv/uploads/a.pdf",)
    assert reloaded.record.plan == plan.model_copy(update={"workdir": driver.record.workdir})


def test_a_snapshot_written_with_the_request_inline_still_loads(deps: dict[str, object]) -> None:
    store = deps["store"]
    assert isinstance(store, SQLiteStateStore)
    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a", "b")))
    driver.step(Planned(_plan(deps, driver)))
    # The layout before the request and plans moved to the log: one whole-record snapshot.
    store.put_task(
        driver.task_id,
        driver.record.model_dump_json(),
        is_open=True,
        schema_version=1,  # the record version of that layout
    )
    with store._lock, store._conn:  # type: ignore[attr-defined]
        store._conn.execute("DELETE FROM log WHERE kind = 'spec'")  # type: ignore[attr-defined]
    reloaded = TaskDriver.load(driver.task_id, **deps)
    assert reloaded is not None and reloaded.record.request.items == ("a", "b")
    assert reloaded.record.plan == driver.record.plan
    # Written again, it keeps its request and plan (now in the log), and is read again.
    runs = [c.subtask for c in reloaded.step(Resume()).commands if isinstance(c, Run)]
    assert [r.subtask_id for r in runs] == ["echo[0]", "echo[1]"]
    reloaded.step(Arrived(_done(runs[0])))
    step = reloaded.step(Arrived(_done(runs[1])))
    [join] = [c.subtask for c in step.commands if isinstance(c, Run)]
    reloaded.step(Arrived(_done(join, output={"text": "A B", "count": 2})))
    assert reloaded.state is TaskState.COMPLETED
    final = TaskDriver.load(driver.task_id, **deps)
    assert final is not None and final.state is TaskState.COMPLETED
    assert final.record.request.items == ("a", "b") and final.record.plan == driver.record.plan


@pytest.mark.parametrize(
    ("budget", "spent", "limit"),
    [
        (
            Budget(max_tokens=100),
            [TokenUsage(prompt_tokens=40, completion_tokens=20)] * 2,
            "tokens",
        ),
        (Budget(max_cost=0.01), [TokenUsage(cost=0.004)] * 3, "cost"),
    ],
)
def test_a_task_past_its_budget_fails_and_halts_what_still_runs(
    deps: dict[str, object], budget: Budget, spent: list[TokenUsage], limit: str
) -> None:
    items = tuple(f"i{n}" for n in range(5))
    request = TaskRequest(template="echo_fanout", items=items, budget=budget)
    driver = _driver(deps, request)
    runs = [c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)]
    *within, last = spent
    for run, usage in zip(runs, within, strict=False):  # up to the budget: it goes on
        step = driver.step(Arrived(_done(run.subtask, usage=usage)))
        assert driver.state is TaskState.EXECUTING and not step.commands
    step = driver.step(Arrived(_done(runs[len(within)].subtask, usage=last)))  # one past it
    assert driver.state is TaskState.FAILED
    assert driver.error is not None and driver.error.code == "budget_exceeded"
    assert f"budget.max_{limit}" in driver.error.message
    (halt,) = [c for c in step.commands if isinstance(c, Halt)]
    assert set(halt.subtask_ids) == {r.subtask.subtask_id for r in runs[len(spent) :]}
    assert isinstance(step.commands[-1], Close)
    reloaded = TaskDriver.load(driver.task_id, **deps)  # the failure is stored
    assert reloaded is not None and reloaded.state is TaskState.FAILED


def test_spending_exactly_its_budget_a_task_completes(deps: dict[str, object]) -> None:
    request = TaskRequest(template="echo_fanout", items=("a",), budget=Budget(max_tokens=10))
    driver = _driver(deps, request)
    step = driver.step(Planned(_plan(deps, driver)))
    [echo] = [c for c in step.commands if isinstance(c, Run)]
    step = driver.step(Arrived(_done(echo.subtask, usage=TokenUsage(prompt_tokens=10))))
    [join] = [c for c in step.commands if isinstance(c, Run)]
    driver.step(Arrived(_done(join.subtask, output={"text": "A", "count": 1})))
    assert driver.state is TaskState.COMPLETED and driver.usage().total_tokens == 10


def test_after_a_restart_side_effects_are_taken_as_recorded_held_or_sent_once(
    deps: dict[str, object], tmp_path: Path
) -> None:
    """Three side-effecting attempts out at a crash: one finished (its result is recorded
    and taken), one started (held for its owner's review), one never started (sent)."""
    from swarm_ray.core.driver._commands import Answer, AnswerRejected
    from swarm_ray.runtime._agent import run_subtask
    from swarm_ray.testing import count_effects

    registry = deps["registry"]
    spec = registry.get("test.echo.effect")  # type: ignore[attr-defined]
    record = str(tmp_path / "effects")
    params = {"record_dir": record}
    Path(record).mkdir()
    request = TaskRequest(template="echo_effect", items=("done", "doubt", "fresh"), params=params)
    driver = _driver(deps, request)
    runs = [c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)]
    done, doubt, fresh = (r.subtask for r in runs)
    assert all(s.record_effects for s in (done, doubt, fresh))
    assert done.idempotency_key != doubt.idempotency_key
    run_subtask(spec, done)  # ran to the end; its result never reached the orchestrator
    results = deps["results"]
    started, _ = effects_keys(doubt.task_id, doubt.subtask_id, doubt.attempt)
    results.put_bytes(started, b"")  # type: ignore[attr-defined]  # it started, then the crash
    again = TaskDriver.load(driver.task_id, **deps)
    assert again is not None
    step = again.step(Resume())
    assert [n.result.subtask_id for n in step.notices if isinstance(n, Accepted)] == ["echo[0]"]
    [resent] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert resent.subtask_id == "echo[2]"
    assert resent.idempotency_key == fresh.idempotency_key  # the same key, a new attempt
    [wait] = waiting_of(again)
    assert wait.subtask_id == "echo[1]" and wait.review_of == 1
    assert again.scheduler is not None and again.scheduler.status("echo[1]") == "waiting"
    assert count_effects(record) == ["done"]  # nothing ran twice
    [refused] = again.step(Answer("echo[1]", {"rerun": "maybe"}, LOCAL)).notices
    assert isinstance(refused, AnswerRejected) and isinstance(refused.error, InvalidInputError)
    step = again.step(Answer(subtask_id="echo[1]", answer={"rerun": True}, principal=LOCAL))
    [rerun] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert rerun.subtask_id == "echo[1]" and rerun.attempt == 2
    assert rerun.idempotency_key == doubt.idempotency_key


def test_an_owner_may_decline_to_rerun_a_side_effect_in_doubt(deps: dict[str, object]) -> None:
    from swarm_ray.core.driver._commands import Answer

    driver = _driver(deps, TaskRequest(template="echo_effect", items=("only",)))
    [run] = [c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)]
    started, _ = effects_keys(run.subtask.task_id, run.subtask.subtask_id, 1)
    deps["results"].put_bytes(started, b"")  # type: ignore[attr-defined]
    again = TaskDriver.load(driver.task_id, **deps)
    assert again is not None and not [
        c for c in again.step(Resume()).commands if isinstance(c, Run)
    ]
    step = again.step(Answer(subtask_id="echo[0]", answer={"rerun": False}, principal=LOCAL))
    assert again.scheduler is not None and again.scheduler.status("echo[0]") == "failed"
    assert not [
        c for c in step.commands if isinstance(c, Run) and c.subtask.subtask_id == "echo[0]"
    ]
    reloaded = TaskDriver.load(driver.task_id, **deps)  # the review and its answer replay
    assert reloaded is not None and reloaded.scheduler is not None
    assert reloaded.scheduler.status("echo[0]") == "failed" and not waiting_of(reloaded)


def test_past_a_finish_budget_what_spends_stops_and_the_task_ends_with_what_it_has(
    deps: dict[str, object],
) -> None:
    """`on_exceeded: finish`: the echoes that spend stop (the running one halted, the
    rest never sent), the partial join runs on what came, and the task completes."""
    items = tuple(f"i{n}" for n in range(4))
    budget = Budget(max_tokens=50, on_exceeded="finish")
    request = TaskRequest(template="echo_fanout", items=items, budget=budget)
    driver = _driver(deps, request)
    runs = [c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)]
    spent = TokenUsage(prompt_tokens=30)
    driver.step(Arrived(_done(runs[0].subtask, usage=spent)))
    step = driver.step(Arrived(_done(runs[1].subtask, usage=spent)))  # 60 > 50
    assert driver.state is TaskState.AGGREGATING  # not failed: it goes on to its join
    (halt,) = [c for c in step.commands if isinstance(c, Halt)]
    assert set(halt.subtask_ids) == {r.subtask.subtask_id for r in runs[2:]}
    [join] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert join.input["parts"] == ["I0", "I1"]  # what came; the stopped ones are left out
    assert driver.scheduler is not None
    error = driver.scheduler.error(runs[2].subtask.subtask_id)
    assert error is not None and error.code == "budget_exceeded"
    late = driver.step(Arrived(_done(runs[2].subtask, usage=spent)))  # halted: not taken
    assert not any(isinstance(c, Run) for c in late.commands)
    driver.step(Arrived(_done(join, output={"text": "I0 I1", "count": 2})))
    assert driver.state is TaskState.COMPLETED
    assert any("budget reached (`budget.max_tokens`)" in w for w in driver.record.warnings)

    reloaded = TaskDriver.load(driver.task_id, **deps)  # the stop is in the log
    assert reloaded is not None and reloaded.state is TaskState.COMPLETED
    assert reloaded.scheduler is not None and reloaded.scheduler.stopped_spending is not None


def test_an_operators_price_per_compute_second_is_part_of_the_cost_and_the_budget(
    deps: dict[str, object],
) -> None:
    budget = Budget(max_cost=0.3)
    request = TaskRequest(template="echo_fanout", items=("a", "b", "c"), budget=budget)
    driver = _driver(deps, request)
    driver.compute_prices = {"test.echo.text": 1.0}  # a unit a second; each echo runs 0.1 s
    runs = [c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)]
    driver.step(Arrived(_done(runs[0].subtask, usage=TokenUsage(cost=0.05))))  # its model too
    assert driver.usage().cost == pytest.approx(0.15)
    driver.step(Arrived(_done(runs[1].subtask)))
    assert driver.usage().cost == pytest.approx(0.25) and driver.state is TaskState.EXECUTING
    driver.step(Arrived(_done(runs[2].subtask)))  # 0.35: past the budget
    assert driver.state is TaskState.FAILED and driver.error is not None
    assert driver.error.details["limit"] == "budget.max_cost"
    reloaded = TaskDriver.load(driver.task_id, **deps)  # the priced results are the logged ones
    assert reloaded is not None and reloaded.usage().cost == pytest.approx(0.35)


def test_plan_request_is_the_one_way_a_request_becomes_a_start(deps: dict[str, object]) -> None:
    """`plan_request` answers with the driver input that starts the task: a validated
    plan, the planner to ask, or why no plan can be made; a refused planner raises."""
    from swarm_ray.core.driver._request_plan import plan_request
    from swarm_ray.core.model._errors import NoTemplateMatchedError, UnknownCapabilityError
    from swarm_ray.core.model._registry import Registry

    registry, router = deps["registry"], deps["router"]
    assert isinstance(registry, Registry)

    def start(request: TaskRequest, known: Registry = registry) -> object:
        return plan_request(
            request, registry=known, router=router, policy=None, task_id="t1", workdir="/w"
        )  # type: ignore[arg-type]

    planned = start(TaskRequest(template="echo_fanout", items=("a", "b")))
    assert isinstance(planned, Planned) and planned.plan.workdir == "/w"
    assert [s.id for s in planned.plan.subtasks][:2] == ["echo[0]", "echo[1]"]
    asked = start(TaskRequest(query="anything", planner="test.planning.good"))
    assert asked == AskPlanner(
        "test.planning.good", TaskRequest(query="anything", planner="test.planning.good")
    )
    unmatched = start(TaskRequest(query="no template has these words"))
    assert isinstance(unmatched, PlanFailed)
    assert isinstance(unmatched.error, NoTemplateMatchedError)
    # A template whose capability the registry lacks: refused by the one validation.
    lacking = Registry()
    invalid = start(TaskRequest(template="echo_fanout", items=("a",)), lacking)
    assert isinstance(invalid, PlanFailed) and "test.echo" in invalid.error.message
    with pytest.raises(UnknownCapabilityError):
        start(TaskRequest(query="anything", planner="test.planning.nowhere"))


def test_the_driver_decides_child_sub_tasks_and_says_when_they_settle(
    deps: dict[str, object],
) -> None:
    """`AskChild` is answered by the driver: refused for a watermark that is not the
    running attempt's, admitted otherwise (dispatched like any sub-task); `ChildSettled`
    follows when the child's result is taken in, and asking again finds the outcome."""
    from swarm_ray.core.driver._commands import AskChild, ChildAdmitted, ChildRefused, ChildSettled
    from swarm_ray.core.model._errors import WatermarkRejectedError

    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a",)))
    [parent, *_] = [
        c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)
    ]
    sid, mark = parent.subtask.subtask_id, parent.subtask.watermark

    forged = driver.step(AskChild(sid, "not-it", "test.noop.run", {"n": 1}, "a1-1"))
    [refused] = forged.notices
    assert isinstance(refused, ChildRefused) and forged.commands == []
    assert isinstance(refused.error, WatermarkRejectedError)
    own = driver.step(AskChild(sid, mark, "test.echo.text", {"text": "x"}, "a1-1"))
    assert (
        isinstance(own.notices[0], ChildRefused)
        and "own capability" in own.notices[0].error.message
    )

    asked = driver.step(AskChild(sid, mark, "test.noop.run", {"n": 1}, "a1-2"))
    [child_run] = [c for c in asked.commands if isinstance(c, Run)]
    assert child_run.subtask.subtask_id == f"{sid}>a1-2"
    assert [n for n in asked.notices if isinstance(n, ChildAdmitted)] == [
        ChildAdmitted(f"{sid}>a1-2", None)
    ]
    arrived = driver.step(Arrived(_done(child_run.subtask, output={"n": 1})))
    [settled] = [n for n in arrived.notices if isinstance(n, ChildSettled)]
    assert settled.child_id == f"{sid}>a1-2" and settled.outcome.ok
    again = driver.step(AskChild(sid, mark, "test.noop.run", {"n": 1}, "a1-2"))
    [admitted] = again.notices
    assert isinstance(admitted, ChildAdmitted) and admitted.outcome == settled.outcome
    assert not any(isinstance(c, Run) for c in again.commands)  # not run twice


def test_a_child_whose_input_the_log_cannot_hold_is_refused_and_the_task_goes_on(
    deps: dict[str, object],
) -> None:
    from swarm_ray.core.driver._commands import AskChild, ChildRefused

    driver = _driver(deps, TaskRequest(template="echo_fanout", items=("a",)))
    [parent, *_] = [
        c for c in driver.step(Planned(_plan(deps, driver))).commands if isinstance(c, Run)
    ]
    ask = AskChild(
        parent.subtask.subtask_id,
        parent.subtask.watermark,
        "test.noop.run",
        {"n": object()},
        "a1-1",
    )
    step = driver.step(ask)
    [refused] = step.notices
    assert isinstance(refused, ChildRefused) and isinstance(refused.error, InvalidInputError)
    assert "not JSON" in refused.error.message and step.commands == []
    assert driver.state is TaskState.EXECUTING


class _StartLost(SQLiteStateStore):
    """A store that commits write by write (as Redis does), in a process that stops after
    writing a task's `dispatching` snapshot and before the `Start` that follows it."""

    def append(
        self, task_id: str, kind: str, payload_json: str, *, dedupe_key: str | None = None
    ) -> int:
        if kind == "sched" and payload_json.startswith('{"kind":"start"'):
            return 0  # never written
        return super().append(task_id, kind, payload_json, dedupe_key=dedupe_key)


@pytest.mark.parametrize("planner", [False, True], ids=["template", "planner"])
def test_a_restart_after_the_plan_was_stored_but_not_its_start_starts_it(
    deps: dict[str, object], tmp_path: Path, planner: bool
) -> None:
    lossy = {**deps, "store": _StartLost(tmp_path / "lossy.db")}
    if planner:
        request = TaskRequest(query="shout", items=("hi",), planner="test.planning.good")
        lost = TaskDriver.create(request, **lossy)
        lost.step(AskPlanner("test.planning.good", request))
        first = "plan"
    else:
        lost = _driver(lossy, TaskRequest(template="echo_fanout", items=("a",)))
        lost.step(Planned(_plan(deps, lost)))
        first = "echo[0]"
    again = TaskDriver.load(
        lost.task_id, **{**lossy, "store": SQLiteStateStore(tmp_path / "lossy.db")}
    )
    assert again is not None and again.scheduler is not None
    [run] = [c.subtask for c in again.step(Resume()).commands if isinstance(c, Run)]
    assert run.subtask_id == first
