"""Shared fixtures: one real local Ray cluster for the whole session (never mocked)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Agents idle a few seconds are released, so pools of earlier tests hold no CPUs.
    os.environ.setdefault("SWARM_RAY_AGENT_IDLE_S", "5")
    ray.init(
        # Logical CPUs: several orchestrators' agent pools live side by side in one session.
        num_cpus=12,
        include_dashboard=False,
        namespace="swarm-ray",
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def swarm(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The orchestrator, with the testing catalog and a state dir of its own."""
    import swarm_ray

    state = tmp_path_factory.mktemp("swarm-state")
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"], state_dir=state, name="swarm-test"
    )
    yield client
    client.shutdown()


@pytest.fixture
def record_dir(tmp_path: Path) -> str:
    return str(tmp_path)
