"""What the orchestrator does besides carrying out intents.

`Observer` records what happens (metric tallies, capability health, the audit trail,
OpenTelemetry traces when an endpoint is set) in one place; `start_upkeep` runs the
background loops: releasing idle agents, probing the Serve capabilities' health,
flushing the metrics to Ray and the audit trail to its files, and sweeping expired
uploads that no open task names.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.model._errors import ErrorCode, SwarmError
from swarm_ray.core.model._subtask import SubTaskResult
from swarm_ray.core.model._task import TaskEvent
from swarm_ray.runtime._audit import AuditTrail
from swarm_ray.runtime._executors import ActorPoolExecutor, ServeExecutor
from swarm_ray.runtime._health import HealthBook
from swarm_ray.runtime._metrics import SwarmMetrics
from swarm_ray.runtime._otel import TaskTraces
from swarm_ray.runtime._uploads import SWEEP_EVERY_S, Uploads

__all__: list[str] = []

_log = logging.getLogger(__name__)


class Observer:
    """The orchestrator's metrics, health book, audit trail and traces (those two may be off)."""

    def __init__(
        self,
        metrics: SwarmMetrics,
        health: HealthBook,
        audit: AuditTrail | None,
        traces: TaskTraces | None = None,
    ):
        self.metrics = metrics
        self.health = health
        self.audit = audit
        self.traces = traces

    def event(self, event: TaskEvent) -> None:
        """A task event, as an INFO line of its task's (and agent's) trail."""
        if self.audit is not None:
            self.audit.write_json(
                "INFO",
                event.model_dump_json(exclude={"task_id", "trace_id", "agent"}),
                task_id=event.task_id,
                trace_id=event.trace_id,
                agent=event.agent,
            )

    def swarm_line(self, level: str, record: dict[str, Any]) -> None:
        """A line about the swarm rather than one task (under the `swarm` pseudo-task)."""
        if self.audit is not None:
            self.audit.write(level, {"at": time.time(), **record}, task_id="swarm", trace_id="-")

    def quarantined(self, task_id: str, error: SwarmError) -> None:
        """A stored task that could not be loaded or resumed: counted and written down."""
        self.metrics.error("orchestrator", str(error.code))
        self.swarm_line(
            "ERROR", {"event": "quarantined", "task_id": task_id, "error": error.message}
        )

    def result(self, result: SubTaskResult, trace_id: str) -> None:
        """An accepted result: its run time, error, health outcome, DEBUG audit line, span."""
        if self.traces is not None:
            with _traced("an attempt's span"):
                self.traces.attempt(result, trace_id)
        if result.timings.duration_s:
            self.metrics.duration(result.capability_id, result.timings.duration_s)
        if result.error is not None:
            self.metrics.error(result.capability_id, str(result.error.code))
        if result.usage.cost:
            self.metrics.cost(result.capability_id, result.usage.cost)
        # A cancelled attempt, or one the caller's input failed (a bad input, a tool not
        # granted), says nothing of the agent: counted, a tenant's mistakes would lower
        # the swarm's health score for everyone.
        error = result.error
        if error is None or (error.code is not ErrorCode.CANCELLED and not error.callers_mistake):
            self.health.attempt(
                result.capability_id, ok=result.ok, duration_s=result.timings.duration_s
            )
        if self.audit is not None:
            self.audit.write(
                "DEBUG",
                {
                    "event": "result",
                    "subtask_id": result.subtask_id,
                    "attempt": result.attempt,
                    "capability": result.capability_id,
                    "ok": result.ok,
                    "error": None if result.error is None else str(result.error.code),
                    "confidence": result.confidence,
                    "timings": result.timings.model_dump(),
                    "usage": result.usage.model_dump(),
                },
                task_id=result.task_id,
                trace_id=trace_id,
                agent=result.agent or result.capability_id,
            )

    def ended(self, driver: TaskDriver) -> None:
        """A task ended (completed, failed or cancelled): its root span."""
        if self.traces is not None:
            with _traced(f"task `{driver.task_id}`'s root span"):
                self.traces.ended(driver.record, driver.usage())


@contextlib.contextmanager
def _traced(what: str) -> Iterator[None]:
    """A span that cannot be made is lost and logged; the task goes on regardless."""
    try:
        yield
    except Exception:
        _log.exception("OpenTelemetry: %s was not sent", what)


async def _reap_idle_agents(pool: ActorPoolExecutor, idle_s: float) -> None:
    """Give back the resources of agents nobody used for a while."""
    while True:
        await asyncio.sleep(max(1.0, idle_s / 4))
        pool.reap(idle_s)


