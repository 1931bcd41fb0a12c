"""The `swarm-ray` CLI against the session's real orchestrator."""

from __future__ import annotations

import json

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
