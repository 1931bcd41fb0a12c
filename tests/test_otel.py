"""OpenTelemetry traces of tasks, received by a real OTLP/HTTP endpoint (nothing mocked).

The test runs a small OTLP/HTTP receiver (`POST /v1/traces`, protobuf, decoded with the
collector's own `ExportTraceServiceRequest`) and an orchestrator on the session's Ray
whose process has `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at it (`connect(env=...)`).
Tasks run through that orchestrator, directly and through a real Serve gateway.
"""

from __future__ import annotations

import gzip
import json
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from swarm_ray import SwarmClient, TaskState, short_id
from swarm_ray.core.model._traceparent import parse_traceparent
from tests.support import wait_until

pytestmark = [pytest.mark.timeout(300), pytest.mark.ray]

NAME = "swarm-otel-test"


@dataclass(frozen=True)
class Received:
    """One span as the receiver got it, with its attributes read out."""

    span: Span
    resource: dict[str, Any]

    @property
    def attributes(self) -> dict[str, Any]:
        return {a.key: _value(a.value) for a in self.span.attributes}

    @property
    def trace_id(self) -> str:
        return self.span.trace_id.hex()

    @property
    def span_id(self) -> str:
        return self.span.span_id.hex()

    @property
    def parent_id(self) -> str:
        return self.span.parent_span_id.hex()


def _value(value: Any) -> Any:
    return getattr(value, value.WhichOneof("value"))


@dataclass
class Receiver:
    """What an OTLP/HTTP endpoint received: every span of every export request."""

    url: str
    spans: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def trace(self, trace_id: str) -> list[Received]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def root_of(self, task_id: str) -> Received | None:
        with self.lock:
            roots = [
                s
                for s in self.spans
                if s.span.name.startswith("swarm.task ")
                and s.attributes.get("swarm.task.id") == task_id
            ]
        assert len(roots) <= 1, f"task {task_id} has {len(roots)} root spans"
        return roots[0] if roots else None


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    got = Receiver(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path != "/v1/traces" or self.headers["Content-Type"] != (
                "application/x-protobuf"
            ):
                self.send_response(404)
                self.end_headers()
                return
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
            with got.lock:
                for resource_spans in request.resource_spans:
                    resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                    for scope_spans in resource_spans.scope_spans:
                        got.spans += [Received(s, resource) for s in scope_spans.spans]
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield got
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def traced(
    ray_cluster: None, receiver: Receiver, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SwarmClient]:
    import swarm_ray

    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog", "swarm_ray.testing.agents:agents_catalog"],
        state_dir=tmp_path_factory.mktemp("otel-swarm"),
        name=NAME,
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "swarm-test"},
    )
    yield client
    client.shutdown()


def _trace_of(receiver: Receiver, task_id: str) -> tuple[Received, list[Received]]:
    """The task's root span once it arrived, and every other span of its trace."""
    root: Received = wait_until(lambda: receiver.root_of(task_id), 60, f"{task_id}'s root")
    others = [s for s in receiver.trace(root.trace_id) if s.span_id != root.span_id]
    return root, others