async def _flush_audit(audit: AuditTrail, io: Executor) -> None:
    """Write the audit trail's queued lines out about once a second, off the event loop."""
    while True:
        await asyncio.sleep(1.0)
        lines = audit.take()
        if lines:
            await asyncio.get_running_loop().run_in_executor(io, audit.write_out, lines)


async def _flush_metrics(metrics: SwarmMetrics) -> None:
    """Hand Ray the counters' increases about once a second (see `_metrics`)."""
    while True:
        await asyncio.sleep(1.0)
        metrics.flush()


async def _sweep_uploads(
    uploads: Uploads, in_use: Callable[[], set[tuple[str, str]]], every_s: float, io: Executor
) -> None:
    """Remove expired uploads no open task names, once every `every_s` (see `_uploads`)."""
    while True:
        await asyncio.sleep(every_s)
        keep = in_use()  # on the event loop, where the drivers are
        try:
            await asyncio.get_running_loop().run_in_executor(io, uploads.sweep, keep)
        except Exception:  # a store that failed this once: the next sweep tries again
            _log.exception("sweeping expired uploads failed")


async def _probe_deployments(serve: ServeExecutor, observer: Observer, interval_s: float) -> None:
    """Health-check every deployed Serve capability; see `swarm_ray.runtime._health`."""
    health = observer.health
    while True:
        await asyncio.sleep(interval_s)
        for cid in serve.deployed():
            ok, detail = await serve.probe(cid)
            was_in = health.in_dispatch(cid)
            if health.probe(cid, ok=ok, detail=detail) != was_in:
                observer.swarm_line(
                    "WARNING" if was_in else "INFO",
                    {"event": "dispatch", "capability": cid, "in_dispatch": not was_in},
                )


def start_upkeep(
    pool: ActorPoolExecutor,
    serve: ServeExecutor,
    observer: Observer,
    *,
    agent_idle_s: float,
    health_interval_s: float,
    uploads: Uploads,
    uploads_in_use: Callable[[], set[tuple[str, str]]],
) -> list[asyncio.Task[None]]:
    """Start the background loops on the running event loop; returns their tasks."""
    loop = asyncio.get_running_loop()
    # The upkeep's file work (audit lines, the uploads sweep) on one thread of its own:
    # never in the default executor, where the orchestrator takes requests in.
    io = ThreadPoolExecutor(max_workers=1, thread_name_prefix="upkeep")
    tasks = [
        loop.create_task(_reap_idle_agents(pool, agent_idle_s)),
        loop.create_task(_probe_deployments(serve, observer, health_interval_s)),
        loop.create_task(_flush_metrics(observer.metrics)),
        loop.create_task(_sweep_uploads(uploads, uploads_in_use, sweep_every_s(), io)),
    ]
    if observer.audit is not None:
        tasks.append(loop.create_task(_flush_audit(observer.audit, io)))
    return tasks


def sweep_every_s() -> float:
    """Seconds between sweeps of expired uploads (`SWARM_RAY_UPLOAD_SWEEP_S`)."""
    return max(0.1, float(os.environ.get("SWARM_RAY_UPLOAD_SWEEP_S", SWEEP_EVERY_S)))


REPORTER_PREFIX = "swarm-metrics/"
"""Named actors called `swarm-metrics/FAMILY:ID` report swarm-level state for `/metrics`.

Any layer can start one (the LLM endpoint budgets do); the orchestrator gathers their
`state()` by family without importing what they are."""


async def reported_states(timeout_s: float = 2.0) -> dict[str, list[dict[str, Any]]]:
    """`state()` of every reporter actor in the cluster, by family; silent ones skipped."""
    import ray

    named = await asyncio.to_thread(ray.util.list_named_actors, all_namespaces=True)
    found = [
        (str(entry["name"]), str(entry["namespace"]))
        for entry in named
        if str(entry.get("name", "")).startswith(REPORTER_PREFIX)
    ]

    async def one(name: str, namespace: str) -> tuple[str, dict[str, Any] | None]:
        family = name[len(REPORTER_PREFIX) :].split(":", 1)[0]
        try:
            actor = ray.get_actor(name, namespace=namespace)
            state: dict[str, Any] = await asyncio.wait_for(actor.state.remote(), timeout_s)
        except Exception:  # restarting or gone: left out of this scrape
            return family, None
        return family, state

    states: dict[str, list[dict[str, Any]]] = {}
    for family, state in await asyncio.gather(*(one(n, ns) for n, ns in found)):
        if state is not None:
            states.setdefault(family, []).append(state)
    for family in states:
        states[family].sort(key=lambda s: json.dumps(s, sort_keys=True, default=str))
    return states
