"""A chat capability of its own for `tests/test_cost.py`, mapped to llama.cpp's server.

Its own id (and so its own Serve app) keeps the endpoint this test registers, with its
prices, away from the `llm.generation.chat` other tests deploy on the in-process model.
"""

from __future__ import annotations

from swarm_ray.core.model._capability import CapabilitySpec, ExecutorKind, Resources, RetryPolicy
from swarm_ray.core.model._template import TaskTemplate
from swarm_ray.core.planning._catalog import Catalog
from swarm_ray.llm._capabilities import ChatIn, ChatOut

CHAT = "test.cost.chat"


def cost_catalog() -> Catalog:
    """`test.cost.chat` (the chat capability on a Serve replica) and `cost_fanout`."""
    return Catalog(
        capabilities=(
            CapabilitySpec(
                id=CHAT,
                description="Answer a prompt with the chat model (for tests).",
                input_model=ChatIn,
                output_model=ChatOut,
                entrypoint="swarm_ray.llm._capabilities:chat",
                executor=ExecutorKind.SERVE,
                deployment="swarm_ray.llm._deployment:capability_llm_app",
                resources=Resources(num_cpus=0.1, max_concurrency=8),
                retry=RetryPolicy(max_attempts=1),
                timeout_s=120.0,
                tags=("llm",),
            ),
        ),
        templates=(
            TaskTemplate.model_validate(
                {
                    "name": "cost_fanout",
                    "stages": [
                        {
                            "name": "chat",
                            "capability": CHAT,
                            "fan_out": "per_item",
                            "input": {"prompt": "$item", "max_tokens": 8},
                        }
                    ],
                }
            ),
        ),
    )
