"""What the cluster can give: pool sizes fitted to it, and requests no node can ever meet.

A cluster started by `ray start`, the cluster launcher or KubeRay declares its real CPUs.
The executors size each pool of agents and each Ray Data stage from what the live nodes
have (`Cluster.fit`), and refuse at once, by name, a capability whose agent no node can
hold (`Cluster.unplaceable`: `num_gpus: 1` on a CPU-only cluster), rather than leave its
sub-tasks pending until they pass their deadlines.

A cluster whose autoscaler can add nodes says so with `SWARM_RAY_AUTOSCALING=1` in the
environment of its Ray processes (the KubeRay manifests set it): then a request no live
node meets is the autoscaler's to answer, and it waits like any other, up to the
placement limit (`SWARM_RAY_PLACEMENT_S`, 600 s by default).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any

import ray

from swarm_ray.core.model._capability import Resources

__all__: list[str] = []

_REFRESH_S = 5.0
"""How long a reading of the nodes' resources is used before it is read again."""


def placement_limit_s() -> float:
    """Longest an agent or a stage waits to be placed before its sub-tasks fail by name."""
    return float(os.environ.get("SWARM_RAY_PLACEMENT_S", "600"))


def autoscaling() -> bool:
    """Whether an autoscaler may add nodes this cluster does not have yet."""
    return os.environ.get("SWARM_RAY_AUTOSCALING", "0").strip().lower() in ("1", "true", "yes")


def need(resources: Resources) -> dict[str, float]:
    """What one agent (or one Ray Data row) reserves, in Ray's resource names."""
    wanted = {"CPU": resources.num_cpus, "GPU": resources.num_gpus}
    if resources.memory_bytes is not None:
        wanted["memory"] = float(resources.memory_bytes)
    return {name: amount for name, amount in wanted.items() if amount > 0}


def _fits(node: Mapping[str, float], wanted: Mapping[str, float]) -> int:
    """How many of `wanted` one node holds at once (a large number when it needs nothing)."""
    counts = [math.floor(node.get(name, 0.0) / amount + 1e-9) for name, amount in wanted.items()]
    return min(counts, default=1 << 20)


def _shown(wanted: Mapping[str, float]) -> str:
    return ", ".join(
        f"{name} {amount / 2**30:.1f} GiB" if name == "memory" else f"{name} {amount:g}"
        for name, amount in wanted.items()
    )


class Cluster:
    """The live nodes' total resources, read at most every `_REFRESH_S` seconds."""

    def __init__(self) -> None:
        self._nodes: list[dict[str, float]] = []
        self._read_at = -math.inf

    def nodes(self) -> list[dict[str, float]]:
        """Total resources of each live node (a node's totals, not what is free now).

        None known outside a Ray process (then nothing is fitted or refused).
        """
        if not ray.is_initialized():
            return []
        if time.monotonic() - self._read_at > _REFRESH_S:
            found: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
            self._nodes = [
                {str(k): float(v) for k, v in node.get("Resources", {}).items()}
                for node in found
                if node.get("Alive")
            ]
            self._read_at = time.monotonic()
        return self._nodes

    def fit(self, resources: Resources) -> int:
        """How many agents of `resources` may exist at once: its cap, or what fits.

        With an autoscaler the cap stands (pending agents are the demand that adds
        nodes). Without one, a pool larger than the cluster can hold only queues agents
        that wait while the running ones go idle.
        """
        cap = resources.max_concurrency
        nodes = self.nodes()
        if autoscaling() or not nodes:
            return cap
        wanted = need(resources)
        room = sum(_fits(node, wanted) for node in nodes)
        return max(1, min(cap, room))

    def unplaceable(self, capability_id: str, resources: Resources) -> str | None:
        """Why no agent of `capability_id` can ever be placed, or None when one can."""
        wanted = need(resources)
        nodes = self.nodes()
        if autoscaling() or not nodes or any(_fits(node, wanted) >= 1 for node in nodes):
            return None
        largest = max(nodes, key=lambda n: (n.get("GPU", 0.0), n.get("CPU", 0.0)), default={})
        has = {k: largest.get(k, 0.0) for k in wanted}
        return (
            f"no resources for `{capability_id}`: one agent needs {_shown(wanted)}, and no "
            f"node of this cluster has them (the largest has {_shown(has) or 'none'}); "
            "no autoscaler can add one (`SWARM_RAY_AUTOSCALING` is off)"
        )
