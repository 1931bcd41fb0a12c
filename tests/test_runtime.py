"""The orchestrator on a real local Ray: executors, failures, watermarks, events."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import ray

from swarm_ray import NoTemplateMatchedError, Resources, SubTaskResult, SwarmClient, TaskState
from swarm_ray.core.guards._watermark import WatermarkKey, issue_watermark
from swarm_ray.runtime._subagent import BACKGROUND_NICE, SubAgent
from swarm_ray.testing import count_executions
from tests.support import spec, wait_until

pytestmark = pytest.mark.ray


def _live_agent(swarm: SwarmClient, capability: str):  # type: ignore[no-untyped-def]
    """A handle on a registered agent of `capability` (new ones register asynchronously)."""
    for name in swarm.info()["agents"]:
        if capability in name:
            try:
                return ray.get_actor(name, namespace="swarm-ray")
            except ValueError:
                continue
    return None


def test_fan_out_and_aggregate_with_events(swarm: SwarmClient) -> None:
    record = swarm.run(template="echo_fanout", items=("a", "b", "c"))
    assert record.machine.state is TaskState.COMPLETED
    assert record.output == {"text": "A B C", "count": 3}
    states = [e.to_state for e in record.machine.audit]
    assert states == [
        "routing",
        "dispatching",
        "executing",
        "aggregating",
        "finalizing",
        "completed",
    ]
    events = swarm.task(record.task_id).events_so_far()
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.trace_id for e in events} == {record.trace_id}
    assert events[-1].status == "completed" and events[-1].progress == 1.0
    assert [e.seq for e in swarm.task(record.task_id).events_so_far(after_seq=5)] == list(
        range(6, len(events) + 1)
    )
    status = swarm.task(record.task_id).status().model_dump(mode="json")
    assert status["subtasks"]["join"]["status"] == "succeeded"
    assert status["usage"]["compute_s"] > 0


def test_the_sync_client_works_in_a_ray_task_and_on_an_async_actors_loop(
    swarm: SwarmClient,
) -> None:
    """Drivers and agents hold the client where Ray runs them: a task's thread, an actor's
    event loop (where `asyncio.run` would refuse)."""
    record = swarm.run(template="echo_fanout", items=("a",))

    @ray.remote(num_cpus=0)
    def in_a_task(client: SwarmClient, task_id: str) -> str:
        return client.task(task_id).status().state

    @ray.remote(num_cpus=0)
    class OnALoop:
        async def state(self, client: SwarmClient, task_id: str) -> str:
            return client.task(task_id).status().state

    assert ray.get(in_a_task.remote(swarm, record.task_id), timeout=60) == "completed"
    actor = OnALoop.remote()  # type: ignore[attr-defined]
    try:
        assert ray.get(actor.state.remote(swarm, record.task_id), timeout=60) == "completed"
    finally:
        ray.kill(actor)


def test_submit_is_idempotent_with_a_task_id(swarm: SwarmClient) -> None:
    first = swarm.submit(template="echo_fanout", items=("x",), task_id="fixed-id-1")
    again = swarm.submit(template="echo_fanout", items=("x",), task_id="fixed-id-1")
    assert first == again == "fixed-id-1"
    assert swarm.task(first).wait().output == {"text": "X", "count": 1}


def test_unroutable_request_is_a_clear_error(swarm: SwarmClient) -> None:
    with pytest.raises(NoTemplateMatchedError, match="no template matches"):
        swarm.submit(query="bake me a cake")
    failed = [t for t in swarm.tasks() if t.query == "bake me a cake"]
    assert failed and failed[0].state == "failed"


def test_bad_item_fails_alone_and_the_batch_completes(swarm: SwarmClient) -> None:
    record = swarm.run(template="echo_fanout", items=("good", 42, "fine"))
    assert record.machine.state is TaskState.COMPLETED
    assert record.output == {"text": "GOOD FINE", "count": 2}
    assert any("`echo[1]`" in w and "field `text`" in w for w in record.warnings)


def test_failed_subtasks_are_retried_and_finished_ones_never_rerun(
    swarm: SwarmClient, record_dir: str
) -> None:
    items = tuple(f"item-{i}" for i in range(12))
    record = swarm.run(
        template="echo_fanout", items=items, params={"record_dir": record_dir, "fail_first": 1}
    )
    assert record.machine.state is TaskState.COMPLETED
    assert record.output is not None and record.output["count"] == 12
    runs = count_executions(record_dir)
    assert sorted(runs) == sorted(items)
    assert all(len(pids) == 1 for pids in runs.values())  # each failed once, finished once


def test_deadline_frees_the_slot_and_reports_a_timeout(swarm: SwarmClient) -> None:
    before = set(swarm.info()["agents"])
    record = swarm.run(template="echo_quick", items=("slow",), params={"delay_s": 3})
    assert record.machine.state is TaskState.COMPLETED  # degraded: join ran on nothing
    assert record.output == {"text": "", "count": 0}
    assert any("deadline" in w for w in record.warnings)
    quick_agents = {a for a in swarm.info()["agents"] if "quick" in a}
    assert not quick_agents & before  # the timed-out agents were killed and replaced


def test_killed_agents_are_replaced_and_only_their_subtask_reruns(
    swarm: SwarmClient, record_dir: str
) -> None:
    items = tuple(f"k{i}" for i in range(200))
    task_id = swarm.submit(
        template="echo_fanout", items=items, params={"record_dir": record_dir, "delay_s": 0.01}
    )
    killed_pids: set[int] = set()
    for round_ in range(1, 5):
        target = 30 * round_
        wait_until(lambda t=target: len(count_executions(record_dir)) > t, what="progress")
        victim = wait_until(lambda: _live_agent(swarm, "test.echo.text"), what="a live agent")
        killed_pids.add(ray.get(victim.pid.remote()))
        ray.kill(victim, no_restart=True)
    record = swarm.task(task_id).wait(timeout_s=120)
    assert record.machine.state is TaskState.COMPLETED
    assert record.output is not None and record.output["count"] == 200
    runs = count_executions(record_dir)
    assert set(runs) == set(items)
    for text, pids in runs.items():
        # a sub-task finished by a live agent is never computed again; only one whose
        # agent was killed after finishing but before answering may run a second time
        assert sum(pid not in killed_pids for pid in pids) <= 1, text
        assert len(pids) == 1 or pids[0] in killed_pids, text


def test_watermarks_refuse_forged_altered_replayed_and_unknown(swarm: SwarmClient) -> None:
    task_id = swarm.submit(template="echo_fanout", items=("w",), params={"delay_s": 1.5})
    wait_until(lambda: swarm.task(task_id).status().subtasks["echo[0]"].status == "running")
    key = WatermarkKey(b"not-the-orchestrator-key")
    forged_token = issue_watermark(
        key,
        task_id=task_id,
        subtask_id="echo[0]",
        capability_id="test.echo.text",
        input={},
        issued_ms=int(time.time() * 1000),
    )
    base = {
        "task_id": task_id,
        "subtask_id": "echo[0]",
        "capability_id": "test.echo.text",
        "output": {"text": "EVIL", "pid": 0},
    }
    forged = SubTaskResult(**base, watermark=forged_token)
    assert ray.get(swarm.actor.report.remote(forged)) is False
    record = swarm.task(task_id).wait()
    assert record.output == {"text": "W", "count": 1}
    # replay the genuine accepted result: refused as replayed
    done = next(e for e in record.log if e.kind == "done" and e.result.subtask_id == "echo[0]")
    assert ray.get(swarm.actor.report.remote(done.result)) is False
    # the genuine token on another sub-task (altered claims): refused
    altered = done.result.model_copy(update={"subtask_id": "join"})
    assert ray.get(swarm.actor.report.remote(altered)) is False
    # an unknown task
    unknown = done.result.model_copy(update={"task_id": "no-such-task"})
    assert ray.get(swarm.actor.report.remote(unknown)) is False
    counts = swarm.info()["watermark_rejections"]
    assert counts.get("forged", 0) >= 1 and counts.get("replayed", 0) >= 1
    assert counts.get("mismatch", 0) >= 1 and counts.get("unknown_task", 0) >= 1
    assert swarm.task(task_id).wait().output == {"text": "W", "count": 1}


def test_cancel_stops_the_task(swarm: SwarmClient) -> None:
    task_id = swarm.submit(template="echo_fanout", items=("c1", "c2"), params={"delay_s": 5})
    wait_until(lambda: swarm.task(task_id).status().state == "executing")
    record = swarm.task(task_id).cancel()
    assert record.machine.state is TaskState.CANCELLED
    assert swarm.task(task_id).status().subtasks["echo[0]"].status == "cancelled"


def test_serve_deployment_executor(swarm: SwarmClient) -> None:
    record = swarm.run(template="echo_serve", items=("s1", "s2"))
    assert record.machine.state is TaskState.COMPLETED
    assert record.output == {"text": "S1 S2", "count": 2}
    done = [
        e.result for e in record.log if e.kind == "done" and e.result.subtask_id.startswith("echo")
    ]
    assert {r.agent for r in done} == {"serve:test.echo.serve"}


def test_ray_data_stage_streams_rows_to_downstream_work(swarm: SwarmClient) -> None:
    items = tuple(f"d{i}" for i in range(6))
    record = swarm.run(template="echo_data_chain", items=items, params={"delay_s": 0.5})
    assert record.machine.state is TaskState.COMPLETED
    assert record.output == {"text": " ".join(i.upper() for i in items), "count": 6}
    events = swarm.task(record.task_id).events_so_far()
    data_done = [
        e.at for e in events if e.status == "succeeded" and (e.subtask_id or "").startswith("echo[")
    ]
    next_started = [
        e.at for e in events if e.status == "running" and (e.subtask_id or "").startswith("again[")
    ]
    assert len(data_done) == 6
    # partial rollout: downstream work started before the Ray Data stage finished
    assert min(next_started) < max(data_done)
    assert swarm.info()["data_pipelines"] >= 1


def test_metrics_reach_the_ray_metrics_endpoint(swarm: SwarmClient, record_dir: str) -> None:
    import urllib.request

    # one failed attempt per item (errors, retries) and one refused result (rejections)
    record = swarm.run(
        template="echo_fanout",
        items=("m1", "m2"),
        params={"record_dir": record_dir, "fail_first": 1},
    )
    stray = SubTaskResult(
        task_id=record.task_id, subtask_id="join", capability_id="test.join.texts", watermark="x.y"
    )
    assert ray.get(swarm.actor.report.remote(stray)) is False
    port = ray._private.worker.global_worker.node.metrics_export_port
    wanted = {
        "ray_agent_task_duration_seconds_count",
        "ray_swarm_task_transitions_total",
        "ray_agent_error_total",
        "ray_swarm_retries_total",
        "ray_swarm_watermark_rejections_total",
    }

    def exported() -> set[str]:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()}
        return wanted & names

    # Ray exports custom metrics every few seconds: wait for them to show.
    assert wait_until(lambda: exported() == wanted, timeout_s=60, what="metrics export")


def test_idle_agents_are_released(ray_cluster: None, tmp_path: Path) -> None:
    import swarm_ray

    # An orchestrator of its own, whose agents idle 2 s are released: quicker to see than
    # the session's 5 s, and no other test's agents in the way.
    own = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=tmp_path,
        name="swarm-idle-test",
        env={"SWARM_RAY_AGENT_IDLE_S": "2"},
    )
    try:
        own.run(template="noop_fanout", items=(1, 2, 3))
        assert [a for a in own.info()["agents"] if "test.noop.run" in a]
        started = time.monotonic()
        wait_until(
            lambda: not [a for a in own.info()["agents"] if "test.noop.run" in a],
            timeout_s=60,
            what="idle noop agents to be released",
        )
        assert time.monotonic() - started >= 1.0  # kept while idle under 2 s
        assert own.run(template="noop_fanout", items=(4,)).machine.state is TaskState.COMPLETED
    finally:
        own.shutdown()


def test_memory_holds_only_recent_ended_tasks(swarm: SwarmClient) -> None:
    # The session sets SWARM_RAY_KEEP_FINISHED=20; a long-lived orchestrator must not
    # keep every task it ever ran.
    before = swarm.actor.__ray_call__.remote(lambda self: self._task_counts())
    completed_before = ray.get(before).get("completed", 0)
    first = swarm.run(template="noop_fanout", items=(0,))
    first_events = swarm.task(first.task_id).events_so_far()
    ids = [swarm.submit(template="noop_fanout", items=(i,)) for i in range(1, 31)]
    for task_id in ids:
        assert swarm.task(task_id).wait().machine.state is TaskState.COMPLETED
    held = ray.get(swarm.actor.__ray_call__.remote(lambda self: len(self._drivers)))
    assert held <= 20
    # A long listing reads evicted tasks back without keeping them.
    listed = {t.task_id: t.state for t in swarm.tasks(limit=1000)}
    assert {first.task_id, *ids} <= listed.keys()
    assert listed[first.task_id] == "completed"
    assert ray.get(swarm.actor.__ray_call__.remote(lambda self: len(self._drivers))) <= 20
    # An evicted task reads back from the store, whole.
    status = swarm.task(first.task_id).status().model_dump(mode="json")
    assert status["state"] == "completed"
    assert status["subtasks"]["noop[0]"]["status"] == "succeeded"
    assert swarm.task(first.task_id).events_so_far() == first_events
    assert swarm.task(first.task_id).wait().output == first.output
    # Counts of ended tasks survive eviction.
    counts = ray.get(swarm.actor.__ray_call__.remote(lambda self: self._task_counts()))
    assert counts["completed"] >= completed_before + 31


def test_a_background_capabilitys_agents_run_at_a_lower_os_priority(ray_cluster: None) -> None:
    agent = ray.remote(num_cpus=0)(SubAgent)
    normal = agent.remote(spec("test.bulk.normal", resources=Resources(num_cpus=0)), "n")
    bulk = agent.remote(
        spec("test.bulk.background", resources=Resources(num_cpus=0, background=True)), "b"
    )
    try:
        normal_pid, bulk_pid = ray.get([normal.pid.remote(), bulk.pid.remote()])
        base = os.getpriority(os.PRIO_PROCESS, normal_pid)
        assert os.getpriority(os.PRIO_PROCESS, bulk_pid) == min(19, base + BACKGROUND_NICE)
    finally:
        ray.kill(normal)
        ray.kill(bulk)


def test_a_task_handle_follows_the_task_and_types_its_output(swarm: SwarmClient) -> None:
    from swarm_ray import TaskHandle, TaskStatus
    from swarm_ray.testing import JoinOut

    task = swarm.start(template="echo_fanout", items=("a", "b"))
    assert isinstance(task, TaskHandle) and swarm.task(task.id).id == task.id
    seen = [e.kind for e in task.events()]
    assert seen[0] == "state" and "subtask" in seen
    status = task.status()
    assert isinstance(status, TaskStatus) and status.ended and status.state == "completed"
    assert status.subtasks["join"].status == "succeeded" and status.usage is not None
    joined = task.output(JoinOut)
    assert isinstance(joined, JoinOut) and joined.count == 2
    assert sorted(joined.text.split()) == ["A", "B"]
    assert task.output() == joined.model_dump()


def test_scarce_agents_go_to_higher_priority_tasks_first(ray_cluster: None) -> None:
    import asyncio

    from swarm_ray.runtime._executors import _Pool
    from swarm_ray.testing import testing_catalog

    spec = next(c for c in testing_catalog().capabilities if c.id == "test.echo.text")
    spec = spec.model_copy(
        update={"resources": spec.resources.model_copy(update={"max_concurrency": 1})}
    )
    pool = _Pool(spec, ray.get_runtime_context().namespace)

    async def scenario() -> list[str]:
        only = await pool.acquire()
        order: list[str] = []

        async def want(priority: int, name: str) -> None:
            agent = await pool.acquire(priority)
            order.append(name)
            pool.release(agent)

        waiting = []
        for priority, name in ((0, "first come, low"), (5, "later, high"), (0, "last, low")):
            waiting.append(asyncio.create_task(want(priority, name)))
            await asyncio.sleep(0)
        pool.release(only)
        await asyncio.gather(*waiting)
        return order

    assert asyncio.run(scenario()) == ["later, high", "first come, low", "last, low"]
    pool.reap(0)


def test_the_open_task_limit_counts_a_callers_open_tasks_and_frees_ended_ones(
    swarm: SwarmClient,
) -> None:
    from swarm_ray import LimitExceededError, TaskRequest
    from swarm_ray.core.guards._principal import Principal

    alice, bob = Principal(id="limit-alice"), Principal(id="limit-bob")
    slow = TaskRequest(template="echo_fanout", items=("held",), params={"delay_s": 30})
    limit = 100  # RequestLimits.max_open_tasks, the default
    opened = ray.get(swarm.actor.submit_many.remote([slow] * limit, [alice] * limit))
    assert all(isinstance(t, str) for t in opened), opened[:3]
    try:
        (refused,) = ray.get(swarm.actor.submit_many.remote([slow], [alice]))
        assert isinstance(refused, LimitExceededError) and refused.limit == "max_open_tasks"
        # Another caller's count is its own.
        (other,) = ray.get(swarm.actor.submit_many.remote([slow], [bob]))
        assert isinstance(other, str)
        ray.get(swarm.actor.cancel.remote(other, "done", bob))
        # An ended task frees its place.
        ray.get(swarm.actor.cancel.remote(opened.pop(), "done", alice))
        (again,) = ray.get(swarm.actor.submit_many.remote([slow], [alice]))
        assert isinstance(again, str)
        opened.append(again)
    finally:
        ray.get([swarm.actor.cancel.remote(t, "done", alice) for t in opened])
