"""The cluster-wide budget of an LLM endpoint: a real actor, real callers, a real 429 server."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from typing import Any

import httpx
import pytest
import ray

from swarm_ray.gateway._prometheus import render
from swarm_ray.llm import EndpointLimits, EngineConfig, GenerationParams, Message, load_engine
from swarm_ray.llm._budget import EndpointBudget, budget_states
from swarm_ray.testing.llm_stubs import serve_in_thread, stub_app
from tests.support import wait_until

pytestmark = [pytest.mark.ray, pytest.mark.timeout(120)]


def budget(**limits: Any) -> Any:
    name = f"test-budget-{uuid.uuid4().hex[:6]}"
    return (
        ray.remote(EndpointBudget)
        .options(name=name, num_cpus=0, max_concurrency=1000)
        .remote(name, EndpointLimits(**limits))
    )


def granted_in_order(refs: list[Any]) -> list[tuple[int, float]]:
    """(index, time) of each grant, in the order they came."""
    order, pending = [], list(refs)
    while pending:
        (ready,), pending = ray.wait(pending, num_returns=1)
        order.append((refs.index(ready), time.monotonic()))
    return order


def test_requests_are_spaced_and_served_first_come_first_served(ray_cluster: None) -> None:
    actor = budget(requests_per_minute=1200)  # one every 50 ms
    first = ray.get(actor.acquire.remote(10, 30.0))
    ray.get(actor.release.remote(first, 10, True, 1.0))  # a 429: nobody starts for 1 s
    now = time.time()
    # Asked in shuffled order, but each says when it first asked: the line follows that.
    refs = [actor.acquire.remote(10, 30.0, now - 10 + i) for i in (3, 0, 4, 1, 5, 2)]
    wait_until(lambda: ray.get(actor.state.remote())["queue_length"] == 6, 5, "the line")
    order = granted_in_order(refs)
    assert [i for i, _ in order] == [1, 3, 5, 0, 2, 4]
    gaps = [b - a for (_, a), (_, b) in itertools.pairwise(order)]
    assert min(gaps) > 0.035 and sum(gaps) / len(gaps) < 0.1
    state = ray.get(actor.state.remote())
    assert state["granted"] == 7 and state["queue_length"] == 0 and state["in_flight"] == 6
    assert state["max_wait_s"] >= 10  # the oldest waited since it first asked


def test_concurrency_tokens_and_429s_make_callers_wait(ray_cluster: None) -> None:
    actor = budget(max_concurrent=2, tokens_per_minute=100)
    first, second = ray.get([actor.acquire.remote(40, 30.0), actor.acquire.remote(40, 30.0)])
    third = actor.acquire.remote(40, 30.0)
    assert not ray.wait([third], timeout=0.3)[0]  # two in flight: wait
    ray.get(actor.release.remote(first, 10))  # a slot, and the real cost was 10 tokens
    lease = ray.get(third, timeout=5)  # 10 + 40 + 40 <= 100
    fourth = actor.acquire.remote(40, 30.0)
    ray.get(actor.release.remote(second, 40))
    assert not ray.wait([fourth], timeout=0.3)[0]  # 10 + 40 + 40 + 40 > 100 in the minute
    ray.get(actor.release.remote(lease, 0, True, 0.4))  # a 429 asks everyone to wait 0.4 s
    assert ray.get(actor.state.remote())["rate_limited"] == 1
    ray.kill(actor)


def test_parallel_callers_stay_under_the_limit_and_show_in_metrics(ray_cluster: None) -> None:
    @ray.remote(num_cpus=0)
    def caller(url: str, n: int) -> dict[str, int]:
        config = EngineConfig(
            kind="openai", base_url=url, model="m", limits=EndpointLimits(requests_per_minute=240)
        )
        engine = load_engine(config)
        for _ in range(n):
            engine.complete([Message(role="user", content="hi")], GenerationParams(max_tokens=4))
        stats = dict(engine.stats)  # type: ignore[attr-defined]
        engine.close()
        return stats

    with serve_in_thread(stub_app(rps=5)) as url:  # the provider: 429 above 5 a second
        started = time.monotonic()
        results = ray.get([caller.remote(f"{url}/v1", 5) for _ in range(4)])
        elapsed = time.monotonic() - started
        seen = httpx.get(f"{url}/stats").json()
    assert seen["ok"] == 20 and seen["max_per_s"] <= 5
    assert sum(r["rate_limited"] for r in results) == seen["rate_limited"] <= 1
    assert elapsed > 4.0  # 20 requests at 4 a second
    states = asyncio.run(budget_states())
    (state,) = [s for s in states if s["endpoint"].startswith(url.removeprefix("http://"))]
    assert state["granted"] >= 20 and state["queue_length"] == 0
    text = render(
        {
            "counters": {},
            "gauges": {},
            "durations": {},
            "boundaries": [],
            "tasks": {},
            "health": {"capabilities": {}, "swarm_health_score": 1.0},
            "llm_budgets": states,
        }
    ).decode()
    assert f'swarm_llm_requests_total{{endpoint="{state["endpoint"]}"}} {state["granted"]}' in text
    assert "swarm_llm_budget_queue_length{" in text and "swarm_llm_rate_limited_total{" in text
