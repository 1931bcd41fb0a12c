"""The Grafana dashboard queries metrics that Ray really exports for the swarm."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from swarm_ray import SwarmClient
from tests.support import wait_until

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "deployments" / "grafana-swarm-ray.json"
METRIC = re.compile(r"\b(ray_[a-z_]+?)(?:_bucket|_count|_sum)?\{")


def _queried() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    return {m.group(1) for expr in exprs for m in METRIC.finditer(expr)}


def test_dashboard_is_importable_and_names_the_swarms_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "swarm-ray" and dashboard["panels"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert variables == {"datasource", "SessionName"}
    for panel in dashboard["panels"]:
        assert panel["datasource"]["uid"] == "${datasource}"
        for target in panel["targets"]:
            assert 'SessionName=~"$SessionName"' in target["expr"]
    assert _queried() == {
        "ray_agent_task_duration_seconds",
        "ray_agent_error_total",
        "ray_swarm_task_transitions_total",
        "ray_swarm_retries_total",
        "ray_swarm_breaker_state",
        "ray_swarm_watermark_rejections_total",
    }


@pytest.mark.ray
def test_rays_metrics_endpoint_serves_what_the_dashboard_queries(swarm: SwarmClient) -> None:
    import ray

    task_id = swarm.submit(
        template="echo_quick", items=("slow-a", "slow-b"), params={"delay_s": 2.0}
    )
    swarm.task(task_id).wait(timeout_s=120)  # timeouts, retries and errors get counted
    port = ray._private.worker.global_worker.node.metrics_export_port
    wanted = _queried() - {"ray_swarm_breaker_state", "ray_swarm_watermark_rejections_total"}

    def exported() -> set[str] | None:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        names = {m.group(1) for m in METRIC.finditer(text)}
        return names if wanted <= names else None

    names = wait_until(exported, 60, f"Ray to export {sorted(wanted)}")
    assert "ray_agent_task_duration_seconds" in names
