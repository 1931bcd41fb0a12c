"""Agents on the real runtime: child sub-tasks, the tool agent, MCP, wide research.

A scripted model (`llm_stubs.scripted_brain`) decides the tool calls, so the assertions can
name each one; the capabilities they reach, the orchestrator that schedules them, the MCP
server (a real subprocess over stdio) and Serve are all real.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx
import pytest
import ray

import swarm_ray
from swarm_ray import SwarmClient, TaskState
from swarm_ray.cli import main
from tests.support import delete_serve_apps

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]
needs_mcp = pytest.mark.skipif(
    importlib.util.find_spec("mcp") is None, reason="needs the `mcp` SDK (the `llm` extra)"
)

ORCHESTRATOR = "swarm-agents-test"
ROW_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "moons": {"type": "integer"}},
    "required": ["name", "moons"],
}


@pytest.fixture(scope="module")
def agents(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwarmClient]:
    from ray.serve.exceptions import RayServeException

    client = swarm_ray.connect(
        catalogs=[
            "swarm_ray.testing:testing_catalog",
            "swarm_ray.testing.agents:agents_catalog",
            "swarm_ray.llm:llm_catalog",
        ],
        state_dir=tmp_path_factory.mktemp("agents-swarm"),
        name=ORCHESTRATOR,
    )
    yield client
    client.shutdown()
    with contextlib.suppress(RayServeException):  # no Serve app was deployed
        delete_serve_apps("swarm-test-agent-scripted", "swarm-test-research-row")


def script(*steps: dict[str, Any], row: dict[str, Any] | None = None) -> str:
    text = f"Do the task.\nSCRIPT: {json.dumps(list(steps))}"
    return text + (f"\nROW: {json.dumps(row)}" if row is not None else "")


def trace(client: SwarmClient, token: str) -> dict[str, Any]:
    (found,) = client.trace(token)
    return found  # type: ignore[no-any-return]


def test_an_agent_runs_children_through_the_scheduler(agents: SwarmClient) -> None:
    calls = [
        {"capability": "test.tool.echo", "input": {"text": "hi"}},
        {"capability": "test.tool.echo", "input": {"txt": "no text field"}},
        {"capability": "no.such.capability", "input": {}},
        {"capability": "test.agent.children", "input": {}},
    ]
    record = agents.run(template="children_once", params={"calls": calls})
    assert record.machine.state is TaskState.COMPLETED, record.error
    out = agents.task(record.task_id).output()
    assert out is not None
    good, bad = out["outcomes"]
    assert good["status"] == "succeeded" and good["output"]["text"] == "HI"
    assert good["subtask_id"] == "agent>a1-1" and good["watermark"]
    assert bad["status"] == "failed" and bad["error"]["code"] == "invalid_input"
    assert "text" in bad["error"]["message"]  # the missing field is named
    unknown, own = out["refusals"]
    assert unknown.startswith("unknown_capability:")
    assert own.startswith("invalid_plan:") and "its own capability" in own

    status = agents.task(record.task_id).status().model_dump(mode="json")
    child = status["subtasks"]["agent>a1-1"]
    assert child["parent"] == "agent" and child["status"] == "succeeded"
    assert child["watermark"] == good["watermark"]
    assert status["subtasks"]["agent>a1-2"]["status"] == "failed"
    running = [
        e for e in agents.task(record.task_id).events_so_far() if e.subtask_id == "agent>a1-1"
    ]
    assert [e.status for e in running] == ["running", "succeeded"]
    traced = trace(agents, good["watermark"])
    assert traced["subtask_id"] == "agent>a1-1" and traced["capability_id"] == "test.tool.echo"


def test_a_retried_call_finds_its_child(agents: SwarmClient) -> None:
    call = {"capability": "test.tool.echo", "input": {"text": "once"}}
    record = agents.run(template="children_once", params={"calls": [call, call], "key": "same"})
    assert record.machine.state is TaskState.COMPLETED, record.error
    first, second = agents.task(record.task_id).output()["outcomes"]  # type: ignore[index]
    assert first == second and first["subtask_id"] == "agent>same"
    children = [s for s in agents.task(record.task_id).status().subtasks if ">" in s]
    assert children == ["agent>same"]


@needs_mcp
def test_the_tool_agent_calls_capabilities_and_mcp_tools(agents: SwarmClient) -> None:
    task = script(
        {"tool": "test__tool__echo", "arguments": {"text": "hello"}},
        {"tool": "test__tool__echo", "arguments": {"words": 3}},
        {"tool": "no_such_tool", "arguments": {}},
        {"tool": "demo__add", "arguments": {"a": 2, "b": 3}},
        {"tool": "final", "arguments": {"answer": "all done"}},
    )
    params = {"task": task, "tools": ["test.tool.echo"], "mcp_servers": ["demo"]}
    record = agents.run(template="scripted_agent_once", params=params)
    assert record.machine.state is TaskState.COMPLETED, record.error
    out = agents.task(record.task_id).output()
    assert out is not None and out["answer"] == "all done" and out["finished"]
    tools = [e["outcome"] for e in out["transcript"] if e["role"] == "tool"]
    echo, bad_args, unknown, add = tools
    assert echo["ok"] and json.loads(echo["content"])["text"] == "HELLO"
    assert echo["subtask_id"] == "agent>a1-1" and echo["watermark"]
    assert not bad_args["ok"] and "'text' is a required property" in bad_args["content"]
    assert bad_args["subtask_id"] is None  # refused before any sub-task was made
    assert not unknown["ok"] and "unknown tool `no_such_tool`" in unknown["content"]
    assert add["ok"] and add["content"] == "5"
    usage = out["usage"]
    assert usage["tool_calls"] == 4 and usage["tool_errors"] == 2 and usage["model_calls"] == 5
    status = agents.task(record.task_id).status().model_dump(mode="json")
    assert status["subtasks"]["agent>a1-1"]["parent"] == "agent"
    assert [s for s in status["subtasks"] if ">" in s] == ["agent>a1-1"]
    assert status["usage"]["completion_tokens"] > 0


@needs_mcp
def test_tools_that_are_not_offered_are_refused(agents: SwarmClient) -> None:
    for params, problem in (
        ({"tools": ["test.echo.text"]}, "not offered to agents as a tool"),
        ({"mcp_servers": ["nobody"]}, "MCP server `nobody` is not registered"),
    ):
        record = agents.run(template="scripted_agent_once", params={"task": "x", **params})
        assert record.machine.state is TaskState.FAILED
        assert record.error is not None and problem in record.error.message


def test_the_tool_agent_asks_its_owner_and_goes_on_with_the_answer(agents: SwarmClient) -> None:
    """The model calls `ask_human` mid-run: the sub-task waits, the owner answers over
    the client, and the next attempt goes on from the saved conversation: nothing the
    first attempt did is done again."""
    from swarm_ray import InvalidInputError
    from tests.support import wait_until

    question = "Which word shall I shout?"
    task = script(
        {"tool": "test__tool__echo", "arguments": {"text": "before"}},
        {"tool": "ask_human", "arguments": {"question": question}},
        {"tool": "test__tool__echo", "arguments": {"text": "$result"}},
        {"tool": "final", "arguments": {"answer": "$result.text"}},
    )
    params = {"task": task, "tools": ["test.tool.echo"], "ask_human": True}
    handle = agents.start(template="scripted_agent_once", params=params)
    status = wait_until(lambda: (s := handle.status()).waiting and s, 120, "the agent to ask")
    [wait] = status.waiting
    assert wait.subtask_id == "agent" and wait.prompt == question
    with pytest.raises(InvalidInputError):
        handle.answer({"answer": ""})
    handle.answer({"answer": "gamma"})
    record = handle.wait(120)
    assert record.machine.state is TaskState.COMPLETED, record.error
    out = agents.task(record.task_id).output()
    assert out is not None and out["answer"] == "GAMMA" and out["finished"]
    tools = [e["outcome"] for e in out["transcript"] if e["role"] == "tool"]
    assert [t["tool"] for t in tools] == ["test__tool__echo", "ask_human", "test__tool__echo"]
    assert tools[1]["question"] == question and tools[1]["content"] == "gamma"
    assert out["usage"]["model_calls"] == 4 and out["usage"]["tool_calls"] == 3
    children = sorted(s for s in agents.task(record.task_id).status().subtasks if ">" in s)
    assert children == ["agent>a1-1", "agent>a2-1"]  # the first echo ran once
    events = agents.task(record.task_id).events_so_far()
    assert [e.status for e in events if e.kind == "human"] == ["waiting_for_human", "answered"]


ITEMS = ("Mars", "Earth", "Pluto")
WIDE_PARAMS = {
    "question": "How many moons? "
    + script(
        {"tool": "test__tool__echo", "arguments": {"text": "{item}"}},
        {"tool": "demo__planet", "arguments": {"name": "{item}"}},
        {"tool": "final", "arguments": {"answer": "found"}},
        row={"name": "$result.name", "moons": "$result.moons"},
    ),
    "row_schema": ROW_SCHEMA,
    "tools": ["test.tool.echo"],
    "mcp_servers": ["demo"],
}


def check_table(client: SwarmClient, task_id: str, output: dict[str, Any]) -> None:
    assert output["columns"] == ["name", "moons"]
    rows = {row["item"]: row for row in output["rows"]}
    assert rows["Mars"]["cells"] == {"name": "mars", "moons": 2}
    assert rows["Earth"]["cells"] == {"name": "earth", "moons": 1}
    assert output["missing"] == ["Pluto"]  # the MCP tool knows no Pluto: no valid row
    for index, item in ((0, "Mars"), (1, "Earth")):
        row = rows[item]
        assert row["subtask_id"] == f"research[{index}]"
        traced = trace(client, row["watermark"])
        assert traced["subtask_id"] == f"research[{index}]"
        (source,) = row["sources"][:1]
        assert source["subtask_id"] == f"research[{index}]>a1-1"
    assert "| Mars | mars | 2 |" in output["markdown"]
    status = client.task(task_id).status().model_dump(mode="json")
    assert any("Pluto" in w for w in status["warnings"])


@needs_mcp
def test_wide_research_traces_every_row(agents: SwarmClient) -> None:
    record = agents.run(template="wide_research_scripted", items=ITEMS, params=WIDE_PARAMS)
    assert record.machine.state is TaskState.COMPLETED, record.error
    output = agents.task(record.task_id).output()
    assert output is not None
    check_table(agents, record.task_id, output)


@needs_mcp
def test_wide_research_from_the_cli(
    agents: SwarmClient, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--name", ORCHESTRATOR, "run", "wide_research_scripted", "Mars", "Earth", "Pluto"]
    code = main([*args, "--params", json.dumps(WIDE_PARAMS)])
    out, _ = capsys.readouterr()
    assert code == 0
    result = json.loads(out)
    check_table(agents, result["task_id"], result["output"])


@needs_mcp
def test_wide_research_notebook_runs(
    agents: SwarmClient, capsys: pytest.CaptureFixture[str]
) -> None:
    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "wide_research.ipynb"
    namespace: dict[str, object] = {"ORCHESTRATOR": ORCHESTRATOR}
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), namespace)
    out = capsys.readouterr().out
    assert "| Mars | mars | 2 |" in out and "traced to research[0]" in out


def test_a_dangerous_output_fails_its_attempt_and_falls_back(agents: SwarmClient) -> None:
    record = agents.run(
        template="say_once", params={"text": "now run: rm -rf / --no-preserve-root"}
    )
    assert record.machine.state is TaskState.COMPLETED, record.error
    assert agents.task(record.task_id).output() == {
        "text": "NOW RUN: RM -RF / --NO-PRESERVE-ROOT",
        "pid": ANY,
    }
    status = agents.task(record.task_id).status().model_dump(mode="json")
    done = [e.result for e in record.log if getattr(e, "kind", "") == "done"]
    assert [r.capability_id for r in done] == ["test.tool.echo"]
    (switch,) = [w for w in status["warnings"] if "switched" in w]
    assert "sanitization_failed after 2 attempt(s)" in switch
    failed = [
        e
        for e in record.log
        if getattr(e, "kind", "") == "failed" and e.result.subtask_id == "agent"
    ]
    assert len(failed) == 2
    assert all(e.result.error.code == "sanitization_failed" for e in failed)
    assert "shell: rm -rf on a root or home" in failed[0].result.error.message
    counters = ray.get(agents.actor.metrics.remote())["counters"]["agent_error"]
    assert [c for c in counters if c[0]["agent"] == "test.unsafe.say"] == [
        [{"agent": "test.unsafe.say", "error_type": "sanitization_failed"}, 2.0]
    ]


def _nobody_processes() -> list[int]:
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid = next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:"))
        if uid == "65534":
            pids.append(int(pid))
    return pids


def test_hard_limits_stop_one_attempt_and_nothing_else(agents: SwarmClient) -> None:
    before = _nobody_processes()
    record = agents.run(template="limits_fanout", items=("bomb", "alloc", "spin", "ok"))
    assert record.machine.state is TaskState.COMPLETED, record.error
    subtasks = agents.task(record.task_id).status().model_dump(mode="json")["subtasks"]
    errors = {sid: s.get("error") or {} for sid, s in subtasks.items()}
    assert {sid: e.get("code") for sid, e in errors.items()} == {
        "run[0]": "resource_limit",
        "run[1]": "resource_limit",
        "run[2]": "resource_limit",
        "run[3]": None,
    }
    assert "limit of 16 processes" in errors["run[0]"]["message"]
    assert "MemoryError" in errors["run[1]"]["message"]
    assert "1.0 s of CPU time" in errors["run[2]"]["message"]
    agents_used = {e.result.agent for e in record.log if hasattr(e, "result")}
    assert len(agents_used) == 1  # one pooled agent ran all four: none was lost
    ok = agents.task(record.task_id).output()["results"]["run[3]"]  # type: ignore[index]
    if os.geteuid() == 0:
        assert ok["uid"] == 65534  # root's children run as nobody (root ignores NPROC)
    assert _nobody_processes() == before  # the fork bomb left nothing behind


@pytest.fixture(scope="module")
def weather_api() -> Iterator[str]:
    from swarm_ray.testing.llm_stubs import flaky_api_app, serve_in_thread

    port = int(os.environ["SWARM_RAY_TEST_API_PORT"])
    with serve_in_thread(flaky_api_app(), port=port) as url:
        yield url


def test_an_api_adapter_degrades_to_its_fallback_and_breaks_the_circuit(
    agents: SwarmClient, weather_api: str
) -> None:
    def mode(name: str) -> int:
        return int(httpx.post(f"{weather_api}/mode", json={"mode": name}).json()["calls"])

    def ask(city: str = "Oslo") -> tuple[Any, dict[str, Any] | None, tuple[str, ...]]:
        record = agents.run(template="weather_once", params={"city": city, "units": "metric"})
        return record, agents.task(record.task_id).output(), record.warnings

    mode("ok")
    _, answer, warnings = ask()
    assert answer == {"city": "Oslo", "temp_c": 21.5, "source": "api"} and warnings == ()
    for broken, why in (("down", "HTTP 503"), ("garbage", "does not fit `Weather`")):
        mode(broken)
        _, answer, warnings = ask()
        assert answer == {"city": None, "temp_c": None, "source": "fallback"}
        assert why in warnings[0] and "answered the declared fallback" in warnings[0]
    calls = mode("ok")  # two failures in a row: the circuit is open for 2 s
    _, answer, warnings = ask()
    assert answer is not None and answer["source"] == "fallback" and "circuit open" in warnings[0]
    assert mode("ok") == calls  # the API was not called
    time.sleep(2.1)
    _, answer, _ = ask()  # the cool-down passed: one trial call, which succeeds
    assert answer is not None and answer["source"] == "api"
    record, _, _ = ask("nowhere")  # a 4xx is the request's fault: no fallback, no retry
    assert record.machine.state is TaskState.FAILED and record.error is not None
    assert record.error.code == "invalid_input" and "HTTP 404" in record.error.message


def test_an_api_adapter_is_a_tool(agents: SwarmClient, weather_api: str) -> None:
    httpx.post(f"{weather_api}/mode", json={"mode": "ok"})
    task = script(
        {"tool": "test__api__weather", "arguments": {"city": "Lima"}},
        {"tool": "final", "arguments": {"answer": "warm"}},
    )
    record = agents.run(
        template="scripted_agent_once", params={"task": task, "tools": ["test.api.weather"]}
    )
    assert record.machine.state is TaskState.COMPLETED, record.error
    transcript = agents.task(record.task_id).output()["transcript"]  # type: ignore[index]
    (call,) = [e["outcome"] for e in transcript if e["outcome"]]
    assert call["ok"] and json.loads(call["content"])["city"] == "Lima"
    assert agents.task(record.task_id).status().subtasks[call["subtask_id"]].status == "succeeded"


@needs_mcp
def test_wide_research_through_the_gateway(
    agents: SwarmClient, serve_port: int, tmp_path: Path
) -> None:
    from ray import serve

    from swarm_ray.gateway import GatewayConfig, build_app

    key = "agents-gateway-key-" + "0" * 16
    (tmp_path / "keys").write_text(f"ops:{key}:admin\n")  # it reads `/metrics` too
    config = GatewayConfig(
        orchestrator=ORCHESTRATOR,
        catalogs=("swarm_ray.testing.agents:agents_catalog",),
        api_keys_file=str(tmp_path / "keys"),
    )
    serve.run(build_app(config), name="agents-gateway", route_prefix="/agents")
    try:
        base = f"http://127.0.0.1:{serve_port}/agents"
        auth = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, headers=auth, timeout=30) as http:
            body = {
                "template": "wide_research_scripted",
                "items": list(ITEMS),
                "params": WIDE_PARAMS,
            }
            accepted = http.post("/v1/tasks", json=body)
            assert accepted.status_code == 202, accepted.text
            task_id = accepted.json()["task_id"]
            record = agents.task(task_id).wait(timeout_s=120)
            assert record.machine.state is TaskState.COMPLETED, record.error
            report = http.get(f"/v1/tasks/{task_id}/report").json()
            check_table(agents, task_id, report["output"])
            metrics = http.get("/metrics").text
            assert "swarm_llm_budget_queue_length" in metrics  # the families are there
    finally:
        serve.delete("agents-gateway")


@needs_mcp
def test_a_budget_stops_the_swarm_once_its_tokens_are_spent(agents: SwarmClient) -> None:
    """Six researchers, a budget a few of them use up: the task fails `budget_exceeded`
    with the rest stopped, and the tokens counted stay near the budget."""
    items = ("Mars", "Earth", "Venus", "Saturn", "Jupiter", "Neptune")
    full = agents.run(template="wide_research_scripted", items=items[:1], params=WIDE_PARAMS)
    assert full.machine.state is TaskState.COMPLETED, full.error
    one = agents.task(full.task_id).status().usage
    assert one is not None and one.total_tokens > 0
    budget = {"max_tokens": 2 * one.total_tokens}
    record = agents.run(
        template="wide_research_scripted", items=items, params=WIDE_PARAMS, budget=budget
    )
    assert record.machine.state is TaskState.FAILED
    assert record.error is not None and record.error.code == "budget_exceeded"
    assert "budget.max_tokens" in record.error.message
    spent = agents.task(record.task_id).status().usage
    assert spent is not None and budget["max_tokens"] < spent.total_tokens
    assert spent.total_tokens < len(items) * one.total_tokens  # stopped, not run through
