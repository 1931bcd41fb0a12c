"""Money on real parts: llama.cpp's OpenAI server, priced, under budgets.

A fan-out of 50 chat sub-tasks goes through the orchestrator and a real Serve replica to
llama-cpp-python's own server (SmolLM2); the endpoint's prices make each call's cost,
and the task's `budget.max_cost` stops it within one attempt's cost of the cap. A
principal's daily budget, set by the operator, stops its tasks and refuses new ones, and
holds across an orchestrator restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import swarm_ray
from swarm_ray import SwarmClient, TaskRequest, TaskState
from tests.cost_catalog import CHAT

pytestmark = [pytest.mark.ray, pytest.mark.timeout(400)]

PRICES = {"prompt_per_million": 1_000_000.0, "completion_per_million": 3_000_000.0}
"""One unit a prompt token, three a completion token: each call costs tens of units."""
ORCHESTRATOR = "swarm-cost"
DAILY_TOKENS = 150
"""Alice's daily budget in tokens: a few chat calls."""


@pytest.fixture(scope="module")
def priced(
    ray_cluster: None, llama_server: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SwarmClient]:
    home = tmp_path_factory.mktemp("cost")
    config = home / "llm.yaml"
    endpoint = {"kind": "openai", "base_url": llama_server, "prices": PRICES}
    settings = {"endpoints": {"llama": endpoint}, "capabilities": {CHAT: "llama"}}
    config.write_text(json.dumps(settings))  # JSON is YAML
    daily = json.dumps({"alice": {"max_tokens": DAILY_TOKENS}})
    client = swarm_ray.connect(
        catalogs=["tests.cost_catalog:cost_catalog"],
        state_dir=home / "state",
        name=ORCHESTRATOR,
        env={"SWARM_RAY_LLM_CONFIG": str(config), "SWARM_RAY_DAILY_BUDGETS": daily},
    )
    yield client
    client.shutdown()


def test_a_fan_out_of_fifty_stops_within_one_attempts_cost_of_its_budget(
    priced: SwarmClient, capsys: pytest.CaptureFixture[str]
) -> None:
    from swarm_ray.cli import main

    client = priced
    one = client.run(template="cost_fanout", items=["Say hello."])
    assert one.machine.state is TaskState.COMPLETED, one.error
    used = client.task(one.task_id).status().usage
    assert used is not None and used.total_tokens > 0
    expected = used.prompt_tokens * 1.0 + used.completion_tokens * 3.0
    assert used.cost == pytest.approx(expected)  # the endpoint's prices, per token

    prompts = [f"Say the number {n}." for n in range(50)]
    cap = 5 * used.cost
    record = client.run(template="cost_fanout", items=prompts, budget={"max_cost": cap})
    assert record.machine.state is TaskState.FAILED
    assert record.error is not None and record.error.code == "budget_exceeded"
    assert "budget.max_cost" in record.error.message
    status = client.task(record.task_id).status()
    assert status.usage is not None
    paid = [s for s in status.subtasks.values() if s.cost > 0]
    dearest = max(s.cost for s in paid)
    assert cap < status.usage.cost <= cap + dearest  # within one attempt's cost
    assert len(paid) < len(prompts) // 2  # stopped, not run through
    assert sum(s.cost for s in paid) == pytest.approx(status.usage.cost)
    done = [s for s in status.subtasks.values() if s.status == "succeeded"]
    assert len(done) == len(paid)  # nothing stopped was charged

    assert main(["--name", ORCHESTRATOR, "show", record.task_id]) == 0
    shown = capsys.readouterr().out
    assert f"cost {status.usage.cost:.6g}" in shown  # what a newcomer reads

    run = ["--name", ORCHESTRATOR, "run", "cost_fanout", *prompts[:10], "--max-tokens", "60"]
    assert main(run) == 1  # the CLI sets a budget too, and says what stopped the task
    result = json.loads(capsys.readouterr().out)
    assert result["state"] == "failed" and result["error"]["code"] == "budget_exceeded"
    assert result["usage"]["total_tokens"] > 60


def test_a_principals_daily_budget_stops_its_tasks_and_survives_a_restart(
    priced: SwarmClient,
) -> None:
    import asyncio

    import ray

    from swarm_ray import BudgetExceededError
    from swarm_ray.core.guards._principal import Principal

    alice, bob = Principal(id="alice"), Principal(id="bob")
    prompts = [f"Name the colour number {n}." for n in range(20)]

    def submit(who: Principal, items: list[str]) -> str:
        request = TaskRequest(template="cost_fanout", items=tuple(items))
        return asyncio.run(priced.aio.submit(request, principal=who))

    first = priced.task(submit(alice, prompts)).wait(timeout_s=300)
    assert first.machine.state is TaskState.FAILED
    assert first.error is not None and first.error.code == "budget_exceeded"
    assert "daily.max_tokens" in first.error.message and "alice" in first.error.message
    spent = priced.task(first.task_id).status().usage
    assert spent is not None and DAILY_TOKENS < spent.total_tokens < 20 * 40  # stopped early

    with pytest.raises(BudgetExceededError) as refused:  # spent for today: refused at once
        submit(alice, ["Say yes."])
    assert refused.value.details["limit"] == "daily.max_tokens"
    other = priced.task(submit(bob, ["Say yes."])).wait(timeout_s=120)  # bob has no budget
    assert other.machine.state is TaskState.COMPLETED, other.error

    ray.kill(priced.actor, no_restart=False)  # Ray restarts it; the tally is in the store
    with pytest.raises(BudgetExceededError):
        submit(alice, ["Say yes."])
