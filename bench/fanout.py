"""Fan-out overhead: N no-op sub-tasks through swarm-ray vs the same N bare Ray tasks.

Run: python bench/fanout.py [--sizes 100 500] [--repeat 3]

Same run, same local cluster, warm (Ray started, actors created) before the clock starts.
Prints the time per sub-task of each, swarm-ray's overhead per sub-task above a bare Ray
task, and the ratio. LangGraph's `Send` fan-out of the same N no-op nodes (in one process,
no Ray) is printed beside them for scale. Goal: at most 1 ms per sub-task above bare Ray.
"""

from __future__ import annotations

import argparse
import operator
import statistics
import tempfile
import time
from typing import Annotated, Any, TypedDict

import ray

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


def time_langgraph(n: int) -> float | None:
    try:
        from langgraph.graph import END, START, StateGraph
        from langgraph.types import Send
    except ImportError:
        return None

    def fan(state: State) -> list[Any]:
        return [Send("work", {"item": i}) for i in state["items"]]

    def work(state: dict[str, Any]) -> dict[str, list[int]]:
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
    args = parser.parse_args()

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
    for n in args.sizes:
        time_bare(n)  # warm: enough idle workers for this N
        time_swarm(client, n)
        bare = statistics.median(time_bare(n) for _ in range(args.repeat))
        swarm = statistics.median(time_swarm(client, n) for _ in range(args.repeat))
        lg_times = [t for t in (time_langgraph(n) for _ in range(args.repeat)) if t is not None]
        lg = f"{statistics.median(lg_times) / n * 1000:18.3f}" if lg_times else f"{'n/a':>18}"
        print(
            f"{n:>5} {bare / n * 1000:17.3f} {swarm / n * 1000:18.3f} "
            f"{(swarm - bare) / n * 1000:12.3f} {swarm / bare:6.2f} {lg}"
        )
    client.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
