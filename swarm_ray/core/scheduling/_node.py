"""One sub-task as the scheduler keeps it: a single record of where it is and what it did.

The scheduler holds one `_Node` per sub-task (its `Dag`, in the order added)
instead of a dict per fact keyed by sub-task id. Only what is ordered across sub-tasks
stays beside the nodes: the accepted results, the attempts in flight and the waits, each
in the order it happened (`$costs`, `outstanding()`, `waiting()` read those orders).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from swarm_ray.core.model._human import HumanAsk
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult, SubTaskSpec

__all__: list[str] = []


class SubTaskStatus(StrEnum):
    """Where a sub-task is."""

    PENDING = "pending"
    RUNNING = "running"
    HELD = "held"
    WAITING = "waiting"
    """Ready, and waiting for a person's answer (`await_human`)."""
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


SETTLED = frozenset(
    {
        SubTaskStatus.SUCCEEDED,
        SubTaskStatus.FAILED,
        SubTaskStatus.SKIPPED,
        SubTaskStatus.CANCELLED,
    }
)
"""The statuses of a sub-task that will not run again."""


@dataclass(slots=True, eq=False)
class _Node:
    """What the scheduler knows of one sub-task (mutable; the scheduler's alone)."""

    spec: SubTaskSpec
    """The sub-task; a pending one's `depends_on` grows when work it waits for is added."""
    origin: str
    """Why it was added (`ready`, `child`, `each`, `rule`, `feedback`): its first reason."""
    index: int
    """Its place in the order added, which dispatch follows."""
    capability: str
    """The capability it runs on now (a fallback's, once it switched)."""
    tried: list[str]
    """Capabilities it ran on, in order (a fallback already tried is not taken again)."""
    status: SubTaskStatus = SubTaskStatus.PENDING
    """Changed only through `Dag.set` (`core.scheduling._dag`), which counts the settled ones."""
    attempt: int = 0
    """Attempts dispatched, over all its capabilities (the attempt number a result names)."""
    cap_attempts: int = 0
    """Attempts on the current capability (what its retry policy counts)."""
    low: SubTaskResult | None = None
    """The best result under its capability's confidence threshold, while a fallback runs."""
    error: SubTaskError | None = None
    """Why it failed for good."""
    dependents: list[str] = field(default_factory=list)
    """Sub-tasks that depend on it (what may become ready when it settles)."""
    previous: str | None = None
    """The feedback round this one reruns."""
    replaced_by: str | None = None
    """The feedback round that reruns this one."""
    answer: dict[str, Any] | None = None
    """The answer its `await_human` stage got (given, or the default): `$answer`."""
    asked: tuple[HumanAsk, Any] | None = None
    """The question its agent asked mid-run, with the state it saved to go on from."""
    resume: dict[str, Any] | None = None
    """What an answered agent's next attempts get (`SubTask.resume`)."""
    asks_made: int = 0
    """Questions its agent asked a person, over all its attempts (at most `MAX_ASKS`)."""
    unsettled_at: tuple[int, SubTaskSpec, int] | None = None
    """Where its dependencies were last seen unsettled: its `Dag`'s `unsettled` count
    then, the spec, and the first unsettled one's position (`Dag.settled_deps`)."""


def latest(nodes: Mapping[str, _Node], subtask_id: str) -> str:
    """The latest round of a sub-task: it, or the feedback round that reruns it, in turn."""
    node = nodes.get(subtask_id)
    while node is not None and node.replaced_by is not None:
        subtask_id = node.replaced_by
        node = nodes.get(subtask_id)
    return subtask_id
