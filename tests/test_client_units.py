"""The clients without Ray: how calls run, and how Ray's errors come back.

The orchestrator is a stand-in whose methods' `.remote(...)` give awaitables, as an
actor handle's do; the tests that need a real one are in `test_runtime.py`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from ray.exceptions import RayActorError, RayTaskError

from swarm_ray import (
    AnswerRefusedError,
    AsyncSwarmClient,
    OrchestratorUnavailableError,
    SwarmClient,
    TaskEvent,
    TaskNotFoundError,
    TaskStatus,
)
from swarm_ray.core.model._human import HumanWait


def _status(state: str = "executing", waiting: tuple[str, ...] = ()) -> TaskStatus:
    asks = [
        HumanWait(
            subtask_id=s, prompt="?", answer_schema={}, since=0, deadline=None, has_default=False
        )
        for s in waiting
    ]
    return TaskStatus(
        task_id="t", state=state, progress=0, created_at=0, updated_at=0, waiting=asks
    )


def _orchestrator(**methods: Callable[..., Any]) -> SimpleNamespace:
    """A stand-in actor: each method's `.remote` runs it as a coroutine."""

    def remote(method: Callable[..., Any]) -> SimpleNamespace:
        async def call(*args: Any, **kwargs: Any) -> Any:
            return method(*args, **kwargs)

        return SimpleNamespace(remote=call)

    return SimpleNamespace(**{name: remote(method) for name, method in methods.items()})


def _sync(actor: Any) -> SwarmClient:
    return SwarmClient(AsyncSwarmClient(actor))


def test_the_sync_client_runs_with_or_without_an_event_loop_in_the_calling_thread() -> None:
    swarm = _sync(_orchestrator(status=lambda task_id, principal: _status()))

    async def in_a_notebook() -> str:  # its cells run on a loop: `asyncio.run` would refuse
        return swarm.task("t").status().state

    assert swarm.task("t").status().state == "executing"  # a script: no loop at all
    assert asyncio.run(in_a_notebook()) == "executing"
    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(swarm.task("t").status().state))
    thread.start()
    thread.join(10)
    assert seen == ["executing"]


def test_an_error_raised_in_the_orchestrator_comes_back_as_itself() -> None:
    refused = TaskNotFoundError("task `t` is not known", task_id="t")

    def status(task_id: str, principal: Any) -> TaskStatus:
        raise RayTaskError("status", "Traceback: ...", refused).as_instanceof_cause()

    with pytest.raises(TaskNotFoundError) as caught:
        _sync(_orchestrator(status=status)).task("t").status()
    assert type(caught.value) is TaskNotFoundError and caught.value == refused


def test_an_orchestrator_away_is_waited_for_or_reported() -> None:
    calls: list[int] = []

    def info() -> dict[str, Any]:
        calls.append(1)
        if len(calls) < 3:  # restarting
            raise RayActorError(error_msg="actor on node 10.0.0.7 died")
        return {"open_tasks": 0}

    actor = _orchestrator(info=info)
    assert _sync(actor).info() == {"open_tasks": 0} and len(calls) == 3  # ridden out
    calls.clear()
    eager = AsyncSwarmClient(actor, ride_out_restarts=False)
    with pytest.raises(OrchestratorUnavailableError) as caught:
        asyncio.run(eager.info())
    assert isinstance(caught.value.__cause__, RayActorError) and len(calls) == 1

    def gone() -> dict[str, Any]:
        raise RayActorError(error_msg="actor on node 10.0.0.7 died")

    patient = AsyncSwarmClient(_orchestrator(info=gone), timeout_s=0.5)
    with pytest.raises(OrchestratorUnavailableError):  # waited for until `timeout_s`
        asyncio.run(patient.info())


def test_answer_goes_to_the_one_subtask_that_waits() -> None:
    answered: list[tuple[str, dict[str, Any]]] = []
    waiting: list[str] = ["ask"]

    def answer(task_id: str, subtask_id: str, value: dict[str, Any], principal: Any) -> TaskStatus:
        answered.append((subtask_id, value))
        return _status()

    swarm = _sync(
        _orchestrator(
            status=lambda task_id, principal: _status(waiting=tuple(waiting)), answer=answer
        )
    )
    swarm.task("t").answer({"send": True})
    assert answered == [("ask", {"send": True})]
    waiting.append("other")
    with pytest.raises(AnswerRefusedError, match="2 sub-tasks waiting"):
        swarm.task("t").answer({"send": True})
    swarm.task("t").answer({"send": False}, "other")  # named: no need to choose
    assert answered[-1] == ("other", {"send": False})


def test_a_task_followed_and_left_early_lets_the_client_go_on() -> None:
    def events(task_id: str, after_seq: int, wait_s: float, principal: Any) -> list[TaskEvent]:
        seq = after_seq + 1
        return [TaskEvent(task_id="t", seq=seq, at=0, trace_id="x", kind="state", status="ran")]

    swarm = _sync(_orchestrator(events=events, status=lambda task_id, principal: _status()))
    for n, event in enumerate(swarm.task("t").events(), start=1):  # never ends by itself
        assert event.seq == n
        if n == 3:
            break
    assert swarm.task("t").status().state == "executing"
