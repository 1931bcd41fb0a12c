"""Forked attempts (`swarm_ray.runtime._zygote`), without Ray: what a limited attempt
relies on: its result, its output, its deadline, its end and its group's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarm_ray.runtime._zygote import run_forked

HERE = "tests.test_zygote"
IMPORTS: list[int] = []
IMPORTS.append(os.getpid())  # once per process that imports this module


def answer(text: str, result_fd: int) -> None:
    print("printed by the attempt")
    os.write(result_fd, f"{text}:{os.getppid()}:{IMPORTS[0]}".encode())


def fail(result_fd: int) -> None:
    raise ValueError("the attempt's own error")


def die(result_fd: int) -> None:
    os.kill(os.getpid(), signal.SIGSEGV)


def linger(pid_file: str, result_fd: int) -> None:
    """Start a grandchild that would outlive the attempt, note both pids, then hang."""
    sleeper = subprocess.Popen(["sleep", "300"])
    Path(pid_file).write_text(f"{os.getpid()} {sleeper.pid}")
    time.sleep(300)


def _gone(pid: int, within_s: float = 5.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().split(")")[1].split()[0] == "Z":
                    return True  # dead, not yet reaped by a parent that is not ours
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_an_attempt_returns_its_result_and_its_output() -> None:
    first = run_forked(f"{HERE}:answer", ("one",), modules=(), timeout_s=60)
    second = run_forked(f"{HERE}:answer", ("two",), modules=(), timeout_s=60)
    assert first.code == 0 and second.code == 0
    text, zygote, importer = first.result.decode().split(":")
    assert text == "one" and b"printed by the attempt" in first.output
    # The second attempt is forked from the same zygote, which imported the module once,
    # before either fork: neither attempt paid for it, and neither is the zygote.
    assert second.result.decode().split(":")[1:] == [zygote, importer] == [importer, importer]
    assert int(zygote) != os.getpid()


def test_an_error_or_a_signal_ends_only_its_attempt() -> None:
    failed = run_forked(f"{HERE}:fail", (), modules=(), timeout_s=60)
    assert failed.code == 1 and failed.result == b""
    assert failed.output.decode().strip().splitlines()[-1] == "ValueError: the attempt's own error"
    crashed = run_forked(f"{HERE}:die", (), modules=(), timeout_s=60)
    assert crashed.code == -signal.SIGSEGV
    assert run_forked(f"{HERE}:answer", ("after",), modules=(), timeout_s=60).code == 0


def test_a_deadline_kills_the_attempt_and_all_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    started = time.monotonic()
    ended = run_forked(f"{HERE}:linger", (str(pids),), modules=(), timeout_s=2)
    assert ended.code is None and 2 <= time.monotonic() - started < 10
    attempt, grandchild = map(int, pids.read_text().split())
    assert _gone(attempt) and _gone(grandchild)


def test_a_killed_agent_takes_its_zygote_and_attempt_with_it(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    agent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from swarm_ray.runtime._zygote import run_forked; "
            f"run_forked('{HERE}:linger', ({str(pids)!r},), modules=(), timeout_s=300)",
        ],
        cwd=Path(__file__).parent.parent,
    )
    try:
        deadline = time.monotonic() + 60
        while not pids.exists() or len(pids.read_text().split()) < 2:
            assert time.monotonic() < deadline and agent.poll() is None
            time.sleep(0.05)
        attempt, grandchild = map(int, pids.read_text().split())
    finally:
        agent.kill()
        agent.wait()
    assert _gone(attempt) and _gone(grandchild)


def test_overlapping_attempts_each_get_a_zygote() -> None:
    concurrent = 3
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(concurrent) as pool:
        ended = list(
            pool.map(
                lambda n: run_forked(f"{HERE}:answer", (str(n),), modules=(), timeout_s=60),
                range(concurrent * 2),
            )
        )
    assert [e.result.decode().split(":")[0] for e in ended] == [
        str(n) for n in range(concurrent * 2)
    ]


def test_an_idle_zygote_is_closed_after_its_idle_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from swarm_ray.runtime import _zygote

    monkeypatch.delenv("SWARM_RAY_ZYGOTE_IDLE_S", raising=False)
    run_forked(f"{HERE}:answer", ("first",), modules=(), timeout_s=60)  # idle for 60 s
    monkeypatch.setenv("SWARM_RAY_ZYGOTE_IDLE_S", "0.5")
    ended = run_forked(f"{HERE}:answer", ("idle",), modules=(), timeout_s=60)
    zygote = int(ended.result.decode().split(":")[1])
    assert _gone(zygote, within_s=3)  # at its idle time, not at the reaper's next round
    assert not _zygote._idle
    assert run_forked(f"{HERE}:answer", ("again",), modules=(), timeout_s=60).code == 0
