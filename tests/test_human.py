"""A person in the loop: a sub-task held for its owner's answer, durable, with a deadline.

The pure part (no Ray): the driver holds the sub-task while the other branches go on,
reloads the wait from its log, takes only its owner's answer matching the schema, and at
the deadline applies the default or fails the sub-task with `human_timeout`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm_ray import AnswerRefusedError, InvalidInputError, SwarmError, TaskRequest, TaskState
from swarm_ray.core.driver._commands import (
    Answer,
    AnswerRejected,
    Arrived,
    Planned,
    Resume,
    Run,
    Wake,
    WakeAt,
)
from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.guards._principal import LOCAL, Principal
from swarm_ray.core.guards._watermark import WatermarkKey
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._subtask import SubTask, SubTaskResult, Timings
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.core.views._views import status_view
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._store import SQLiteStateStore

ALICE = Principal(id="alice")


def _rejected(driver: TaskDriver, subtask_id: str, answer: object, who: Principal) -> SwarmError:
    """Why the driver refused `who`'s answer (it must refuse it, and change nothing)."""
    step = driver.step(Answer(subtask_id, answer, who))
    [rejected] = step.notices
    assert isinstance(rejected, AnswerRejected) and step.commands == []
    return rejected.error


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def deps(tmp_path: Path) -> dict[str, object]:
    registry, router = load_catalogs(
        ["swarm_ray.testing:testing_catalog", "tests.human_catalog:human_catalog"]
    )
    return {
        "registry": registry,
        "store": SQLiteStateStore(tmp_path / "state.db"),
        "results": ResultStore(str(tmp_path / "results")),
        "key": WatermarkKey.generate(),
        "router": router,
        "clock": Clock(),
    }


def _start(deps: dict[str, object], template: str) -> tuple[TaskDriver, list[SubTask]]:
    request = TaskRequest(template=template)
    driver = TaskDriver.create(request, owner="alice", **deps)
    plan = expand(deps["router"].route(request), request, task_id=driver.task_id)  # type: ignore[attr-defined]
    step = driver.step(Planned(plan))
    return driver, [c.subtask for c in step.commands if isinstance(c, Run)]


def _done(subtask: SubTask) -> SubTaskResult:
    output: dict[str, object] = {"text": str(subtask.input.get("text", "")).upper(), "pid": 1}
    if subtask.capability_id == "test.join.texts":
        parts = [p for p in subtask.input["parts"] if p is not None]
        output = {"text": " ".join(parts), "count": len(parts)}
    return SubTaskResult(
        task_id=subtask.task_id,
        subtask_id=subtask.subtask_id,
        capability_id=subtask.capability_id,
        attempt=subtask.attempt,
        output=output,
        timings=Timings(started_at=1.0, finished_at=1.1),
        watermark=subtask.watermark,
    )


def _finish(driver: TaskDriver, runs: list[SubTask]) -> None:
    while runs:
        step = driver.step(Arrived(_done(runs.pop(0))))
        runs += [c.subtask for c in step.commands if isinstance(c, Run)]


