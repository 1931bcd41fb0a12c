"""What a person or an agent hands a task from outside its plan, checked before it is fed.

Two inputs reach a task's scheduler from outside the work it dispatched: a person's
answer to a sub-task held for them (`Answer`) and a running agent's child sub-task
(`AskChild`). Each is checked here, against the task's scheduler and plan, and becomes
the event the driver feeds (`HumanAnswered`, `ChildAdded`) or the error that refuses it.
A refusal is that input's own, which the driver reports by notice: it never ends the
task, and neither does a bug met while checking (`refusal` makes it the input's error).

Pure: no Ray, no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from swarm_ray.core.driver._children import admit_child
from swarm_ray.core.driver._commands import Answer, AskChild
from swarm_ray.core.model._errors import (
    AgentUnavailableError,
    AnswerRefusedError,
    InvalidInputError,
    SwarmError,
    SwarmRuntimeError,
    WatermarkRejectedError,
)
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._human import check_answer
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import ChildAdded, HumanAnswered
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__: list[str] = []

T = TypeVar("T")


def refusal(what: str, check: Callable[[], T]) -> T | SwarmError:
    """What `check()` returns, or the error that refuses `what` (a bug met included)."""
    try:
        return check()
    except SwarmError as exc:
        return exc
    except Exception as exc:  # a bug checking one input must not stop the task
        return SwarmRuntimeError(f"{what} could not be checked ({type(exc).__name__}: {exc})")


def must_be_json(value: Any, what: str) -> None:
    """Refuse what the task's log could not write (`InvalidInputError`): not JSON data."""
    try:
        json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} is not JSON data: {exc}") from None


def answer_event(
    given: Answer,
    *,
    task_id: str,
    owner: str | None,
    scheduler: Scheduler | None,
    ended: bool,
    now: float,
) -> HumanAnswered:
    """The event that feeds a person's answer to a waiting sub-task.

    Only the task's owner answers (a trusted caller, holding the cluster, may answer
    any task; an admin key that is not the owner's may not).

    Raises:
        AnswerRefusedError: the sub-task does not wait for an answer (`not_waiting`:
            never asked, answered already, past its deadline, or the task ended) or the
            principal is not the owner (`not_owner`).
        InvalidInputError: the answer does not match the sub-task's schema (fields in
            `errors`), or is not JSON data.
    """
    sid, who = given.subtask_id, given.principal
    if not who.trusted and who.id != owner:
        raise AnswerRefusedError(
            f"only the owner of task `{task_id}` answers its sub-tasks, not `{who.id}`",
            task_id=task_id,
            subtask_id=sid,
            reason="not_owner",
        )
    wait = scheduler.wait_of(sid) if scheduler is not None else None
    late = wait is not None and wait.deadline is not None and wait.deadline <= now
    if wait is None or late or ended:
        why = "past its deadline" if late else f"state {_status_of(scheduler, sid)}"
        raise AnswerRefusedError(
            f"sub-task `{sid}` of task `{task_id}` is not waiting for an answer ({why})",
            task_id=task_id,
            subtask_id=sid,
            reason="not_waiting",
        )
    checked = check_answer(wait, given.answer)
    must_be_json(checked, f"the answer to sub-task `{sid}`")
    return HumanAnswered(
        at=now,
        subtask_id=sid,
        answer=checked,
        principal=who.id,
        review_of=wait.review_of,
        asked_in=wait.asked_in,
    )


def _status_of(scheduler: Scheduler | None, subtask_id: str) -> str:
    if scheduler is None or subtask_id not in {s.id for s in scheduler.specs()}:
        return "unknown"
    return str(scheduler.status(subtask_id))


def child_event(
    ask: AskChild,
    *,
    task_id: str,
    state: TaskState,
    scheduler: Scheduler | None,
    plan: Plan | None,
    registry: Registry,
    running: str | None,
    now: float,
) -> tuple[str, ChildAdded | None]:
    """The child's id, and the event that adds it (None when it exists already).

    `running` is the watermark of the parent's attempt out now (None when none is): only
    that attempt may ask. The child itself is judged by `_children.admit_child`.

    Raises:
        AgentUnavailableError: the task ended, or has no plan yet.
        WatermarkRejectedError: the watermark is not the running attempt's.
        InvalidInputError: the child's input is not JSON data.
        InvalidPlanError, UnknownCapabilityError: what `admit_child` refuses.
    """
    if state.terminal or scheduler is None or plan is None:
        raise AgentUnavailableError(f"task `{task_id}` is {state}: it takes no child sub-tasks")
    if not ask.parent_watermark or running != ask.parent_watermark:
        raise WatermarkRejectedError(
            f"sub-task `{ask.parent}` of task `{task_id}` has no running attempt with that "
            "watermark; only a running attempt may ask for child sub-tasks",
            reason="not_outstanding",
            subtask_id=ask.parent,
        )
    must_be_json(ask.input, f"the input of `{ask.parent}`'s child `{ask.key}`")
    return admit_child(
        scheduler, plan, registry, ask.parent, ask.capability_id, ask.input, ask.key, at=now
    )
