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

Idle agents keep what Ray reserved for them. The executors of one orchestrator share a
`Room`: who of theirs waits to be placed (a Ray Data stage's placement group, a new
agent, a Serve deployment's replicas), and the pools whose idle agents are released
while anything waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol

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


_AGENT_GRACE_S = 2.0
"""An agent not running this long after its creation waits for resources (starting a
worker process and importing the capability took 0.5 to 1.5 s here)."""
_STAGE_GRACE_S = 0.2
"""A stage's placement group not placed this long waits for resources."""


class Pool(Protocol):
    """A pool of agents whose idle ones can be released (`_executors._Pool`)."""

    def reap(self, max_idle_s: float) -> int:
        """Release agents idle at least `max_idle_s`; how many."""
        ...


class Room:
    """What the executors of one orchestrator wait for, and the idle agents that yield.

    While a Ray Data stage waits for its placement group, a new agent waits to be placed
    or a Serve deployment starts its replicas, every idle agent is released (its CPU or
    GPU goes back to Ray) and an agent that finishes is released instead of kept idle.
    While a stage waits, no new agent is created: stages feed the agents, so the agents'
    work comes after theirs.
    """

    def __init__(self, cluster: Cluster | None = None) -> None:
        self.cluster = cluster or Cluster()
        self.pools: list[Pool] = []
        self.waiting = 0
        """Stages, agents and deployments of ours waiting to be placed."""
        self.stages_waiting = 0
        self._after_stages: list[asyncio.Future[None]] = []

    @property
    def contended(self) -> bool:
        """Whether something of ours waits for resources that idle agents hold."""
        return self.waiting > 0

    def reclaim(self) -> int:
        """Release every idle agent; how many."""
        return sum(pool.reap(0.0) for pool in self.pools)

    @contextlib.asynccontextmanager
    async def placing(self, *, stage: bool) -> AsyncIterator[None]:
        """Mark a wait for placement: idle agents are released until it ends."""
        self.waiting += 1
        if stage:
            self.stages_waiting += 1
        self.reclaim()
        try:
            yield
        finally:
            self.waiting -= 1
            if stage:
                self.stages_waiting -= 1
                if not self.stages_waiting:
                    for waiter in self._after_stages:
                        if not waiter.done():
                            waiter.set_result(None)
                    self._after_stages.clear()

    async def stages_placed(self) -> None:
        """Return once no stage of ours waits for its placement group."""
        if self.stages_waiting:
            waiter = asyncio.get_running_loop().create_future()
            self._after_stages.append(waiter)
            await waiter

    async def placed_within(self, ready: Any, limit_s: float, *, stage: bool) -> bool:
        """Wait for `ready` (an actor's or a placement group's); False past `limit_s`.

        Not counted in any deadline. Past a short grace (what placing costs when the
        resources are free: a new worker process for an agent, next to nothing for a
        placement group) it counts as waiting for resources, and idle agents yield.

        Raises:
            RayActorError: the actor died before it ran (its node went, say).
        """
        waiting = asyncio.ensure_future(ready)
        grace = min(limit_s, _STAGE_GRACE_S if stage else _AGENT_GRACE_S)
        try:
            done, _ = await asyncio.wait({waiting}, timeout=grace)
            if not done:
                async with self.placing(stage=stage):
                    done, _ = await asyncio.wait({waiting}, timeout=limit_s - grace)
            if not done:
                return False
            waiting.result()
            return True
        finally:
            waiting.cancel()


_ROOMS: dict[int, Room] = {}


def process_room() -> Room:
    """The room of this process's executors (one orchestrator per actor process)."""
    return _ROOMS.setdefault(os.getpid(), Room())