def test_a_waiting_branch_survives_a_reload_and_runs_with_its_owners_answer(
    deps: dict[str, object],
) -> None:
    driver, runs = _start(deps, "human_branches")
    assert sorted(r.subtask_id for r in runs) == ["first", "second"]  # `ask` is held
    _finish(driver, runs)  # the other branches go on and finish
    assert driver.scheduler is not None
    assert str(driver.scheduler.status("ask")) == "waiting"
    assert [e.status for e in driver.events if e.kind == "human"] == ["waiting_for_human"]
    [wait] = status_view(driver, brief=True).waiting
    assert wait.subtask_id == "ask" and wait.owner == "alice" and wait.deadline == 1600.0

    reloaded = TaskDriver.load(driver.task_id, **deps)
    assert reloaded is not None
    step = reloaded.step(Resume())
    assert WakeAt(1600.0) in step.commands and not any(isinstance(c, Run) for c in step.commands)
    refused = _rejected(reloaded, "ask", {"text": "gamma"}, Principal(id="mallory", admin=True))
    assert isinstance(refused, AnswerRefusedError) and refused.details["reason"] == "not_owner"
    assert isinstance(_rejected(reloaded, "ask", {"text": ""}, ALICE), InvalidInputError)
    assert isinstance(_rejected(reloaded, "first", {"text": "x"}, ALICE), AnswerRefusedError)
    step = reloaded.step(Answer("ask", {"text": "gamma"}, ALICE))
    [run] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert run.subtask_id == "ask" and run.input["text"] == "gamma"
    assert any(e.summary == "answered by `alice`" for e in reloaded.events)
    answered = _rejected(reloaded, "ask", {"text": "gamma"}, LOCAL)  # answered already
    assert isinstance(answered, AnswerRefusedError)
    _finish(reloaded, [run])
    assert reloaded.state is TaskState.COMPLETED
    assert reloaded.output() == {"text": "ALPHA BETA GAMMA", "count": 3}
    again = TaskDriver.load(driver.task_id, **deps)
    assert again is not None and again.scheduler is not None
    assert again.scheduler.answer("ask") == {"text": "gamma"}


def test_at_the_deadline_the_default_applies(deps: dict[str, object]) -> None:
    driver, runs = _start(deps, "human_default")
    clock = deps["clock"]
    assert isinstance(clock, Clock)
    clock.now += 3.5
    step = driver.step(Wake())
    [ask] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert ask.input["text"] == "by default"
    _finish(driver, [*runs, ask])
    assert driver.state is TaskState.COMPLETED
    assert driver.output() == {"text": "ALPHA BETA BY DEFAULT", "count": 3}
    assert any("default answer applied" in w for w in driver.record.warnings)


def test_a_wake_a_hair_before_the_deadline_arms_the_timer_again(
    deps: dict[str, object],
) -> None:
    """A timer that fires early (the event loop's clock is not the wall clock) must not
    lose the deadline: a task of the suite once waited past it for good."""
    driver, _ = _start(deps, "human_default")
    clock = deps["clock"]
    assert isinstance(clock, Clock)
    deadline = clock.now + 3
    clock.now = deadline - 1e-6
    step = driver.step(Wake())
    assert WakeAt(deadline) in step.commands and not any(isinstance(c, Run) for c in step.commands)
    clock.now = deadline
    step = driver.step(Wake())
    [ask] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert ask.input["text"] == "by default"


def test_with_no_default_the_sub_task_fails_with_human_timeout(deps: dict[str, object]) -> None:
    driver, runs = _start(deps, "human_strict")
    clock = deps["clock"]
    assert isinstance(clock, Clock)
    clock.now += 2.5
    late = _rejected(driver, "ask", {"text": "late"}, ALICE)  # past it, before the timer
    assert isinstance(late, AnswerRefusedError)
    driver.step(Wake())
    _finish(driver, runs)
    assert driver.state is TaskState.COMPLETED  # `join` is partial_ok: the task degrades
    assert driver.scheduler is not None
    error = driver.scheduler.error("ask")
    assert error is not None and error.code == "human_timeout"
    assert driver.output() == {"text": "ALPHA BETA", "count": 2}


