"""Who waits for a person: the task's waits, and the questions its stages ask.

`core.scheduling._waits` is the policy: what a sub-task waits for, whether an answer
answers it, which waits fall due. `WaitTable` keeps the waits themselves (in the order
they began) and the stages' questions of the plan in force; it alone writes them. The
scheduler asks it and applies the answers: it sets the sub-task's status and dispatches
or fails it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from swarm_ray.core.model._human import HumanAsk, HumanWait
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._signals import AwaitHuman, HumanAnswered
from swarm_ray.core.scheduling._node import _Node
from swarm_ray.core.scheduling._waits import answers, ask_of, awaiting, due, review_wait, stage_wait

__all__: list[str] = []


class WaitTable:
    """The sub-tasks waiting for a person, and what each stage of the plan asks."""

    def __init__(self) -> None:
        self._asks: dict[str, HumanAsk] = {}
        """What each `await_human` stage of the plan in force asks, by stage name."""
        self._waits: dict[str, HumanWait] = {}
        """Sub-tasks waiting for a person, in the order they began (`waiting()` keeps it)."""

    @property
    def waits(self) -> Mapping[str, HumanWait]:
        """Every wait, by sub-task id, in the order they began (read it)."""
        return self._waits

    def take(self, plan: Plan) -> None:
        """Ask what `plan`'s stages ask from now on."""
        self._asks = {
            s.name: s.await_human for s in plan.template.stages if s.await_human is not None
        }

    def asks(self, stage: str) -> bool:
        """Whether `stage` holds each of its sub-tasks for a person."""
        return stage in self._asks

    def begin(self, node: _Node, at: float, asked_in: int | None = None) -> AwaitHuman:
        """`node` waits from `at` for its stage's question, or its agent's (`asked_in`)."""
        sid = node.spec.id
        wait = stage_wait(sid, ask_of(node, self._asks, asked_in), at, asked_in)
        self._waits[sid] = wait
        return awaiting(wait)

    def begin_review(self, node: _Node, attempt: int, at: float) -> AwaitHuman:
        """`node`'s side-effecting attempt was in flight at a crash: a person decides."""
        wait = review_wait(node.spec.id, node.capability, attempt, at)
        self._waits[node.spec.id] = wait
        return awaiting(wait)

    def answered(self, event: HumanAnswered) -> HumanWait | None:
        """The wait `event` answers, no longer waiting; None if nothing waits for it."""
        wait = self._waits.get(event.subtask_id)
        if wait is None or not answers(wait, event):
            return None
        del self._waits[event.subtask_id]
        return wait

    def fall_due(
        self, at: float, nodes: Mapping[str, _Node]
    ) -> Iterator[tuple[str, HumanWait, HumanAsk]]:
        """The waits whose deadline passed by `at`: `(sub-task, wait, what it asked)`.

        Each no longer waits once yielded. The caller settles each (the ask's default
        applies, or it times out) before the next, and may stop early.
        """
        for sid in due(self._waits, at):
            wait = self._waits.pop(sid)
            yield sid, wait, ask_of(nodes[sid], self._asks, wait.asked_in)

    def clear(self) -> None:
        """The task ended: nothing waits any more."""
        self._waits.clear()
