"""A throwaway real redis-server for tests of Redis-backed code.

Not a conftest: a test module imports `running_redis_server` and wraps it in a fixture of
the scope it needs. The server listens on a free loopback port, keeps nothing on disk
(`--save ''`, `--appendonly no`) and is killed when the context exits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

REDIS_SERVER = "redis-server"


def free_port() -> int:
    """Return a loopback TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def redis_server_or_skip() -> str:
    """Return the path of `redis-server`; skip the test without it, or fail under CI."""
    path = shutil.which(REDIS_SERVER)
    if path is None:
        reason = (
            f"`{REDIS_SERVER}` is not on PATH, so the Redis backend is untested here;"
            " install it (Debian/Ubuntu: `apt-get install redis-server`)"
        )
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return path


def _answers_ping(port: int) -> bool:
    client = redis.Redis(
        host="127.0.0.1", port=port, socket_connect_timeout=0.5, retry=Retry(NoBackoff(), 0)
    )
    try:
        return bool(client.ping())
    except redis.ConnectionError:
        return False
    finally:
        client.close()


@contextlib.contextmanager
def running_redis_server(workdir: Path, *, deadline_s: float = 15.0) -> Iterator[str]:
    """Run a redis-server until the context exits and yield its `redis://` URL.

    A port found free can be taken before the server binds it; the server then exits,
    and another port is tried.
    """
    exe = redis_server_or_skip()
    for _ in range(3):
        port = free_port()
        cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "no", "--dir", str(workdir)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + deadline_s
            while proc.poll() is None and time.monotonic() < deadline:
                if _answers_ping(port):
                    yield f"redis://127.0.0.1:{port}/0"
                    return
                time.sleep(0.01)  # poll interval; the loop waits on PING, not on time
        finally:
            proc.kill()
            proc.wait()
    pytest.fail(f"`{REDIS_SERVER}` did not answer PING within {deadline_s!r} s")
