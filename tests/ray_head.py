"""A Ray head started as a user starts one (`ray start --head`), for tests and measurements.

It gets a free port and a temp dir of its own, and its processes are found and stopped by
that temp dir: `ray stop` would stop every Ray process of this user on the machine.

    python tests/ray_head.py CPUS -- COMMAND ...   # COMMAND runs with RAY_ADDRESS set
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
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ours(temp_dir: Path) -> list[int]:
    """Ids of the processes whose command line names `temp_dir` (this head's alone)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if str(temp_dir).encode() in cmdline:
            found.append(int(entry.name))
    return found


def stop(temp_dir: Path, grace_s: float = 10.0) -> None:
    """Stop this head's processes (SIGTERM, then SIGKILL past `grace_s`)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _ours(temp_dir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        until = time.monotonic() + grace_s
        while _ours(temp_dir) and time.monotonic() < until:
            time.sleep(0.2)
        if not _ours(temp_dir):
            return


@contextlib.contextmanager
def ray_head(
    num_cpus: int,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
    port: int | None = None,
) -> Iterator[str]:
    """`ray start --head --num-cpus N` on a free port; yields its address, then stops it."""
    # Short: Ray puts its sockets under it, and a socket path has ~107 bytes.
    temp_dir = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))
    port = port or free_port()
    ray = Path(sys.executable).with_name("ray")
    command = [
        str(ray), "start", "--head", f"--port={port}", f"--num-cpus={num_cpus}",
        "--num-gpus=0", "--node-ip-address=127.0.0.1", f"--temp-dir={temp_dir}",
        "--include-dashboard=false", "--disable-usage-stats", *extra,
    ]  # fmt: skip
    try:
        subprocess.run(
            command, env=dict(env or os.environ), check=True, capture_output=True, timeout=120
        )
        yield f"127.0.0.1:{port}"
    finally:
        stop(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)


def main(argv: list[str]) -> int:
    cpus, rest = int(argv[0]), argv[argv.index("--") + 1 :]
    with ray_head(cpus) as address:
        started = time.perf_counter()
        done = subprocess.run(rest, env={**os.environ, "RAY_ADDRESS": address})
        print(f"ray_head: {' '.join(rest)} took {time.perf_counter() - started:.1f} s", flush=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
