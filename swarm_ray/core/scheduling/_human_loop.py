"""A person in the loop, applied: the scheduler's side of holding a sub-task for a person.

`core.scheduling._waits` decides (purely) what a sub-task waits for, whether an answer
answers it, which waits fall due and what they fail with; `WaitTable`
(`core.scheduling._wait_table`) keeps the waits. `HumanLoop` adds to the `Scheduler` the
steps that apply those decisions to a sub-task: hold it (a stage's `await_human`, an
agent's question, a side-effecting attempt found in flight at a restart), go on with it
once answered (or its default applies), or fail it when nobody answers. It only adds
behaviour: it writes none of the scheduler's fields, changing a status through the `Dag`,
a wait through the `WaitTable` and an attempt through the scheduler's own methods.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swarm_ray.core.model._signals import AwaitHuman, Dispatch, HumanAnswered, HumanSettled, Intent
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult
from swarm_ray.core.scheduling._dag import Dag
from swarm_ray.core.scheduling._node import SubTaskStatus as _S
from swarm_ray.core.scheduling._node import _Node
from swarm_ray.core.scheduling._wait_table import WaitTable
from swarm_ray.core.scheduling._waits import not_rerun, question, resume_with, unanswered

if TYPE_CHECKING:
    from swarm_ray.core.model._signals import FailTask, FinishTask, RunIntent, Warn

__all__: list[str] = []


class HumanLoop:
    """The scheduler's steps for a sub-task held for a person."""

    if TYPE_CHECKING:  # what of the scheduler it uses (`core.scheduling._scheduler`)
        outcome: FinishTask | FailTask | None
        _dag: Dag
        _waits: WaitTable

        @property
        def _nodes(self) -> dict[str, _Node]: ...
        def _launch(
            self, sid: str, at: float, kind: type[RunIntent], **extra: Any
        ) -> list[Intent]: ...
        def _on_failure(
            self, sid: str, error: SubTaskError, at: float, *, retry: bool = True
        ) -> list[Intent]: ...
        def _settle_failed(self, sid: str, error: SubTaskError, at: float) -> list[Intent]: ...
        def _end_attempt(self, sid: str) -> None: ...
        def _warn(self, message: str, subtask_id: str | None = None) -> Warn: ...

    def _on_answer(self, event: HumanAnswered) -> list[Intent]:
        """Go on with the sub-task a person answered, if it still waits for this answer."""
        sid = event.subtask_id
        wait = self._waits.answered(event)
        if wait is None:
            return []
        settled = HumanSettled(subtask_id=sid, outcome="answered", principal=event.principal)
        if event.review_of is not None:
            rerun = bool(event.answer.get("rerun"))
            return [settled, *self._reviewed(sid, rerun, event.principal, event.at)]
        by_agent = wait.asked_in is not None
        return [settled, *self._answered(sid, event.answer, event.at, by_agent=by_agent)]

    def _wait(self, sid: str, at: float, asked_in: int | None = None) -> AwaitHuman:
        """Hold a sub-task until it is answered.

        It is ready in an `await_human` stage, or paused by its agent's question
        (`asked_in`, the attempt that asked).
        """
        awaits = self._waits.begin(self._nodes[sid], at, asked_in)
        self._dag.set(self._nodes[sid], _S.WAITING)
        return awaits

    def _paused(self, result: SubTaskResult, at: float) -> list[Intent]:
        """An agent paused its attempt to ask a person: hold the sub-task for the answer."""
        sid = result.subtask_id
        node = self._nodes[sid]
        assert result.error is not None
        self._end_attempt(sid)
        asked = question(result, node.asks_made)
        if isinstance(asked, SubTaskError):
            return self._on_failure(sid, asked, at)
        node.cap_attempts -= 1
        node.asks_made += 1
        node.asked = (asked, result.error.details.get("state"))
        return [self._wait(sid, at, asked_in=result.attempt)]

    def _hold_for_review(self, sid: str, attempt: int, at: float) -> AwaitHuman:
        """Hold a side-effecting attempt that was in flight at a crash, for a person."""
        self._end_attempt(sid)
        node = self._nodes[sid]
        awaits = self._waits.begin_review(node, attempt, at)
        self._dag.set(node, _S.WAITING)
        return awaits

    def _reviewed(self, sid: str, rerun: bool, who: str, at: float) -> list[Intent]:
        if rerun:
            self._dag.set(self._nodes[sid], _S.PENDING)
            return self._launch(sid, at, Dispatch, reason="reviewed")
        return self._settle_failed(sid, not_rerun(sid, who), at)

    def _answered(
        self, sid: str, answer: dict[str, Any], at: float, *, by_agent: bool
    ) -> list[Intent]:
        node = self._nodes[sid]
        if by_agent:  # the agent goes on from what it saved, with the answer
            node.resume = resume_with(node, answer)
            node.asked = None
        else:  # the stage's input reads it (`$answer`)
            node.answer = answer
        self._dag.set(node, _S.PENDING)
        return self._launch(sid, at, Dispatch, reason="answered")

    def _expire(self, at: float) -> list[Intent]:
        """Settle the waits whose deadline passed: the default applies, or `human_timeout`."""
        out: list[Intent] = []
        for sid, wait, ask in self._waits.fall_due(at, self._nodes):
            by_agent = wait.asked_in is not None
            default = ask.default
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
                out += [
                    HumanSettled(subtask_id=sid, outcome="timed_out"),
                    *self._settle_failed(sid, unanswered(sid), at),
                ]
            if self.outcome is not None:
                break
        return out
