"""What a failed attempt leads to: a retry, a fallback, a breaker's verdict, or failing for good.

An attempt that fails or passes its deadline is retried with backoff while its
capability's `retry` policy allows it (one refused before dispatch is not: the same input
would fail the same way). Then the sub-task switches to the next fallback it has not
tried; with none left it keeps a low-confidence result an earlier capability gave (with a
warning), or fails for good (`_settle_failed`): a required sub-task fails the task, another
lets what waited on it go on or be skipped, and a planner's draft says so (`DraftSettled`).

Each capability has a circuit breaker (`core._breaker`). The errors in `_BREAKER_CODES`
count towards opening it; while it is open its sub-tasks switch to a fallback or are
held, and when it cools one held sub-task goes as the trial (a success closes it and
sends the rest: `Scheduler._on_done`). Once the task reaches its budget
(`SpendingStopped`) every sub-task that spends fails with the budget's error: the ones
running, and any that would start. `Failures` is mixed into `Scheduler`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swarm_ray.core._breaker import Breaker
from swarm_ray.core._errors import ErrorCode
from swarm_ray.core._node import SubTaskStatus, _Node
from swarm_ray.core._registry import Registry
from swarm_ray.core._signals import (
    BreakerHalfOpened,
    BreakerOpened,
    CancelSubTasks,
    Dispatch,
    DraftSettled,
    FailTask,
    Fallback,
    FinishTask,
    Intent,
    Retry,
    RunIntent,
    SpendingStopped,
    Warn,
)
from swarm_ray.core._subtask import SubTaskError, SubTaskResult

__all__: list[str] = []

_BREAKER_CODES = frozenset(
    {
        ErrorCode.TIMEOUT,
        ErrorCode.AGENT_UNAVAILABLE,
        ErrorCode.AGENT_ERROR,
        ErrorCode.INVALID_OUTPUT,
        ErrorCode.SANITIZATION_FAILED,
    }
)


class Failures:
    """The scheduler's methods for an attempt that failed, and for its capability's breaker."""

    if TYPE_CHECKING:  # what of the scheduler they use
        outcome: FinishTask | FailTask | None
        drafted: DraftSettled | None
        stopped_spending: SubTaskError | None
        _registry: Registry
        _nodes: dict[str, _Node]
        _running: dict[str, Dispatch | Retry | Fallback]
        _held: list[str]
        _breakers: dict[str, Breaker]
        _spenders: set[str]
        _draft: str | None

        def _set(self, node: _Node, status: SubTaskStatus) -> None: ...

        def _warn(self, message: str, subtask_id: str | None = None) -> Warn: ...

        def _launch(
            self, sid: str, at: float, kind: type[RunIntent], **extra: Any
        ) -> list[Intent]: ...

        def _dispatch_ready(self, at: float, settled: str | None = None) -> list[Intent]: ...

        def _accept(self, result: SubTaskResult, at: float) -> list[Intent]: ...

        def _end(self, reason: str, code: ErrorCode, sid: str | None) -> list[Intent]: ...

        def _check_finished(self) -> list[Intent]: ...

    def _on_failure(
        self, sid: str, error: SubTaskError, at: float, *, retry: bool = True
    ) -> list[Intent]:
        node = self._nodes[sid]
        capability_id = node.capability
        breaker = self._breaker(capability_id)
        out: list[Intent] = []
        self._running.pop(sid, None)
        if error.code in _BREAKER_CODES:
            if breaker.failure(at):
                out.append(
                    BreakerOpened(
                        capability_id=capability_id, failures=breaker.failures, until=breaker.until
                    )
                )
        else:
            breaker.release_trial(sid)
        policy = self._registry.get(capability_id).retry
        if retry and error.code in policy.retry_on and node.cap_attempts < policy.max_attempts:
            delay = policy.delay_s(node.cap_attempts + 1)
            return out + self._launch(sid, at, Retry, delay_s=delay, error_code=error.code)
        if self._next_fallback(sid) is not None:
            tries = node.cap_attempts
            return out + self._switch(sid, at, f"{error.code} after {tries} attempt(s)")
        if node.low is not None:
            kept, node.low = node.low, None
            out.append(
                self._warn(
                    f"sub-task `{sid}`: fallback failed ({error.code}); kept the "
                    f"low-confidence result of `{kept.capability_id}`",
                    sid,
                )
            )
            return out + self._accept(kept, at)
        return out + self._settle_failed(sid, error, at)

    def _settle_failed(self, sid: str, error: SubTaskError, at: float) -> list[Intent]:
        node = self._nodes[sid]
        self._set(node, SubTaskStatus.FAILED)
        node.error = error
        message = f"sub-task `{sid}` on `{node.capability}` failed: {error.message}"
        if sid == self._draft:  # no draft: the template router plans, and says why
            self.drafted = DraftSettled(subtask_id=sid, failure=message)
            return [self.drafted]
        out: list[Intent] = [self._warn(message, sid)]
        if node.spec.required:
            return out + self._end(message, error.code, sid)
        return out + self._dispatch_ready(at, sid)

    def _next_fallback(self, sid: str) -> str | None:
        node = self._nodes[sid]
        fallback = self._registry.get(node.capability).fallback
        while fallback is not None and fallback in node.tried:
            fallback = self._registry.get(fallback).fallback
        return fallback

    def _switch(self, sid: str, at: float, reason: str) -> list[Intent]:
        fallback = self._next_fallback(sid)
        assert fallback is not None
        node = self._nodes[sid]
        previous = node.capability
        node.capability = fallback
        node.tried.append(fallback)
        node.cap_attempts = 0
        self._running.pop(sid, None)
        warn = self._warn(
            f"sub-task `{sid}` switched from `{previous}` to fallback `{fallback}`: {reason}", sid
        )
        return [warn, *self._launch(sid, at, Fallback, from_capability=previous, reason=reason)]

    def _breaker(self, capability_id: str) -> Breaker:
        if capability_id not in self._breakers:
            policy = self._registry.get(capability_id).breaker
            self._breakers[capability_id] = Breaker(policy)
        return self._breakers[capability_id]

    def _cool(self, at: float) -> list[Intent]:
        out: list[Intent] = []
        # A trial may settle its sub-task at once (the budget is reached), and what that
        # starts may make breakers of its own: loop over the ones there were.
        for capability_id, breaker in list(self._breakers.items()):
            if breaker.cool(at):
                out.append(BreakerHalfOpened(capability_id=capability_id))
                trial = next(
                    (h for h in self._held if self._nodes[h].capability == capability_id), None
                )
                if trial is not None:
                    self._held.remove(trial)
                    out += self._launch(trial, at, Dispatch, reason="half_open")
        return out

    def _spends(self, capability_id: str) -> bool:
        """Whether attempts of `capability_id` cost (an `llm` tag, or spending seen here)."""
        tagged = "llm" in self._registry.get(capability_id).tags
        return tagged or capability_id in self._spenders

    def _stop_spending(self, event: SpendingStopped) -> list[Intent]:
        """The budget is reached: fail what spends and runs; nothing that spends starts."""
        if self.stopped_spending is not None or self.outcome is not None:
            return []
        error = SubTaskError(
            code=ErrorCode.BUDGET_EXCEEDED, message=event.message, details={"limit": event.limit}
        )
        self.stopped_spending = error
        halted = tuple(sid for sid in self._running if self._spends(self._nodes[sid].capability))
        out: list[Intent] = [
            self._warn(
                f"budget reached (`{event.limit}`): {len(halted)} running sub-tasks stopped, "
                "no new model calls; the task finishes with what it has",
                None,
            )
        ]
        if halted:
            out.append(CancelSubTasks(subtask_ids=halted))
        for sid in halted:
            del self._running[sid]
            out += self._settle_failed(sid, error, event.at)
            if self.outcome is not None:
                break
        return out + self._check_finished()
