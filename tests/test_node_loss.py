"""Losing a worker node mid-job: a real multi-node cluster, in a process of its own.

Autoscaling clusters lose workers (spot instances, scale-down). `tests/node_loss.py`
builds a head and two worker nodes on this machine (`ray.cluster_utils.Cluster`, each
node its own raylet), runs a job and removes a worker in the middle of it; here the
outcome is judged: the job completes, only sub-tasks whose attempt died with the node
run again (their failed attempt says `agent_unavailable`, and the task's events name
them), and no sub-task finished before the loss runs again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import OWN_CLUSTER

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(900),
    OWN_CLUSTER,  # a head and two workers of its own
]

SCENARIO = Path(__file__).with_name("node_loss.py")


JOBS = ("video", "documents")


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Both jobs, one after the other on one cluster (`node_loss.py`), by job."""
    env = {**os.environ, "SWARM_RAY_AGENT_IDLE_S": "30", "RAY_DEDUP_LOGS": "0"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, str(SCENARIO), str(tmp_path_factory.mktemp("node-loss")), *JOBS],
        capture_output=True,
        text=True,
        timeout=800,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
    )
    found = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            outcome = json.loads(line)
            found[outcome["job"]] = outcome
    assert done.returncode == 0 and set(found) == set(JOBS), (
        done.stdout[-3000:] + done.stderr[-3000:]
    )
    return found


@pytest.mark.parametrize("job", JOBS)
def test_a_job_survives_losing_a_worker_node(job: str, outcomes: dict[str, dict[str, Any]]) -> None:
    outcome = outcomes[job]
    assert outcome["state"] == "completed", outcome["error"]
    assert outcome["removed"].get("node"), "the worker was never removed mid-job"
    assert not outcome["removed_alive"]  # the control store saw the node go
    attempts: dict[str, list[str]] = outcome["attempts"]
    for subtask, tries in attempts.items():
        assert tries[-1] == "ok" or subtask not in outcome["removed"]["done_before"], tries
        # an attempt before the last failed because its node went away, nothing else
        assert all(t in ("agent_unavailable", "timeout") for t in tries[:-1]), (subtask, tries)
    for subtask in outcome["removed"]["done_before"]:
        assert attempts[subtask] == ["ok"], (subtask, attempts[subtask])  # never rerun
    rerun = {s for s, tries in attempts.items() if len(tries) > 1}
    named = {r["subtask"] for r in outcome["retries"] if "agent_unavailable" in r["summary"]}
    assert rerun <= named  # the task's events say which were rescheduled, and why
