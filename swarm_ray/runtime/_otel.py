"""OpenTelemetry traces of tasks, exported over OTLP/HTTP when an endpoint is set.

One trace per task, made in the orchestrator from what it already knows, so agents need
no tracing setup of their own:

    swarm.task <template or planner>   the task, from its creation to its end
      swarm.plan <planner>             each attempt of the planning call (planner tasks)
      swarm.attempt <capability>       each accepted attempt, queued_at .. finished_at
        chat <model>                   each model call it made (GenAI conventions)
        execute_tool <tool>            each tool or MCP call it made

The model and tool calls come with the attempt's result (`SubTaskResult.calls`: the
engines `swarm_ray.llm` loads and the tool agent's tools note them while the attempt
runs), so they too need no tracing in the agents. An attempt's span is sent when its
result is accepted, with the attempt's own `Timings`
as its times; the task's root span is sent when the task ends. The root's span id is
derived from the task (`root_span_id`), so attempt spans sent earlier, or before a
restart of the orchestrator, name it as their parent before it exists.

The trace id is the task's own `trace_id` (32 hex digits; any other form is hashed to
one). A task submitted with a `traceparent` took that trace id (`TaskDriver.create`), and
its root span is a child of the caller's span. That holds for trusted callers; a tenant
(an HTTP caller) names only its own traces: its `traceparent` is replaced at intake by
`tenant_traceparent`, whose trace id is a keyed digest of the tenant and the trace id it
sent. Its tasks with one `traceparent` share one trace of their own, it never joins
another's trace by naming its id, and it cannot choose the id that the audit log's
DEBUG sampling reads (`_audit.sampled`), so it cannot force its task to be sampled.

Off by default: only with `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or
`OTEL_EXPORTER_OTLP_ENDPOINT` set in the orchestrator's process (`TaskTraces.from_env`)
is anything imported from `opentelemetry` (the `otel` extra) or sent. The exporter reads
the other `OTEL_EXPORTER_OTLP_*` settings (headers, timeout) itself; `OTEL_SERVICE_NAME`
names the service (`swarm-ray` by default). Every task is traced: a caller's sampled flag
is not obeyed, since an HTTP caller must not hide its task from the operator's traces.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import re
import secrets
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, cast

from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import ErrorCode, WatermarkRejectedError
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._subtask import CallRecord, SubTaskResult, TokenUsage
from swarm_ray.core.model._traceparent import parse_traceparent
from swarm_ray.core.planning._planning import PLAN_SUBTASK
from swarm_ray.core.views._trace import short_id

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.util.types import AttributeValue

__all__: list[str] = []

_log = logging.getLogger(__name__)

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""Either one turns the export on."""
_HEX32 = re.compile(r"[0-9a-f]{32}")


_TENANT_TRACES = secrets.token_bytes(32)
"""Key of tenants' trace ids (this process's: after a restart, the same `traceparent`
starts another trace)."""


def tenant_traceparent(value: str | None, principal: Principal) -> str | None:
    """A tenant's `traceparent` with a trace id of its own (see the module docstring).

    The trace id is an HMAC of the tenant and the trace id it sent, so the tenant's
    tasks sent with one trace id share a trace, and two tenants never do. The span id is
    kept (the root's parent, in the tenant's own trace) and the flags are dropped: every
    task is traced, and sampling is the operator's. None for no valid `traceparent`.
    """
    parent = parse_traceparent(value)
    if parent is None:
        return None
    digest = hmac.new(
        _TENANT_TRACES, f"{principal.id}\0{parent.trace_id}".encode(), hashlib.sha256
    ).hexdigest()[:32]
    return f"00-{digest}-{parent.span_id}-00"


def otel_trace_id(trace_id: str) -> int:
    """The exported trace id of a task's `trace_id`: itself when it is 32 hex digits."""
    if _HEX32.fullmatch(trace_id) and int(trace_id, 16):
        return int(trace_id, 16)
    return int(hashlib.sha256(trace_id.encode()).hexdigest()[:32], 16) or 1


def root_span_id(task_id: str, trace_id: str) -> int:
    """The span id of a task's root span, the same in every process and after restarts."""
    return int(hashlib.sha256(f"{trace_id}/{task_id}".encode()).hexdigest()[:16], 16) or 1


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _usage(usage: TokenUsage) -> dict[str, AttributeValue]:
    found: dict[str, AttributeValue] = {
        "gen_ai.usage.input_tokens": usage.prompt_tokens,
        "gen_ai.usage.output_tokens": usage.completion_tokens,
    }
    if usage.calls:
        found["swarm.llm.calls"] = usage.calls
    if usage.cost:
        found["swarm.cost"] = usage.cost
    return found


