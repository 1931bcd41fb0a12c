"""Which cluster `connect()` and the CLI join when no address is given.

Ray's default (`ray.init()` with no address) joins the cluster named in
`$RAY_TMPDIR/ray/ray_current_cluster`. A `ray start` head writes it, and so does
`ray.cluster_utils.Cluster`; a cluster killed before its shutdown leaves it behind. Then a
plain `ray.init(num_cpus=...)` raises "When connecting to an existing cluster, num_cpus and
num_gpus must not be provided" and `address="auto"` waits minutes on the dead address.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from swarm_ray.runtime._client import local_cluster
from tests.support import OWN_CLUSTER


@pytest.fixture
def ray_tmpdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    # Short: Ray puts its sockets under it, and a socket path has ~107 bytes.
    base = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    (base / "ray").mkdir()
    monkeypatch.setenv("RAY_TMPDIR", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # closed again: nothing listens there


def test_no_address_file_means_no_head(ray_tmpdir: Path) -> None:
    assert local_cluster() is None


def test_a_stale_address_is_not_a_head_and_costs_no_wait(ray_tmpdir: Path) -> None:
    (ray_tmpdir / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{_dead_port()}")
    started = time.monotonic()
    assert local_cluster() is None
    assert time.monotonic() - started < 5


def test_an_answering_head_is_joined(ray_tmpdir: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        (ray_tmpdir / "ray" / "ray_current_cluster").write_text(address)
        assert local_cluster() == address


@pytest.mark.ray
@OWN_CLUSTER
def test_connect_starts_its_own_cluster_beside_a_stale_address(ray_tmpdir: Path) -> None:
    """What broke CI: an address left by a killed cluster made every `ray.init` fail."""
    (ray_tmpdir / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{_dead_port()}")
    script = (
        "import ray, swarm_ray\n"
        f"swarm = swarm_ray.connect(state_dir={str(ray_tmpdir / 'state')!r}, name='addr')\n"
        "print('cpus', int(ray.cluster_resources()['CPU']))\n"
        "import os; print('auth', os.environ.get('RAY_AUTH_MODE'))\n"
        # Two dozen actors at once, as pools of agents start: each is a worker.
        "A = ray.remote(num_cpus=0)(type('A', (), {'ping': lambda self: 1}))\n"
        "actors = [A.remote() for _ in range(24)]\n"
        "print('pings', sum(ray.get([a.ping.remote() for a in actors])))\n"
        "import time; time.sleep(3)\n"  # the raylet's warning, if any, comes after
        "swarm.shutdown()\n"
        "ray.shutdown()\n"
    )
    env = {**os.environ, "RAY_TMPDIR": str(ray_tmpdir), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_AUTH_MODE", None)  # Ray's default, as on a newcomer's machine
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # A new local cluster, not a join, with as many logical CPUs as cores: nothing
    # oversubscribed (the executors fit pools to the cluster, as on one `ray start` made)
    assert f"cpus {os.cpu_count()}" in done.stdout
    # Token authentication stays on (Ray's default) without Ray's warning saying so.
    assert "auth token" in done.stdout
    assert "Token authentication is enabled" not in done.stderr + done.stdout
    # Nor the raylet's warning that more workers started than there are cores.
    assert "pings 24" in done.stdout
    assert "maximum expected startup concurrency" not in done.stderr + done.stdout
