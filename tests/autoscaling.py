"""The 20-brochure job on an autoscaling cluster that starts with no worker: run by
`test_autoscaling.py` in its own process.

A head with no CPU for agents (`ray start --head --num-cpus 0`, the orchestrator's
place) and Ray's fake multi-node provider adding worker nodes of 2 CPUs each on this
machine. Ray's own `AutoscalingCluster` cannot be used: it runs `ray stop --force` (every
Ray process of this user) and reads an example config the 2.60 wheel leaves out. Prints
one JSON line: the job's output, the most workers seen, and the workers left after the
job's agents and replicas went.

    python tests/autoscaling.py OUT_DIR
"""

from __future__ import annotations

import json
import os
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
    extra = [f"--autoscaling-config={config}"]
    with ray_head(0, env, extra, port=port) as address:
        import ray
        from ray import serve

        from swarm_ray.documents._job import main as job

        ray.init(address=address, log_to_driver=False)
        most = 0
        done = threading.Event()

        def watch() -> None:
            nonlocal most
            while not done.is_set():
                most = max(most, _workers())
                time.sleep(0.5)

        before = _workers()
        threading.Thread(target=watch, daemon=True).start()
        started = time.perf_counter()
        code = job(["--samples", "20", "--out", out, "--address", address])
        took = time.perf_counter() - started
        done.set()
        at_start = most
        placed = _placement()
        import swarm_ray

        swarm_ray.connect(address, state_dir=Path(out) / "state").shutdown()
        # The LLM fallback's Serve replica would hold its worker's CPU for good.
        serve.shutdown()  # type: ignore[no-untyped-call]
        until = time.monotonic() + 120
        while _workers() and time.monotonic() < until:
            time.sleep(1)
        outcome = {"code": code, "before": before, "most_workers": at_start, "left": _workers()}
        print(json.dumps({**outcome, **placed, "took": round(took, 1)}), flush=True)
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
