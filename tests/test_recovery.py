"""The orchestrator dies mid-run and comes back: nothing lost, nothing doubled."""

from __future__ import annotations

import time

import pytest
import ray

import swarm_ray
from swarm_ray import TaskState
from swarm_ray.core.model._signals import SubTaskDone
from swarm_ray.testing import count_effects, count_executions
from tests.support import wait_until

pytestmark = pytest.mark.ray


def test_orchestrator_killed_three_times_mid_run(
    ray_cluster: None, tmp_path, record_dir: str
) -> None:  # type: ignore[no-untyped-def]
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=tmp_path / "state",
        name="swarm-recovery",
    )
    sizes = {"r1": 40, "r2": 40, "r3": 40}
    ids = {
        name: client.submit(
            template="echo_fanout",
            items=tuple(f"{name}-{i}" for i in range(n)),
            params={"record_dir": record_dir, "delay_s": 0.2},
        )
        for name, n in sizes.items()
    }
    kills = 0
    deadline = time.monotonic() + 120
    while kills < 3 and time.monotonic() < deadline:
        done = len(count_executions(record_dir))
        if done >= 25 * (kills + 1):
            ray.kill(client.actor, no_restart=False)  # Ray restarts it: recovery runs
            kills += 1
        time.sleep(0.05)
    assert kills == 3
    for name, task_id in ids.items():
        record = client.task(task_id).wait(timeout_s=120)
        assert record.machine.state is TaskState.COMPLETED, record.error
        assert record.output is not None and record.output["count"] == sizes[name]
        accepted = [e for e in record.log if isinstance(e, SubTaskDone)]
        keys = [(e.result.subtask_id, e.result.attempt) for e in accepted]
        assert len(keys) == len(set(keys)), "a result was recorded twice"
        expected = {f"echo[{i}]" for i in range(sizes[name])} | {"join"}
        assert expected <= {k for k, _ in keys}, "a result was lost"
    runs = count_executions(record_dir)
    assert len(runs) == sum(sizes.values())
    # Only work in flight when the orchestrator died may run again: what its 4 agents
    # were running, and on a busy machine one more each that an agent finishes before
    # Ray reaps it (an agent dies with its orchestrator, but not at the same instant).
    assert sum(len(p) - 1 for p in runs.values()) <= 2 * 4 * kills
    client.shutdown()


def test_orchestrator_killed_during_a_dynamic_fan_out(
    ray_cluster: None, tmp_path, record_dir: str
) -> None:  # type: ignore[no-untyped-def]
    """Killed after `echo` fanned out over `split`'s output: the expansion is replayed,
    not redone; every element runs and is recorded once."""
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=tmp_path / "state",
        name="swarm-recovery-each",
    )
    words = [f"w{i}" for i in range(30)]
    task_id = client.submit(
        template="split_fanout",
        query=" ".join(words),
        params={"record_dir": record_dir, "delay_s": 0.05},
    )
    deadline = time.monotonic() + 120
    while len(count_executions(record_dir)) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    ray.kill(client.actor, no_restart=False)
    record = client.task(task_id).wait(timeout_s=120)
    assert record.machine.state is TaskState.COMPLETED, record.error
    assert record.output is not None and record.output["count"] == len(words)
    accepted = [e.result.subtask_id for e in record.log if isinstance(e, SubTaskDone)]
    assert len(accepted) == len(set(accepted)), "a result was recorded twice"
    assert accepted.count("split") == 1  # the list was made once, before the kill
    assert {f"echo[{i}]" for i in range(len(words))} <= set(accepted)
    fanned = [e for e in client.task(task_id).events_so_far() if e.kind == "fanout"]
    assert len(fanned) == 1  # expanded once, replayed after the restart, not again
    runs = count_executions(record_dir)
    assert sorted(runs) == sorted(words)
    # only what was in flight: 4 agents, and one more each that a dying agent finishes
    assert sum(len(p) - 1 for p in runs.values()) <= 2 * 4
    client.shutdown()


