"""A person in the loop, the scheduler's side: a sub-task held until someone answers.

Three things make a sub-task wait (`waiting`, with a `HumanWait` in `Scheduler._waits`):
its stage declares `await_human` and it became ready; its agent paused an attempt to ask
a question (`AskedHumanError`: no retry spent, at most `MAX_ASKS` per sub-task); or a
side-effecting attempt was in flight at a crash and a person decides whether to run it
again. An answer event sends it on (into `$answer`, or to the agent as `SubTask.resume`);
at the deadline the default applies, or it fails with `human_timeout`. The driver and the
views read what waits (`waiting`, `wait_of`), when to wake (`next_deadline`) and the
answer a sub-task ran with (`answer`). The questions and answers are `core._human`'s;
`Waiting` is mixed into `Scheduler`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swarm_ray.core._errors import ErrorCode
from swarm_ray.core._human import REVIEW_SCHEMA, HumanAsk, HumanWait
from swarm_ray.core._node import SubTaskStatus, _Node
from swarm_ray.core._signals import (
    AwaitHuman,
    Dispatch,
    FailTask,
    Fallback,
    FinishTask,
    HumanAnswered,
    HumanSettled,
    Intent,
    Retry,
    RunIntent,
    Warn,
)
from swarm_ray.core._subtask import SubTaskError, SubTaskResult

__all__: list[str] = []

MAX_ASKS = 8
"""Questions one sub-task's agent may ask a person, over all its attempts."""


