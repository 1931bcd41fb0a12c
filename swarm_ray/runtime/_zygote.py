"""Forked attempts: an interpreter that imports once and forks a process per attempt.

A limited attempt (`_rlimits`) runs in a process of its own, so that its limits, its
crash and whatever it starts are its own. A fresh interpreter per attempt paid swarm_ray's
and the workload's imports each time, 1 to 2 s of CPU: most of the work on a tenant's
small PDF. Each agent process keeps idle *zygotes* instead: child interpreters that
import a capability's modules the first time they serve it and then `fork` one process
per attempt. The fork starts with those imports done and holds nothing of any other
attempt, since a zygote runs no attempt itself. A zygote idle for
`SWARM_RAY_ZYGOTE_IDLE_S` (60 s) is closed, as an idle pooled agent is released.

The zygote speaks to its agent over a Unix socket pair, its only link:

- agent -> zygote: an 8-byte length sent with two file descriptors (`SCM_RIGHTS`), the
  attempt's result pipe and its output pipe (its stdout and stderr); then that many
  bytes, the pickled `(modules, function, args)`. The zygote imports `modules` (trusted:
  they come from registered capabilities, never from a request), forks, and the child
  calls `function(*args, result_fd)`.
- zygote -> agent: 8 bytes, the child's pid; then 8 bytes, its exit code as
  `subprocess` gives it (negative: the signal that ended it).

The child leads its own process group and dies with the zygote (`PR_SET_PDEATHSIG`;
the zygote forks from its only thread). The zygote exits when the agent's end closes,
killing a running attempt's group first: nothing outlives its agent.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

__all__: list[str] = []

_WORD = struct.Struct("!q")
_MAX_IDLE = 4
"""Idle zygotes an agent process keeps; more run at once only while attempts overlap."""
_OUTPUT_TAIL = 64 * 1024
"""Bytes of an attempt's stdout and stderr kept, its last ones."""
_DRAIN_S = 1.0
"""How long the pipes are read after the attempt's group was killed."""


_START = "from swarm_ray.runtime._zygote import main; main()"
"""The zygote's program (not `-m`: the package imports this module first)."""


class ZygoteLost(RuntimeError):
    """The zygote serving an attempt died or broke the protocol."""


@dataclass(frozen=True)
class Ended:
    """How a forked attempt ended."""

    code: int | None
    """Exit code as `subprocess` gives it (negative: killed by that signal); None: it ran
    past its deadline and was killed."""
    result: bytes
    """What it wrote to its result descriptor."""
    output: bytes
    """The tail of what it printed."""


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


