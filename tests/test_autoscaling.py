"""An autoscaling cluster that starts with no worker runs the 20-brochure job exactly,
though a worker dies in the middle of it.

`tests/autoscaling.py` starts a head with no CPU for agents and Ray's fake multi-node
provider (worker nodes of 2 CPUs, added and removed by Ray's autoscaler on this machine),
runs the job, kills the raylet of the worker that did most of the extraction once part of
it is done, and waits for idle workers to go. Here the outcome is judged: the agents' and
stages' pending demands brought workers up from zero, the orchestrator stayed on the head
and no agent ran there, the job was exact although a worker died mid-way (only sub-tasks
whose attempt died with it ran again), and the workers went back to zero.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# It starts a cluster of its own with Ray's autoscaler, beside the session's cluster, and
# takes a few minutes: `.ci/run` runs it alone, after the suite (`SWARM_RAY_AUTOSCALING_TEST=1`).
# Inside the whole suite its autoscaler came up with Ray's default config (no worker type)
# and the job waited out its timeout.
pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        os.environ.get("SWARM_RAY_AUTOSCALING_TEST") != "1",
        reason="run alone: SWARM_RAY_AUTOSCALING_TEST=1 pytest tests/test_autoscaling.py",
    ),
]

SCENARIO = Path(__file__).with_name("autoscaling.py")


def test_workers_scale_from_zero_and_back_for_an_exact_job(tmp_path: Path) -> None:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, str(SCENARIO), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=800,
        env=env,
        cwd=SCENARIO.parent.parent,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    outcome = json.loads(lines[-1])
    assert outcome["code"] == 0
    assert re.search(r"precision (1\.000|0\.99\d), recall 1\.000", done.stdout)
    assert outcome["before"] == 0  # the job started on a cluster with no worker
    assert outcome["most_workers"] >= 2  # its pending demand brought workers up
    assert outcome["left"] == 0  # and idle workers went again
    assert outcome["orchestrator_on_head"]
    assert outcome["agents"] > 0 and outcome["agents_on_head"] == 0
    killed = outcome["killed"]
    assert killed.get("node") and killed["not_done"] > 0, "no worker was killed mid-job"
    assert not outcome["killed_alive"]  # the control store saw the node go
    attempts: dict[str, list[str]] = outcome["attempts"]
    for subtask, tries in attempts.items():
        # Each ends done; an attempt that failed did so because its node went away.
        # (Two `ok`s: the rules' facts, then the LLM fallback's for the unsure ones.)
        assert tries[-1] == "ok", (subtask, tries)
        assert all(t in ("ok", "agent_unavailable", "timeout") for t in tries), (subtask, tries)
    for subtask in killed["done_before"]:
        assert set(attempts[subtask]) == {"ok"}, (subtask, attempts[subtask])  # never rerun
    rerun = sorted(s for s, tries in attempts.items() if set(tries) != {"ok"})
    print(
        f"\n20 brochures, workers 0 -> {outcome['most_workers']} -> 0, one killed mid-job "
        f"({len(rerun)} sub-task(s) ran again): {outcome['took']} s"
    )