@pytest.mark.ray
@pytest.mark.timeout(400)
def test_killed_during_the_wait_answered_over_rest_and_a_default_at_the_deadline(
    ray_cluster: None, serve_port: int, tmp_path: Path
) -> None:
    """Three branches, one waiting; the orchestrator is killed during the wait; the owner
    answers through the gateway; the task completes with the answer. Another run gets its
    default at the deadline."""
    import secrets

    import httpx
    import ray
    from ray import serve

    import swarm_ray
    from swarm_ray.gateway import GatewayConfig, build_app
    from tests.support import wait_until

    catalogs = ("swarm_ray.testing:testing_catalog", "tests.human_catalog:human_catalog")
    client = swarm_ray.connect(catalogs=list(catalogs), state_dir=tmp_path, name="swarm-human")
    alice, bob = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    keys = tmp_path / "keys"
    keys.write_text(f"alice:{alice}\nbob:{bob}\n")
    config = GatewayConfig(
        orchestrator="swarm-human", catalogs=catalogs, api_keys_file=str(keys), state_dir=None
    )
    serve.run(build_app(config), name="swarm-human-gateway", route_prefix="/human")
    base = f"http://127.0.0.1:{serve_port}/human"
    try:
        with httpx.Client(
            base_url=base, timeout=60, headers={"Authorization": f"Bearer {alice}"}
        ) as http:
            task_id = http.post("/v1/tasks", json={"template": "human_branches"}).json()["task_id"]

            def waiting() -> dict[str, object] | None:
                status = http.get(f"/v1/tasks/{task_id}").json()
                done = [s for s, v in status["subtasks"].items() if v["status"] == "succeeded"]
                return status if status["waiting"] and len(done) == 2 else None

            status = wait_until(waiting, 120, "the other branches to finish while ask waits")
            assert [w["subtask_id"] for w in status["waiting"]] == ["ask"]  # type: ignore[index]
            listed = http.get("/v1/tasks").json()
            assert [t["waiting"][0]["subtask_id"] for t in listed if t["task_id"] == task_id]
            ray.kill(client.actor, no_restart=False)  # Ray restarts it; it replays the wait
            url = f"/v1/tasks/{task_id}/subtasks/ask/answer"
            bad = http.post(url, json={"answer": {"text": 3}})
            assert bad.status_code == 422, bad.text
            other = http.post(
                url, json={"answer": {"text": "x"}}, headers={"Authorization": f"Bearer {bob}"}
            )
            assert other.status_code == 404  # not bob's task: not even known to him
            answered = http.post(url, json={"answer": {"text": "gamma"}})
            assert answered.status_code == 200, answered.text
            again = http.post(url, json={"answer": {"text": "gamma"}})
            assert again.status_code == 409
            record = client.task(task_id).wait(timeout_s=120)
            assert record.machine.state is TaskState.COMPLETED, record.error
            assert record.output == {"text": "ALPHA BETA GAMMA", "count": 3}
            events = client.task(task_id).events_so_far()
            assert any(e.summary == "answered by `alice`" for e in events)

            late = http.post("/v1/tasks", json={"template": "human_default"}).json()["task_id"]
            record = client.task(late).wait(timeout_s=120)
            assert record.machine.state is TaskState.COMPLETED, record.error
            assert record.output == {"text": "ALPHA BETA BY DEFAULT", "count": 3}
    finally:
        serve.delete("swarm-human-gateway")
        client.shutdown()


def _asked(subtask: SubTask, question: str, **ask: object) -> SubTaskResult:
    """The result of an attempt whose agent paused to ask (`swarm_ray.agent.ask_human`)."""
    from swarm_ray.agent import ask_human
    from swarm_ray.core.model._subtask import SubTaskError, TokenUsage

    try:
        ask_human(question, state={"seen": subtask.attempt}, usage=TokenUsage(calls=1), **ask)  # type: ignore[arg-type]
    except Exception as exc:
        error = SubTaskError.from_exception(exc)
    return SubTaskResult(
        task_id=subtask.task_id,
        subtask_id=subtask.subtask_id,
        capability_id=subtask.capability_id,
        attempt=subtask.attempt,
        error=error,
        usage=TokenUsage(calls=1),
        timings=Timings(started_at=1.0, finished_at=1.1),
        watermark=subtask.watermark,
    )