def _short_watermark(token: str) -> str | None:
    try:
        return short_id(token) if token else None
    except (WatermarkRejectedError, IndexError):
        return None


class TaskTraces:
    """Sends each task's spans through a `BatchSpanProcessor`; flushed as tasks end."""

    def __init__(self, exporter: SpanExporter | None = None) -> None:
        """Export through `exporter` (default: OTLP/HTTP protobuf, set up from the env)."""
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
        self._ids = _PinnedIds()
        # A provider of our own, never the global one: Ray's tracing hook (or a user's)
        # may set that, and the two stay apart.
        self._provider = TracerProvider(
            resource=Resource.create(
                {"service.name": os.environ.get("OTEL_SERVICE_NAME", "swarm-ray")}
            ),
            sampler=ALWAYS_ON,
            id_generator=cast("IdGenerator", self._ids),  # duck-typed: no import at load
        )
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._tracer = self._provider.get_tracer("swarm_ray")
        self._flushing: asyncio.Future[bool] | Future[bool] | None = None
        self._again = False

    @classmethod
    def from_env(cls) -> TaskTraces | None:
        """Traces when an OTLP endpoint is set in this process, else None (nothing loaded)."""
        if not any(os.environ.get(name) for name in ENDPOINT_VARS):
            return None
        try:
            return cls()
        except ImportError as exc:
            _log.warning(
                "an OTLP endpoint is set but traces are off: %s (install `swarm-ray[otel]`)", exc
            )
            return None

    def _root(self, task_id: str, trace_id: str) -> Context:
        """The context of a task's root span, as its children's parent."""
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

        root = SpanContext(
            trace_id=otel_trace_id(trace_id),
            span_id=root_span_id(task_id, trace_id),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        return trace.set_span_in_context(NonRecordingSpan(root))

    def attempt(self, result: SubTaskResult, trace_id: str) -> None:
        """Send the span of one accepted attempt, a child of its task's root."""
        from opentelemetry.trace import Status, StatusCode

        times = result.timings
        end = times.finished_at or time.time()
        start = min(end, times.queued_at or times.started_at or end)
        planning = result.subtask_id == PLAN_SUBTASK
        cid = result.capability_id
        attributes: dict[str, AttributeValue] = {
            "swarm.task.id": result.task_id,
            "swarm.subtask.id": result.subtask_id,
            "swarm.capability.id": cid,
            "swarm.attempt": result.attempt,
            "swarm.confidence": result.confidence,
            **_usage(result.usage),
        }
        if result.agent is not None:
            attributes["swarm.agent"] = result.agent
        if result.node_id is not None:
            attributes["swarm.node.id"] = result.node_id
        if (watermark := _short_watermark(result.watermark)) is not None:
            attributes["swarm.watermark"] = watermark
        span = self._tracer.start_span(
            f"swarm.plan {cid}" if planning else f"swarm.attempt {cid}",
            context=self._root(result.task_id, trace_id),
            start_time=_ns(start),
            attributes=attributes,
        )
        if times.started_at is not None and start <= times.started_at <= end:
            span.add_event("started", timestamp=_ns(times.started_at))
        if result.error is not None:
            span.set_attribute("swarm.error.code", str(result.error.code))
            if result.error.code is not ErrorCode.CANCELLED:  # halted, not failed
                span.set_attribute("error.type", str(result.error.code))
                span.set_status(Status(StatusCode.ERROR, result.error.message[:500]))
        if result.calls:
            from opentelemetry import trace

            inside = trace.set_span_in_context(span)
            for call in result.calls:
                self._call(call, inside)
        span.end(end_time=_ns(end))

    def _call(self, call: CallRecord, parent: Context) -> None:
        """A model call (`chat MODEL`) or a tool call (`execute_tool TOOL`) of an attempt.

        Named and described by OpenTelemetry's GenAI semantic conventions (`gen_ai.*`).
        """
        from opentelemetry.trace import SpanKind, Status, StatusCode

        attributes: dict[str, AttributeValue] = {}
        if call.provider is not None:
            attributes["gen_ai.provider.name"] = call.provider
        if call.kind == "llm":
            name = f"chat {call.name}"
            attributes |= {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": call.name,
                "gen_ai.usage.input_tokens": call.input_tokens,
                "gen_ai.usage.output_tokens": call.output_tokens,
            }
            kind = SpanKind.CLIENT
        else:
            name = f"execute_tool {call.name}"
            attributes |= {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name}
            kind = SpanKind.INTERNAL
        span = self._tracer.start_span(
            name, context=parent, kind=kind, start_time=_ns(call.started_at), attributes=attributes
        )
        if call.error is not None:
            span.set_attribute("error.type", "tool_error" if call.kind == "tool" else "llm_error")
            span.set_status(Status(StatusCode.ERROR, call.error))
        span.end(end_time=_ns(max(call.started_at, call.finished_at)))

    def ended(self, record: TaskRecord, usage: TokenUsage) -> None:
        """Send a task's root span (it ended now), then flush its spans off the loop."""
        from opentelemetry import trace
        from opentelemetry.trace import (
            NonRecordingSpan,
            SpanContext,
            Status,
            StatusCode,
            TraceFlags,
        )

        attributes: dict[str, AttributeValue] = {
            "swarm.task.id": record.task_id,
            "swarm.task.state": str(record.machine.state),
            **_usage(usage),
        }
        name = record.request.template or "task"
        if record.planning is not None:
            name = record.planning.subtasks[0].capability_id
            attributes["swarm.task.planner"] = name
        elif record.plan is not None:
            name = record.plan.template.name
        if record.plan is not None:
            attributes["swarm.task.template"] = record.plan.template.name
            attributes["swarm.task.subtasks"] = len(record.plan.subtasks)
        if record.owner is not None:
            attributes["swarm.task.owner"] = record.owner
        if record.request.parent_task_id is not None:
            attributes["swarm.task.parent_id"] = record.request.parent_task_id
        context: Context | None = None
        parent = parse_traceparent(record.request.traceparent)
        if parent is not None and otel_trace_id(record.trace_id) == int(parent.trace_id, 16):
            caller = SpanContext(
                trace_id=int(parent.trace_id, 16),
                span_id=int(parent.span_id, 16),
                is_remote=True,
                trace_flags=TraceFlags(parent.flags),
            )
            context = trace.set_span_in_context(NonRecordingSpan(caller))
        self._ids.pin(otel_trace_id(record.trace_id), root_span_id(record.task_id, record.trace_id))
        try:
            span = self._tracer.start_span(
                f"swarm.task {name}",
                context=context,
                start_time=_ns(record.created_at),
                attributes=attributes,
            )
        finally:
            self._ids.unpin()
        if record.error is not None:
            span.set_attribute("swarm.error.code", str(record.error.code))
            if record.error.code is not ErrorCode.CANCELLED:
                span.set_attribute("error.type", str(record.error.code))
                span.set_status(Status(StatusCode.ERROR, record.error.message[:500]))
        span.end(end_time=_ns(max(record.created_at, time.time())))
        self._flush()

    def _flush(self) -> None:
        """Export what is queued, in a thread (one flush at a time; another after it)."""
        if self._flushing is not None:
            self._again = True
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside the actor's event loop
            self._provider.force_flush()
            return
        self._flushing = loop.run_in_executor(None, self._provider.force_flush)
        self._flushing.add_done_callback(self._flushed)

    def _flushed(self, _done: Any) -> None:
        self._flushing = None
        if self._again:
            self._again = False
            self._flush()

    def shutdown(self) -> None:
        """Export what is left and stop the exporter."""
        self._provider.shutdown()


class _PinnedIds:
    """Random ids, except the ones pinned for the next span (a task's root span).

    An `IdGenerator` by its methods (subclassing it would import `opentelemetry` with
    this module).
    """

    def __init__(self) -> None:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

        self._random = RandomIdGenerator()
        self._pinned: tuple[int, int] | None = None

    def pin(self, trace_id: int, span_id: int) -> None:
        self._pinned = (trace_id, span_id)

    def unpin(self) -> None:
        self._pinned = None

    def generate_trace_id(self) -> int:
        return self._pinned[0] if self._pinned else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        return self._pinned[1] if self._pinned else self._random.generate_span_id()

    def is_trace_id_random(self) -> bool:
        return self._pinned is None
