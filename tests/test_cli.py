"""The `swarm-ray` CLI against the session's real orchestrator."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarm_ray import SwarmClient
from swarm_ray.cli import main

pytestmark = pytest.mark.ray


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["--name", "swarm-test", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_tasks_show_status(swarm: SwarmClient, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "run", "echo_fanout", "cli-a", "cli-b")
    assert code == 0
    result = json.loads(out)
    assert result["state"] == "completed" and result["output"] == {
        "text": "CLI-A CLI-B",
        "count": 2,
    }
    assert "completed" in err

    code, out, _ = cli(capsys, "tasks")
    assert code == 0 and result["task_id"] in out

    code, out, _ = cli(capsys, "show", result["task_id"])
    assert code == 0
    assert "succeeded  echo[0]" in out and "join" in out
    assert "finalizing -> completed" in out

    code, out, _ = cli(capsys, "status")
    assert code == 0 and "test.echo.text" in out and "echo_fanout" in out


def test_cancel_and_errors(swarm: SwarmClient, capsys: pytest.CaptureFixture[str]) -> None:
    task_id = swarm.submit(template="echo_fanout", items=("z",), params={"delay_s": 5})
    code, out, _ = cli(capsys, "cancel", task_id)
    assert code == 0 and "cancelled" in out
    code, _, err = cli(capsys, "show", "no-such-task")
    assert code == 2 and "`no-such-task` is not known" in err
    code, _, err = cli(capsys, "run", "no_such_template")
    assert code == 2 and "`no_such_template` is not registered" in err


def test_serve_deploys_the_gateway(
    swarm: SwarmClient, serve_port: int, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    import httpx
    from ray import serve

    key = "cli-gateway-key-" + "0" * 16
    (tmp_path / "keys").write_text(key + "\n")
    code, out, err = cli(
        capsys,
        "--catalog",
        "swarm_ray.testing:testing_catalog",
        "serve",
        "--detach",
        "--port",
        str(serve_port),
        "--keys-file",
        str(tmp_path / "keys"),
        "--app-name",
        "cli-gateway",
    )
    try:
        assert code == 0 and f":{serve_port}/" in out and str(tmp_path / "keys") in err
        assert key not in out + err
        url = f"http://127.0.0.1:{serve_port}"
        assert httpx.get(f"{url}/health", timeout=30).status_code == 200
        assert httpx.get(f"{url}/v1/tasks", timeout=30).status_code == 401
        auth = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{url}/v1/tasks", headers=auth, timeout=30).status_code == 200
    finally:
        serve.delete("cli-gateway")
