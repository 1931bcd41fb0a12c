"""Capabilities as Ray Serve deployments (model-backed agents live here).

`capability_app(spec)` builds a Serve application whose replicas run the capability's
entrypoint with the capability's `ray_actor_options` (so `num_gpus=0.25` puts four
replicas on one GPU).

Health: `health()` runs the spec's own `health_check` (if any) and reports status,
version and latency; the orchestrator probes it and takes the capability out of
dispatch after three failures in a row. Serve's own `check_health` raises on the same
signs, so Serve replaces a sick replica. A failure that is the request's own mistake (a
user error) does not count: one tenant's bad requests must not take a replica down.
"""

from __future__ import annotations

import time
from typing import Any

from ray import serve

from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.core.model._subtask import SubTask, SubTaskResult
from swarm_ray.core.planning._catalog import load_entrypoint
from swarm_ray.runtime._agent import run_subtask

__all__: list[str] = []


@serve.deployment
class CapabilityDeployment:
    """A Serve replica running one capability."""

    def __init__(self, spec: CapabilitySpec) -> None:
        self._spec = spec
        self._calls = 0
        self._consecutive_errors = 0
        self._last_latency_s = 0.0

    def run(self, subtask: SubTask) -> SubTaskResult:
        """Run one attempt of a sub-task."""
        started = time.perf_counter()
        result = run_subtask(self._spec, subtask, agent=f"serve:{self._spec.id}")
        self._last_latency_s = time.perf_counter() - started
        self._calls += 1
        if result.error is None or not result.error.callers_mistake:  # else not the replica's
            self._consecutive_errors = 0 if result.ok else self._consecutive_errors + 1
        return result

    def _problem(self) -> str | None:
        if self._consecutive_errors >= 3:
            return f"replica of `{self._spec.id}` failed {self._consecutive_errors} calls in a row"
        if self._spec.health_check is not None:
            try:
                load_entrypoint(self._spec.health_check)()
            except Exception as exc:
                return f"health check of `{self._spec.id}` raised {type(exc).__name__}: {exc}"
        return None

    def health(self) -> dict[str, Any]:
        """Status (`ok` or `unhealthy` with an error), version and latency of this replica."""
        problem = self._problem()
        return {
            "status": "ok" if problem is None else "unhealthy",
            "error": problem,
            "capability": self._spec.id,
            "version": self._spec.version,
            "calls": self._calls,
            "latency_ms": round(self._last_latency_s * 1000, 3),
            "consecutive_errors": self._consecutive_errors,
        }

    def check_health(self) -> None:
        """Raise (so Serve replaces the replica) when `health()` would say unhealthy."""
        problem = self._problem()
        if problem is not None:
            raise RuntimeError(problem)


def deployment_names(spec: CapabilitySpec) -> tuple[str, str]:
    """(application name, deployment name) for a capability."""
    return f"swarm-{spec.id.replace('.', '-')}", spec.id.replace(".", "_")


def capability_app(spec: CapabilitySpec) -> Any:
    """A Serve application for `spec`, sized by its resources.

    A spec naming its own `deployment` builder gets that app (it must name its
    deployment as `deployment_names` says and answer `run(subtask)`).
    """
    _, deployment = deployment_names(spec)
    if spec.deployment is not None:
        from swarm_ray.core.planning._catalog import load_entrypoint

        return load_entrypoint(spec.deployment)(spec)
    return CapabilityDeployment.options(  # type: ignore[attr-defined]
        name=deployment,
        ray_actor_options=spec.resources.ray_options(),
        num_replicas=1,
        max_ongoing_requests=max(1, spec.resources.max_concurrency),
    ).bind(spec)
