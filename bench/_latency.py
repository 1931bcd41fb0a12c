"""What the latency benchmarks share: a percentile, closed- and open-loop load, a gateway.

`bench/gateway.py`, `bench/noisy.py` and `bench/scale.py` each start the same thing (a
local swarm, Serve on a free loopback port, the gateway with an API key per principal):
one function does it, so the three measure the same set-up.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

import swarm_ray
from swarm_ray.gateway import GatewayConfig, build_app


def percentile(values: Sequence[float], q: float) -> float:
    """The `q` quantile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def closed_round(
    url: str, headers: list[dict[str, str]], n: int
) -> tuple[list[float], list[str]]:
    """`n` no-op tasks sent by a client per entry of `headers`, each sending its next
    when the last is answered, on one kept-alive connection opened by an untimed first
    request: latencies of the 202s, and the 422s (a limit refused the task)."""
    latencies: list[float] = []
    refused: list[str] = []
    counter = iter(range(n))

    def check(response: httpx.Response) -> bool:
        if response.status_code == 422:  # a limit refused it: counted apart
            refused.append(response.text[:200])
            return False
        if response.status_code != 202:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
        return True

    async def client(own: dict[str, str]) -> None:
        async with httpx.AsyncClient(base_url=url, headers=own, timeout=120) as http:
            # Connect first, untimed: the figures are of requests, not of TCP set-up.
            check(await http.post("/v1/tasks", json={"template": "noop_fanout", "items": [-1]}))
            for i in counter:
                started = time.perf_counter()
                response = await http.post(
                    "/v1/tasks", json={"template": "noop_fanout", "items": [i]}
                )
                elapsed = time.perf_counter() - started
                if check(response):
                    latencies.append(elapsed)

    await asyncio.gather(*(client(h) for h in headers))
    return latencies, refused


async def open_round(
    url: str, headers: list[dict[str, str]], rate: float, seconds: float
) -> tuple[list[float], list[str]]:
    """Send `rate` requests a second for `seconds` on a fixed schedule, whatever the
    answers; latencies of the 202s from each request's scheduled time, and the 422s."""
    latencies: list[float] = []
    refused: list[str] = []
    limits = httpx.Limits(max_connections=len(headers), max_keepalive_connections=len(headers))
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        # Open the connections first, untimed.
        await asyncio.gather(
            *(
                http.post("/v1/tasks", json={"template": "noop_fanout", "items": [-1]}, headers=h)
                for h in headers
            )
        )

        async def one(i: int, due: float) -> None:
            response = await http.post(
                "/v1/tasks",
                json={"template": "noop_fanout", "items": [i]},
                headers=headers[i % len(headers)],
            )
            elapsed = time.perf_counter() - due
            if response.status_code == 422:
                refused.append(response.text[:200])
            elif response.status_code != 202:
                raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")
            else:
                latencies.append(elapsed)

        sent: list[asyncio.Task[None]] = []
        start = time.perf_counter()
        for i in range(max(1, round(rate * seconds))):
            due = start + i / rate
            pause = due - time.perf_counter()
            if pause > 0:
                await asyncio.sleep(pause)
            sent.append(asyncio.create_task(one(i, due)))
        await asyncio.gather(*sent)
    return latencies, refused


@dataclass(frozen=True)
class Gateway:
    """A running gateway: the swarm behind it, its URL, and each principal's key."""

    swarm: swarm_ray.SwarmClient
    url: str
    keys: dict[str, str]
    state: Path


def start_gateway(
    name: str,
    principals: Sequence[str],
    *,
    catalog: str = "swarm_ray.testing:testing_catalog",
    gateway_options: dict[str, Any] | None = None,
    **connect: Any,
) -> Gateway:
    """A swarm named `name` (Ray started here), Serve on a free loopback port, and the
    gateway at `/`, with one API key for each of `principals`.

    `gateway_options` go to `GatewayConfig`; `connect` to `swarm_ray.connect`.
    """
    from ray import serve

    state = Path(tempfile.mkdtemp(prefix=f"swarm-{name}-"))
    keys = {who: secrets.token_urlsafe(24) for who in principals}
    (state / "keys").write_text("".join(f"{who}:{key}\n" for who, key in keys.items()))
    connect.setdefault("include_dashboard", False)
    swarm = swarm_ray.connect(catalogs=[catalog], state_dir=state, name=name, **connect)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    config = GatewayConfig(
        orchestrator=name,
        catalogs=(catalog,),
        state_dir=str(state),
        api_keys_file=str(state / "keys"),
        **(gateway_options or {}),
    )
    serve.run(build_app(config), name="gateway", route_prefix="/")
    return Gateway(swarm, f"http://127.0.0.1:{port}", keys, state)
