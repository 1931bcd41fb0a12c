"""A worker node dies in the middle of a job: run by `test_node_loss.py` in its own process.

A real multi-node Ray cluster on this machine (`ray.cluster_utils.Cluster`: a head and two
workers, each its own raylet), a swarm on it, and a job; once some of the job's sub-tasks
have finished and others are running, one worker node is removed. Each job named runs in
turn on the same cluster and swarm, a fresh worker joining before the next one (one
cluster's start-up for all). Prints one JSON line per job: the state, every sub-task's
attempts and the retry events, for the test to judge.

    python tests/node_loss.py STATE_DIR video [documents ...]
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any


def main(state_dir: str, jobs: list[str]) -> int:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            # A dead node is noticed in about 3 s (1 s checks, 3 misses), not Ray's ~15 s:
            # what this scenario waits for, not what it judges.
            "_system_config": {"health_check_period_ms": 1000, "health_check_failure_threshold": 3},
        },
    )
    try:
        return _scenarios(cluster, jobs, state_dir)
    finally:
        # Also when the scenario fails: the cluster's shutdown removes the address it
        # wrote to /tmp/ray/ray_current_cluster, which a later plain `ray.init()` joins.
        ray.shutdown()
        cluster.shutdown()


def _scenarios(cluster: Any, jobs: list[str], state_dir: str) -> int:
    import ray

    import swarm_ray

    for _ in range(2):
        cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    work = Path(state_dir)
    swarm = swarm_ray.connect(
        catalogs=["swarm_ray.video:video_catalog", "swarm_ray.documents:documents_catalog"],
        state_dir=work / "state",
        name="swarm-node-loss",
    )
    for n, job in enumerate(jobs):
        if n:  # the node lost last time is replaced, as an autoscaler would
            cluster.add_node(num_cpus=2)
            cluster.wait_for_nodes()
        _scenario(cluster, swarm, job, work / job)
    swarm.shutdown()
    return 0


def _scenario(cluster: Any, swarm: Any, job: str, work: Path) -> None:
    """Run `job`, remove a worker mid-way, print the outcome as a JSON line."""
    import ray

    from swarm_ray.core.model._signals import SubTaskDone, SubTaskFailed

    workers = sorted(cluster.worker_nodes, key=lambda w: w.unique_id)
    work.mkdir(parents=True)
    if job == "video":
        from swarm_ray.video import generate_sample_video

        sample = generate_sample_video(work / "sample.mp4", duration_s=40, width=640, height=480)
        task_id = swarm.submit(
            template="analyze_video",
            # 16 segments: several waves of the analysis stage on 4 CPUs, so the poll
            # below finds some done and some not even on a loaded machine.
            params={"path": sample.path, "target_segments": 16, "min_segment_s": 2},
        )
        stage = "analyze["
    else:
        from swarm_ray.testing.sample_documents import generate_brochures

        sample_set = generate_brochures(work / "pdfs", n=8, seed=1)
        task_id = swarm.submit(
            template="compare_documents",
            items=tuple(sample_set.pdf_paths),
            params={"dimensions": ["battery"]},
        )
        stage = "extract["
    removed: dict[str, Any] = {}

    def remove_when_busy() -> None:
        """Once some of the stage is done and more runs, remove the node doing most of it."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            subtasks = swarm.task(task_id).status().subtasks
            mine = {k: v.status for k, v in subtasks.items() if k.startswith(stage)}
            # Some finished and some not (running, or queued behind the running ones):
            # results of one wave can arrive within a poll of each other.
            if any(v == "succeeded" for v in mine.values()) and any(
                v != "succeeded" for v in mine.values()
            ):
                done = [
                    e.result
                    for e in swarm.task(task_id).record().log
                    if isinstance(e, SubTaskDone) and e.result.subtask_id.startswith(stage)
                ]
                ids = [n for n, _ in Counter(r.node_id for r in done).most_common()]
                victim = next((w for w in workers if w.unique_id in ids), workers[0])
                removed["node"] = victim.unique_id
                removed["done_before"] = sorted(r.subtask_id for r in done)
                cluster.remove_node(victim, allow_graceful=False)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=remove_when_busy)
    began = time.monotonic()
    killer.start()
    record = swarm.task(task_id).wait(timeout_s=600)
    killer.join()
    print(f"TIMING job {time.monotonic() - began:.1f}s", file=sys.stderr)
    attempts: dict[str, list[str]] = {}
    for event in record.log:
        if isinstance(event, SubTaskDone | SubTaskFailed):
            r = event.result
            attempts.setdefault(r.subtask_id, []).append(
                "ok" if r.error is None else str(r.error.code)
            )
    deadline = time.monotonic() + 90  # the control store notices a dead node in time
    while time.monotonic() < deadline and any(
        n["NodeID"] == removed.get("node") and n["Alive"] for n in ray.nodes()
    ):
        time.sleep(1)
    print(f"TIMING dead {time.monotonic() - began:.1f}s", file=sys.stderr)
    retries = [
        {"subtask": e.subtask_id, "summary": e.summary}
        for e in swarm.task(task_id).events_so_far()
        if e.kind == "subtask" and e.summary.startswith(("retry", "fallback"))
    ]
    print(
        json.dumps(
            {
                "job": job,
                "state": str(record.machine.state),
                "error": None if record.error is None else record.error.message,
                "removed": removed,
                "attempts": attempts,
                "retries": retries,
                "nodes_alive": sum(1 for n in ray.nodes() if n["Alive"]),
                "removed_alive": any(
                    n["NodeID"] == removed.get("node") and n["Alive"] for n in ray.nodes()
                ),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