def test_orchestrator_killed_during_a_video_job(ray_cluster: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Killed while segments are analysed: the one video task completes, each segment's
    result is recorded once, and segments finished before the kill are not analysed again."""
    from swarm_ray.video import generate_sample_video

    client = swarm_ray.connect(
        catalogs=["swarm_ray.video:video_catalog"],
        state_dir=tmp_path / "state",
        name="swarm-recovery-video",
    )
    sample = generate_sample_video(tmp_path / "v.mp4", duration_s=40, width=640, height=480)
    task_id = client.submit(
        template="analyze_video",
        params={"path": sample.path, "target_segments": 8, "min_segment_s": 2},
    )

    def analysed() -> list[str]:
        return [
            e.subtask_id or ""
            for e in client.task(task_id).events_so_far()
            if e.status == "succeeded" and (e.subtask_id or "").startswith("analyze[")
        ]

    deadline = time.monotonic() + 180
    while not analysed() and time.monotonic() < deadline:
        time.sleep(0.1)
    done_before = set(analysed())
    assert done_before, "no segment finished before the deadline"
    ray.kill(client.actor, no_restart=False)
    record = client.task(task_id).wait(timeout_s=300)
    assert record.machine.state is TaskState.COMPLETED, record.error
    accepted = [e.result.subtask_id for e in record.log if isinstance(e, SubTaskDone)]
    assert len(accepted) == len(set(accepted)), "a result was recorded twice"
    segments = {s for s in accepted if s.startswith("analyze[")}
    assert done_before <= segments and len(segments) >= 5
    dispatched = {}
    for e in client.task(task_id).events_so_far():
        if e.status == "running" and (e.subtask_id or "") in done_before:
            dispatched[e.subtask_id] = dispatched.get(e.subtask_id, 0) + 1
    assert all(n == 1 for n in dispatched.values()), dispatched  # never sent again
    client.shutdown()


def test_redis_state_backend_runs_a_task(ray_cluster: None, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest_redis import running_redis_server

    with running_redis_server(tmp_path) as url:
        client = swarm_ray.connect(
            catalogs=["swarm_ray.testing:testing_catalog"],
            state_url=url,
            state_dir=tmp_path,
            name="swarm-redis",
        )
        record = client.run(template="echo_fanout", items=("r", "s"))
        assert record.output == {"text": "R S", "count": 2}
        from swarm_ray.runtime._store_redis import RedisStateStore

        with RedisStateStore(url) as store:
            assert record.task_id in store.list_tasks()
            assert not store.get_task(record.task_id).is_open  # type: ignore[union-attr]
        client.shutdown()


def test_a_task_reloaded_from_its_last_saved_state_still_finishes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """States left within one step (routing, executing, finalizing) are not saved on their
    own; a driver reloaded from the last save (`dispatching`) must still finish."""
    from swarm_ray.core.driver._commands import Arrived, Close, Planned, Resume, Run
    from swarm_ray.core.driver._driver import TaskDriver
    from swarm_ray.core.guards._watermark import WatermarkKey
    from swarm_ray.core.model._plan import expand
    from swarm_ray.core.model._record import SCHEMA_VERSION
    from swarm_ray.core.model._subtask import SubTaskResult, Timings
    from swarm_ray.core.model._task import TaskRequest
    from swarm_ray.core.planning._catalog import load_catalogs
    from swarm_ray.runtime._results import ResultStore
    from swarm_ray.runtime._store import open_state_store

    registry, router = load_catalogs(["swarm_ray.testing:testing_catalog"])
    store = open_state_store(None, state_dir=tmp_path, supported_schema_version=SCHEMA_VERSION)
    deps = {
        "registry": registry,
        "store": store,
        "results": ResultStore(str(tmp_path / "results")),
        "key": WatermarkKey.generate(),
    }
    request = TaskRequest(template="noop_fanout", items=(1,))
    driver = TaskDriver.create(request, **deps)
    plan = expand(router.route(request), request, task_id=driver.task_id)
    [first] = [c for c in driver.step(Planned(plan)).commands if isinstance(c, Run)]
    assert driver.state is TaskState.EXECUTING
    reloaded = TaskDriver.load(driver.task_id, **deps)
    assert reloaded is not None and reloaded.state is TaskState.DISPATCHING
    [again] = [c for c in reloaded.step(Resume()).commands if isinstance(c, Run)]
    assert again.subtask.subtask_id == first.subtask.subtask_id
    subtask = again.subtask
    done = SubTaskResult(
        task_id=subtask.task_id,
        subtask_id=subtask.subtask_id,
        capability_id=subtask.capability_id,
        attempt=subtask.attempt,
        output={},
        timings=Timings(started_at=1.0, finished_at=1.1),
        watermark=subtask.watermark,
    )
    finished = reloaded.step(Arrived(done))
    assert any(isinstance(c, Close) for c in finished.commands)
    assert reloaded.state is TaskState.COMPLETED
    saved = TaskDriver.load(driver.task_id, **deps)
    assert saved is not None and saved.state is TaskState.COMPLETED
    moves = [(str(e.from_state), str(e.to_state)) for e in saved.record.machine.audit]
    assert moves == [
        ("created", "routing"),
        ("routing", "dispatching"),
        ("dispatching", "executing"),
        ("executing", "aggregating"),
        ("aggregating", "finalizing"),
        ("finalizing", "completed"),
    ]


def test_a_side_effect_in_flight_at_a_crash_is_not_repeated_unless_its_owner_says_so(
    ray_cluster: None, tmp_path, record_dir: str
) -> None:  # type: ignore[no-untyped-def]
    """Two payments start, then the orchestrator dies: after the restart neither runs
    again by itself. Both wait for review; the owner reruns one and declines the other."""
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=tmp_path / "state",
        name="swarm-effects",
    )
    try:
        task_id = client.submit(
            template="echo_effect",
            items=("pay-1", "pay-2"),
            params={"record_dir": record_dir, "delay_s": 8},
        )
        wait_until(lambda: len(count_effects(record_dir)) == 2, 60, "both payments to start")
        ray.kill(client.actor, no_restart=False)  # Ray restarts it: recovery runs
        waiting = wait_until(lambda: client.task(task_id).status().waiting, 60, "a review")
        wait_until(lambda: len(client.task(task_id).status().waiting) == 2, 30, "both reviews")
        assert all(w.review_of == 1 and "side effects" in w.prompt for w in waiting)
        time.sleep(1.0)
        assert sorted(count_effects(record_dir)) == ["pay-1", "pay-2"]  # none repeated
        assert count_executions(record_dir) == {}  # and neither finished
        client.task(task_id).answer({"rerun": True}, "echo[0]")
        client.task(task_id).answer({"rerun": False}, "echo[1]")
        record = client.task(task_id).wait(timeout_s=60)
        assert record.machine.state is TaskState.COMPLETED, record.error
        assert record.output is not None and record.output["text"] == "PAY-1"
        assert sorted(count_effects(record_dir)) == ["pay-1", "pay-1", "pay-2"]
        status = client.task(task_id).status()
        assert status.subtasks["echo[1]"].status == "failed"
        assert any("chose not to run it again" in w for w in status.warnings)
    finally:
        client.shutdown()
