"""`POST /v1/tasks` latency through the gateway against a bare Serve endpoint, same run.

Both sides are FastAPI ingresses on the same Serve proxy, with one replica each and the
same `max_ongoing_requests`; the bare one answers a constant 202. Clients (50 by default,
each sending its requests one after another on one kept-alive connection, opened by an
untimed first request) alternate between the two sides in rounds, so both see the same
machine. The gateway's requests submit real tasks (one no-op
sub-task each, from the testing catalog) that the orchestrator plans, persists and runs;
each gateway round ends when its tasks have finished, so no round pays for another's.

    python bench/gateway.py [--clients 50] [--requests 2000] [--rounds 4]

Prints p50 and p99 for each side and their ratios (goal: gateway p99 <= 1.3 x bare).
"""

import argparse
import asyncio
import os
import secrets
import socket
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _cpu import cpu_by_role

from swarm_ray.gateway import GatewayConfig, build_app


def _bare_app() -> Any:
    from fastapi import FastAPI
    from ray import serve

    app = FastAPI()

    @serve.deployment(ray_actor_options={"num_cpus": 0.1})
    @serve.ingress(app)
    class Bare:
        @app.post("/v1/tasks", status_code=202)
        async def submit(self, body: dict[str, Any]) -> dict[str, str]:
            return {"task_id": "constant", "state": "accepted"}

    return Bare


async def _round(url: str, headers: dict[str, str], clients: int, n: int) -> list[float]:
    latencies: list[float] = []
    counter = iter(range(n))

    async def client() -> None:
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as http:
            # Connect first, untimed: the figures are of requests, not of TCP set-up.
            await http.post("/v1/tasks", json={"template": "noop_fanout", "items": [-1]})
            for i in counter:
                started = time.perf_counter()
                response = await http.post(
                    "/v1/tasks", json={"template": "noop_fanout", "items": [i]}
                )
                latencies.append(time.perf_counter() - started)
                if response.status_code != 202:
                    raise RuntimeError(f"{url}: {response.status_code} {response.text[:200]}")

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies


_ROLES = ("Orchestrator", "ProxyActor", "ServeReplica:gateway", "ServeReplica:bare", "SubAgent")


def _cpu_by_role() -> dict[str, float]:
    """CPU seconds so far of this machine's Ray processes, by role (empty without /proc)."""
    found = cpu_by_role(_ROLES)
    if "driver" in found:
        found["load generator"] = found.pop("driver")
    return found


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000, help="per side")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    import ray
    from ray import serve

    import swarm_ray

    state = Path(tempfile.mkdtemp(prefix="swarm-bench-gateway-"))
    key = secrets.token_urlsafe(24)
    (state / "keys").write_text(key + "\n")
    os.environ.setdefault("SWARM_RAY_AUDIT_DEBUG_SAMPLE", "0.01")
    started = time.perf_counter()
    swarm = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=state,
        name="bench-gateway",
        include_dashboard=False,
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    config = GatewayConfig(
        orchestrator="bench-gateway",
        catalogs=("swarm_ray.testing:testing_catalog",),
        state_dir=str(state),
        api_keys_file=str(state / "keys"),
        max_ongoing_requests=200,
    )
    serve.run(build_app(config), name="gateway", route_prefix="/")
    serve.run(
        _bare_app().options(max_ongoing_requests=200).bind(), name="bare", route_prefix="/bare"
    )
    print(f"cold start (Ray, orchestrator, Serve, two apps): {time.perf_counter() - started:.1f} s")

    sides = {
        "gateway": (f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {key}"}),
        "bare": (f"http://127.0.0.1:{port}/bare", {}),
    }
    for url, headers in sides.values():  # warm both up
        asyncio.run(_round(url, headers, args.clients, 200))
    latencies: dict[str, list[float]] = {name: [] for name in sides}
    spent: dict[str, dict[str, float]] = {name: {} for name in sides}
    wall: dict[str, float] = dict.fromkeys(sides, 0.0)
    per_round = max(1, args.requests // args.rounds)
    for _ in range(args.rounds):
        for name, (url, headers) in sides.items():
            before, clock = _cpu_by_role(), time.perf_counter()
            latencies[name] += asyncio.run(_round(url, headers, args.clients, per_round))
            wall[name] += time.perf_counter() - clock
            # The gateway's tasks finish before the next round, so neither side pays for
            # the other's work: CPU per request below counts that drain to the gateway.
            while swarm.info()["open_tasks"]:
                time.sleep(0.05)
            for role, seconds in _cpu_by_role().items():
                spent[name][role] = spent[name].get(role, 0.0) + seconds - before.get(role, 0.0)

    print(f"\n{args.clients} concurrent clients, {per_round * args.rounds} requests per side")
    quantiles = (0.5, 0.9, 0.95, 0.99, 0.999)
    print(f"{'side':<8} " + " ".join(f"{f'p{100 * q:g} ms':>10}" for q in quantiles) + "   mean ms")
    for name, values in latencies.items():
        print(
            f"{name:<8} "
            + " ".join(f"{1000 * _pct(values, q):10.1f}" for q in quantiles)
            + f" {1000 * statistics.fmean(values):9.1f}"
        )
    print("\nthroughput and CPU per request by process (while that side ran)")
    for name, values in latencies.items():
        roles = ", ".join(
            f"{role} {1000 * seconds / len(values):.2f} ms"
            for role, seconds in sorted(spent[name].items(), key=lambda kv: -kv[1])
            if seconds > 0.01
        )
        print(f"{name:<8} {len(values) / wall[name]:6.0f} req/s; {roles or 'no /proc'}")
    gw, bare = latencies["gateway"], latencies["bare"]
    print(f"\np50 ratio gateway/bare: {_pct(gw, 0.5) / _pct(bare, 0.5):.2f}")
    print(f"p99 ratio gateway/bare: {_pct(gw, 0.99) / _pct(bare, 0.99):.2f}  (goal <= 1.3)")
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