def test_a_task_is_one_trace_whose_spans_follow_its_plan(
    traced: SwarmClient, receiver: Receiver, tmp_path: Path
) -> None:
    items = ("a", "b", "c")
    record = traced.run(
        template="echo_fanout",
        items=items,
        params={"record_dir": str(tmp_path), "fail_first": 1},  # each echo fails once
    )
    assert record.machine.state is TaskState.COMPLETED, record.error
    assert record.plan is not None
    status = traced.task(record.task_id).status()
    root, attempts = _trace_of(receiver, record.task_id)

    assert root.trace_id == record.trace_id  # the task's own trace id, as exported
    assert root.parent_id == ""  # no caller's trace: the root is a trace's root
    assert root.span.name == "swarm.task echo_fanout"
    assert root.resource["service.name"] == "swarm-test"
    assert root.attributes["swarm.task.state"] == "completed"
    assert root.attributes["swarm.task.template"] == "echo_fanout"
    assert root.attributes["swarm.task.subtasks"] == len(record.plan.subtasks)
    assert "swarm.task.owner" not in root.attributes  # a trusted caller's task

    # Every other span of the trace is an attempt, a child of the root; together they
    # are every attempt of every sub-task of the plan, numbered 1..n, the last succeeded.
    assert attempts and all(s.parent_id == root.span_id for s in attempts)
    assert all(s.span.name.startswith("swarm.attempt ") for s in attempts)
    by_subtask: dict[str, list[Received]] = {}
    for span in attempts:
        by_subtask.setdefault(span.attributes["swarm.subtask.id"], []).append(span)
    assert set(by_subtask) == {s.id for s in record.plan.subtasks}
    for spec in record.plan.subtasks:
        spans = sorted(by_subtask[spec.id], key=lambda s: s.attributes["swarm.attempt"])
        view = status.subtasks[spec.id]
        assert [s.attributes["swarm.attempt"] for s in spans] == list(range(1, view.attempts + 1))
        last = spans[-1]
        assert last.span.name == f"swarm.attempt {spec.capability_id}"
        assert last.attributes["swarm.capability.id"] == spec.capability_id
        assert last.span.status.code != Status.STATUS_CODE_ERROR
        assert view.watermark is not None
        assert last.attributes["swarm.watermark"] == short_id(view.watermark)
        assert last.attributes["swarm.agent"] and last.attributes["swarm.node.id"]
        assert last.attributes["gen_ai.usage.input_tokens"] == 0  # echo uses no model
        assert "swarm.cost" not in last.attributes
        for failed in spans[:-1]:
            assert failed.span.status.code == Status.STATUS_CODE_ERROR
            assert failed.attributes["error.type"] == "agent_error"
            assert "fails on purpose" in failed.span.status.message
    echoes = [s for s in record.plan.subtasks if s.stage == "echo"]
    assert len(echoes) == len(items)
    assert all(len(by_subtask[s.id]) == 2 for s in echoes)  # failed once, then succeeded

    # Times: each attempt lies within its task, starting when it was queued; the join
    # was queued only after every echo had finished.
    for span in attempts:
        assert root.span.start_time_unix_nano <= span.span.start_time_unix_nano
        assert span.span.start_time_unix_nano <= span.span.end_time_unix_nano
        assert span.span.end_time_unix_nano <= root.span.end_time_unix_nano
        (started,) = [e for e in span.span.events if e.name == "started"]
        assert span.span.start_time_unix_nano <= started.time_unix_nano
        assert started.time_unix_nano <= span.span.end_time_unix_nano
    (join,) = [s for s in record.plan.subtasks if s.stage == "join"]
    last_echo_end = max(s.span.end_time_unix_nano for e in echoes for s in by_subtask[e.id])
    assert by_subtask[join.id][0].span.start_time_unix_nano >= last_echo_end
    assert root.span.end_time_unix_nano - root.span.start_time_unix_nano < 120e9

    # Another task is another trace.
    other = traced.run(template="echo_fanout", items=("z",))
    other_root, other_spans = _trace_of(receiver, other.task_id)
    assert other_root.trace_id == other.trace_id != record.trace_id
    assert len(other_spans) == 2  # one echo and the join, each right the first time


def test_an_agents_model_and_tool_calls_are_gen_ai_spans_under_its_attempt(
    traced: SwarmClient, receiver: Receiver
) -> None:
    """The tool agent's turns are `chat` spans and its tool call an `execute_tool` span,
    children of its attempt's span; the tool's own sub-task is an attempt of the task."""
    steps = [
        {"tool": "test__tool__echo", "arguments": {"text": "hi"}},
        {"tool": "final", "arguments": {"answer": "done"}},
    ]
    task = f"Do the task.\nSCRIPT: {json.dumps(steps)}"
    params = {"task": task, "tools": ["test.tool.echo"]}
    record = traced.run(template="scripted_agent_once", params=params)
    assert record.machine.state is TaskState.COMPLETED, record.error
    root, spans = _trace_of(receiver, record.task_id)
    by_name: dict[str, list[Received]] = {}
    for span in spans:
        by_name.setdefault(span.span.name, []).append(span)
    (agent,) = by_name["swarm.attempt test.agent.scripted"]
    (child,) = by_name["swarm.attempt test.tool.echo"]
    assert agent.parent_id == root.span_id and child.parent_id == root.span_id
    chats = by_name["chat scripted"]
    (tool,) = by_name["execute_tool test__tool__echo"]
    assert len(chats) == 2  # the turn that called the tool, and the answer
    for call in (*chats, tool):
        assert call.parent_id == agent.span_id
        assert agent.span.start_time_unix_nano <= call.span.start_time_unix_nano
        assert call.span.end_time_unix_nano <= agent.span.end_time_unix_nano
    for chat in chats:
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.provider.name"] == "scripted"
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.span.kind == Span.SPAN_KIND_CLIENT
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "test__tool__echo"
    assert tool.attributes["gen_ai.provider.name"] == "swarm"
    assert tool.span.status.code != Status.STATUS_CODE_ERROR
    # the tool ran while its call was open: the child's attempt lies inside it
    assert tool.span.start_time_unix_nano <= child.span.end_time_unix_nano
    assert child.span.end_time_unix_nano <= tool.span.end_time_unix_nano


