"""Fan-out: what the orchestrator costs per sub-task, beside bare Ray and LangGraph.

Run: python bench/fanout.py [--sizes 100 500] [--repeat 3] [--payload-n 2000]
     python bench/fanout.py --quick      # CI: N=300 once, 500 payloads, 100 work items

Same run, same local cluster, warm (Ray started, actors created) before the clock starts.
Absolute figures differ from machine to machine, so each goal is a ratio to something
measured in the same run.

1. N no-op sub-tasks through swarm-ray against the same N bare Ray tasks: time per
   sub-task, swarm-ray's overhead above a bare task, the ratio; LangGraph's `Send` fan-out
   of the same N no-op nodes (one process, no Ray) beside them for scale.
2. Realistic payloads: N sub-tasks of 2 KB in and 2 KB out through validated models (the
   `echo_flat` template). Prints the orchestrator's own CPU per sub-task, read from /proc
   like the other benchmarks, and sub-tasks settled per second. Goal: orchestrator CPU
   per sub-task at most 0.5 x the time per bare Ray task measured in part 1 (N = the
   largest size).
3. Work that computes: 500 sub-tasks of 10 ms CPU each, through swarm-ray and through
   LangGraph's `Send` fan-out of the same work. Goal: the swarm finishes first (a ratio
   above 1).
"""

from __future__ import annotations

import argparse
import operator
import statistics
import tempfile
import time
from typing import Annotated, Any, TypedDict

import ray
from _cpu import cpu_by_role, spent
from _quick import need

import swarm_ray


@ray.remote(num_cpus=0.5)
def bare_noop(n: int) -> int:
    return n


def time_bare(n: int) -> float:
    start = time.perf_counter()
    ray.get([bare_noop.remote(i) for i in range(n)])
    return time.perf_counter() - start


def time_swarm(client: swarm_ray.SwarmClient, n: int) -> float:
    start = time.perf_counter()
    record = client.run(template="noop_fanout", items=tuple(range(n)))
    elapsed = time.perf_counter() - start
    assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
    return elapsed


class State(TypedDict):
    items: list[int]
    done: Annotated[list[int], operator.add]


def time_payloads(client: swarm_ray.SwarmClient, n: int) -> tuple[float, float]:
    """Wall seconds and orchestrator CPU seconds for N sub-tasks of 2 KB in and out."""
    items = tuple(f"{i:06d}" + "x" * 2042 for i in range(n))  # 2 KB each way
    before = cpu_by_role(["Orchestrator"])
    start = time.perf_counter()
    record = client.run(template="echo_flat", items=items)
    elapsed = time.perf_counter() - start
    used = spent(before, cpu_by_role(["Orchestrator"])).get("Orchestrator", 0.0)
    assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
    return elapsed, used


def burn(ms: float) -> None:
    until = time.thread_time() + ms / 1000
    while time.thread_time() < until:
        pass


def time_swarm_work(client: swarm_ray.SwarmClient, n: int, ms: float) -> float:
    start = time.perf_counter()
    items = tuple(str(i) for i in range(n))
    record = client.run(template="echo_flat", items=items, params={"cpu_ms": ms})
    elapsed = time.perf_counter() - start
    assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
    return elapsed


def time_langgraph(n: int, ms: float = 0.0) -> float | None:
    """LangGraph's `Send` fan-out of N nodes that compute for `ms` each (0: no-ops)."""
    try:
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Send
    except ImportError:
        return None

    def fan(state: State) -> list[Any]:
        return [Send("work", {"item": i}) for i in state["items"]]

    def work(state: dict[str, Any]) -> dict[str, list[int]]:
        if ms:
            burn(ms)
        return {"done": [state["item"]]}

    graph = StateGraph(State)
    graph.add_node("work", work)
    graph.add_conditional_edges(START, fan, ["work"])
    graph.add_edge("work", END)
    app = graph.compile()
    start = time.perf_counter()
    out = app.invoke({"items": list(range(n)), "done": []})
    elapsed = time.perf_counter() - start
    assert len(out["done"]) == n
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--payload-n", type=int, default=2000)
    parser.add_argument("--work-n", type=int, default=500)
    parser.add_argument("--work-ms", type=float, default=10.0)
    parser.add_argument(
        "--quick", action="store_true", help="CI: N=300 once, 500 payloads, 100 work items"
    )
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.repeat, args.payload_n, args.work_n = [300], 1, 500, 100

    cold = time.perf_counter()
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=tempfile.mkdtemp(prefix="swarm-bench-"),
        name="swarm-bench",
        include_dashboard=False,
        # Logical CPUs: the swarm's pooled agents hold theirs while bare tasks run beside.
        num_cpus=4,
    )
    time_swarm(client, 10)
    time_bare(10)
    print(f"cold start (ray.init + orchestrator + first task): {time.perf_counter() - cold:.2f} s")
    print(
        f"{'N':>5} {'bare ray ms/task':>17} {'swarm ms/sub-task':>18} {'overhead ms':>12} "
        f"{'ratio':>6} {'langgraph ms/node':>18}"
    )
    bare_ms = 0.0  # per bare Ray task, at the largest N: what the CPU goal is a ratio to
    for n in args.sizes:
        time_bare(n)  # warm: enough idle workers for this N
        time_swarm(client, n)
        bare = statistics.median(time_bare(n) for _ in range(args.repeat))
        bare_ms = bare / n * 1000
        swarm = statistics.median(time_swarm(client, n) for _ in range(args.repeat))
        lg_times = [t for t in (time_langgraph(n) for _ in range(args.repeat)) if t is not None]
        lg = f"{statistics.median(lg_times) / n * 1000:18.3f}" if lg_times else f"{'n/a':>18}"
        print(
            f"{n:>5} {bare / n * 1000:17.3f} {swarm / n * 1000:18.3f} "
            f"{(swarm - bare) / n * 1000:12.3f} {swarm / bare:6.2f} {lg}"
        )
    time_payloads(client, 100)  # warm the echo agents
    print(f"\n2 KB in, 2 KB out, validated models, N={args.payload_n}:")
    for _ in range(args.repeat):
        wall, cpu = time_payloads(client, args.payload_n)
        cpu_ms = need(cpu or None, "the orchestrator's CPU (/proc)") / args.payload_n * 1000
        print(
            f"  orchestrator CPU {cpu_ms:.3f} ms/sub-task = {cpu_ms / bare_ms:.2f} x a bare "
            f"Ray task's {bare_ms:.3f} ms (goal <= 0.5), "
            f"{args.payload_n / wall:,.0f} sub-tasks settled/s, wall {wall:.2f} s"
        )
    print(f"\n{args.work_n} sub-tasks of {args.work_ms:.0f} ms CPU each:")
    time_swarm_work(client, 50, args.work_ms)
    swarm_times = [time_swarm_work(client, args.work_n, args.work_ms) for _ in range(args.repeat)]
    lg_times = [
        t for t in (time_langgraph(args.work_n, args.work_ms) for _ in range(args.repeat)) if t
    ]
    swarm_wall = statistics.median(swarm_times)
    line = f"  swarm-ray {swarm_wall:.2f} s"
    lg_wall = statistics.median(need(lg_times, "LangGraph's time (is langgraph installed?)"))
    line += f", LangGraph Send {lg_wall:.2f} s: swarm {lg_wall / swarm_wall:.2f}x faster"
    print(line + f" (goal > 1; work alone: {args.work_n * args.work_ms / 1000:.1f} CPU-s)")
    client.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
