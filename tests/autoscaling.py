"""The 20-brochure job on an autoscaling cluster that starts with no worker: run by
`test_autoscaling.py` in its own process.

A head with no CPU for agents (`ray start --head --num-cpus 0`, the orchestrator's
place) and Ray's fake multi-node provider adding worker nodes of 2 CPUs each on this
machine. Ray's own `AutoscalingCluster` cannot be used: it runs `ray stop --force` (every
Ray process of this user) and reads an example config the 2.60 wheel leaves out.

Once some of the job's extraction is done and more is not, the worker that did most of
it dies: its raylet is killed (SIGKILL), as a spot instance goes, and its agents and rows
with it. The autoscaler sees the node go like any other.

Prints one JSON line: the job's output, the most workers seen, the worker killed and
every sub-task's attempts, and the workers left after the job's agents and replicas went.

    python tests/autoscaling.py OUT_DIR
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.ray_head import free_port, ray_head

IDLE_S = 6.0
"""A worker node idle this long is taken away."""

STAGE = "extract["
"""The sub-tasks in the middle of which a worker dies."""


def _config(gcs: str) -> dict[str, object]:
    return {
        "cluster_name": "fake_multinode",
        "max_workers": 4,
        "provider": {
            "type": "fake_multinode",
            "gcs_address": gcs,
            "use_node_id_as_ip": True,
            "disable_node_updaters": True,
            "disable_launch_config_check": True,
        },
        "available_node_types": {
            "ray.head.default": {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0},
            "cpu2": {
                "resources": {"CPU": 2},
                "node_config": {},
                "min_workers": 0,
                "max_workers": 4,
            },
        },
        "head_node_type": "ray.head.default",
        "upscaling_speed": 1.0,
        "idle_timeout_minutes": IDLE_S / 60,
        "auth": {"ssh_user": "ubuntu"},
        "docker": {},
        "file_mounts": {},
        "cluster_synced_files": [],
        "file_mounts_sync_continuously": False,
        "rsync_exclude": [],
        "rsync_filter": [],
        "initialization_commands": [],
        "setup_commands": [],
        "head_setup_commands": [],
        "worker_setup_commands": [],
        "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def _workers() -> int:
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return sum(1 for n in nodes if n["Alive"] and n["Resources"].get("CPU", 0) > 0)


def _alive(node_id: str | None) -> bool:
    """Whether the control store still counts node `node_id` alive."""
    import ray

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return any(n["NodeID"] == node_id and n["Alive"] for n in nodes)


def _placement() -> dict[str, object]:
    """Where the orchestrator and the agents ran: on the head or not."""
    import ray
    from ray._private import state

    nodes: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    head = next(n["NodeID"] for n in nodes if "node:__internal_head__" in n["Resources"])
    actors = state.actors()
    where = {info.get("Name", ""): info["Address"]["NodeID"] for info in actors.values()}
    agents = [node for name, node in where.items() if name.startswith("swarm-agent:")]
    return {
        "orchestrator_on_head": where.get("swarm-ray-orchestrator") == head,
        "agents": len(agents),
        "agents_on_head": sum(1 for node in agents if node == head),
    }


def _raylet(node_id: str) -> int | None:
    """The process id of the raylet of node `node_id` (on this machine), if it runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"/raylet") and f"--node_id={node_id}".encode() in argv:
            return int(entry.name)
    return None


