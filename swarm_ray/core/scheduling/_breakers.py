"""The task's circuit breakers: one per capability, and the sub-tasks held behind them.

`core.scheduling._breaker` is the policy: a `Breaker` is a frozen value, and each
transition (an admission, a success, a failure, the cool-down) returns the next one.
`Breakers` is the table of those values and of the sub-tasks held while their
capability's breaker is open; it alone writes them. The scheduler asks it and applies
the answers: it dispatches what a closing or half-opening breaker lets go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import BreakerOpened
from swarm_ray.core.scheduling._breaker import Breaker
from swarm_ray.core.scheduling._failures import BREAKER_CODES

__all__: list[str] = []

CapabilityOf = Callable[[str], str]
"""The capability a sub-task runs on now (it changes when it switches to a fallback)."""


class Breakers:
    """Each capability's breaker, made on first use from its spec's policy."""

    def __init__(self, registry: Registry) -> None:
        self._registry = registry
        self._breakers: dict[str, Breaker] = {}
        self._held: list[str] = []
        """Sub-tasks held while their capability's breaker is open, in the order held."""

    @property
    def breakers(self) -> Mapping[str, Breaker]:
        """Every breaker made so far, by capability id (read it; the methods change it)."""
        return self._breakers

    @property
    def held(self) -> Sequence[str]:
        """The sub-tasks held behind an open breaker, in the order held."""
        return self._held

    def _of(self, capability_id: str) -> Breaker:
        if capability_id not in self._breakers:
            policy = self._registry.get(capability_id).breaker
            self._breakers[capability_id] = Breaker(policy)
        return self._breakers[capability_id]

    def admits(self, capability_id: str, sid: str) -> bool:
        """Whether `sid` may run on `capability_id` now (its breaker counts the trial)."""
        admitted, self._breakers[capability_id] = self._of(capability_id).admits(sid)
        return admitted

    def hold(self, sid: str) -> None:
        """Hold `sid` until its capability's breaker half-opens or closes."""
        self._held.append(sid)

    def release_trial(self, capability_id: str, sid: str) -> None:
        """`sid`'s attempt ended without a verdict on the capability: free its trial."""
        self._breakers[capability_id] = self._of(capability_id).release_trial(sid)

    def success(self, capability_id: str, capability_of: CapabilityOf) -> list[str] | None:
        """A success on `capability_id`: what its breaker, if it closed now, lets go.

        None if the breaker was closed already; else the sub-tasks held behind it, no
        longer held.
        """
        closed, self._breakers[capability_id] = self._of(capability_id).success()
        if not closed:
            return None
        freed = [h for h in self._held if capability_of(h) == capability_id]
        self._held = [h for h in self._held if h not in freed]
        return freed

    def failure(
        self, capability_id: str, sid: str, code: ErrorCode, at: float
    ) -> BreakerOpened | None:
        """A failed attempt of `sid`: the intent if its capability's breaker opened.

        Counted as the capability's failure only when its code says so (`BREAKER_CODES`).
        """
        breaker = self._of(capability_id)
        opened = False
        if code in BREAKER_CODES:
            opened, breaker = breaker.failure(at)
        else:
            breaker = breaker.release_trial(sid)
        self._breakers[capability_id] = breaker
        if not opened:
            return None
        return BreakerOpened(
            capability_id=capability_id, failures=breaker.failures, until=breaker.until
        )

    def cool(self, at: float, capability_of: CapabilityOf) -> Iterator[tuple[str, str | None]]:
        """Half-open each breaker whose cool-down passed by `at`.

        Yields `(capability, trial)`, the trial being the first sub-task held behind it
        (no longer held), if any. Lazy, one breaker at a time: the caller dispatches each
        trial before the next breaker cools. A trial may settle its sub-task at once (the
        budget is reached), and what that starts may make breakers of its own: only the
        ones there were cool.
        """
        for capability_id in list(self._breakers):
            cooled = self._breakers[capability_id].cool(at)
            if cooled is None:
                continue
            self._breakers[capability_id] = cooled
            trial = next((h for h in self._held if capability_of(h) == capability_id), None)
            if trial is not None:
                self._held.remove(trial)
            yield capability_id, trial

    def let_go(self) -> None:
        """The task ended: nothing is held any more."""
        self._held.clear()
