"""What each scheduler intent asks of the orchestrator by itself: one table, intent to orders.

The driver turns every intent into an event (`_announce`), commands and notices. Most
intents say all they need on their own: a breaker that opened is a notice and a timer
for when it may close, a cancel is a halt. Those are here, matched exhaustively. The rest
need the task's state and stay the driver's: a run intent becomes a `SubTask` with a
fresh watermark (and may move the task to `aggregating`), a planner's settled draft
becomes a plan, and the task's end becomes its stored outcome and a `Close`.
"""

from __future__ import annotations

from typing import NamedTuple, assert_never

from swarm_ray.core.driver._commands import (
    BreakerMoved,
    Command,
    Halt,
    Notice,
    Refused,
    Retrying,
    WakeAt,
)
from swarm_ray.core.model._signals import (
    AwaitHuman,
    BreakerClosed,
    BreakerHalfOpened,
    BreakerOpened,
    CancelSubTasks,
    Dispatch,
    DraftSettled,
    FailTask,
    Fallback,
    FannedOut,
    FeedbackRoundStarted,
    FinishTask,
    HumanSettled,
    Intent,
    ResultRejected,
    Retry,
    RuleFired,
    SkipSubTask,
    Warn,
)

__all__: list[str] = []


class Orders(NamedTuple):
    """The commands and notices an intent asks for whatever the task's state."""

    commands: tuple[Command, ...] = ()
    notices: tuple[Notice, ...] = ()


def orders(intent: Intent) -> Orders:
    """What `intent` asks of the orchestrator by itself (nothing, for the driver's own)."""
    match intent:
        case Retry() | Fallback():
            kind = type(intent).__name__.lower()
            return Orders(notices=(Retrying(intent.capability_id, kind),))
        case AwaitHuman(deadline=deadline):
            return Orders(commands=() if deadline is None else (WakeAt(deadline),))
        case BreakerOpened(capability_id=cid, until=until):
            return Orders(commands=(WakeAt(until),), notices=(BreakerMoved(cid, 2),))
        case BreakerHalfOpened(capability_id=cid):
            return Orders(notices=(BreakerMoved(cid, 1),))
        case BreakerClosed(capability_id=cid):
            return Orders(notices=(BreakerMoved(cid, 0),))
        case ResultRejected():
            return Orders(notices=(Refused("not_outstanding"),))
        case CancelSubTasks(subtask_ids=ids):
            return Orders(commands=(Halt(ids),))
        case Dispatch() | DraftSettled() | FinishTask() | FailTask():
            return Orders()  # the driver's: they need the task's state
        case (
            SkipSubTask()
            | HumanSettled()
            | Warn()
            | RuleFired()
            | FeedbackRoundStarted()
            | FannedOut()
        ):
            return Orders()  # announced; nothing to do
        case _:
            assert_never(intent)