def _kill_mid_job(address: str, out: str, killed: dict[str, Any], stop: threading.Event) -> None:
    """Once some of the job's `STAGE` is done and more is not, kill the worker doing most."""
    import ray

    import swarm_ray

    deadline = time.monotonic() + 300
    while not stop.is_set() and time.monotonic() < deadline:
        try:  # the job's own `connect` creates the orchestrator: join it, never race it
            ray.get_actor("swarm-ray-orchestrator", namespace="swarm-ray")
            break
        except ValueError:
            time.sleep(0.2)
    swarm = swarm_ray.connect(address, state_dir=Path(out) / "state")
    killed["swarm"] = swarm
    while not stop.is_set() and time.monotonic() < deadline:
        tasks = [t for t in swarm.tasks() if t.template == "compare_documents"]
        if not tasks:
            time.sleep(0.2)
            continue
        task = swarm.task(tasks[0].task_id)
        killed["task_id"] = tasks[0].task_id
        mine = {k: v.status for k, v in task.status().subtasks.items() if k.startswith(STAGE)}
        if any(v == "succeeded" for v in mine.values()) and any(
            v != "succeeded" for v in mine.values()
        ):
            done = [
                e.result
                for e in task.record().log
                if type(e).__name__ == "SubTaskDone" and e.result.subtask_id.startswith(STAGE)
            ]
            workers = {
                n["NodeID"]
                for n in ray.nodes()  # type: ignore[no-untyped-call]
                if n["Alive"] and n["Resources"].get("CPU", 0) > 0
            }
            busiest = [r.node_id for r in done if r.node_id in workers]
            if not busiest:
                time.sleep(0.05)
                continue
            victim = max(set(busiest), key=busiest.count)
            pid = _raylet(victim)
            if pid is None:
                time.sleep(0.05)
                continue
            os.kill(pid, signal.SIGKILL)
            killed.update(
                node=victim,
                done_before=sorted(r.subtask_id for r in done),
                not_done=sum(1 for v in mine.values() if v != "succeeded"),
            )
            return
        time.sleep(0.05)


def _attempts(killed: dict[str, Any]) -> dict[str, list[str]]:
    """Each sub-task's attempts, in order: `ok` or the error code."""
    if "task_id" not in killed:
        return {}
    attempts: dict[str, list[str]] = {}
    for event in killed["swarm"].task(killed["task_id"]).record().log:
        if type(event).__name__ in ("SubTaskDone", "SubTaskFailed"):
            r = event.result
            attempts.setdefault(r.subtask_id, []).append(
                "ok" if r.error is None else str(r.error.code)
            )
    return attempts


def main(out: str) -> int:
    port = free_port()
    config = Path(tempfile.mkstemp(suffix=".json")[1])
    config.write_text(json.dumps(_config(f"127.0.0.1:{port}")))
    env = {
        **os.environ,
        "RAY_FAKE_CLUSTER": "1",
        "AUTOSCALER_UPDATE_INTERVAL_S": "1",
        "SWARM_RAY_AUTOSCALING": "1",
        "SWARM_RAY_AGENT_IDLE_S": "3",
        "RAY_AUTH_MODE": "disabled",
    }
    os.environ.update(env)
    # A dead node is noticed in about 3 s (1 s checks, 3 misses), not Ray's ~15 s: what
    # the scenario waits for, not what it judges.
    checks = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}
    extra = [f"--autoscaling-config={config}", f"--system-config={json.dumps(checks)}"]
    with ray_head(0, env, extra, port=port) as address:
        import ray

        from swarm_ray.documents._job import main as job

        ray.init(address=address, log_to_driver=False)
        most = 0
        done = threading.Event()
        killed: dict[str, Any] = {}

        def watch() -> None:
            nonlocal most
            while not done.is_set():
                most = max(most, _workers())
                time.sleep(0.5)

        before = _workers()
        threading.Thread(target=watch, daemon=True).start()
        killer = threading.Thread(target=_kill_mid_job, args=(address, out, killed, done))
        killer.start()
        started = time.perf_counter()
        code = job(["--samples", "20", "--out", out, "--address", address])
        took = time.perf_counter() - started
        done.set()
        killer.join()
        at_start = most
        placed = _placement()
        attempts = _attempts(killed)
        until = time.monotonic() + 30  # the control store notices the dead node in time
        while time.monotonic() < until and _alive(killed.get("node")):
            time.sleep(0.5)
        import swarm_ray

        swarm_ray.connect(address, state_dir=Path(out) / "state").shutdown()
        # The LLM fallback's Serve replica goes too: its deployment scales to zero once
        # idle (`SWARM_RAY_AGENT_IDLE_S` after Serve's 30 s look-back saw no request).
        until = time.monotonic() + 150
        while _workers() and time.monotonic() < until:
            time.sleep(1)
        outcome = {"code": code, "before": before, "most_workers": at_start, "left": _workers()}
        lost = {
            "killed": {k: v for k, v in killed.items() if k in ("node", "done_before", "not_done")},
            "killed_alive": _alive(killed.get("node")),
            "attempts": attempts,
        }
        print(json.dumps({**outcome, **placed, **lost, "took": round(took, 1)}), flush=True)
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