def test_an_agent_asks_mid_run_and_goes_on_from_its_state_with_the_answer(
    deps: dict[str, object],
) -> None:
    driver, runs = _start(deps, "human_branches")
    first = next(r for r in runs if r.subtask_id == "first")
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}}
    schema["required"] = ["answer"]
    step = driver.step(Arrived(_asked(first, "Shout or not?", schema=schema, timeout_s=60)))
    assert not any(isinstance(c, Run) for c in step.commands)  # held, not retried
    assert driver.scheduler is not None and str(driver.scheduler.status("first")) == "waiting"
    waiting = {w.subtask_id: w for w in status_view(driver, brief=True).waiting}
    assert waiting["first"].prompt == "Shout or not?" and waiting["first"].deadline == 1060.0
    assert isinstance(_rejected(driver, "first", {"answer": 3}, ALICE), InvalidInputError)

    reloaded = TaskDriver.load(driver.task_id, **deps)  # the wait is in the log
    assert reloaded is not None
    reloaded.step(Resume())
    step = reloaded.step(Answer("first", {"answer": "yes"}, ALICE))
    [run] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert run.subtask_id == "first" and run.attempt == first.attempt + 1
    assert run.resume == {"answer": {"answer": "yes"}, "state": {"seen": first.attempt}}
    assert run.input == first.input  # the stage's input is unchanged; the answer is aside

    # it may ask again; the second question is a wait of its own, answered on its own
    step = reloaded.step(Arrived(_asked(run, "Really?")))
    assert not any(isinstance(c, Run) for c in step.commands)
    step = reloaded.step(Answer("first", {}, ALICE))
    [again] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert again.resume == {"answer": {}, "state": {"seen": run.attempt}}
    assert reloaded.usage().calls == 2  # what the asking attempts spent is accounted
    _finish(reloaded, [again, *[r for r in runs if r.subtask_id != "first"]])
    step = reloaded.step(Answer("ask", {"text": "gamma"}, ALICE))  # the stage's own wait
    _finish(reloaded, [c.subtask for c in step.commands if isinstance(c, Run)])
    assert reloaded.state is TaskState.COMPLETED
    assert reloaded.output() == {"text": "ALPHA BETA GAMMA", "count": 3}
    answered = [e.summary for e in reloaded.events if e.summary == "answered by `alice`"]
    assert len(answered) == 3


def test_an_agents_question_takes_its_default_and_a_sub_task_asks_a_bounded_number_of_times(
    deps: dict[str, object],
) -> None:
    from swarm_ray.core.scheduling._scheduler import MAX_ASKS

    driver, runs = _start(deps, "human_branches")
    second = next(r for r in runs if r.subtask_id == "second")
    driver.step(Arrived(_asked(second, "Go on?", timeout_s=5, default={"go": True})))
    clock = deps["clock"]
    assert isinstance(clock, Clock)
    clock.now += 6
    step = driver.step(Wake())
    [run] = [c.subtask for c in step.commands if isinstance(c, Run)]
    assert run.resume == {"answer": {"go": True}, "state": {"seen": second.attempt}}
    for _ in range(MAX_ASKS - 1):  # it keeps asking; each question is answered at once
        driver.step(Arrived(_asked(run, "And now?")))
        step = driver.step(Answer("second", {}, ALICE))
        [run] = [c.subtask for c in step.commands if isinstance(c, Run)]
    step = driver.step(Arrived(_asked(run, "One more?")))  # past the bound: it fails
    assert driver.scheduler is not None
    error = driver.scheduler.error("second")
    assert error is not None and error.code == "invalid_output"
    assert f"at most {MAX_ASKS}" in error.message


def test_an_answer_whose_check_breaks_is_refused_and_the_task_goes_on(
    deps: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver checks answers inside its step: a check that breaks (a bug) is that
    answer's error, as it was when the check ran outside; the task keeps waiting."""
    import swarm_ray.core.driver._admit as admit_module
    from swarm_ray.core.model._errors import SwarmRuntimeError

    driver, runs = _start(deps, "human_branches")
    _finish(driver, runs)
    assert [w.subtask_id for w in status_view(driver, brief=True).waiting] == ["ask"]

    def broken(*_args: object) -> None:
        raise RuntimeError("a bug in the checker")

    monkeypatch.setattr(admit_module, "check_answer", broken)
    bug = _rejected(driver, "ask", {"text": "gamma"}, ALICE)
    assert isinstance(bug, SwarmRuntimeError) and "a bug in the checker" in bug.message
    monkeypatch.undo()
    assert driver.state is TaskState.EXECUTING
    step = driver.step(Answer("ask", {"text": "gamma"}, ALICE))
    _finish(driver, [c.subtask for c in step.commands if isinstance(c, Run)])
    assert driver.state is TaskState.COMPLETED
