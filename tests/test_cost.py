"""Money on real parts: llama.cpp's OpenAI server, priced, under a task's cost budget.

A fan-out of 50 chat sub-tasks goes through the orchestrator and a real Serve replica to
llama-cpp-python's own server (SmolLM2); the endpoint's prices make each call's cost,
and the task's `budget.max_cost` stops it within one attempt's cost of the cap.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarm_ray import TaskState
from tests.cost_catalog import CHAT

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]

PRICES = {"prompt_per_million": 1_000_000.0, "completion_per_million": 3_000_000.0}
"""One unit a prompt token, three a completion token: each call costs tens of units."""


def test_a_fan_out_of_fifty_stops_within_one_attempts_cost_of_its_budget(
    ray_cluster: None, llama_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import swarm_ray
    from swarm_ray.cli import main

    config = tmp_path / "llm.yaml"
    endpoint = {"kind": "openai", "base_url": llama_server, "prices": PRICES}
    settings = {"endpoints": {"llama": endpoint}, "capabilities": {CHAT: "llama"}}
    config.write_text(json.dumps(settings))  # JSON is YAML
    client = swarm_ray.connect(
        catalogs=["tests.cost_catalog:cost_catalog"],
        state_dir=tmp_path / "state",
        name="swarm-cost",
        env={"SWARM_RAY_LLM_CONFIG": str(config)},
    )
    try:
        one = client.run(template="cost_fanout", items=["Say hello."])
        assert one.machine.state is TaskState.COMPLETED, one.error
        used = client.status(one.task_id).usage
        assert used is not None and used.total_tokens > 0
        expected = used.prompt_tokens * 1.0 + used.completion_tokens * 3.0
        assert used.cost == pytest.approx(expected)  # the endpoint's prices, per token

        prompts = [f"Say the number {n}." for n in range(50)]
        cap = 5 * used.cost
        record = client.run(template="cost_fanout", items=prompts, budget={"max_cost": cap})
        assert record.machine.state is TaskState.FAILED
        assert record.error is not None and record.error.code == "budget_exceeded"
        assert "budget.max_cost" in record.error.message
        status = client.status(record.task_id)
        assert status.usage is not None
        paid = [s for s in status.subtasks.values() if s.cost > 0]
        dearest = max(s.cost for s in paid)
        assert cap < status.usage.cost <= cap + dearest  # within one attempt's cost
        assert len(paid) < len(prompts) // 2  # stopped, not run through
        assert sum(s.cost for s in paid) == pytest.approx(status.usage.cost)
        done = [s for s in status.subtasks.values() if s.status == "succeeded"]
        assert len(done) == len(paid)  # nothing stopped was charged

        assert main(["--name", "swarm-cost", "show", record.task_id]) == 0
        shown = capsys.readouterr().out
        assert f"cost {status.usage.cost:.6g}" in shown  # what a newcomer reads
    finally:
        client.shutdown()
