"""What a person or an agent hands a running task, the driver's side: taken in, or refused.

Two inputs come from outside the attempts a task dispatched: a person's answer to a
sub-task held for them (`Answer`) and a running agent's child sub-task (`AskChild`).
`_admit` checks each against the task; the driver feeds what it admitted to the
scheduler and carries out what follows, or reports the refusal by notice
(`AnswerRejected`, `ChildRefused`): a refused input never ends the task. An admitted
child that already settled is told of at once (`ChildAdmitted`); else the driver watches
it (`_ask_child` names it; the driver keeps the set), and after each step tells of every
watched child that settled (`ChildSettled`); the task's end settles them all.

`Outside` is mixed into `TaskDriver`.
"""

from __future__ import annotations

from swarm_ray.core.driver._admit import answer_event, child_event, refusal
from swarm_ray.core.driver._children import child_outcome
from swarm_ray.core.driver._commands import (
    Answer,
    AnswerRejected,
    AskChild,
    ChildAdmitted,
    ChildRefused,
    Step,
)
from swarm_ray.core.driver._host import DriverHost
from swarm_ray.core.model._errors import SwarmError

__all__: list[str] = []


class Outside(DriverHost):
    """The driver's methods for a person's answer and an agent's child sub-task."""

    def _answer(self, given: Answer, out: Step) -> None:
        """Take a person's answer to a waiting sub-task, or say why not (`AnswerRejected`)."""
        answered = refusal(
            f"the answer to sub-task `{given.subtask_id}`",
            lambda: answer_event(
                given,
                task_id=self.task_id,
                owner=self.record.owner,
                scheduler=self.scheduler,
                ended=self.state.terminal,
                now=self._clock(),
            ),
        )
        if isinstance(answered, SwarmError):
            out.notices.append(AnswerRejected(answered))
            return
        self._carry(self._feed(answered), out)

    def _ask_child(self, ask: AskChild, out: Step) -> str | None:
        """Admit a child sub-task of a running attempt (`core.driver._admit`), or refuse it.

        Returns the child to watch until it settles (None: refused, or settled already).
        """
        admitted = refusal(
            f"`{ask.parent}`'s child",
            lambda: child_event(
                ask,
                task_id=self.task_id,
                state=self.state,
                scheduler=self.scheduler,
                plan=self.record.plan,
                registry=self.registry,
                running=self._gate.running(ask.parent),
                now=self._clock(),
            ),
        )
        if isinstance(admitted, SwarmError):
            out.notices.append(ChildRefused(admitted))
            return None
        child_id, added = admitted
        if added is not None:
            self._carry(self._feed(added), out)
        assert self.scheduler is not None
        outcome = child_outcome(self.scheduler, child_id)
        out.notices.append(ChildAdmitted(child_id, outcome))
        return child_id if outcome is None else None
