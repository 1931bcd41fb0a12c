"""What each scheduler intent announces: one table from intent to task event.

The driver turns intents into commands (run, halt, arm a timer) and into `TaskEvent`s
that people and the live page read. This module holds the second half, so the words of
every event are in one place and the driver's matching is only about what to do.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from swarm_ray.core.model._signals import (
    AwaitHuman,
    BreakerClosed,
    BreakerHalfOpened,
    BreakerOpened,
    Dispatch,
    Fallback,
    FannedOut,
    FeedbackRoundStarted,
    HumanSettled,
    Intent,
    ResultRejected,
    Retry,
    RuleFired,
    SkipSubTask,
    Warn,
)

__all__: list[str] = []


class Said(NamedTuple):
    """A task event's words: `kind`, `status`, and what it is about."""

    kind: str
    status: str
    subtask_id: str | None = None
    agent: str | None = None
    summary: str = ""


def _run(intent: Dispatch | Retry | Fallback) -> Said:
    kind = type(intent).__name__.lower()
    why = ""
    if isinstance(intent, Retry):
        why = f" after {intent.error_code}"  # a lost node: agent_unavailable
    elif isinstance(intent, Fallback):
        why = f" from `{intent.from_capability}`: {intent.reason}"
    return Said(
        "subtask",
        "running",
        intent.subtask_id,
        intent.capability_id,
        f"{kind}, attempt {intent.attempt}{why}",
    )


_SETTLED = {
    "answered": "answered by `{who}`",
    "default": "no answer by the deadline: the default applies",
    "timed_out": "no answer by the deadline: human_timeout",
}

_TABLE: dict[type[Any], Callable[[Any], Said]] = {
    Dispatch: _run,
    Retry: _run,
    Fallback: _run,
    SkipSubTask: lambda i: Said("subtask", "skipped", i.subtask_id, summary=i.reason),
    AwaitHuman: lambda i: Said("human", "waiting_for_human", i.subtask_id, summary=i.prompt[:160]),
    HumanSettled: lambda i: Said(
        "human", i.outcome, i.subtask_id, summary=_SETTLED[i.outcome].format(who=i.principal)
    ),
    Warn: lambda i: Said("warning", "warning", i.subtask_id, summary=i.message),
    BreakerOpened: lambda i: Said("breaker", "opened", agent=i.capability_id),
    BreakerHalfOpened: lambda i: Said("breaker", "halfopened", agent=i.capability_id),
    BreakerClosed: lambda i: Said("breaker", "closed", agent=i.capability_id),
    RuleFired: lambda i: Said("rule", "fired", i.source, summary=f"{i.rule}: {i.added}"),
    FeedbackRoundStarted: lambda i: Said("feedback", f"round {i.round}", i.judge_subtask),
    FannedOut: lambda i: Said(
        "fanout", "expanded", i.source, summary=f"`{i.stage}`: {len(i.added)} sub-tasks"
    ),
    ResultRejected: lambda i: Said("rejected", "not outstanding", i.subtask_id, summary=i.reason),
}


def announce(intent: Intent) -> Said | None:
    """The event `intent` announces, or None.

    Cancels and the task's end say nothing here: the state machine's transition is their
    event.
    """
    say = _TABLE.get(type(intent))
    return None if say is None else say(intent)
