"""Wide research against a real OpenAI-compatible endpoint: the planets, a real model.

Starts a local cluster whose LLM capabilities use the endpoint (`SWARM_RAY_LLM_URL`),
registers the project's demo MCP server as `demo` (`SWARM_RAY_LLM_CONFIG`), and runs the
`wide_research` template over the eight planets: one tool agent per planet, which may
call the MCP tool `planet`, answering a row `{name, moons, diameter_km}`. Prints the
table, how many cells match the tool's facts, the time, tokens and the endpoint's
budget. The values are the model's: a small model gets many wrong; the shape is
checked by the swarm (every row validates against the schema, or the row is missing).

    python bench/wide_research_live.py --url http://127.0.0.1:8000/v1    # vLLM, hosted...
    python bench/wide_research_live.py --llama                           # CPU: llama.cpp
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from swarm_ray.testing.mcp_demo import PLANETS

ROW_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "moons": {"type": "integer"},
        "diameter_km": {"type": "integer"},
    },
    "required": ["name", "moons", "diameter_km"],
}
QUESTION = (
    "Find how many moons the planet has and its diameter in km. Call the `demo__planet` "
    "tool with the planet's name, then answer from what it returns."
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="OpenAI-compatible base URL")
    parser.add_argument("--llama", action="store_true", help="start llama.cpp's server (CPU)")
    parser.add_argument("--model", default=None, help="model name (default: the first listed)")
    parser.add_argument("--rpm", type=float, default=None, help="budget: requests per minute")
    parser.add_argument("--max-steps", type=int, default=3)
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        if args.llama:
            sys.path.insert(0, str(Path(__file__).parent))
            from llm import _llama_server  # bench/llm.py

            args.url = stack.enter_context(_llama_server(1))
        if not args.url:
            parser.error("give --url or --llama")
        run(args)


def run(args: argparse.Namespace) -> None:
    import ray

    import swarm_ray

    settings = Path(tempfile.mkdtemp(prefix="wide-live-")) / "llm.yaml"
    settings.write_text(
        f"mcp_servers:\n  demo: {{command: [{sys.executable}, -m, swarm_ray.testing.mcp_demo]}}\n"
    )
    os.environ["SWARM_RAY_LLM_URL"] = args.url
    os.environ["SWARM_RAY_LLM_CONFIG"] = str(settings)
    if args.model:
        os.environ["SWARM_RAY_LLM_MODEL"] = args.model
    if args.rpm:
        os.environ["SWARM_RAY_LLM_RPM"] = str(args.rpm)
    swarm = swarm_ray.connect(
        catalogs=["swarm_ray.llm:llm_catalog"],
        state_dir=tempfile.mkdtemp(prefix="wide-live-state-"),
        include_dashboard=False,
    )
    try:
        items = [name.capitalize() for name in PLANETS]
        params = {
            "question": QUESTION,
            "row_schema": ROW_SCHEMA,
            "mcp_servers": ["demo"],
            "max_steps": args.max_steps,
        }
        started = time.monotonic()
        record = swarm.run(template="wide_research", items=items, params=params)
        seconds = time.monotonic() - started
        output: dict[str, Any] = swarm.task(record.task_id).output() or {}
        status = swarm.task(record.task_id).status()
        metrics = ray.get(swarm.actor.metrics.remote())
    finally:
        swarm.shutdown()
        ray.shutdown()
    print(output.get("markdown", ""))
    right = sum(
        row["cells"].get("moons") == PLANETS[str(row["item"]).lower()]["moons"]
        and row["cells"].get("diameter_km") == PLANETS[str(row["item"]).lower()]["diameter_km"]
        for row in output.get("rows", [])
    )
    children = sum(1 for s in status["subtasks"].values() if "parent" in s)
    print(
        f"state {record.machine.state}: {len(output.get('rows', []))}/{len(PLANETS)} rows "
        f"({right} match the tool's facts), missing {output.get('missing')}, "
        f"{children} child sub-tasks, {seconds:.1f} s; usage {output.get('usage')}"
    )
    for budget in metrics.get("llm_budgets", []):
        print(f"budget {budget['endpoint']}: {budget}")
    for warning in status["warnings"]:
        print("warning:", warning)
    if args.json_out is not None:
        summary = {"seconds": seconds, "right": right, "output": output}
        args.json_out.write_text(json.dumps(summary, indent=2, default=str))


if __name__ == "__main__":
    main()
