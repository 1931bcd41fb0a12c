"""A circuit breaker per capability, a pure policy: each transition returns the next one.

The caller passes the time and keeps the breaker a transition returns.

closed --N consecutive failures--> open --cool-down--> half-open --trial ok--> closed
                                    ^  |                         |
                                    |  +--an earlier attempt ok--+--> closed
                                    +-------trial fails----------+
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from swarm_ray.core.model._capability import BreakerPolicy

__all__: list[str] = []


class BreakerState(StrEnum):
    """Whether a capability takes sub-tasks."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class Breaker:
    """One capability's breaker, a value: each transition returns the next breaker.

    The scheduler keeps one per capability and replaces it by what a transition returns;
    a transition that changes nothing returns the breaker itself.
    """

    policy: BreakerPolicy
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    until: float = 0.0
    trial: str | None = None

    def admits(self, subtask_id: str) -> tuple[bool, Breaker]:
        """Whether `subtask_id` may run now; in half-open state it becomes the one trial."""
        if self.state is BreakerState.CLOSED:
            return True, self
        if self.state is BreakerState.HALF_OPEN and self.trial in (None, subtask_id):
            return True, replace(self, trial=subtask_id)
        return False, self

    def cool(self, at: float) -> Breaker | None:
        """Open -> half-open once the cool-down has passed; None while it has not moved."""
        if self.state is BreakerState.OPEN and at >= self.until:
            return replace(self, state=BreakerState.HALF_OPEN, trial=None)
        return None

    def failure(self, at: float) -> tuple[bool, Breaker]:
        """Count a run-time failure; True when the breaker (re)opened."""
        failures = self.failures + 1
        if self.state is BreakerState.HALF_OPEN or (
            self.state is BreakerState.CLOSED and failures >= self.policy.failure_threshold
        ):
            until = at + self.policy.cooldown_s
            opened = BreakerState.OPEN
            return True, replace(self, state=opened, failures=failures, until=until, trial=None)
        return False, replace(self, failures=failures)

    def success(self) -> tuple[bool, Breaker]:
        """Count a success; True when the breaker closed.

        A success while open (an attempt dispatched before the breaker opened) is as good
        a proof that the capability works as a half-open trial, so it closes too.
        """
        if self.state is not BreakerState.CLOSED:
            return True, replace(self, state=BreakerState.CLOSED, failures=0, trial=None)
        return False, replace(self, failures=0)

    def release_trial(self, subtask_id: str) -> Breaker:
        """Forget the trial if it ended without saying anything about the capability."""
        return replace(self, trial=None) if self.trial == subtask_id else self