def test_a_cancelled_task_is_traced_to_its_end(
    traced: SwarmClient, receiver: Receiver, tmp_path: Path
) -> None:
    task_id = traced.submit(
        template="echo_fanout",
        items=("slow",),
        params={"delay_s": 30, "record_dir": str(tmp_path)},
    )
    wait_until(
        lambda: any(v.status == "running" for v in traced.task(task_id).status().subtasks.values()),
        60,
        "the echo to run",
    )
    record = traced.task(task_id).cancel()
    root, attempts = _trace_of(receiver, task_id)
    assert record.machine.state is TaskState.CANCELLED
    assert root.attributes["swarm.task.state"] == "cancelled"
    assert root.attributes["swarm.error.code"] == "cancelled"
    assert root.span.status.code != Status.STATUS_CODE_ERROR  # stopped, not failed
    assert root.span.end_time_unix_nano - root.span.start_time_unix_nano < 30e9
    assert all(s.parent_id == root.span_id for s in attempts)


@pytest.fixture(scope="module")
def gateway(
    traced: SwarmClient, serve_port: int, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    from ray import serve

    from swarm_ray.gateway import GatewayConfig, build_app

    key = secrets.token_urlsafe(24)
    keys = tmp_path_factory.mktemp("otel-gateway") / "keys"
    keys.write_text(f"tracer:{key}\n")
    config = GatewayConfig(
        orchestrator=NAME,
        catalogs=("swarm_ray.testing:testing_catalog",),
        api_keys_file=str(keys),
        state_dir=None,
    )
    serve.run(build_app(config), name="swarm-otel-gateway", route_prefix="/otel")
    with httpx.Client(
        base_url=f"http://127.0.0.1:{serve_port}/otel",
        timeout=60,
        headers={"Authorization": f"Bearer {key}"},
    ) as http:
        yield http
    serve.delete("swarm-otel-gateway")


def test_a_traceparent_sent_to_the_gateway_starts_the_tenants_own_trace(
    gateway: httpx.Client, traced: SwarmClient, receiver: Receiver
) -> None:
    """A tenant's trace context places its task under its span, in a trace of its own.

    It may not join another's trace by naming its id, nor choose the id that decides
    audit sampling (`_otel.tenant_traceparent`); its tasks sent with one trace id share
    one trace.
    """
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    header = f"00-{trace_id}-{parent_id}-01"
    body = {"template": "echo_fanout", "items": ["x", "y"], "task_id": "traced-1"}
    accepted = gateway.post("/v1/tasks", json=body, headers={"traceparent": header})
    assert accepted.status_code == 202, accepted.text
    task_id = accepted.json()["task_id"]
    # The same request again, from a retrying client with a new span: the same task.
    again = gateway.post(
        "/v1/tasks", json=body, headers={"traceparent": f"00-{trace_id}-{'1' * 16}-01"}
    )
    assert again.status_code == 202, again.text
    assert again.json()["task_id"] == task_id

    root, attempts = _trace_of(receiver, task_id)
    assert root.trace_id != trace_id and root.parent_id == parent_id
    assert traced.task(task_id).record().trace_id == root.trace_id  # events and logs share it
    assert root.attributes["swarm.task.owner"] == "tracer"
    assert len(attempts) == 3 and all(s.parent_id == root.span_id for s in attempts)
    other = {**body, "task_id": "traced-2"}
    second = gateway.post("/v1/tasks", json=other, headers={"traceparent": header})
    assert second.status_code == 202, second.text
    assert _trace_of(receiver, second.json()["task_id"])[0].trace_id == root.trace_id


@pytest.mark.parametrize(
    "header",
    [
        "00-{t}-{s}-01-extra",  # more fields than version 00 has
        "01-{t}-{s}-01",  # a version this reader does not know
        "00-{T}-{s}-01",  # upper case
        "00-" + "0" * 32 + "-{s}-01",  # an all-zero trace id
        "00-{t}-" + "0" * 16 + "-01",  # an all-zero parent id
        "00-{t}-{s}-1",  # short flags
    ],
)
def test_a_malformed_traceparent_is_ignored(
    gateway: httpx.Client, receiver: Receiver, header: str
) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    value = header.format(t=trace_id, T=trace_id.upper(), s=parent_id)
    assert parse_traceparent(value) is None
    accepted = gateway.post(
        "/v1/tasks",
        json={"template": "echo_fanout", "items": ["m"]},
        headers={"traceparent": value},
    )
    assert accepted.status_code == 202, accepted.text
    root, _ = _trace_of(receiver, accepted.json()["task_id"])
    assert root.parent_id == "" and root.trace_id != trace_id


def test_two_traceparent_headers_are_ignored(gateway: httpx.Client, receiver: Receiver) -> None:
    first = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    second = f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"
    accepted = gateway.post(
        "/v1/tasks",
        json={"template": "echo_fanout", "items": ["n"]},
        headers=[("traceparent", first), ("traceparent", second)],
    )
    assert accepted.status_code == 202, accepted.text
    root, _ = _trace_of(receiver, accepted.json()["task_id"])
    assert root.parent_id == ""
