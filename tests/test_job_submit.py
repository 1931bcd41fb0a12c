"""`ray job submit` as README writes it, against a head node started with `ray start --head`.

The head runs in its own temporary directory, HOME (so its auth token) and free ports,
apart from the session's cluster; it is started with `--block` in a process group of its
own and stopped by signalling that group (never `ray stop`, which would stop every Ray
on the machine). As README says, a token is made first (`ray get-auth-token --generate`,
which writes `~/.ray/auth_token`; any earlier local `ray.init()` leaves one too), so the
head turns Ray 2.60's token authentication on, and a client sets `RAY_AUTH_MODE=token`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support import OWN_CLUSTER, wait_until

pytestmark = [pytest.mark.ray, pytest.mark.timeout(420), OWN_CLUSTER]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _free_ports(n: int) -> list[int]:
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


@dataclass(frozen=True)
class Head:
    dashboard: str
    env: dict[str, str]
    home: Path


def _ours(marker: str) -> list[int]:
    """Processes whose command line names our temporary directory (only ours can)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline and int(entry.name) != os.getpid():
                found.append(int(entry.name))
    return found


@pytest.fixture(scope="module")
def head() -> Iterator[Head]:
    # Short paths: Ray's sockets live under --temp-dir and a socket path has ~107 bytes.
    base = Path(tempfile.mkdtemp(prefix="rjs", dir="/tmp"))
    home = base / "home"
    home.mkdir()
    gcs, dash, client, agent, agent_grpc, runtime, metrics = _free_ports(7)
    env = {
        **os.environ,
        "HOME": str(home),  # the head writes its auth token to $HOME/.ray/auth_token
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # jobs run this python
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    for variable in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        env.pop(variable, None)
    command = [
        str(BIN / "ray"),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={gcs}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dash}",
        f"--ray-client-server-port={client}",
        f"--dashboard-agent-listen-port={agent}",
        f"--dashboard-agent-grpc-port={agent_grpc}",
        f"--runtime-env-agent-port={runtime}",
        f"--metrics-export-port={metrics}",
        # Logical CPUs beyond the cores, as `swarm_ray.connect()` gives a local cluster:
        # pooled agents keep their share while idle, and with only 2 the stages wait on
        # each other until idle agents are released.
        "--num-cpus=8",
        f"--temp-dir={base / 'ray'}",
        "--disable-usage-stats",
    ]
    # As README says: a token first (`ray start` turns token auth on when one exists).
    subprocess.run(
        [str(BIN / "ray"), "get-auth-token", "--generate"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    log = (base / "head.log").open("wb")
    # No graceful drain on SIGTERM (it waits up to 30 s for work this test leaves behind).
    head_env = {**env, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    process = subprocess.Popen(
        command, env=head_env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{dash}"
    token_file = home / ".ray" / "auth_token"

    def up() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"ray start exited: {(base / 'head.log').read_text()[-2000:]}")
        if not token_file.exists():
            return False
        token = token_file.read_text().strip()
        try:
            answer = httpx.get(
                f"{url}/api/version", headers={"Authorization": f"Bearer {token}"}, timeout=5
            )
        except httpx.HTTPError:
            return False
        return answer.status_code == 200

    try:
        wait_until(up, 120, "the head node's dashboard")
        yield Head(dashboard=url, env=env, home=home)
    finally:
        # `ray start --block` drains the node and stops what it started; signalling the
        # whole group instead would stop the GCS first and leave it waiting 30 s for it.
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        deadline = time.monotonic() + 20
        while (left := _ours(str(base))) and time.monotonic() < deadline:
            time.sleep(0.5)
        for pid in left:  # anything of this head still alive (each by its own id)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        log.close()
        shutil.rmtree(base, ignore_errors=True)


def _ray(head: Head, *args: str, auth: bool = True, timeout: float = 300) -> tuple[int, str]:
    env = dict(head.env)
    if auth:
        env["RAY_AUTH_MODE"] = "token"  # the README's one extra step on a `ray start` head
    done = subprocess.run(
        [str(BIN / "ray"), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout + done.stderr


def test_a_client_without_token_mode_is_refused(head: Head) -> None:
    code, out = _ray(head, "job", "list", "--address", head.dashboard, auth=False, timeout=120)
    assert code != 0
    assert "RAY_AUTH_MODE" in out or "AuthenticationError" in out, out[-2000:]


def test_ray_job_submit_runs_the_compare_job(head: Head, tmp_path: Path) -> None:
    out_dir = tmp_path / "compare"
    command = ["job", "submit", "--address", head.dashboard, "--working-dir", ".", "--"]
    job = ["python", "jobs/compare_documents.py", "--samples", "4", "--dimensions", "battery"]
    for _ in range(12):  # the head's job agent comes up a little after its dashboard
        code, log = _ray(head, *command, *job, "--out", str(out_dir))
        if "No available agent" not in log:
            break
        time.sleep(5)
    assert code == 0, log[-4000:]
    assert "succeeded" in log.lower(), log[-4000:]
    assert "parse 4/4" in log  # plain per-stage progress lines (not a terminal)
    progress = [line for line in log.splitlines() if "parse " in line and "/4" in line]
    assert progress and not [p for p in progress if "\x1b[" in p]  # no bars in a log
    report = out_dir / "report.md"
    assert f"report: {report}" in log
    assert report.read_text().startswith("#")
    rollouts = list((out_dir / "state" / "results" / "rollouts" / "tasks").glob("*.parquet"))
    assert len(rollouts) == 1  # the run left its rollout for the notebook
