"""A task's watermark gate: each attempt leaves with a token, and only that one comes back.

The driver gets a fresh HMAC watermark for every attempt it dispatches (`issue`), and the
gate remembers the last one per sub-task. A result is let in (`let_in`) only with a
valid token (not forged, not altered: `verify_watermark`) that is the one issued for its
sub-task and attempt; a result whose sub-task already settled is `replayed`, any other
`unknown`. An agent asking for a child sub-task shows the same token (`running`).

Pure: no Ray, no I/O (the caller passes the time).
"""

from __future__ import annotations

from collections.abc import Callable

from swarm_ray.core.guards._watermark import WatermarkKey, issue_watermark, verify_watermark
from swarm_ray.core.model._errors import WatermarkRejectedError
from swarm_ray.core.model._signals import RunIntent
from swarm_ray.core.model._subtask import SubTaskResult

__all__: list[str] = []


class Gate:
    """The watermarks of one task's attempts out (one driver's; not thread-safe)."""

    def __init__(self, key: WatermarkKey, task_id: str, parent_task_id: str | None) -> None:
        self._key = key
        self._task_id = task_id
        self._parent_task_id = parent_task_id
        self._issued: dict[str, tuple[int, str]] = {}
        """Sub-task id -> (attempt, watermark) of its attempt out."""

    def issue(self, intent: RunIntent, now: float) -> str:
        """The watermark of the attempt `intent` runs, issued at `now`."""
        token = issue_watermark(
            self._key,
            task_id=self._task_id,
            parent_task_id=self._parent_task_id,
            subtask_id=intent.subtask_id,
            capability_id=intent.capability_id,
            input=intent.input,
            issued_ms=int(now * 1000),
        )
        self._issued[intent.subtask_id] = (intent.attempt, token)
        return token

    def running(self, subtask_id: str) -> str | None:
        """The watermark of `subtask_id`'s attempt out, if one is."""
        issued = self._issued.get(subtask_id)
        return None if issued is None else issued[1]

    def expect(self, result: SubTaskResult) -> None:
        """Let `result` in as if its attempt were out (one recorded before a restart)."""
        self._issued[result.subtask_id] = (result.attempt, result.watermark)

    def forget(self, subtask_id: str) -> None:
        """Its attempt out is void (sent again after a restart, with a new watermark)."""
        self._issued.pop(subtask_id, None)

    def let_in(self, result: SubTaskResult, now: float, settled: Callable[[str], bool]) -> None:
        """Take `result`'s attempt off the gate, or raise why it may not come in.

        `settled` says whether a sub-task will not run again (its late results are
        `replayed`).

        Raises:
            WatermarkRejectedError: forged or altered (a bad signature or claims),
                replayed or unknown (never dispatched, or an older attempt); the reason is
                in its details.
        """
        verify_watermark(
            self._key,
            result.watermark,
            now_ms=int(now * 1000),
            task_id=self._task_id,
            subtask_id=result.subtask_id,
            capability_id=result.capability_id,
        )
        if self._issued.get(result.subtask_id) != (result.attempt, result.watermark):
            reason = "replayed" if settled(result.subtask_id) else "unknown"
            raise WatermarkRejectedError(
                f"result for sub-task `{result.subtask_id}` attempt {result.attempt} "
                f"is not outstanding ({reason})",
                reason=reason,
                subtask_id=result.subtask_id,
            )
        del self._issued[result.subtask_id]