class _Zygote:
    """The agent's side of one zygote."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock = ours
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _START, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            theirs.close()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def close(self) -> None:
        self._sock.close()  # the zygote sees its end close and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=2)
            return
        self._proc.kill()
        self._proc.wait()

    def _word(self, deadline: float) -> int:
        ready, _, _ = select.select([self._sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise ZygoteLost("the zygote did not answer")
        try:
            value: int = _WORD.unpack(_recv_exact(self._sock, _WORD.size))[0]
        except (EOFError, OSError) as exc:
            raise ZygoteLost(f"the zygote was lost ({exc or 'closed'})") from None
        return value

    def run(
        self, modules: tuple[str, ...], function: str, args: tuple[Any, ...], timeout_s: float
    ) -> Ended:
        deadline = time.monotonic() + timeout_s
        payload = pickle.dumps((modules, function, args))
        result_r, result_w = os.pipe()
        output_r, output_w = os.pipe()
        try:
            try:
                socket.send_fds(self._sock, [_WORD.pack(len(payload))], [result_w, output_w])
                self._sock.sendall(payload)
            except OSError as exc:
                raise ZygoteLost(f"the zygote was lost ({exc})") from None
            finally:
                os.close(result_w)
                os.close(output_w)
            # The imports of a zygote's first attempt of a capability count as start-up.
            pid = self._word(time.monotonic() + max(timeout_s, 120.0))
            return self._collect(pid, result_r, output_r, deadline)
        finally:
            os.close(result_r)
            os.close(output_r)

    def _collect(self, pid: int, result_r: int, output_r: int, deadline: float) -> Ended:
        result, output = bytearray(), bytearray()
        sinks = {result_r: result, output_r: output}
        code: int | None = None
        timed_out = False
        while code is None:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                _kill_group(pid)
                code = self._word(time.monotonic() + 10)
                break
            ready, _, _ = select.select([self._sock.fileno(), *sinks], [], [], left)
            for fd in ready:
                if fd == self._sock.fileno():
                    code = self._word(time.monotonic() + 1)
                elif not _read_into(fd, sinks, output):
                    del sinks[fd]
        _kill_group(pid)  # whatever the attempt started ends with it
        drain_until = time.monotonic() + _DRAIN_S
        while sinks and (left := drain_until - time.monotonic()) > 0:
            drained, _, _ = select.select(list(sinks), [], [], left)
            for fd in drained:
                if not _read_into(fd, sinks, output):
                    del sinks[fd]
        return Ended(None if timed_out else code, bytes(result), bytes(output[-_OUTPUT_TAIL:]))


def _read_into(fd: int, sinks: dict[int, bytearray], output: bytearray) -> bool:
    """Read what `fd` has into its sink; False at its end."""
    chunk = os.read(fd, 65536)
    if not chunk:
        return False
    sinks[fd] += chunk
    if sinks[fd] is output and len(output) > 2 * _OUTPUT_TAIL:
        del output[:-_OUTPUT_TAIL]
    return True


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


_idle: list[tuple[_Zygote, float]] = []
"""Idle zygotes, each with the monotonic time it went idle."""
_idle_lock = threading.Lock()
_went_idle = threading.Condition(_idle_lock)
"""Told each time a zygote goes idle (the reaper's next close may be sooner)."""
_reaper: threading.Thread | None = None


def idle_s() -> float:
    """How long a zygote may sit idle before it exits (`SWARM_RAY_ZYGOTE_IDLE_S`, 60 s).

    An idle documents zygote holds about 140 MB and no Ray resource; an agent released
    for being idle takes its zygotes with it whatever this says.
    """
    return float(os.environ.get("SWARM_RAY_ZYGOTE_IDLE_S", "60"))


def _reap() -> None:
    """Close each zygote once it has been idle `idle_s`, for as long as the agent lives.

    It sleeps until the oldest idle zygote's time is up, or until one more goes idle.
    """
    while True:
        with _went_idle:
            limit, now = idle_s(), time.monotonic()
            stale = [z for z, since in _idle if now - since >= limit]
            _idle[:] = [(z, since) for z, since in _idle if now - since < limit]
            if not stale:
                oldest = min((since for _, since in _idle), default=None)
                _went_idle.wait(None if oldest is None else oldest + limit - now)
                continue
        for zygote in stale:
            zygote.close()


@atexit.register
def _close_idle() -> None:
    """At the agent's exit, its idle zygotes go first (they would see its end close)."""
    with _idle_lock:
        closing = [z for z, _ in _idle]
        _idle.clear()
    for zygote in closing:
        zygote.close()


def run_forked(
    function: str, args: tuple[Any, ...], *, modules: tuple[str, ...], timeout_s: float
) -> Ended:
    """Call `function(*args, result_fd)` (a `package.module:name`) in a forked process.

    `modules` are imported before the fork, in a zygote that keeps them for later
    attempts. Raises `ZygoteLost` when the zygote died under the attempt.
    """
    global _reaper
    with _idle_lock:
        zygote = None
        while _idle and zygote is None:
            candidate, _ = _idle.pop()
            if candidate.alive():
                zygote = candidate
            else:
                candidate.close()
        if _reaper is None:
            _reaper = threading.Thread(target=_reap, name="zygote-reaper", daemon=True)
            _reaper.start()
    if zygote is None:
        zygote = _Zygote()
    healthy = False
    try:
        module = function.partition(":")[0]
        ended = zygote.run((*modules, module), function, args, timeout_s)
        healthy = True
        return ended
    finally:
        with _idle_lock:
            keep = healthy and zygote.alive() and len(_idle) < _MAX_IDLE
            if keep:
                _idle.append((zygote, time.monotonic()))
                _went_idle.notify()
        if not keep:
            zygote.close()


# --- the zygote ---------------------------------------------------------------------


def _die_with_parent() -> None:
    with contextlib.suppress(Exception):  # Linux only; elsewhere the group kill must do
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child(sock: socket.socket, fds: list[int], function: str, args: tuple[Any, ...]) -> None:
    """The forked attempt: never returns."""
    try:
        sock.close()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.setsid()
        _die_with_parent()
        result_fd, output_fd = fds
        os.dup2(output_fd, 1)
        os.dup2(output_fd, 2)
        os.close(output_fd)
        module, _, name = function.partition(":")
        getattr(importlib.import_module(module), name)(*args, result_fd)
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
            sys.stderr.flush()
        os._exit(1)
    os._exit(0)


def _wait(sock: socket.socket, pid: int) -> int | None:
    """The child's exit code, or None when the agent went away first."""
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([sock.fileno(), pidfd], [], [])
            if pidfd in ready:
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            if sock.fileno() in ready:  # the agent sends nothing during an attempt: it is gone
                _kill_group(pid)
                os.waitpid(pid, 0)
                return None
    finally:
        os.close(pidfd)


def _serve(sock: socket.socket) -> None:
    imported: set[str] = set()
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, _WORD.size, 2)
            if not header:
                return
            header += _recv_exact(sock, _WORD.size - len(header))
            modules, function, args = pickle.loads(_recv_exact(sock, _WORD.unpack(header)[0]))
        except (EOFError, OSError):
            return
        for module in modules:
            if module not in imported:
                imported.add(module)
                with contextlib.suppress(Exception):  # the attempt reports its own errors
                    importlib.import_module(module)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(sock, fds, function, args)
        for fd in fds:
            os.close(fd)
        try:
            sock.sendall(_WORD.pack(pid))
            code = _wait(sock, pid)
            if code is None:
                return
            sock.sendall(_WORD.pack(code))
        except OSError:
            _kill_group(pid)
            return


def main() -> None:
    """The zygote: serve the socket pair's end named by the first argument."""
    sock = socket.socket(fileno=int(sys.argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the agent ends it, by closing its end
    _serve(sock)
