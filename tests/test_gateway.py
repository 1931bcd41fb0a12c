"""The Serve gateway against real Serve on the session's local Ray (nothing mocked).

The gateway runs with two replicas in front of the session's orchestrator (testing
catalog), so a request can land on either and swarm-level answers must agree.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from prometheus_client.parser import text_string_to_metric_families
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    status_code_conformance,
)
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as ws_connect

from swarm_ray import SwarmClient
from swarm_ray.testing import SICK_FLAG
from tests.support import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.ray]


@dataclass(frozen=True)
class Gateway:
    url: str
    key: str
    load_keys: tuple[str, ...] = ()
    """Keys of 50 more principals, for many clients at once (each its own tenant)."""
    admin_key: str = ""
    """The operator's key: `/metrics` and the detailed `/health` need an admin."""

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    @property
    def admin(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_key}"}

    def client(self, **kwargs: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)


@pytest.fixture(scope="module")
def gateway(
    swarm: SwarmClient, serve_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    from ray import serve

    from swarm_ray.gateway import GatewayConfig, build_app

    key = secrets.token_urlsafe(24)
    load_keys = tuple(secrets.token_urlsafe(24) for _ in range(50))
    keys = tmp_path_factory.mktemp("gateway") / "keys"
    listed = "".join(f"load-{n}:{k}\n" for n, k in enumerate(load_keys))
    admin_key = secrets.token_urlsafe(24)
    keys.write_text(
        f"# test keys\n{secrets.token_urlsafe(24)}\n{key}\n{listed}ops:{admin_key}:admin\n"
    )
    config = GatewayConfig(
        orchestrator="swarm-test",
        catalogs=("swarm_ray.testing:testing_catalog",),
        api_keys_file=str(keys),
        num_replicas=2,
        event_poll_s=1.0,
    )
    serve.run(build_app(config), name="swarm-gateway", route_prefix="/")
    yield Gateway(
        url=f"http://127.0.0.1:{serve_port}", key=key, load_keys=load_keys, admin_key=admin_key
    )
    serve.delete("swarm-gateway")


def _finished(http: httpx.Client, task_id: str, timeout_s: float = 60.0) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        status: dict[str, Any] = http.get(f"/v1/tasks/{task_id}").json()
        return status if status["state"] in ("completed", "failed", "cancelled") else None

    result: dict[str, Any] = wait_until(done, timeout_s, f"task {task_id} to end")
    return result


def test_rest_submit_status_report_and_list(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        accepted = http.post("/v1/tasks", json={"template": "echo_fanout", "items": ["a", "b"]})
        assert accepted.status_code == 202, accepted.text
        task_id = accepted.json()["task_id"]
        assert accepted.json()["events_url"] == f"/v1/tasks/{task_id}/events"

        status = _finished(http, task_id)
        assert status["state"] == "completed"
        assert status["template"] == "echo_fanout"
        echoes = {k: v for k, v in status["subtasks"].items() if v["stage"] == "echo"}
        assert len(echoes) == 2
        for sub in echoes.values():
            assert sub["status"] == "succeeded"
            assert sub["capability"] == "test.echo.text"
            assert sub["watermark"].count(".") == 1  # a result reference with its token
        join = next(v for v in status["subtasks"].values() if v["stage"] == "join")
        assert sorted(join["depends_on"]) == sorted(echoes)

        report = http.get(f"/v1/tasks/{task_id}/report")
        assert report.status_code == 200
        assert sorted(report.json()["output"]["text"].split()) == ["A", "B"]

        listed = http.get("/v1/tasks", params={"limit": 50}).json()
        assert task_id in [t["task_id"] for t in listed]

        missing = http.get("/v1/tasks/nope-not-a-task")
        assert missing.status_code == 404
        assert missing.json()["code"] == "task_not_found"


def test_report_of_a_running_task_is_409_and_cancel_works(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        body = {"template": "echo_fanout", "items": ["slow"], "params": {"delay_s": 20}}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
        early = http.get(f"/v1/tasks/{task_id}/report")
        assert early.status_code == 409
        assert "not completed" in early.json()["detail"]
        cancelled = http.post(f"/v1/tasks/{task_id}/cancel")
        assert cancelled.status_code == 200
        assert _finished(http, task_id)["state"] == "cancelled"


def test_auth_required_everywhere_but_health(gateway: Gateway) -> None:
    with gateway.client() as http:
        for method, path in [
            ("GET", "/v1/tasks"),
            ("POST", "/v1/tasks"),
            ("GET", "/v1/tasks/abc"),
            ("GET", "/v1/capabilities"),
            ("GET", "/metrics"),
            ("POST", "/v1/debug/watermark/extract"),
        ]:
            response = http.request(method, path, json={"template": "echo_fanout"})
            assert response.status_code == 401, (method, path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
        wrong = http.get("/v1/tasks", headers={"Authorization": "Bearer " + "x" * 32})
        assert wrong.status_code == 401
        assert http.get("/health").status_code == 200


def test_keys_never_reach_the_logs(gateway: Gateway) -> None:
    import ray

    with gateway.client(headers=gateway.auth) as http:
        assert http.get("/v1/tasks").status_code == 200
    with gateway.client(headers={"Authorization": "Bearer wrong-key-wrong-key-1234"}) as http:
        assert http.get("/v1/tasks").status_code == 401
    logs = Path(ray.get_runtime_context().gcs_address and "/tmp/ray/session_latest/logs")
    texts = [p.read_text(errors="replace") for p in logs.rglob("*") if p.is_file()]
    assert texts, "no Ray logs found"
    assert not [t for t in texts if gateway.key in t or "wrong-key-wrong-key-1234" in t]


def test_invalid_requests_get_422_with_field_detail(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        neither = http.post("/v1/tasks", json={"items": ["a"]})
        assert neither.status_code == 422
        assert "needs a `query` or a `template`" in json.dumps(neither.json())

        extra = http.post("/v1/tasks", json={"template": "echo_fanout", "colour": "red"})
        assert extra.status_code == 422
        assert any(d["loc"][-1] == "colour" for d in extra.json()["detail"])

        bad_id = http.post("/v1/tasks", json={"template": "echo_fanout", "task_id": "a b"})
        assert bad_id.status_code == 422
        assert any(d["loc"][-1] == "task_id" for d in bad_id.json()["detail"])

        unknown = http.post("/v1/tasks", json={"template": "no_such_template"})
        assert unknown.status_code == 422
        assert unknown.json()["code"] == "no_template"
        assert "no_such_template" in unknown.json()["detail"][0]["msg"]


def _events(
    gateway: Gateway, task_id: str, after: int, limit: int | None
) -> tuple[list[dict[str, Any]], int | None]:
    url = gateway.url.replace("http", "ws") + f"/v1/tasks/{task_id}/events?after_seq={after}"
    got: list[dict[str, Any]] = []
    with ws_connect(url, additional_headers=gateway.auth, open_timeout=30) as ws:
        try:
            while limit is None or len(got) < limit:
                got.append(json.loads(ws.recv(timeout=60)))
        except ConnectionClosed as closed:
            return got, closed.rcvd.code if closed.rcvd else None
    return got, None


def test_websocket_events_with_reconnect(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        items = [f"w{i}" for i in range(4)]
        body = {"template": "echo_fanout", "items": items, "params": {"delay_s": 0.3}}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
    first, code = _events(gateway, task_id, after=0, limit=3)
    assert code is None and [e["seq"] for e in first] == [1, 2, 3]
    rest, code = _events(gateway, task_id, after=first[-1]["seq"], limit=None)
    assert code == 1000
    seqs = [e["seq"] for e in first + rest]
    assert seqs == list(range(1, len(seqs) + 1))  # nothing missed, nothing twice
    assert rest[-1]["kind"] == "state" and rest[-1]["status"] == "completed"
    assert {e["trace_id"] for e in first + rest} == {first[0]["trace_id"]}
    done = [e for e in rest if e["kind"] == "subtask" and e["status"] == "succeeded"]
    assert len(done) == len(items) + 1


def test_websocket_refuses_bad_key_and_unknown_task(gateway: Gateway) -> None:
    url = gateway.url.replace("http", "ws") + "/v1/tasks/whatever/events"
    with (
        ws_connect(url, additional_headers={"Authorization": "Bearer nope"}) as ws,
        pytest.raises(ConnectionClosed) as closed,
    ):
        ws.recv(timeout=30)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
    _, code = _events(gateway, "no-such-task", after=0, limit=None)
    assert code == 4404


def test_capabilities_with_schemas(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        listed = http.get("/v1/capabilities").json()
        ids = {c["id"] for c in listed}
        assert {"test.echo.text", "test.join.texts"} <= ids
        one = http.get("/v1/capabilities/test.echo.text").json()
        assert one["input_schema"]["properties"]["text"]["type"] == "string"
        assert "text" in one["input_schema"]["required"]
        assert one["output_schema"]["properties"]["pid"]["type"] == "integer"
        assert http.get("/v1/capabilities/test.nothing.here").status_code == 404


def test_health_reports_capabilities_and_the_score(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        task_id = http.post("/v1/tasks", json={"template": "echo_fanout", "items": ["h"]}).json()
        _finished(http, task_id["task_id"])
        health = http.get("/health", headers=gateway.admin).json()  # every capability
        assert http.get("/health").json() == {"status": health["status"]}  # a tenant's key
    with gateway.client() as anonymous:
        assert anonymous.get("/health").json() == {"status": health["status"]}
    echo = health["capabilities"]["test.echo.text"]
    assert echo["version"] == "1" and echo["attempts"] >= 1
    assert echo["latency_ms"] is not None and echo["latency_ms"] >= 0
    expected = (
        0.4 * health["success_rate"] + 0.3 * health["latency_score"] + 0.3 * health["availability"]
    )
    assert health["swarm_health_score"] == pytest.approx(expected, abs=1e-5)
    assert 0.0 <= health["swarm_health_score"] <= 1.0


def test_failing_health_checks_take_a_capability_out_of_dispatch(gateway: Gateway) -> None:
    SICK_FLAG.unlink(missing_ok=True)
    with gateway.client(headers=gateway.auth) as http:

        def run_checked() -> dict[str, Any]:
            body = {"template": "echo_checked", "items": ["c"]}
            return _finished(http, http.post("/v1/tasks", json=body).json()["task_id"])

        def in_dispatch() -> bool:
            caps = http.get("/health", headers=gateway.admin).json()["capabilities"]
            return bool(caps["test.echo.checked"]["in_dispatch"])

        assert run_checked()["state"] == "completed"  # deploys it; healthy
        SICK_FLAG.touch()
        try:
            wait_until(lambda: not in_dispatch(), 30, "the capability to be taken out")
            health = http.get("/health", headers=gateway.admin).json()
            assert health["status"] == "degraded"
            assert health["capabilities"]["test.echo.checked"]["status"] == "unavailable"
            assert "sick flag" in health["capabilities"]["test.echo.checked"]["last_error"]
            refused = run_checked()
            echo = next(v for v in refused["subtasks"].values() if v["stage"] == "echo")
            assert echo["status"] == "failed"
            assert echo["error"]["code"] == "agent_unavailable"
            assert "out of dispatch" in echo["error"]["message"]
        finally:
            SICK_FLAG.unlink(missing_ok=True)
        wait_until(in_dispatch, 30, "the capability to come back")
        assert run_checked()["state"] == "completed"


def test_metrics_are_swarm_wide_and_named(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        task_id = http.post("/v1/tasks", json={"template": "echo_fanout", "items": ["m"]}).json()
        _finished(http, task_id["task_id"])
        assert http.get("/metrics").status_code == 403  # a tenant's key
        texts = [http.get("/metrics", headers=gateway.admin) for _ in range(6)]
    assert all(t.status_code == 200 for t in texts)
    assert texts[0].headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(texts[0].text)}
    for name in (
        "agent_task_duration_seconds",
        "agent_error",
        "swarm_task_transitions",
        "swarm_watermark_rejections",
        "swarm_retries",
        "swarm_breaker_state",
        "swarm_tasks",
        "swarm_health_score",
    ):
        assert name in families, name
    completed = sum(
        s.value
        for s in families["swarm_task_transitions"].samples
        if s.labels.get("to_state") == "completed" and s.name.endswith("_total")
    )
    tasks = {s.labels["state"]: s.value for s in families["swarm_tasks"].samples}
    assert completed >= 1 and tasks.get("completed", 0) >= 1
    # Whichever replica answered, the swarm-level counts are the same orchestrator's.
    counts = {
        sum(s.value for s in f.samples if s.labels.get("to_state") == "completed")
        for t in texts
        for f in text_string_to_metric_families(t.text)
        if f.name == "swarm_task_transitions"
    }
    assert len(counts) == 1


def test_watermark_extract_traces_a_pasted_passage(gateway: Gateway) -> None:
    with gateway.client(headers=gateway.auth) as http:
        body = {"template": "echo_fanout", "items": ["traced"]}
        status = _finished(http, http.post("/v1/tasks", json=body).json()["task_id"])
        sid, echo = next((k, v) for k, v in status["subtasks"].items() if v["stage"] == "echo")
        token = echo["watermark"]
        passage = f"| traced | TRACED | source {token} |\n"
        traced = http.post(
            "/v1/debug/watermark/extract", json={"text": passage, "include_input": True}
        )
        assert traced.status_code == 200, traced.text
        [found] = traced.json()
        assert found["valid"] is True and found["known"] is True
        assert found["task_id"] == status["task_id"] and found["subtask_id"] == sid
        assert found["capability_id"] == "test.echo.text"
        assert found["agent"] == echo["agent"] and found["accepted_result"] is True
        assert found["input"]["text"] == "traced" and found["input_verified"] is True
        assert found["issued_at"] <= found["finished_at"]

        body_part, sig = token.split(".")
        forged = f"{body_part}.{('A' if sig[0] != 'A' else 'B')}{sig[1:]}"
        [bad] = http.post("/v1/debug/watermark/extract", json={"text": forged}).json()
        assert bad["valid"] is False and bad["reason"] == "forged"

        none = http.post("/v1/debug/watermark/extract", json={"text": "no token here"})
        assert none.status_code == 422
        assert none.json()["code"] == "no_watermark"


def test_audit_trail_per_task_and_agent(gateway: Gateway, swarm_state_dir: Path) -> None:
    with gateway.client(headers=gateway.auth) as http:
        body = {"template": "echo_fanout", "items": ["audit"]}
        status = _finished(http, http.post("/v1/tasks", json=body).json()["task_id"])
    task_file = swarm_state_dir / "audit" / "tasks" / f"{status['task_id']}.jsonl"

    def written() -> list[dict[str, Any]] | None:  # the trail is flushed about once a second
        if not task_file.exists():
            return None
        lines = [json.loads(line) for line in task_file.read_text().splitlines()]
        return lines if any(line.get("status") == "completed" for line in lines) else None

    lines: list[dict[str, Any]] = wait_until(written, 30, "the audit trail to be flushed")
    assert {line["trace_id"] for line in lines} == {lines[0]["trace_id"]}
    assert [line["seq"] for line in lines if line["level"] == "INFO"] == list(
        range(1, 1 + sum(line["level"] == "INFO" for line in lines))
    )
    debug = [line for line in lines if line["level"] == "DEBUG"]
    assert len(debug) == 2 and all(d["ok"] for d in debug)
    agent_file = swarm_state_dir / "audit" / "agents" / "test.echo.text.jsonl"
    assert status["task_id"] in agent_file.read_text()


def test_openapi_and_docs(gateway: Gateway) -> None:
    with gateway.client() as http:
        assert http.get("/openapi.json").status_code == 401
        assert http.get("/docs").status_code == 401
    with gateway.client(headers=gateway.auth) as http:
        spec = http.get("/openapi.json").json()
        assert http.get("/docs").status_code == 200
    for path in (
        "/v1/tasks",
        "/v1/tasks/{task_id}",
        "/v1/tasks/{task_id}/cancel",
        "/v1/tasks/{task_id}/report",
        "/v1/capabilities",
        "/v1/capabilities/{capability_id}",
        "/health",
        "/metrics",
        "/v1/debug/watermark/extract",
    ):
        assert path in spec["paths"], path
    assert "HTTPBearer" in spec["components"]["securitySchemes"]


_ENDED = frozenset({"completed", "failed", "cancelled"})


def test_load_1000_tasks_from_50_clients_none_lost(gateway: Gateway, swarm: SwarmClient) -> None:
    total, clients = 1000, 50
    accepted: list[str] = []
    refused: list[tuple[int, str]] = []

    async def client(queue: asyncio.Queue[int], key: str) -> None:
        async with httpx.AsyncClient(
            base_url=gateway.url, headers={"Authorization": f"Bearer {key}"}, timeout=120
        ) as http:
            while not queue.empty():
                i = queue.get_nowait()
                body = {"template": "noop_fanout", "items": [i]}
                response = await http.post("/v1/tasks", json=body)
                if response.status_code == 202:
                    accepted.append(response.json()["task_id"])
                else:
                    refused.append((response.status_code, response.text))

    async def main() -> None:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(total):
            queue.put_nowait(i)
        await asyncio.gather(*(client(queue, key) for key in gateway.load_keys[:clients]))

    asyncio.run(main())
    assert refused == [] and len(accepted) == total and len(set(accepted)) == total
    # Every task is listed and ends completed (one listing a poll, not a wait per task).
    deadline = time.monotonic() + 120
    while True:
        states = {t.task_id: t.state for t in swarm.tasks(limit=total)}
        ended = [states.get(t) for t in accepted if states.get(t) in _ENDED]
        if len(ended) == total or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert set(accepted) <= set(states)
    assert {states[t] for t in accepted} == {"completed"}


def test_openapi_operations_never_fail_on_the_server(gateway: Gateway) -> None:
    """Schemathesis: generated requests to every documented operation, with a valid key."""
    schema = schemathesis.openapi.from_url(f"{gateway.url}/openapi.json", headers=gateway.auth)
    checks = [not_a_server_error, status_code_conformance, content_type_conformance]
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 9

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=15,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def call(case: Any) -> None:
            case.call_and_validate(base_url=gateway.url, headers=gateway.auth, checks=checks)

        call()


def test_websocket_stream_survives_an_orchestrator_restart(
    gateway: Gateway, swarm: SwarmClient
) -> None:
    import ray

    with gateway.client(headers=gateway.auth) as http:
        items = [f"r{i}" for i in range(6)]
        body = {"template": "echo_fanout", "items": items, "params": {"delay_s": 0.5}}
        task_id = http.post("/v1/tasks", json=body).json()["task_id"]
    url = gateway.url.replace("http", "ws") + f"/v1/tasks/{task_id}/events"
    seen: list[dict[str, Any]] = []
    with ws_connect(url, additional_headers=gateway.auth, open_timeout=30) as ws:
        seen.append(json.loads(ws.recv(timeout=60)))
        ray.kill(swarm.actor, no_restart=False)  # Ray restarts it; it reloads the task
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                seen.append(json.loads(ws.recv(timeout=120)))
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(1, len(seqs) + 1))
    assert seen[-1]["status"] == "completed"
    assert any(e["kind"] == "state" and "resumed" in e["summary"] for e in seen)
