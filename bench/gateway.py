"""`POST /v1/tasks` latency through the gateway against a bare Serve endpoint, same run.

Both sides are FastAPI ingresses on the same Serve proxy, with one replica each and the
same `max_ongoing_requests`; the bare one answers a constant 202. Clients (50 by default,
each sending its requests one after another on one kept-alive connection, opened by an
untimed first request) alternate between the two sides in rounds, so both see the same
machine. Each client is its own principal with its own API key, as separate callers
are: the per-principal open-task limit (`SWARM_RAY_LIMIT_MAX_OPEN_TASKS`) applies to each
alone. The gateway's requests submit real tasks (one no-op sub-task each, from the
testing catalog) that the orchestrator plans, persists and runs; each gateway round ends
when its tasks have finished, so no round pays for another's.

    python bench/gateway.py [--clients 50] [--requests 2000] [--rounds 4]
    python bench/gateway.py --quick      # CI: 400 requests a side in 2 rounds

Prints p50 and p99 for each side and their ratios (goals: gateway p50 <= 1.2 x bare and
p99 <= 1.3 x bare, measured in the same run), and CPU per request by process (goal: the
orchestrator's near 2 ms). A 422 answer (a limit refused the task) is counted apart and
left out of the latencies; any other answer but 202 stops the run.
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
from _quick import need

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


async def _round(url: str, headers: list[dict[str, str]], n: int) -> tuple[list[float], list[str]]:
    """One round: a client per entry of `headers`; latencies of the 202s, and the 422s."""
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
    parser.add_argument("--warm", type=int, default=200, help="untimed requests per side")
    parser.add_argument(
        "--quick", action="store_true", help="CI: 400 requests a side, 2 rounds, 100 warm"
    )
    args = parser.parse_args()
    if args.quick:
        args.requests, args.rounds, args.warm = 400, 2, 100

    import ray
    from ray import serve

    import swarm_ray

    state = Path(tempfile.mkdtemp(prefix="swarm-bench-gateway-"))
    # One principal per client, as separate callers are (the open-task limit is each's).
    keys = [secrets.token_urlsafe(24) for _ in range(args.clients)]
    (state / "keys").write_text("".join(f"client{i}:{k}\n" for i, k in enumerate(keys)))
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
        "gateway": (f"http://127.0.0.1:{port}", [{"Authorization": f"Bearer {k}"} for k in keys]),
        "bare": (f"http://127.0.0.1:{port}/bare", [{}] * args.clients),
    }
    for url, headers in sides.values():  # warm both up
        asyncio.run(_round(url, headers, args.warm))
    latencies: dict[str, list[float]] = {name: [] for name in sides}
    refused: dict[str, list[str]] = {name: [] for name in sides}
    spent: dict[str, dict[str, float]] = {name: {} for name in sides}
    wall: dict[str, float] = dict.fromkeys(sides, 0.0)
    per_round = max(1, args.requests // args.rounds)
    for _ in range(args.rounds):
        for name, (url, headers) in sides.items():
            before, clock = _cpu_by_role(), time.perf_counter()
            answered, turned_away = asyncio.run(_round(url, headers, per_round))
            latencies[name] += answered
            refused[name] += turned_away
            wall[name] += time.perf_counter() - clock
            # The gateway's tasks finish before the next round, so neither side pays for
            # the other's work: CPU per request below counts that drain to the gateway.
            while swarm.info()["open_tasks"]:
                time.sleep(0.05)
            for role, seconds in _cpu_by_role().items():
                spent[name][role] = spent[name].get(role, 0.0) + seconds - before.get(role, 0.0)

    print(f"\n{args.clients} concurrent clients, {per_round * args.rounds} requests per side")
    for name, answers in refused.items():
        if answers:
            print(f"{name}: {len(answers)} answered 422, left out of the figures: {answers[0]}")
    for name, values in latencies.items():
        need(values, f"{name} latencies (every request was refused)")
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
    print(f"\np50 ratio gateway/bare: {_pct(gw, 0.5) / _pct(bare, 0.5):.2f}  (goal <= 1.2)")
    print(f"p99 ratio gateway/bare: {_pct(gw, 0.99) / _pct(bare, 0.99):.2f}  (goal <= 1.3)")
    orchestrator = need(spent["gateway"].get("Orchestrator"), "the orchestrator's CPU (/proc)")
    print(f"orchestrator CPU per request: {1000 * orchestrator / len(gw):.2f} ms  (goal near 2)")
    # Each client waits for its answer before it asks again, so with the cores saturated
    # p50 is about clients / throughput: the p50 ratio follows the CPU a request costs.
    cpu = {name: sum(spent[name].values()) / len(latencies[name]) for name in sides}
    rate = {name: len(latencies[name]) / wall[name] for name in sides}
    print(
        f"CPU per request, the processes above together: gateway {1000 * cpu['gateway']:.2f} "
        f"ms, bare {1000 * cpu['bare']:.2f} ms ({cpu['gateway'] / cpu['bare']:.2f}x); "
        f"throughput bare / gateway {rate['bare'] / rate['gateway']:.2f}x ({args.clients} "
        f"clients, each waiting for its answer, on {os.cpu_count()} cores: when they are "
        "saturated, the p50 ratio follows these)"
    )
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
