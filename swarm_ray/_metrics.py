"""Swarm metrics through `ray.util.metrics`, so they show on the Ray dashboard.

Ray exports them with a `ray_` prefix (counters gain `_total`). They are created lazily
inside the process that records them (the orchestrator actor), which owns the
swarm-level numbers: one process, so every reader sees the same counts.
"""

from __future__ import annotations

import functools
from typing import Any

__all__: list[str] = []

_DURATION_BOUNDARIES = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300]


class SwarmMetrics:
    """The orchestrator's metrics, recorded with tags."""

    @functools.cached_property
    def _m(self) -> dict[str, Any]:
        from ray.util import metrics

        return {
            "duration": metrics.Histogram(
                "agent_task_duration_seconds",
                description="Run time of one sub-task attempt on an agent.",
                boundaries=_DURATION_BOUNDARIES,
                tag_keys=("agent",),
            ),
            "errors": metrics.Counter(
                "agent_error",
                description="Failed sub-task attempts by capability and error code.",
                tag_keys=("agent", "error_type"),
            ),
            "transitions": metrics.Counter(
                "swarm_task_transitions",
                description="Task state machine transitions.",
                tag_keys=("from_state", "to_state"),
            ),
            "rejections": metrics.Counter(
                "swarm_watermark_rejections",
                description="Results refused because of their watermark.",
                tag_keys=("reason",),
            ),
            "retries": metrics.Counter(
                "swarm_retries",
                description="Sub-task retries and fallbacks by capability.",
                tag_keys=("agent", "kind"),
            ),
            "breaker": metrics.Gauge(
                "swarm_breaker_state",
                description="Circuit breaker per capability: 0 closed, 1 half-open, 2 open.",
                tag_keys=("agent",),
            ),
        }

    def duration(self, agent: str, seconds: float) -> None:
        """Record one attempt's run time."""
        self._m["duration"].observe(seconds, tags={"agent": agent})

    def error(self, agent: str, error_type: str) -> None:
        """Count a failed attempt."""
        self._m["errors"].inc(tags={"agent": agent, "error_type": error_type})

    def transition(self, from_state: str, to_state: str) -> None:
        """Count a task state transition."""
        self._m["transitions"].inc(tags={"from_state": from_state, "to_state": to_state})

    def rejection(self, reason: str) -> None:
        """Count a refused result."""
        self._m["rejections"].inc(tags={"reason": reason})

    def retry(self, agent: str, kind: str) -> None:
        """Count a retry or a fallback."""
        self._m["retries"].inc(tags={"agent": agent, "kind": kind})

    def breaker(self, agent: str, state: int) -> None:
        """Set a capability's breaker state."""
        self._m["breaker"].set(state, tags={"agent": agent})
