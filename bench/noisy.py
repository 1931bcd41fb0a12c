"""A noisy neighbour: one tenant's status calls while another runs the slowest requests
the gateway's door accepts, against quiet phases of the same run.

The attacker (`tests/noisy_neighbour.py`) holds 250 slowly sent request bodies, sends a
JSON body nested 960 deep five times a second with `Content-Type: Application/JSON`, and
keeps 70 WebSockets open that never present a key; each held request is reopened when
the gateway answers it. The victim, another principal, calls `GET /v1/tasks/{id}` on a
task of its own, one call after another; quiet and noisy phases alternate, so both see
the same machine. The gateway runs with its default limits, behind a Serve proxy with
the gateway's proxy middleware (`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`).

    python bench/noisy.py [--calls 1000] [--rounds 3]
    python bench/noisy.py --quick      # CI: 200 calls a phase, 2 rounds

Prints p50, p90 and p99 of each phase, what the attacker was answered, and the p99 ratio
noisy / quiet (goal <= 2).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _quick import need


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000, help="victim's calls per phase")
    parser.add_argument("--rounds", type=int, default=3, help="quiet and noisy phases each")
    parser.add_argument("--quick", action="store_true", help="CI: 200 calls a phase, 2 rounds")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.rounds = 200, 2

    # Before Ray starts: its processes, the proxy among them, take the environment.
    os.environ["RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH"] = "swarm_ray.gateway:proxy_middlewares"
    os.environ.setdefault("SWARM_RAY_AUDIT_DEBUG_SAMPLE", "0.01")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for `tests.noisy_neighbour`
    import ray
    from _latency import start_gateway
    from ray import serve

    from tests.noisy_neighbour import compare

    started = time.perf_counter()
    gateway = start_gateway("bench-noisy", ("attacker", "victim"))
    keys, url = gateway.keys, gateway.url
    print(f"cold start (Ray, orchestrator, Serve): {time.perf_counter() - started:.1f} s")

    run = compare(url, keys["attacker"], keys["victim"], calls=args.calls, rounds=args.rounds)
    need(run.quiet, "the quiet phases' latencies")
    need(run.noisy, "the noisy phases' latencies")
    need(run.seen.get("deep 422"), "the attacker's deep bodies refused with 422")
    print(f"\n{args.rounds} rounds of {args.calls} victim calls per phase")
    print("\n".join(run.lines()))
    gateway.swarm.shutdown()
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
