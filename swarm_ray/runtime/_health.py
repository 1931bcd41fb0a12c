"""Capability health: recent outcomes, health probes, and the swarm health score.

Pure bookkeeping (no Ray): the orchestrator feeds it every accepted attempt and every
health probe of a capability deployment, and reads back whether a capability may be
dispatched to and how healthy the swarm is.

**Out of dispatch.** A capability whose health probe fails `PROBE_FAILURES_TO_EJECT` (3)
times in a row is taken out of dispatch: its sub-tasks fail at once with
`agent_unavailable` (so the scheduler retries with backoff, falls back, or opens its
breaker, and says so) until one probe succeeds again.

**The swarm health score** (0 to 1, on `GET /health`)::

    swarm_health_score = 0.4 * success_rate + 0.3 * latency_score + 0.3 * availability

- `success_rate`: successful attempts over all attempts in the recent window (the last
  `WINDOW` attempts per capability, summed over capabilities); 1 before any attempt.
- `latency_score`: the mean over capabilities with attempts of
  `max(0, 1 - p95_duration / timeout)`: a capability whose slow attempts take a tenth of
  their deadline scores 0.9, one at its deadline scores 0; 1 before any attempt.
- `availability`: the share of registered capabilities in dispatch.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from swarm_ray.core.model._capability import CapabilitySpec

__all__: list[str] = []

PROBE_FAILURES_TO_EJECT = 3
"""Consecutive failed health probes that take a capability out of dispatch."""
WINDOW = 200
"""Attempts per capability the success rate and latency are computed over."""

_WEIGHTS = (0.4, 0.3, 0.3)


def health_score(success_rate: float, latency_score: float, availability: float) -> float:
    """`0.4 * success_rate + 0.3 * latency_score + 0.3 * availability`, each in [0, 1]."""
    parts = (success_rate, latency_score, availability)
    for name, value in zip(("success_rate", "latency_score", "availability"), parts, strict=True):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"`{name}` must be in [0, 1], got {value!r}")
    return round(sum(w * v for w, v in zip(_WEIGHTS, parts, strict=True)), 6)


def _p95(values: Iterable[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


@dataclass
class _Capability:
    outcomes: deque[tuple[bool, float]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    probe_failures: int = 0
    last_probe: dict[str, Any] = field(default_factory=dict)
    last_error: str | None = None


class HealthBook:
    """Health of every capability of one orchestrator."""

    def __init__(self, specs: Iterable[CapabilitySpec]) -> None:
        self._specs = {spec.id: spec for spec in specs}
        self._caps = {cid: _Capability() for cid in self._specs}

    def attempt(self, capability_id: str, *, ok: bool, duration_s: float) -> None:
        """Record one finished attempt (success or run-time failure)."""
        self._caps[capability_id].outcomes.append((ok, max(0.0, duration_s)))

    def probe(self, capability_id: str, *, ok: bool, detail: dict[str, Any]) -> bool:
        """Record one health probe; returns whether the capability is in dispatch now."""
        cap = self._caps[capability_id]
        cap.last_probe = detail
        if ok:
            cap.probe_failures = 0
            cap.last_error = None
        else:
            cap.probe_failures += 1
            cap.last_error = str(detail.get("error", "health check failed"))
        return self.in_dispatch(capability_id)

    def in_dispatch(self, capability_id: str) -> bool:
        """False while the capability's last `PROBE_FAILURES_TO_EJECT` probes all failed."""
        cap = self._caps.get(capability_id)
        return cap is None or cap.probe_failures < PROBE_FAILURES_TO_EJECT

    def why_out_if_out(self, capability_id: str) -> str | None:
        """`why_out` for a capability out of dispatch; None while it takes sub-tasks."""
        return None if self.in_dispatch(capability_id) else self.why_out(capability_id)

    def why_out(self, capability_id: str) -> str:
        """A sentence for the error of a sub-task refused because its capability is out."""
        cap = self._caps[capability_id]
        return (
            f"capability `{capability_id}` is out of dispatch: its last {cap.probe_failures} "
            f"health checks failed (last error: {cap.last_error})"
        )

    def capability(self, capability_id: str) -> dict[str, Any]:
        """Status, latency, success rate and version of one capability."""
        spec, cap = self._specs[capability_id], self._caps[capability_id]
        durations = [d for _ok, d in cap.outcomes]
        successes = sum(ok for ok, _d in cap.outcomes)
        if not self.in_dispatch(capability_id):
            status = "unavailable"
        elif cap.probe_failures or (cap.outcomes and successes < len(cap.outcomes) / 2):
            status = "degraded"
        else:
            status = "ok"
        return {
            "status": status,
            "in_dispatch": self.in_dispatch(capability_id),
            "version": spec.version,
            "model": cap.last_probe.get("model"),
            "executor": str(spec.executor),
            "attempts": len(cap.outcomes),
            "success_rate": round(successes / len(cap.outcomes), 6) if cap.outcomes else None,
            "latency_ms": round(1000 * _p95(durations), 3) if durations else None,
            "consecutive_probe_failures": cap.probe_failures,
            "last_error": cap.last_error,
        }

    def report(self) -> dict[str, Any]:
        """Every capability's health, the score's parts and the score."""
        outcomes = [o for cap in self._caps.values() for o in cap.outcomes]
        success_rate = sum(ok for ok, _d in outcomes) / len(outcomes) if outcomes else 1.0
        latency_parts = [
            max(0.0, 1.0 - _p95(d for _ok, d in cap.outcomes) / self._specs[cid].timeout_s)
            for cid, cap in self._caps.items()
            if cap.outcomes
        ]
        latency_score = sum(latency_parts) / len(latency_parts) if latency_parts else 1.0
        availability = (
            sum(self.in_dispatch(cid) for cid in self._caps) / len(self._caps)
            if self._caps
            else 1.0
        )
        return {
            "swarm_health_score": health_score(success_rate, latency_score, availability),
            "success_rate": round(success_rate, 6),
            "latency_score": round(latency_score, 6),
            "availability": round(availability, 6),
            "capabilities": {cid: self.capability(cid) for cid in sorted(self._caps)},
        }
