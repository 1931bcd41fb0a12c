"""50 concurrent tool-using sub-agents against an endpoint limited to 10 requests/s.

The provider is the project's stub OpenAI server in its own process, answering 429 with
`Retry-After` above `--rps` requests in any second (`python -m swarm_ray.testing.llm_stubs`).
The swarm runs `wide_research` over `--agents` items; each row agent is a tool agent
whose (scripted) model calls the demo MCP server's `add` twice, answers, then gives its
row: four model calls per agent. Two runs side by side:

- **budget**: `SWARM_RAY_LLM_RPM = 60 x rps`: every call waits for a slot from the
  endpoint's one budget actor;
- **retries only**: no budget; each call retries its 429s (honouring `Retry-After`).

Goals for the budget run: no sub-agent fails, throughput at least 0.9 of the limit, no
sub-agent starves (the longest wait for a slot is printed, and the spread of the agents'
finishing times).

    python bench/llm_budget.py                # 50 agents, 10 req/s
    python bench/llm_budget.py --quick        # CI: 10 agents, 10 req/s

The budget's own figures (waits for a slot) come from the orchestrator's `metrics()`,
which gathers every reporter actor's state by family (`llm_budgets` for the endpoint
budgets, `swarm_ray.runtime._upkeep.reported_states`); a run with no budget actor has no
such family.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _quick import need

SCRIPT = [
    {"tool": "demo__add", "arguments": {"a": 1, "b": 2}},
    {"tool": "demo__add", "arguments": {"a": 3, "b": 4}},
    {"tool": "final", "arguments": {"answer": "sum found"}},
]
ROW_SCHEMA = {
    "type": "object",
    "properties": {"item": {"type": "string"}, "sum": {"type": "integer"}},
    "required": ["item", "sum"],
}


def _stub(port: int, rps: float, latency_s: float) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "swarm_ray.testing.llm_stubs", "--port", str(port)]
    command += ["--rps", str(rps), "--latency", str(latency_s)]
    server = subprocess.Popen(command)
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/stats", timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError("stub server did not start")


def _params() -> dict[str, Any]:
    question = f"Add up.\nSCRIPT: {json.dumps(SCRIPT)}\n"
    question += 'ROW: {"item": "{item}", "sum": "$result"}'
    return {"question": question, "row_schema": ROW_SCHEMA, "mcp_servers": ["demo"]}


def _run(swarm: Any, port: int, agents: int, name: str) -> dict[str, Any]:
    import ray

    base = f"http://127.0.0.1:{port}"
    before = httpx.get(f"{base}/stats").json()
    items = [f"item-{n:03d}" for n in range(agents)]
    started = time.time()
    record = swarm.run(template="wide_research", items=items, params=_params())
    elapsed = time.time() - started
    after = httpx.get(f"{base}/stats").json()
    output = swarm.task(record.task_id).output() or {}
    rows = [
        e.result
        for e in record.log
        if getattr(e, "kind", "") == "done" and e.result.subtask_id.startswith("research[")
    ]
    need(rows, f"{name}: agents' run times (no research row finished)")
    spans = sorted(r.timings.finished_at - r.timings.started_at for r in rows)
    first = min(r.timings.started_at for r in rows)
    last = max(r.timings.finished_at for r in rows)
    calls = after["ok"] - before["ok"]
    # Present only while a budget actor answers: none in the run without a budget.
    states = ray.get(swarm.actor.metrics.remote()).get("llm_budgets", [])
    if name == "budget":
        need(states, "the budget's waits (no `llm_budgets` state in the orchestrator's metrics)")
    return {
        "run": name,
        "state": str(record.machine.state),
        "rows": len(output.get("rows", [])),
        "failed_attempts": sum(getattr(e, "kind", "") == "failed" for e in record.log),
        "calls": calls,
        "rate_limited_seen": after["rate_limited"] - before["rate_limited"],
        "seconds": round(elapsed, 2),
        "calls_per_s": round(calls / (last - first), 2),
        "agent_seconds": {
            "min": round(spans[0], 2),
            "median": round(statistics.median(spans), 2),
            "max": round(spans[-1], 2),
        },
        "budget": states[0] if states else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--rps", type=float, default=10.0, help="the provider's limit")
    parser.add_argument("--latency", type=float, default=0.05, help="model seconds per call")
    parser.add_argument("--json-out", type=Path, default=None)
    parser.add_argument("--quick", action="store_true", help="CI: 10 agents")
    args = parser.parse_args()
    if args.quick:
        args.agents = 10

    from swarm_ray.testing.llm_stubs import free_port

    port = free_port()
    server = _stub(port, args.rps, args.latency)
    settings = Path(tempfile.mkdtemp(prefix="llm-budget-")) / "llm.yaml"
    settings.write_text(
        f"mcp_servers:\n  demo: {{command: [{sys.executable}, -m, swarm_ray.testing.mcp_demo]}}\n"
    )
    results = []
    try:
        for name, rpm in (("budget", 60 * args.rps), ("retries only", None)):
            results.append(_one(name, rpm, port, args.agents, settings))
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(f"{args.agents} sub-agents, provider limit {args.rps:g} req/s, 4 model calls each")
    for r in results:
        budget = r["budget"] or {}
        print(
            f"  {r['run']:>12}: {r['state']}, rows {r['rows']}/{args.agents} "
            f"(failed attempts {r['failed_attempts']}), {r['calls']} calls in {r['seconds']} s, "
            f"{r['calls_per_s']} calls/s = {r['calls_per_s'] / args.rps:.2f} of the limit, "
            f"429s seen {r['rate_limited_seen']}, "
            f"agent run time min/median/max {r['agent_seconds']['min']}/"
            f"{r['agent_seconds']['median']}/{r['agent_seconds']['max']} s"
            + (
                f", longest wait for a slot {budget.get('max_wait_s')} s "
                f"(mean {budget.get('mean_wait_s')} s)"
                if budget
                else ""
            )
        )
    budget = results[0]
    print(
        f"  goals (budget run): rows {budget['rows']}/{args.agents} with "
        f"{budget['failed_attempts']} failed attempts (goal: all, none), "
        f"{budget['calls_per_s'] / args.rps:.2f} of the limit (goal >= 0.9)"
    )
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(results, indent=2, default=str))


def _one(name: str, rpm: float | None, port: int, agents: int, settings: Path) -> dict[str, Any]:
    """One run on a fresh local cluster whose environment selects the stub endpoint."""
    import ray

    import swarm_ray

    os.environ["SWARM_RAY_LLM_URL"] = f"http://127.0.0.1:{port}/v1"
    os.environ["SWARM_RAY_LLM_CONFIG"] = str(settings)
    os.environ.pop("SWARM_RAY_LLM_RPM", None)
    if rpm is not None:
        os.environ["SWARM_RAY_LLM_RPM"] = str(rpm)
    state = tempfile.mkdtemp(prefix="llm-budget-state-")
    swarm = swarm_ray.connect(
        catalogs=["swarm_ray.llm:llm_catalog"], state_dir=state, include_dashboard=False
    )
    try:
        # deploys the row agents and starts the MCP server: not part of the measure
        swarm.run(template="wide_research", items=["warm-up"], params=_params())
        return _run(swarm, port, agents, name)
    finally:
        swarm.shutdown()
        ray.shutdown()


if __name__ == "__main__":
    main()
