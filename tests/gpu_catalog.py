"""Capabilities that need a GPU, for `tests/test_cluster_fit.py` on a CPU-only cluster.

One per executor (a pooled agent, a Ray Data row, a Serve replica), each asking one whole
GPU: on a cluster without one, and no autoscaler to add one, their sub-tasks must fail
by name at once rather than wait pending until their deadlines.
"""

from __future__ import annotations

from swarm_ray.core.model._capability import CapabilitySpec, ExecutorKind, Resources, RetryPolicy
from swarm_ray.core.model._template import TaskTemplate
from swarm_ray.core.planning._catalog import Catalog
from swarm_ray.testing import EchoIn, EchoOut

EXECUTORS = {"actor": ExecutorKind.ACTOR, "rows": ExecutorKind.DATA, "serve": ExecutorKind.SERVE}


def gpu_catalog() -> Catalog:
    """`test.gpu.{actor,rows,serve}` (one GPU each) and the `gpu_echo` template."""
    return Catalog(
        capabilities=tuple(
            CapabilitySpec(
                id=f"test.gpu.{name}",
                description=f"Echo a text on a GPU ({kind} executor; for tests).",
                input_model=EchoIn,
                output_model=EchoOut,
                entrypoint="swarm_ray.testing:echo",
                executor=kind,
                resources=Resources(num_cpus=0.1, num_gpus=1),
                timeout_s=600.0,
                retry=RetryPolicy(max_attempts=1),
            )
            for name, kind in EXECUTORS.items()
        ),
        templates=(
            TaskTemplate.model_validate(
                {
                    "name": "gpu_echo",
                    "stages": [
                        {
                            "name": name,
                            "capability": f"test.gpu.{name}",
                            "fan_out": "per_item",
                            "input": {"text": "$item"},
                        }
                        for name in EXECUTORS
                    ],
                }
            ),
        ),
    )
