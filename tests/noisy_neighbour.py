"""A noisy neighbour for a live gateway: one tenant runs the slowest requests the door
accepts while another's simple calls are timed (shared by `test_security.py` and
`bench/noisy.py`; `python -m tests.noisy_neighbour URL KEY SLOW DEEP_PER_S SOCKETS`
runs the attacker alone, until its standard input ends).

The attacker, in a process of its own with one event loop, keeps up at once:

- `slow_bodies` request bodies that declare 64 KiB and send one byte, each reopened once
  the gateway answers it (408 at the deadline, 429 over the key's budget);
- a JSON body nested 960 deep `deep_per_s` times a second (422), with the content type
  spelled as the third probe did (`Application/JSON`);
- `sockets` WebSockets with no key that never send it, each reopened once the gateway
  closes it (4401 at the key deadline, 1013 when a newer one takes its place).

It is paced, not a flood: its requests open evenly over `ramp_s` (3 s), one the gateway
held is reopened about a second after its answer, one it refused at once about
`retry_refused_s` (10 s) after, jittered so they do not come back together. What it
measures is whether held and hostile requests slow other
tenants, not how many requests a second the machine absorbs (a rate limit's matter).
The victim's calls are sequential `GET /v1/tasks/{id}` of a task of its own, and
`compare` alternates quiet and noisy phases in one run, so both sides see the same
machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx

__all__ = ["Attack", "Comparison", "compare", "percentile", "timed_calls"]

DEEP = ('{"template": "echo_fanout", "params": {"p": ' + "[" * 960 + "]" * 960 + "}}").encode()


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@dataclass
class Attack:
    """The attacker (see the module docstring); `running()` holds it up for a block."""

    url: str
    key: str
    slow_bodies: int = 250
    deep_per_s: float = 5.0
    sockets: int = 70
    retry_refused_s: float = 10.0
    ramp_s: float = 3.0
    """The workers open evenly over this long: slow requests, not a burst of connections."""
    seen: Counter[str] = field(default_factory=Counter)
    """What the gateway answered, by kind (`slow 429`, `deep 422`, `socket 4401`...)."""

    @contextlib.contextmanager
    def running(self) -> Iterator[Attack]:
        """Run the attack for the block, in a process of its own (so it takes no turns of
        the caller's interpreter from the calls being timed); it is up on entry, and
        `seen` counts what it was answered once the block ends."""
        import subprocess
        from pathlib import Path

        command = [sys.executable, "-m", "tests.noisy_neighbour", self.url, self.key]
        command += [str(self.slow_bodies), str(self.deep_per_s), str(self.sockets)]
        root = Path(__file__).resolve().parents[1]
        with subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=root
        ) as attacker:
            assert attacker.stdin is not None and attacker.stdout is not None
            try:
                line = attacker.stdout.readline().strip()
                if line != "up":
                    raise AssertionError(f"the attack did not get going: {line!r}")
                yield self
            finally:
                attacker.stdin.close()  # the attacker stops when its input ends
                self.seen.update(json.loads(attacker.stdout.readline() or "{}"))

    def run_here(self) -> None:
        """Attack until standard input ends; print `up` once going, then what was seen."""
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        up = threading.Event()

        def until_input_ends() -> None:
            up.wait()
            print("up", flush=True)
            sys.stdin.read()
            loop.call_soon_threadsafe(stop.set)

        threading.Thread(target=until_input_ends, daemon=True).start()
        loop.run_until_complete(self._main(stop, up))
        loop.close()
        print(json.dumps(dict(self.seen)), flush=True)

    async def _main(self, stop: asyncio.Event, up: threading.Event) -> None:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        # Each worker's first request, from when it was sent until it is answered.
        first: dict[int, float] = {}
        sent: set[int] = set()
        n = self.slow_bodies + self.sockets
        workers = [
            *(
                self._slow_body(host, int(port), stop, _First(i, first, sent, n))
                for i in range(self.slow_bodies)
            ),
            *(self._socket(stop, _First(i, first, sent, n)) for i in range(self.slow_bodies, n)),
            self._deep(stop),
        ]
        tasks = [asyncio.ensure_future(w) for w in workers]
        # Up once the opening burst is through: every first request sent, and each either
        # answered or held by the gateway for a second.
        loop = asyncio.get_running_loop()
        while not stop.is_set() and (
            len(sent) < n or any(loop.time() - t < 1.0 for t in first.values())
        ):
            await asyncio.sleep(0.05)
        up.set()
        await stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _slow_body(self, host: str, port: int, stop: asyncio.Event, opening: _First) -> None:
        head = (
            f"POST /v1/tasks HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {self.key}\r\n"
            "Content-Type: application/json\r\nContent-Length: 65536\r\n\r\n{"
        ).encode()
        await opening.ramp(self.ramp_s)
        while not stop.is_set():
            opening.sent()
            try:
                reader, writer = await asyncio.open_connection(host, port)
            except OSError:
                self.seen["slow refused"] += 1
                opening.answered()
                await self._pause(refused=True)
                continue
            try:
                writer.write(head)
                await writer.drain()
                line = await reader.readline()  # the status line, whenever it comes
                parts = line.split()
                status = parts[1].decode() if len(parts) > 1 else "closed"
            except OSError:
                status = "reset"
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            self.seen[f"slow {status}"] += 1
            opening.answered()
            await self._pause(refused=status == "429")

    async def _socket(self, stop: asyncio.Event, opening: _First) -> None:
        from websockets.asyncio.client import connect
        from websockets.exceptions import ConnectionClosed, InvalidHandshake

        url = self.url.replace("http", "ws", 1) + "/v1/tasks/anything/events"
        await opening.ramp(self.ramp_s)
        while not stop.is_set():
            code: int | str = "none"
            opening.sent()
            try:
                async with connect(url, open_timeout=30) as ws:
                    opening.answered()  # accepted: held until its key deadline
                    await ws.recv()  # nothing comes: it waits for the close
            except ConnectionClosed as closed:
                code = closed.rcvd.code if closed.rcvd is not None else "none"
            except (InvalidHandshake, OSError, TimeoutError):
                code = "refused"
            self.seen[f"socket {code}"] += 1
            opening.answered()
            await self._pause(refused=code in (1013, "refused"))

    async def _pause(self, *, refused: bool) -> None:
        await asyncio.sleep((self.retry_refused_s if refused else 1.0) * random.uniform(0.5, 1.5))

    async def _deep(self, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "Application/JSON"}
        async with httpx.AsyncClient(base_url=self.url, timeout=30) as client:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    answer = await client.post("/v1/tasks", content=DEEP, headers=headers)
                    self.seen[f"deep {answer.status_code}"] += 1
                await asyncio.sleep(1.0 / self.deep_per_s)


@dataclass
class _First:
    """Tracks one worker's first request for `Attack._main` (later ones change nothing)."""

    worker: int
    pending: dict[int, float]
    sent_by: set[int]
    of: int = 1

    async def ramp(self, ramp_s: float) -> None:
        """Wait this worker's turn to open: the workers open evenly over `ramp_s`."""
        await asyncio.sleep(ramp_s * self.worker / self.of)

    def sent(self) -> None:
        if self.worker not in self.sent_by:
            self.sent_by.add(self.worker)
            self.pending[self.worker] = asyncio.get_running_loop().time()

    def answered(self) -> None:
        self.pending.pop(self.worker, None)


def timed_calls(http: httpx.Client, path: str, n: int) -> list[float]:
    """Seconds each of `n` sequential `GET path` took (every one must answer 200)."""
    took = []
    for _ in range(n):
        started = time.perf_counter()
        answer = http.get(path)
        took.append(time.perf_counter() - started)
        if answer.status_code != 200:
            raise AssertionError(f"`GET {path}` answered {answer.status_code}: {answer.text}")
    return took


@dataclass(frozen=True)
class Comparison:
    """The victim's latencies in quiet and noisy phases of one run."""

    quiet: list[float]
    noisy: list[float]
    seen: dict[str, int]

    def ratio(self, q: float = 0.99) -> float:
        """The noisy `q` quantile over the quiet one."""
        return percentile(self.noisy, q) / percentile(self.quiet, q)

    def lines(self) -> list[str]:
        shown = []
        for name, values in (("quiet", self.quiet), ("noisy", self.noisy)):
            quantiles = ", ".join(
                f"p{100 * q:g} {1000 * percentile(values, q):.1f} ms" for q in (0.5, 0.9, 0.99)
            )
            shown.append(f"{name}: {len(values)} calls, {quantiles}")
        shown.append(f"p99 ratio noisy/quiet: {self.ratio():.2f} (goal <= 2)")
        shown.append(f"the attacker saw: {dict(sorted(self.seen.items()))}")
        return shown


def compare(
    url: str, attacker_key: str, victim_key: str, *, calls: int = 150, rounds: int = 2
) -> Comparison:
    """Time the victim's calls in `rounds` quiet and noisy phases, alternating."""
    victim = {"Authorization": f"Bearer {victim_key}"}
    with httpx.Client(base_url=url, timeout=30, headers=victim) as http:
        accepted = http.post("/v1/tasks", json={"template": "echo_fanout", "items": ["own"]})
        if accepted.status_code != 202:
            raise AssertionError(f"the victim's task was refused: {accepted.text}")
        path = f"/v1/tasks/{accepted.json()['task_id']}"
        timed_calls(http, path, 30)  # warm
        quiet: list[float] = []
        noisy: list[float] = []
        attack = Attack(url, attacker_key)
        for _ in range(rounds):
            quiet += timed_calls(http, path, calls)
            with attack.running():
                noisy += timed_calls(http, path, calls)
    return Comparison(quiet, noisy, dict(attack.seen))


if __name__ == "__main__":
    url, key, slow, deep, sockets = sys.argv[1:6]
    Attack(url, key, int(slow), float(deep), int(sockets)).run_here()
