"""Swarm-wide views over orchestrator shards: `info`, `health` and `metrics` merged.

Each shard answers for its own tasks, agents and capabilities' outcomes; a caller of
`AsyncSwarmClient.info`, `health` or `metrics` (the CLI, the gateway's `/health` and
`/metrics`) sees the swarm as one. Pure functions over the shards' answers, by index:

- counts add up (open tasks, tasks by state, counters, duration histograms, gauges);
- health is the worst shard's (its score the lowest, a capability out of dispatch on
  any shard out), and a shard that did not answer is named in `shards_down`;
- what every shard holds alike (capabilities, templates) comes from the first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__: list[str] = []

Answers = Mapping[int, dict[str, Any]]
"""Each answering shard's own view, by shard index."""


def merge_info(answers: Answers) -> dict[str, Any]:
    """`info` of every shard as one: open tasks added, agents listed by shard."""
    first = answers[min(answers)]
    merged = dict(first)
    merged["open_tasks"] = sum(int(a.get("open_tasks", 0)) for a in answers.values())
    merged["agents"] = [agent for a in answers.values() for agent in a.get("agents", [])]
    merged["started_at"] = min(float(a.get("started_at", 0.0)) for a in answers.values())
    merged["shards"] = {
        str(k): {"open_tasks": a.get("open_tasks", 0), "started_at": a.get("started_at")}
        for k, a in sorted(answers.items())
    }
    return merged


def merge_health(answers: Answers, down: list[int]) -> dict[str, Any]:
    """`health` of the shards that answered as the worst of them; `down` named."""
    reports = [answers[k] for k in sorted(answers)]
    merged = dict(min(reports, key=lambda r: float(r["swarm_health_score"])))
    capabilities: dict[str, dict[str, Any]] = {}
    for report in reports:
        for cid, health in report.get("capabilities", {}).items():
            kept = capabilities.get(cid)
            if kept is None or (kept.get("in_dispatch") and not health.get("in_dispatch")):
                capabilities[cid] = health
    merged["capabilities"] = dict(sorted(capabilities.items()))
    merged["open_tasks"] = sum(int(r.get("open_tasks", 0)) for r in reports)
    merged["uptime_s"] = min(float(r.get("uptime_s", 0.0)) for r in reports)
    errors = [r["audit_error"] for r in reports if r.get("audit_error")]
    if errors:
        merged["audit_error"] = "; ".join(errors)
    merged["shards_down"] = sorted(down)
    return merged


def merge_metrics(answers: Answers) -> dict[str, Any]:
    """`metrics` snapshots (see `_metrics.SwarmMetrics.snapshot`) added up."""
    snapshots = [answers[k] for k in sorted(answers)]
    merged = dict(snapshots[0])
    for kind in ("counters", "gauges"):
        merged[kind] = _series_sum(s.get(kind, {}) for s in snapshots)
    durations: dict[str, dict[str, Any]] = {}
    for snapshot in snapshots:
        for agent, hist in snapshot.get("durations", {}).items():
            kept = durations.setdefault(agent, {"buckets": [0] * len(hist["buckets"]), "sum": 0.0})
            kept["buckets"] = [a + b for a, b in zip(kept["buckets"], hist["buckets"], strict=True)]
            kept["sum"] += hist["sum"]
    merged["durations"] = durations
    tasks: dict[str, int] = {}
    for snapshot in snapshots:
        for state, n in snapshot.get("tasks", {}).items():
            tasks[state] = tasks.get(state, 0) + int(n)
    merged["tasks"] = tasks
    merged["health"] = merge_health({k: a["health"] for k, a in answers.items()}, [])
    return merged


def _series_sum(families: Any) -> dict[str, list[list[Any]]]:
    """`{name: [[labels, value], ...]}` of several shards, values of equal labels added."""
    added: dict[str, dict[tuple[tuple[str, Any], ...], list[Any]]] = {}
    for family in families:
        for name, series in family.items():
            by_labels = added.setdefault(name, {})
            for labels, value in series:
                key = tuple(sorted(labels.items()))
                if key in by_labels:
                    by_labels[key][1] += value
                else:
                    by_labels[key] = [dict(labels), value]
    return {name: list(by_labels.values()) for name, by_labels in added.items()}
