"""Orchestrator shards without Ray: ids naming shards, stores, and the shared count."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from swarm_ray.core.model._errors import InvalidSpecError
from swarm_ray.runtime._ledger import Ledger, OpenTaskLedger, open_ledger
from swarm_ray.runtime._shards import (
    chosen_shard,
    mark,
    retired,
    shard_name,
    shard_of,
    shard_store_url,
    shards_from_env,
)


def test_an_id_names_its_shard_and_shard_0_keeps_todays_ids() -> None:
    assert shard_of("3f9a0c1b2d4e5f60") == 0
    assert mark("3f9a0c1b2d4e5f60", 0) == "3f9a0c1b2d4e5f60"
    marked = mark("3f9a0c1b2d4e5f60", 3)
    assert marked == "3f9a0c1b2d4e5f60--s3" and shard_of(marked) == 3
    assert mark(marked, 3) == marked  # a returned id sent again is kept
    assert shard_of("abc-s1") == 0 and shard_of("abc--s0") == 0 and shard_of("a--s01") == 0
    assert shard_name("swarm", 0) == "swarm" and shard_name("swarm", 2) == "swarm-s2"


def test_a_chosen_id_hashes_to_one_shard_stably() -> None:
    shards = {chosen_shard(f"job-{n}", 4) for n in range(64)}
    assert shards == {0, 1, 2, 3}
    assert chosen_shard("job-7", 4) == chosen_shard("job-7", 4)
    assert chosen_shard("job--s2", 4) == 2  # an id that names its shard keeps it
    assert chosen_shard("anything", 1) == 0


def test_each_shard_has_its_own_part_of_the_store() -> None:
    assert shard_store_url(None, 0) == (None, None)
    assert shard_store_url(None, 2) == (None, "state-s2.db")
    assert shard_store_url("sqlite:///var/s/state.db", 1) == ("sqlite:///var/s/state-s1.db", None)
    assert shard_store_url("/var/s/x.db", 1) == ("/var/s/x-s1.db", None)
    assert shard_store_url("redis://h:6379/0", 1) == ("redis://h:6379/0", "swarm-ray-s1")
    assert shard_store_url("redis://h:6379/0", 0) == ("redis://h:6379/0", None)


def test_shards_past_n_with_stored_tasks_are_found(tmp_path: Path) -> None:
    for name in ("state.db", "state-s1.db", "state-s3.db", "state-sx.db"):
        (tmp_path / name).touch()
    assert retired(tmp_path, None, 1) == [1, 3]
    assert retired(tmp_path, None, 2) == [3]
    named = tmp_path / "named"
    named.mkdir()
    for name in ("tasks.db", "tasks-s2.db", "tasks-s7.db", "state-s4.db", "tasks-s2.db-wal"):
        (named / name).touch()
    assert retired(tmp_path, str(named / "tasks.db"), 1) == [2, 7]
    assert retired(tmp_path, f"sqlite://{named / 'tasks.db'}", 3) == [7]
    assert retired(tmp_path, str(tmp_path / "absent" / "tasks.db"), 1) == []


@pytest.mark.redis
def test_shards_past_n_with_tasks_in_redis_are_found(tmp_path: Path) -> None:
    import redis

    from swarm_ray import StateStoreError
    from tests.conftest_redis import free_port, running_redis_server

    with running_redis_server(tmp_path) as url:
        assert retired(tmp_path, url, 1) == []
        client = redis.Redis.from_url(url)
        client.zadd("swarm-ray-s3:tasks", {"t--s3": 1.0})
        client.zadd("swarm-ray-s5:tasks", {"t--s5": 1.0})
        client.set("swarm-ray-s4:other", "1")  # a key, but no task
        assert retired(tmp_path, url, 1) == [3, 5]
        assert retired(tmp_path, url, 4) == [5]
        client.close()
    dead = f"redis://:secret@127.0.0.1:{free_port()}/0"
    with pytest.raises(StateStoreError) as refused:
        retired(tmp_path, dead, 1)
    assert "shards past 1" in str(refused.value) and "secret" not in str(refused.value)


def test_the_shard_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SWARM_RAY_ORCHESTRATORS", raising=False)
    assert shards_from_env() == 1
    monkeypatch.setenv("SWARM_RAY_ORCHESTRATORS", "4")
    assert shards_from_env() == 4 and shards_from_env(2) == 2
    for bad in ("0", "x", "1000"):
        monkeypatch.setenv("SWARM_RAY_ORCHESTRATORS", bad)
        with pytest.raises(InvalidSpecError, match="SWARM_RAY_ORCHESTRATORS"):
            shards_from_env()


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def ledgers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Ledger]]:
    """Two shards' ledgers on one place: `owners.db`, or one Redis server of the test's."""
    if request.param == "sqlite":
        yield [open_ledger(None, tmp_path, k) for k in (0, 1)]
        return
    from tests.conftest_redis import running_redis_server

    (tmp_path / "redis").mkdir()
    with running_redis_server(tmp_path / "redis") as url:
        yield [open_ledger(url, tmp_path, k) for k in (0, 1)]


def test_the_ledger_admits_exactly_the_limit_from_many_threads(ledgers: list[Ledger]) -> None:
    """Two shards' ledgers, 50 takes at once: exactly `limit` seats."""
    admitted: list[str] = []
    start = threading.Barrier(50)

    def take(n: int) -> None:
        start.wait()
        if ledgers[n % 2].take("alice", f"t{n}", 7) is None:
            admitted.append(f"t{n}")

    threads = [threading.Thread(target=take, args=(n,)) for n in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 7 and ledgers[0].held("alice") == 7
    assert ledgers[1].take("alice", admitted[0], 7) is None  # its seat already
    assert ledgers[1].take("bob", "b1", 7) is None  # another owner's count is its own
    ledgers[0].give_back(admitted[0])
    assert ledgers[1].take("alice", "t-new", 7) is None
    # A restarted shard keeps only the seats of the tasks it reloaded.
    ledgers[0].reseat([("alice", "t-kept")])
    on_1 = sum(1 for t in admitted[1:] if int(t[1:]) % 2 == 1) + 1  # + t-new
    assert ledgers[0].held("alice") == 1 + on_1


DAY = 1_796_256_000.0  # 2026-12-03 00:00 UTC


def test_a_daily_budget_holds_across_shards_on_their_shared_book(
    ledgers: list[Ledger], tmp_path: Path
) -> None:
    """Two shards' spend on one book: each sees the other's open and ended tasks."""
    from swarm_ray.core.model._subtask import TokenUsage
    from swarm_ray.runtime._spend import DailySpend, parse_daily_budgets
    from swarm_ray.runtime._store import SQLiteStateStore

    now = [DAY + 3600]
    limits = parse_daily_budgets('{"alice": {"max_cost": 1.0, "max_tokens": 500}}')
    spend = [
        DailySpend(limits, SQLiteStateStore(tmp_path / f"s{k}.db"), lambda: now[0], book=book)
        for k, book in enumerate(ledgers)
    ]
    spend[0].ended("alice", "t0", TokenUsage(cost=0.4, prompt_tokens=100))
    spend[1].running("alice", "t1", TokenUsage(cost=0.2))  # open on shard 1, so far
    spend[1].running("alice", "t1", TokenUsage(cost=0.3, completion_tokens=50))  # set, not added
    for shard in spend:
        assert shard.today("alice").cost == pytest.approx(0.7)
        assert shard.today("alice").total_tokens == 150
        assert shard.over("alice", new=True) is None
    spend[1].ended("alice", "t1", TokenUsage(cost=0.35, completion_tokens=60))
    spend[1].ended("alice", "t1", TokenUsage(cost=0.35, completion_tokens=60))  # replayed
    spend[0].running("alice", "t2", TokenUsage(cost=0.3))
    over = spend[1].over("alice")  # shard 1 stops for what shards 0 and 1 spent together
    assert over is not None and over.details["limit"] == "daily.max_cost"
    assert over.details["value"] == pytest.approx(1.05)
    assert spend[0].today("bob").cost == 0.0  # another owner's tally is its own
    spend[0].running("bob", "t3", TokenUsage(cost=5.0))  # no budget for bob: no line
    assert spend[1].today("bob").cost == 0.0
    now[0] += 86_400  # a task open past midnight counts on the day it spends
    spend[0].running("alice", "t2", TokenUsage(cost=0.3))
    assert spend[1].today("alice").cost == pytest.approx(0.3)
    assert spend[1].over("alice", new=True) is None
    now[0] -= 86_400
    assert spend[1].today("alice").cost == pytest.approx(0.75)  # t2 left yesterday's sum


def test_shards_views_merge_into_one_swarm() -> None:
    from swarm_ray.runtime._merge import merge_health, merge_info, merge_metrics

    def health(score: float, in_dispatch: bool, open_tasks: int) -> dict[str, Any]:
        cap = {"in_dispatch": in_dispatch}
        return {
            "swarm_health_score": score,
            "capabilities": {"a.b.c": cap},
            "open_tasks": open_tasks,
            "uptime_s": 5.0,
        }

    merged = merge_health({0: health(0.9, True, 2), 1: health(0.7, False, 3)}, [2])
    assert merged["swarm_health_score"] == 0.7 and merged["open_tasks"] == 5
    assert merged["capabilities"]["a.b.c"]["in_dispatch"] is False
    assert merged["shards_down"] == [2]
    info = merge_info(
        {
            0: {"open_tasks": 1, "agents": ["x"], "started_at": 2.0},
            1: {"open_tasks": 4, "agents": ["y"], "started_at": 1.0},
        }
    )
    assert info["open_tasks"] == 5 and info["agents"] == ["x", "y"] and info["started_at"] == 1.0

    def snapshot(n: float) -> dict[str, Any]:
        return {
            "counters": {"c": [[{"k": "v"}, n], [{"k": str(n)}, 1.0]]},
            "gauges": {},
            "durations": {"agent": {"buckets": [1, n], "sum": n}},
            "tasks": {"completed": int(n)},
            "health": health(0.9, True, 0),
        }

    metrics = merge_metrics({0: snapshot(2.0), 1: snapshot(3.0)})
    assert [{"k": "v"}, 5.0] in metrics["counters"]["c"] and len(metrics["counters"]["c"]) == 3
    assert metrics["durations"]["agent"] == {"buckets": [2, 5.0], "sum": 5.0}
    assert metrics["tasks"] == {"completed": 5}


def test_the_ledger_lives_where_the_store_does(tmp_path: Path) -> None:
    assert isinstance(open_ledger(None, tmp_path, 1), OpenTaskLedger)
    assert (tmp_path / "owners.db").exists()


def test_a_chosen_id_may_name_only_a_shard_that_runs() -> None:
    # An id ending in `--s5` placed on another shard would be routed by its id to shard 5
    # (now, or once N grows) and never found again: it is refused by name instead.
    from swarm_ray.core.model._task import TaskRequest
    from swarm_ray.runtime._aclient import AsyncSwarmClient

    def chosen(task_id: str) -> TaskRequest:
        return TaskRequest(template="echo_fanout", items=("a",), task_id=task_id)

    two = AsyncSwarmClient(object(), shards={0: object(), 1: object()}, spread=2)
    assert two._new_shard(chosen("job--s1")) == 1
    assert two._new_shard(chosen("job-7")) == chosen_shard("job-7", 2)
    with pytest.raises(InvalidSpecError, match=r"job--s5.*shard 5"):
        two._new_shard(chosen("job--s5"))
    lone = AsyncSwarmClient(object())
    assert lone._new_shard(chosen("job-7")) == 0
    with pytest.raises(InvalidSpecError, match="shard 1"):
        lone._new_shard(chosen("job--s1"))


def test_the_orchestrators_node_group_is_named_by_a_custom_resource(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from swarm_ray.runtime._config import orchestrator_resource

    monkeypatch.delenv("SWARM_RAY_ORCHESTRATOR_RESOURCE", raising=False)
    assert orchestrator_resource() is None  # the head node
    monkeypatch.setenv("SWARM_RAY_ORCHESTRATOR_RESOURCE", " orchestrators ")
    assert orchestrator_resource() == "orchestrators"
    for bad in ("CPU", "GPU", "memory", "a b", "{}", "x" * 80):
        monkeypatch.setenv("SWARM_RAY_ORCHESTRATOR_RESOURCE", bad)
        with pytest.raises(InvalidSpecError, match="SWARM_RAY_ORCHESTRATOR_RESOURCE"):
            orchestrator_resource()
