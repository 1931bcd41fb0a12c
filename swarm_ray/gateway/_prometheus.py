"""The orchestrator's metric snapshot in the Prometheus text format.

The numbers come from the one orchestrator actor, so every gateway replica renders the
same swarm-level values. The families, with their labels:

| metric | type | labels |
| --- | --- | --- |
| `agent_task_duration_seconds` | histogram | `agent` |
| `agent_error_total` | counter | `agent`, `error_type` |
| `swarm_task_transitions_total` | counter | `from_state`, `to_state` |
| `swarm_watermark_rejections_total` | counter | `reason` |
| `swarm_retries_total` | counter | `agent`, `kind` (`retry`, `fallback`) |
| `swarm_cost_total` | counter | `agent` (money its accepted attempts cost, from `prices`) |
| `swarm_breaker_state` | gauge | `agent` (0 closed, 1 half-open, 2 open) |
| `swarm_tasks` | gauge | `state` (open tasks; ended ones since the orchestrator started) |
| `swarm_capability_in_dispatch` | gauge | `capability` (1 in, 0 taken out) |
| `swarm_health_score` | gauge | |
| `swarm_llm_budget_queue_length` | gauge | `endpoint` (callers waiting for a request slot) |
| `swarm_llm_budget_in_flight` | gauge | `endpoint` |
| `swarm_llm_budget_max_wait_seconds` | gauge | `endpoint` (longest wait for a slot) |
| `swarm_llm_requests_total` | counter | `endpoint` (slots granted) |
| `swarm_llm_tokens_total` | counter | `endpoint` (tokens the requests used) |
| `swarm_llm_rate_limited_total` | counter | `endpoint` (HTTP 429 answers seen) |
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_COUNTERS = {
    "agent_error": (
        "Failed sub-task attempts by capability and error code.",
        ("agent", "error_type"),
    ),
    "swarm_task_transitions": ("Task state machine transitions.", ("from_state", "to_state")),
    "swarm_watermark_rejections": ("Results refused because of their watermark.", ("reason",)),
    "swarm_retries": ("Sub-task retries and fallbacks by capability.", ("agent", "kind")),
    "swarm_cost": ("Money accepted attempts cost, by capability.", ("agent",)),
}


class _Snapshot(Collector):
    def __init__(self, snapshot: dict[str, Any]) -> None:
        self._s = snapshot

    def collect(self) -> Iterator[Metric]:
        s = self._s
        bounds = [str(float(b)) for b in s["boundaries"]] + ["+Inf"]
        duration = HistogramMetricFamily(
            "agent_task_duration_seconds",
            "Run time of one sub-task attempt on an agent.",
            labels=["agent"],
        )
        for agent, hist in sorted(s["durations"].items()):
            cumulative = list(itertools.accumulate(hist["buckets"]))
            duration.add_metric(
                [agent], list(zip(bounds, cumulative, strict=True)), sum_value=hist["sum"]
            )
        yield duration
        for name, (doc, labels) in _COUNTERS.items():
            family = CounterMetricFamily(name, doc, labels=list(labels))
            for tags, value in s["counters"].get(name, []):
                family.add_metric([tags.get(label, "") for label in labels], value)
            yield family
        breaker = GaugeMetricFamily(
            "swarm_breaker_state",
            "Circuit breaker per capability: 0 closed, 1 half-open, 2 open.",
            labels=["agent"],
        )
        for tags, value in s["gauges"].get("swarm_breaker_state", []):
            breaker.add_metric([tags["agent"]], value)
        yield breaker
        tasks = GaugeMetricFamily("swarm_tasks", "Tasks by state.", labels=["state"])
        for state, count in sorted(s["tasks"].items()):
            tasks.add_metric([state], count)
        yield tasks
        health = s["health"]
        in_dispatch = GaugeMetricFamily(
            "swarm_capability_in_dispatch",
            "1 while a capability takes sub-tasks, 0 once health checks took it out.",
            labels=["capability"],
        )
        for cid, cap in health["capabilities"].items():
            in_dispatch.add_metric([cid], 1.0 if cap["in_dispatch"] else 0.0)
        yield in_dispatch
        yield GaugeMetricFamily(
            "swarm_health_score",
            "0.4 x success rate + 0.3 x latency score + 0.3 x agent availability.",
            value=health["swarm_health_score"],
        )
        yield from _budgets(s.get("llm_budgets", []))


_BUDGET_FAMILIES = (
    (
        "swarm_llm_budget_queue_length",
        GaugeMetricFamily,
        "queue_length",
        "Callers waiting for a request slot of an LLM endpoint.",
    ),
    (
        "swarm_llm_budget_in_flight",
        GaugeMetricFamily,
        "in_flight",
        "Requests in flight to an LLM endpoint.",
    ),
    (
        "swarm_llm_budget_max_wait_seconds",
        GaugeMetricFamily,
        "max_wait_s",
        "Longest wait for a request slot of an LLM endpoint.",
    ),
    (
        "swarm_llm_requests",
        CounterMetricFamily,
        "granted",
        "Request slots an LLM endpoint's budget granted.",
    ),
    (
        "swarm_llm_tokens",
        CounterMetricFamily,
        "tokens_used",
        "Tokens an LLM endpoint's requests used.",
    ),
    (
        "swarm_llm_rate_limited",
        CounterMetricFamily,
        "rate_limited",
        "HTTP 429 answers an LLM endpoint gave.",
    ),
)


def _budgets(states: list[dict[str, Any]]) -> Iterator[Metric]:
    """One family per budget figure, a sample per endpoint (`swarm_ray.llm._budget`)."""
    for name, kind, key, doc in _BUDGET_FAMILIES:
        family = kind(name, doc, labels=["endpoint"])
        for state in states:
            family.add_metric([state["endpoint"]], float(state[key]))
        yield family


def render(snapshot: dict[str, Any]) -> bytes:
    """The snapshot from `Orchestrator.metrics()` as Prometheus text."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Snapshot(snapshot))
    return generate_latest(registry)
