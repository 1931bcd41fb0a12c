"""A circuit breaker per capability, pure: the caller passes the time.

closed --N consecutive failures--> open --cool-down--> half-open --trial ok--> closed
                                    ^  |                         |
                                    |  +--an earlier attempt ok--+--> closed
                                    +-------trial fails----------+
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from swarm_ray.core._capability import BreakerPolicy

__all__: list[str] = []


class BreakerState(StrEnum):
    """Whether a capability takes sub-tasks."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass
class Breaker:
    """One capability's breaker."""

    policy: BreakerPolicy
    state: BreakerState = BreakerState.CLOSED
    failures: int = 0
    until: float = 0.0
    trial: str | None = None

    def admits(self, subtask_id: str) -> bool:
        """Whether `subtask_id` may run now; in half-open state it becomes the one trial."""
        if self.state is BreakerState.CLOSED:
            return True
        if self.state is BreakerState.HALF_OPEN and self.trial in (None, subtask_id):
            self.trial = subtask_id
            return True
        return False

    def cool(self, at: float) -> bool:
        """Move open -> half-open once the cool-down has passed; True when it moved."""
        if self.state is BreakerState.OPEN and at >= self.until:
            self.state, self.trial = BreakerState.HALF_OPEN, None
            return True
        return False

    def failure(self, at: float) -> bool:
        """Count a run-time failure; True when the breaker (re)opened."""
        self.failures += 1
        if self.state is BreakerState.HALF_OPEN or (
            self.state is BreakerState.CLOSED and self.failures >= self.policy.failure_threshold
        ):
            self.state, self.until, self.trial = (
                BreakerState.OPEN,
                at + self.policy.cooldown_s,
                None,
            )
            return True
        return False

    def success(self) -> bool:
        """Count a success; True when the breaker closed.

        A success while open (an attempt dispatched before the breaker opened) is as good
        a proof that the capability works as a half-open trial, so it closes too.
        """
        self.failures = 0
        if self.state is not BreakerState.CLOSED:
            self.state, self.trial = BreakerState.CLOSED, None
            return True
        return False

    def release_trial(self, subtask_id: str) -> None:
        """Forget the trial if it ended without saying anything about the capability."""
        if self.trial == subtask_id:
            self.trial = None
