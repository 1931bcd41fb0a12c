"""A person in the loop, as a pure policy: what a sub-task waits for, and when it stops.

Three things make a sub-task wait (`waiting`, with a `HumanWait` in the scheduler's
table of waits): its stage declares `await_human` and it became ready (`stage_wait`);
its agent paused an attempt to ask a question (`question`: no retry spent, at most
`MAX_ASKS` per sub-task); or a side-effecting attempt was in flight at a crash and a
person decides whether to run it again (`review_wait`). An answer that `answers` the
wait sends it on (into `$answer`, or to the agent as `SubTask.resume`); at the deadline
(`due`) the default applies, or it fails with `unanswered`'s error.

Every function here reads a wait, an ask or a result and returns a value; it changes
nothing. `Scheduler` keeps the waits and applies what these decide; the questions and
answers themselves are `core.model._human`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._human import REVIEW_SCHEMA, HumanAsk, HumanWait
from swarm_ray.core.model._signals import AwaitHuman, HumanAnswered
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult
from swarm_ray.core.scheduling._node import _Node

__all__: list[str] = []

MAX_ASKS = 8
"""Questions one sub-task's agent may ask a person, over all its attempts."""


def ask_of(node: _Node, asks: Mapping[str, HumanAsk], asked_in: int | None) -> HumanAsk:
    """What `node` waits for: its agent's question (`asked_in`), else its stage's."""
    if asked_in is None:
        return asks[node.spec.stage]
    assert node.asked is not None  # kept while it waits for the answer
    return node.asked[0]


def stage_wait(sid: str, ask: HumanAsk, at: float, asked_in: int | None = None) -> HumanWait:
    """The wait of a sub-task held for `ask` from `at` (`asked_in`: the attempt that asked)."""
    return HumanWait(
        subtask_id=sid,
        prompt=ask.prompt,
        answer_schema=ask.answer_schema,
        since=at,
        deadline=None if ask.timeout_s is None else at + ask.timeout_s,
        has_default=ask.default is not None,
        asked_in=asked_in,
    )


def review_wait(sid: str, capability: str, attempt: int, at: float) -> HumanWait:
    """The wait of a side-effecting attempt that was in flight at a crash."""
    prompt = (
        f"sub-task `{sid}` on `{capability}` (which has side effects) was "
        f"running attempt {attempt} when the orchestrator stopped, and nothing records "
        'whether it finished. Run it again? Answer {"rerun": true} or {"rerun": false}.'
    )
    return HumanWait(
        subtask_id=sid,
        prompt=prompt,
        answer_schema=REVIEW_SCHEMA,
        since=at,
        deadline=None,
        has_default=False,
        review_of=attempt,
    )


def awaiting(wait: HumanWait) -> AwaitHuman:
    """The intent that tells of `wait`."""
    return AwaitHuman(subtask_id=wait.subtask_id, prompt=wait.prompt, deadline=wait.deadline)


def question(result: SubTaskResult, asks_made: int) -> HumanAsk | SubTaskError:
    """The question a paused attempt asks, or the `invalid_output` error it fails with.

    A question is not a failed try (it spends no retry), but a sub-task asks at most
    `MAX_ASKS` times, and one that is not a valid `HumanAsk` fails the attempt.
    """
    assert result.error is not None
    asks = asks_made + 1
    try:
        if asks > MAX_ASKS:
            raise ValueError(f"it asked {asks} times, at most {MAX_ASKS}")
        return HumanAsk.model_validate(result.error.details.get("ask"))
    except ValueError as exc:  # a pydantic ValidationError included
        return SubTaskError(
            code=ErrorCode.INVALID_OUTPUT,
            message=f"sub-task `{result.subtask_id}` asked a person a question it may not "
            f"ask: {exc}",
        )


def answers(wait: HumanWait | None, event: HumanAnswered) -> bool:
    """Whether `event` answers `wait` (None: it was settled meanwhile)."""
    if wait is None:
        return False
    if event.review_of is not None:
        return wait.review_of == event.review_of
    return wait.asked_in == event.asked_in


def due(waits: Mapping[str, HumanWait], at: float) -> list[str]:
    """The waits whose deadline passed by `at`, in the order they began."""
    return [sid for sid, wait in waits.items() if wait.deadline is not None and wait.deadline <= at]


def next_deadline(waits: Mapping[str, HumanWait]) -> float | None:
    """The earliest deadline of a wait (when to wake), if any."""
    deadlines = [w.deadline for w in waits.values() if w.deadline is not None]
    return min(deadlines) if deadlines else None


def unanswered(sid: str) -> SubTaskError:
    """The error of a sub-task whose deadline passed with no answer and no default."""
    return SubTaskError(
        code=ErrorCode.HUMAN_TIMEOUT,
        message=f"sub-task `{sid}` waited for an answer until its deadline and "
        "got none (no default declared)",
    )


def not_rerun(sid: str, who: str) -> SubTaskError:
    """The error of a reviewed sub-task that `who` chose not to run again."""
    return SubTaskError(
        code=ErrorCode.NEEDS_REVIEW,
        message=f"sub-task `{sid}` has side effects and was in flight at a crash; "
        f"`{who}` chose not to run it again",
    )


def resume_with(node: _Node, answer: dict[str, Any]) -> dict[str, Any]:
    """What an answered agent's next attempts get: the answer and the state it saved."""
    assert node.asked is not None
    return {"answer": answer, "state": node.asked[1]}
