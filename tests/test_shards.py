"""Orchestrator shards on a real local Ray: routing, listing, limits and changing N.

Marked `shards`: `pytest -m shards` runs them alone. Each test here uses orchestrators
of its own (two shards each), beside the session's one orchestrator.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import ray
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from swarm_ray import SwarmClient, connect
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import (
    AnswerRefusedError,
    InvalidSpecError,
    LimitExceededError,
    OrchestratorUnavailableError,
    TaskNotFoundError,
)
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.runtime._client import NAMESPACE
from swarm_ray.runtime._loop import LOOP
from swarm_ray.runtime._shards import shard_name, shard_of
from swarm_ray.testing import count_executions
from tests.support import wait_until

pytestmark = pytest.mark.shards

_CATALOG = ["swarm_ray.testing:testing_catalog"]
_LIMIT = 10


@pytest.fixture(scope="module")
def shards(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwarmClient]:
    """Two orchestrator shards, each principal held to `_LIMIT` open tasks."""
    client = connect(
        catalogs=_CATALOG,
        state_dir=tmp_path_factory.mktemp("shards"),
        name="swarm-shards",
        orchestrators=2,
        env={"SWARM_RAY_LIMIT_MAX_OPEN_TASKS": str(_LIMIT)},
    )
    yield client
    client.shutdown()


def test_new_tasks_spread_and_each_is_answered_by_its_shard(shards: SwarmClient) -> None:
    assert sorted(shards.aio.shards) == [0, 1]
    handles = [shards.start(template="echo_fanout", items=[f"w{n}"]) for n in range(4)]
    assert sorted(shard_of(h.id) for h in handles) == [0, 0, 1, 1]
    for handle in handles:
        record = handle.wait(timeout_s=60)
        assert record.machine.state == "completed" and record.task_id == handle.id
        assert handle.status().task_id == handle.id
    # Each shard keeps its own tasks: shard 0 does not know shard 1's.
    other = next(h.id for h in handles if shard_of(h.id) == 1)
    with pytest.raises(TaskNotFoundError):
        LOOP.run(shards.aio.options(timeout_s=10)._call(lambda a: a.status.remote(other)))
    # The swarm's views count every shard's tasks; the client pickles with its shards.
    info = shards.info()
    assert sorted(info["shards"]) == ["0", "1"] and info["open_tasks"] >= 0
    health = LOOP.run(shards.aio.health())
    assert health["shards_down"] == [] and health["capabilities"]
    ended = LOOP.run(shards.aio.metrics())["tasks"].get("completed", 0)
    assert ended >= 4
    assert ray.get(ray.remote(lambda c: sorted(c.aio.shards)).remote(shards)) == [0, 1]
    # A chosen id goes where its hash says, and sending it again is the same task.
    chosen = shards.submit(template="echo_fanout", items=["c"], task_id="chosen-1")
    again = shards.submit(template="echo_fanout", items=["c"], task_id="chosen-1")
    assert chosen == again and chosen.removesuffix("--s1") == "chosen-1"


def test_a_tenants_child_task_lives_with_its_parent(shards: SwarmClient) -> None:
    who = Principal(id="shards-bob")
    echo = TaskRequest(template="echo_fanout", items=("p",))
    parents = [LOOP.run(shards.aio.submit(echo, principal=who)) for _ in range(2)]
    for parent in parents:
        child = echo.model_copy(update={"parent_task_id": parent})
        child_id = LOOP.run(shards.aio.submit(child, principal=who))
        assert shard_of(child_id) == shard_of(parent)
        assert LOOP.run(shards.aio.record(child_id, principal=who)).request.parent_task_id == parent
    assert {shard_of(p) for p in parents} == {0, 1}


def test_a_killed_shard_comes_back_alone_and_recomputes_nothing_finished(
    shards: SwarmClient, record_dir: str
) -> None:
    """Shard 1 killed mid-task: shard 0 settles meanwhile; shard 1 answers again in < 10 s."""
    items = tuple(f"k{i}" for i in range(12))
    params = {"record_dir": record_dir, "delay_s": 0.2}
    handles = [shards.start(template="echo_fanout", items=items, params=params) for _ in range(2)]
    assert sorted(shard_of(h.id) for h in handles) == [0, 1]
    wait_until(lambda: len(count_executions(record_dir)) >= 6, 60, "six sub-tasks done")
    ray.kill(shards.aio.shards[1], no_restart=False)  # Ray restarts it: it recovers alone
    killed = time.monotonic()
    on_1 = next(h for h in handles if shard_of(h.id) == 1)
    on_1.status()  # rides out the restart
    assert time.monotonic() - killed < 10
    for handle in handles:
        record = handle.wait(timeout_s=60)
        assert record.machine.state == "completed", record.error
        assert record.output is not None and record.output["count"] == len(items)
    runs = count_executions(record_dir)
    # Only what was in flight on shard 1 when it died may run again (its 4 agents).
    assert len(runs) == len(items) and sum(len(p) - 2 for p in runs.values()) <= 2 * 4


def test_listing_merges_shards_newest_first(shards: SwarmClient) -> None:
    ids = [shards.submit(template="echo_fanout", items=[f"l{n}"]) for n in range(4)]
    listed = shards.tasks(limit=1000)
    seen = [t.task_id for t in listed]
    assert len(seen) == len(set(seen)) and set(ids) <= set(seen)
    created = [t.created_at for t in listed]
    assert created == sorted(created, reverse=True)
    newest = shards.tasks(limit=3)
    assert [t.task_id for t in newest] == seen[:3]
    assert {shard_of(t) for t in seen[:4]} == {0, 1}


def test_the_cli_shows_every_shard(shards: SwarmClient, capsys: pytest.CaptureFixture[str]) -> None:
    from swarm_ray.cli import main

    task_id = shards.submit(template="echo_fanout", items=["cli"])
    assert main(["--name", "swarm-shards", "--orchestrators", "2", "status"]) == 0
    assert "shards (2), open tasks by shard: 0: " in capsys.readouterr().out
    assert main(["--name", "swarm-shards", "--orchestrators", "2", "show", task_id]) == 0
    assert task_id in capsys.readouterr().out


def test_an_id_naming_no_shard_is_not_found(shards: SwarmClient) -> None:
    with pytest.raises(TaskNotFoundError, match="not known"):
        shards.task("3f9a0c1b2d4e5f60--s7").status()


def test_the_open_task_limit_is_exact_across_shards(shards: SwarmClient) -> None:
    """50 concurrent submits of one principal over 2 shards: exactly `_LIMIT` open."""
    who = Principal(id="shards-alice")
    slow = TaskRequest(template="echo_fanout", items=("held",), params={"delay_s": 30})

    async def fifty() -> list[str | BaseException]:
        calls = [shards.aio.submit(slow, principal=who) for _ in range(50)]
        return await asyncio.gather(*calls, return_exceptions=True)

    answers = LOOP.run(fifty())
    opened = [a for a in answers if isinstance(a, str)]
    refused = [a for a in answers if isinstance(a, LimitExceededError)]
    try:
        # The submits alternate between the shards, 25 each: a count per shard would have
        # opened up to 2 x `_LIMIT`. Which shard's submits took the seats is a race.
        assert len(opened) == _LIMIT and len(refused) == 50 - _LIMIT, answers[:3]
        # An ended task frees its seat, whichever shard it was on.
        LOOP.run(shards.aio.cancel(opened.pop(), principal=who))
        opened.append(LOOP.run(shards.aio.submit(slow, principal=who)))
        with pytest.raises(LimitExceededError):
            LOOP.run(shards.aio.submit(slow, principal=who))
    finally:
        for task_id in opened:
            LOOP.run(shards.aio.cancel(task_id, principal=who))


def test_the_gateway_routes_by_id_and_a_down_shard_fails_only_its_own(
    shards: SwarmClient, serve_port: int, tmp_path: Path
) -> None:
    """404 for an id naming no shard; 503 with `Retry-After` for a down shard's task, and
    a listing without its tasks, naming it.

    Last of the tests on `shards`: it kills shard 1 for good.
    """
    from ray import serve

    from swarm_ray.gateway import GatewayConfig, build_app

    key = secrets.token_urlsafe(24)
    keys = tmp_path / "keys"
    keys.write_text(f"{key}\n")
    config = GatewayConfig(
        orchestrator="swarm-shards",
        orchestrators=2,
        catalogs=tuple(_CATALOG),
        api_keys_file=str(keys),
    )
    serve.run(build_app(config), name="swarm-gateway-shards", route_prefix="/")
    auth = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{serve_port}", headers=auth) as http:
            body = {"template": "echo_fanout", "items": ["g"]}
            ids = [http.post("/v1/tasks", json=body).json()["task_id"] for _ in range(4)]
            assert sorted(shard_of(t) for t in ids) == [0, 0, 1, 1]
            for task_id in ids:
                assert http.get(f"/v1/tasks/{task_id}").status_code == 200
            listed = http.get("/v1/tasks", params={"limit": 3}).json()
            assert [t["task_id"] for t in listed] == ids[::-1][:3]
            assert http.get("/v1/tasks/3f9a0c1b2d4e5f60--s7").status_code == 404
            # A shard 1 task's events stream from shard 1, to the end.
            on_1 = next(t for t in ids if shard_of(t) == 1)
            url = f"ws://127.0.0.1:{serve_port}/v1/tasks/{on_1}/events"
            with ws_connect(url, additional_headers=auth, open_timeout=30) as ws:
                events = []
                with pytest.raises(ConnectionClosed) as closed:
                    while True:
                        events.append(json.loads(ws.recv(timeout=60)))
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
            assert events[-1]["kind"] == "state" and events[-1]["status"] == "completed"

            ray.kill(shards.aio.shards[1], no_restart=True)
            down = http.get(f"/v1/tasks/{next(t for t in ids if shard_of(t) == 1)}")
            assert down.status_code == 503 and down.headers["retry-after"] == "2", down.text
            up = http.get(f"/v1/tasks/{next(t for t in ids if shard_of(t) == 0)}")
            assert up.status_code == 200
            # A listing leaves the down shard's tasks out and names it, and fails no one.
            listed = http.get("/v1/tasks")
            assert listed.status_code == 200, listed.text
            assert listed.headers["x-swarm-shards-down"] == "1"
            assert {t["task_id"] for t in listed.json()} >= {t for t in ids if shard_of(t) == 0}
            assert not [t["task_id"] for t in listed.json() if shard_of(t["task_id"]) == 1]
            assert http.get("/health").json() == {"status": "degraded"}
            # New tasks go to the shard that answers.
            for _ in range(2):
                accepted = http.post("/v1/tasks", json=body)
                assert accepted.status_code == 202, accepted.text
                assert shard_of(accepted.json()["task_id"]) == 0
    finally:
        serve.delete("swarm-gateway-shards")


def test_changing_n_keeps_every_task_with_its_shard(ray_cluster: None, tmp_path: Path) -> None:
    """2 shards, then 1: shard 1 comes back for its own tasks, none lost or doubled."""
    options = {"catalogs": _CATALOG, "state_dir": tmp_path, "name": "swarm-reshard"}
    before = connect(**options, orchestrators=2)
    asked = [before.submit(template="echo_asked") for _ in range(4)]
    done = [before.submit(template="echo_fanout", items=["x"]) for _ in range(2)]
    for task_id in done:
        before.task(task_id).wait(timeout_s=60)
    assert {shard_of(t) for t in asked} == {0, 1}
    before.shutdown()  # every shard killed; their stores stay
    for shard in (0, 1):  # and their names free: a connect() now makes fresh ones
        with pytest.raises(ValueError):
            ray.get_actor(shard_name("swarm-reshard", shard), namespace=NAMESPACE)

    after = connect(**options, orchestrators=1)
    try:
        assert sorted(after.aio.shards) == [0, 1] and after.aio.spread == 1
        for n, task_id in enumerate(asked):
            handle = after.task(task_id)
            for _ in range(100):  # until the restarted shard has reloaded it waiting
                if handle.status().waiting:
                    break
                LOOP.run(asyncio.sleep(0.1))
            handle.answer({"text": f"last{n}"})
            record = handle.wait(timeout_s=60)
            assert record.machine.state == "completed", record.error
            with pytest.raises(AnswerRefusedError):
                handle.answer({"text": "again"})
        assert all(after.task(t).status().state == "completed" for t in done)
        listed = [t.task_id for t in after.tasks(limit=1000)]
        assert sorted(listed) == sorted(asked + done)  # each once, none lost
        # New tasks go to the shards that take them now (shard 0 alone).
        new = [after.submit(template="echo_fanout", items=["n"]) for _ in range(3)]
        assert {shard_of(t) for t in new} == {0}
        # A shard that is down fails its own tasks' calls at once, and no other's.
        quick = after.aio.options(timeout_s=5, ride_out_restarts=False)
        ray.kill(after.aio.shards[1], no_restart=True)
        on_1 = next(t for t in asked if shard_of(t) == 1)
        on_0 = next(t for t in asked if shard_of(t) == 0)
        with pytest.raises(OrchestratorUnavailableError):
            LOOP.run(quick.status(on_1))
        assert LOOP.run(quick.status(on_0)).state == "completed"
        assert len(LOOP.run(quick.submit(TaskRequest(template="echo_fanout", items=("z",))))) > 0
    finally:
        after.shutdown()


def test_shards_live_on_the_node_group_the_operator_names(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`SWARM_RAY_ORCHESTRATOR_RESOURCE`: each shard takes 0.001 of that resource, and a
    resource no node declares is refused at once by name, not left pending for ever."""
    options = {"catalogs": _CATALOG, "orchestrators": 2}
    monkeypatch.setenv("SWARM_RAY_ORCHESTRATOR_RESOURCE", "no-such-group")
    with pytest.raises(InvalidSpecError, match="`no-such-group`"):
        connect(**options, state_dir=tmp_path / "none", name="swarm-nowhere")
    monkeypatch.setenv("SWARM_RAY_ORCHESTRATOR_RESOURCE", "orchestrators")
    before = ray.available_resources().get("orchestrators", 0.0)
    client = connect(**options, state_dir=tmp_path / "placed", name="swarm-placed")
    try:
        handle = client.start(template="echo_fanout", items=["p"])
        assert handle.wait(timeout_s=60).machine.state == "completed"
        wait_until(
            lambda: (
                abs(before - ray.available_resources().get("orchestrators", 0.0) - 0.002) < 1e-6
            ),
            what="two shards holding 0.001 of `orchestrators` each",
        )
    finally:
        client.shutdown()