class Waiting:
    """The scheduler's methods for sub-tasks that wait for a person, and what it tells of them."""

    if TYPE_CHECKING:  # what of the scheduler they use
        outcome: FinishTask | FailTask | None
        _nodes: dict[str, _Node]
        _running: dict[str, Dispatch | Retry | Fallback]
        _waits: dict[str, HumanWait]
        _asks: dict[str, HumanAsk]

        def _set(self, node: _Node, status: SubTaskStatus) -> None: ...

        def _warn(self, message: str, subtask_id: str | None = None) -> Warn: ...

        def _launch(
            self, sid: str, at: float, kind: type[RunIntent], **extra: Any
        ) -> list[Intent]: ...

        def _on_failure(self, sid: str, error: SubTaskError, at: float) -> list[Intent]: ...

        def _settle_failed(self, sid: str, error: SubTaskError, at: float) -> list[Intent]: ...

    def waiting(self) -> list[HumanWait]:
        """Sub-tasks waiting for a person, in the order they began to wait."""
        return list(self._waits.values())

    def wait_of(self, subtask_id: str) -> HumanWait | None:
        """What `subtask_id` waits for, if it waits for a person."""
        return self._waits.get(subtask_id)

    def next_deadline(self) -> float | None:
        """The earliest deadline of a waiting sub-task (when to wake), if any."""
        deadlines = [w.deadline for w in self._waits.values() if w.deadline is not None]
        return min(deadlines) if deadlines else None

    def answer(self, subtask_id: str) -> dict[str, Any] | None:
        """The answer a sub-task ran with (given, or its default), if it asked a person."""
        node = self._nodes.get(subtask_id)
        return None if node is None else node.answer

    def _on_answer(self, event: HumanAnswered) -> list[Intent]:
        """Go on with the sub-task a person answered, if it still waits for this answer."""
        sid, review = event.subtask_id, event.review_of is not None
        wait = self._waits.get(sid)  # None: it was settled meanwhile, nothing to do
        if wait is None or (
            wait.review_of != event.review_of if review else wait.asked_in != event.asked_in
        ):
            return []
        del self._waits[sid]
        settled = HumanSettled(subtask_id=sid, outcome="answered", principal=event.principal)
        if review:
            rerun = bool(event.answer.get("rerun"))
            return [settled, *self._reviewed(sid, rerun, event.principal, event.at)]
        by_agent = wait.asked_in is not None
        return [settled, *self._answered(sid, event.answer, event.at, by_agent=by_agent)]

    def _wait(self, sid: str, at: float, asked_in: int | None = None) -> AwaitHuman:
        """Hold a sub-task until it is answered.

        It is ready in an `await_human` stage, or paused by its agent's question
        (`asked_in`, the attempt that asked).
        """
        ask = self._ask_of(sid, asked_in)
        deadline = None if ask.timeout_s is None else at + ask.timeout_s
        self._waits[sid] = HumanWait(
            subtask_id=sid,
            prompt=ask.prompt,
            answer_schema=ask.answer_schema,
            since=at,
            deadline=deadline,
            has_default=ask.default is not None,
            asked_in=asked_in,
        )
        self._set(self._nodes[sid], SubTaskStatus.WAITING)
        return AwaitHuman(subtask_id=sid, prompt=ask.prompt, deadline=deadline)

    def _ask_of(self, sid: str, asked_in: int | None) -> HumanAsk:
        """What `sid` waits for: its agent's question (`asked_in`), else its stage's."""
        node = self._nodes[sid]
        if asked_in is None:
            return self._asks[node.spec.stage]
        assert node.asked is not None  # kept while it waits for the answer
        return node.asked[0]

    def _paused(self, result: SubTaskResult, at: float) -> list[Intent]:
        """An agent paused its attempt to ask a person: hold the sub-task for the answer.

        A question is not a failed try (it spends no retry), but a sub-task asks at most
        `MAX_ASKS` times, and a question that is not a valid `HumanAsk` fails the attempt
        as `invalid_output`.
        """
        sid = result.subtask_id
        node = self._nodes[sid]
        assert result.error is not None
        self._running.pop(sid, None)
        asks = node.asks_made + 1
        try:
            if asks > MAX_ASKS:
                raise ValueError(f"it asked {asks} times, at most {MAX_ASKS}")
            ask = HumanAsk.model_validate(result.error.details.get("ask"))
        except ValueError as exc:  # a pydantic ValidationError included
            error = SubTaskError(
                code=ErrorCode.INVALID_OUTPUT,
                message=f"sub-task `{sid}` asked a person a question it may not ask: {exc}",
            )
            return self._on_failure(sid, error, at)
        node.cap_attempts -= 1
        node.asks_made = asks
        node.asked = (ask, result.error.details.get("state"))
        return [self._wait(sid, at, asked_in=result.attempt)]

    def _hold_for_review(self, sid: str, attempt: int, at: float) -> AwaitHuman:
        """Hold a side-effecting attempt that was in flight at a crash, for a person."""
        del self._running[sid]
        node = self._nodes[sid]
        prompt = (
            f"sub-task `{sid}` on `{node.capability}` (which has side effects) was "
            f"running attempt {attempt} when the orchestrator stopped, and nothing records "
            'whether it finished. Run it again? Answer {"rerun": true} or {"rerun": false}.'
        )
        self._waits[sid] = HumanWait(
            subtask_id=sid,
            prompt=prompt,
            answer_schema=REVIEW_SCHEMA,
            since=at,
            deadline=None,
            has_default=False,
            review_of=attempt,
        )
        self._set(node, SubTaskStatus.WAITING)
        return AwaitHuman(subtask_id=sid, prompt=prompt, deadline=None)

    def _reviewed(self, sid: str, rerun: bool, who: str, at: float) -> list[Intent]:
        if rerun:
            self._set(self._nodes[sid], SubTaskStatus.PENDING)
            return self._launch(sid, at, Dispatch, reason="reviewed")
        error = SubTaskError(
            code=ErrorCode.NEEDS_REVIEW,
            message=f"sub-task `{sid}` has side effects and was in flight at a crash; "
            f"`{who}` chose not to run it again",
        )
        return self._settle_failed(sid, error, at)

    def _answered(
        self, sid: str, answer: dict[str, Any], at: float, *, by_agent: bool
    ) -> list[Intent]:
        node = self._nodes[sid]
        if by_agent:  # the agent goes on from what it saved, with the answer
            assert node.asked is not None
            node.resume = {"answer": answer, "state": node.asked[1]}
            node.asked = None
        else:  # the stage's input reads it (`$answer`)
            node.answer = answer
        self._set(node, SubTaskStatus.PENDING)
        return self._launch(sid, at, Dispatch, reason="answered")

    def _expire(self, at: float) -> list[Intent]:
        """Settle the waits whose deadline passed: the default applies, or `human_timeout`."""
        out: list[Intent] = []
        for sid, wait in list(self._waits.items()):
            if wait.deadline is None or wait.deadline > at:
                continue
            del self._waits[sid]
            by_agent = wait.asked_in is not None
            default = self._ask_of(sid, wait.asked_in).default
            if default is not None:
                out += [
                    HumanSettled(subtask_id=sid, outcome="default"),
                    self._warn(
                        f"sub-task `{sid}`: nobody answered by its deadline; the "
                        "default answer applied",
                        sid,
                    ),
                    *self._answered(sid, default, at, by_agent=by_agent),
                ]
            else:
                error = SubTaskError(
                    code=ErrorCode.HUMAN_TIMEOUT,
                    message=f"sub-task `{sid}` waited for an answer until its deadline and "
                    "got none (no default declared)",
                )
                out += [
                    HumanSettled(subtask_id=sid, outcome="timed_out"),
                    *self._settle_failed(sid, error, at),
                ]
            if self.outcome is not None:
                break
        return out
