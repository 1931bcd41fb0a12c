"""Swarm metrics through `ray.util.metrics`, so they show on the Ray dashboard.

Ray exports them with a `ray_` prefix (counters gain `_total`). They are created lazily
inside the process that records them (the orchestrator actor), which owns the
swarm-level numbers: one process, so every reader sees the same counts.

The numbers are tallied in plain Python (`snapshot()`), which the gateway's `GET /metrics`
renders in the Prometheus text format: whichever gateway replica answers, it asks the one
orchestrator, so the numbers agree (a `prometheus_client` registry inside a replica would
only see that replica). Counters reach Ray from the tallies, as the increase since the
last `flush()`, which the orchestrator's upkeep calls once a second: Ray exports every few
seconds anyway, and a `ray.util.metrics` call per task transition was a tenth of the
orchestrator's CPU per gateway request.
"""

from __future__ import annotations

import bisect
import functools
from collections import defaultdict
from typing import Any

__all__: list[str] = []

DURATION_BOUNDARIES = [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300]

Labels = tuple[tuple[str, str], ...]

_RAY_COUNTERS = {
    "agent_error": "errors",
    "swarm_task_transitions": "transitions",
    "swarm_watermark_rejections": "rejections",
    "swarm_retries": "retries",
    "swarm_cost": "cost",
}
"""Each tallied counter's `ray.util.metrics` counter (in `SwarmMetrics._m`)."""


class SwarmMetrics:
    """The orchestrator's metrics, recorded with tags (and tallied for `snapshot()`)."""

    def __init__(self) -> None:
        self._counters: dict[str, dict[Labels, float]] = defaultdict(lambda: defaultdict(float))
        self._gauges: dict[str, dict[Labels, float]] = defaultdict(dict)
        # per agent: bucket counts (one per boundary, then +Inf), sum
        self._durations: dict[str, tuple[list[int], list[float]]] = {}
        self._flushed: dict[tuple[str, Labels], float] = {}
        """Each counter series' total as last handed to Ray (`flush`)."""

    def _count(self, name: str, **labels: str) -> None:
        self._counters[name][tuple(sorted(labels.items()))] += 1

    def tally(self, name: str, label: str) -> dict[str, float]:
        """A counter's totals by one of its labels (`tally("swarm_retries", "kind")`)."""
        totals: dict[str, float] = defaultdict(float)
        for labels, value in self._counters.get(name, {}).items():
            totals[dict(labels).get(label, "")] += value
        return dict(totals)

    def snapshot(self) -> dict[str, Any]:
        """Plain counters, gauges and duration histograms (JSON-ready, picklable)."""
        return {
            "counters": {
                name: [[dict(k), v] for k, v in series.items()]
                for name, series in self._counters.items()
            },
            "gauges": {
                name: [[dict(k), v] for k, v in series.items()]
                for name, series in self._gauges.items()
            },
            "durations": {
                agent: {"buckets": list(counts), "sum": total[0]}
                for agent, (counts, total) in self._durations.items()
            },
            "boundaries": list(DURATION_BOUNDARIES),
        }

    def flush(self) -> None:
        """Hand Ray each counter's increase since the last flush."""
        for name, series in self._counters.items():
            metric = self._m[_RAY_COUNTERS[name]]
            for labels, total in series.items():
                increase = total - self._flushed.get((name, labels), 0.0)
                if increase > 0:
                    metric.inc(increase, tags=dict(labels))
                    self._flushed[(name, labels)] = total

    @functools.cached_property
    def _m(self) -> dict[str, Any]:
        from ray.util import metrics

        return {
            "duration": metrics.Histogram(
                "agent_task_duration_seconds",
                description="Run time of one sub-task attempt on an agent.",
                boundaries=DURATION_BOUNDARIES,
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
            "cost": metrics.Counter(
                "swarm_cost",
                description="Money accepted attempts cost, by capability (endpoint prices).",
                tag_keys=("agent",),
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
        counts, total = self._durations.setdefault(
            agent, ([0] * (len(DURATION_BOUNDARIES) + 1), [0.0])
        )
        counts[bisect.bisect_left(DURATION_BOUNDARIES, seconds)] += 1
        total[0] += seconds

    def error(self, agent: str, error_type: str) -> None:
        """Count a failed attempt."""
        self._count("agent_error", agent=agent, error_type=error_type)

    def transition(self, from_state: str, to_state: str) -> None:
        """Count a task state transition."""
        self._count("swarm_task_transitions", from_state=from_state, to_state=to_state)

    def rejection(self, reason: str) -> None:
        """Count a refused result."""
        self._count("swarm_watermark_rejections", reason=reason)

    def retry(self, agent: str, kind: str) -> None:
        """Count a retry or a fallback."""
        self._count("swarm_retries", agent=agent, kind=kind)

    def cost(self, agent: str, amount: float) -> None:
        """Add what an accepted attempt cost."""
        self._counters["swarm_cost"][(("agent", agent),)] += amount

    def breaker(self, agent: str, state: int) -> None:
        """Set a capability's breaker state."""
        self._m["breaker"].set(state, tags={"agent": agent})
        self._gauges["swarm_breaker_state"][(("agent", agent),)] = state
