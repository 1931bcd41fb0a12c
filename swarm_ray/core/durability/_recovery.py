"""After a restart: what becomes of each attempt that was out when the orchestrator stopped.

The task's log says which attempts were dispatched and never answered
(`Scheduler.outstanding`). One that cannot have changed the world (its capability has no
side effects, or they are safe to repeat: `rerun_safe`) is sent again, with a new
watermark. One that may have is **in doubt**, and is settled by what it left in the
result store (`effects_keys`): its recorded result, taken in as if it had just arrived;
else a review by a person (`ReviewRequested`) if it started; else, as it never started,
it is sent again.

No Ray; the result store is reached through its interface (`Blobs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swarm_ray.core.durability._journal import Blobs
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import Dispatch, Fallback, Retry, ReviewRequested
from swarm_ray.core.model._subtask import SubTaskResult, effects_keys

__all__: list[str] = []

Outstanding = Dispatch | Retry | Fallback


def in_doubt(
    outstanding: Sequence[Outstanding], registry: Registry
) -> tuple[list[Outstanding], list[Outstanding]]:
    """`outstanding` split in order: what is simply sent again, and what is in doubt."""
    resend: list[Outstanding] = []
    doubtful: list[Outstanding] = []
    for intent in outstanding:
        spec = registry.get(intent.capability_id)
        (doubtful if spec.side_effects and not spec.rerun_safe else resend).append(intent)
    return resend, doubtful


def settle_in_doubt(
    intent: Outstanding, task_id: str, results: Blobs, clock: Callable[[], float]
) -> SubTaskResult | ReviewRequested | None:
    """What an attempt in doubt becomes: its recorded result, a review, or None (resend).

    `clock` is read for the review's time only.
    """
    started, recorded = effects_keys(task_id, intent.subtask_id, intent.attempt)
    if results.exists(results.ref(recorded)):
        return SubTaskResult.model_validate(results.get_json(results.ref(recorded)))
    if results.exists(results.ref(started)):
        return ReviewRequested(at=clock(), subtask_id=intent.subtask_id, attempt=intent.attempt)
    return None
