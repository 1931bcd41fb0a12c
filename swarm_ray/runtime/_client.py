"""`swarm_ray.connect()`: get or create the orchestrator from any Ray process.

Works the same from a driver script, a `ray job submit` entrypoint, a notebook or a Serve
replica, on a local cluster (started here when none runs) or on one given by address.
The orchestrator is a named detached actor, so every caller in the namespace shares it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar, overload

import ray
from pydantic import BaseModel
from ray._common.constants import HEAD_NODE_RESOURCE_NAME
from ray.exceptions import RayActorError

from swarm_ray.core._errors import AnswerRefusedError, SwarmRuntimeError
from swarm_ray.core._record import TaskRecord
from swarm_ray.core._task import TaskEvent, TaskRequest
from swarm_ray.core._trace import find_tokens
from swarm_ray.core._views import TaskStatus
from swarm_ray.runtime._orchestrator import Orchestrator

__all__ = ["SwarmClient", "TaskHandle", "connect"]

ORCHESTRATOR_NAME = "swarm-ray-orchestrator"
"""Name of the detached orchestrator actor."""
NAMESPACE = "swarm-ray"
"""Ray namespace of the orchestrator and its agents."""
DEFAULT_CATALOGS = ("swarm_ray.catalog:default_catalog",)
"""Catalogs an orchestrator loads unless told otherwise."""


def local_cluster(*, any_cluster: bool = False) -> str | None:
    """The address of a Ray cluster on this machine that answers, if any.

    The one a `ray start` head names in `/tmp/ray/ray_current_cluster`, and with
    `any_cluster` also any other running GCS (as Ray's `address="auto"`). Ray itself would
    wait minutes on an address a killed cluster left behind in that file; a one-second
    TCP probe tells a live cluster from a stale address.
    """
    try:
        from ray._private.services import find_gcs_addresses
        from ray._private.utils import read_ray_address
    except ImportError:  # a Ray that moved them: start a local cluster, as without one
        return None
    candidates = [read_ray_address()]
    if any_cluster:
        candidates += sorted(find_gcs_addresses())  # type: ignore[no-untyped-call]
    for address in candidates:
        if not address:
            continue
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return str(address)
        except (OSError, ValueError):
            continue
    return None


def connect(
    address: str | None = None,
    *,
    catalogs: Sequence[str] = DEFAULT_CATALOGS,
    state_url: str | None = None,
    results_uri: str | None = None,
    state_dir: str | os.PathLike[str] | None = None,
    name: str = ORCHESTRATOR_NAME,
    namespace: str = NAMESPACE,
    env: Mapping[str, str] | None = None,
    **init_kwargs: Any,
) -> SwarmClient:
    """Join (or start) a Ray cluster and get or create the orchestrator.

    Args:
        address: A Ray address (`auto`, `ray://...`, `host:port`). None: `RAY_ADDRESS`,
            else a `ray start` head on this machine that answers, else a new local
            cluster (unless this process is already connected).
        catalogs: Import paths of `Catalog` functions the orchestrator loads.
        state_url: State store (`sqlite:///...`, `redis://...`); default
            `SWARM_RAY_STATE_URL`, else SQLite under the state directory.
        results_uri: Result store root (any `pyarrow.fs` URI); default
            `SWARM_RAY_RESULTS_URI`, else under the state directory.
        state_dir: Directory for state, results and keys (default `SWARM_RAY_STATE_DIR`
            or `~/.swarm-ray`).
        name: Actor name; several orchestrators can live side by side under other names.
        namespace: Ray namespace.
        env: Environment variables of the orchestrator's own process (its Ray
            `runtime_env`), for settings read there, such as
            `OTEL_EXPORTER_OTLP_ENDPOINT` (see `swarm_ray.runtime._otel`).
        **init_kwargs: Passed to `ray.init` when this call starts or joins the cluster.

    The orchestrator is created only if none runs under `name`; an existing one keeps the
    catalogs, stores and `env` it was created with (Ray ignores them then).
    """
    state_url = state_url or os.environ.get("SWARM_RAY_STATE_URL")
    results_uri = results_uri or os.environ.get("SWARM_RAY_RESULTS_URI")
    if not ray.is_initialized():
        init_kwargs.setdefault("log_to_driver", False)
        if address is None and "RAY_ADDRESS" not in os.environ:
            address = local_cluster()
            if address is None:
                # A new local cluster: "local", not Ray's default, which joins whatever
                # `/tmp/ray/ray_current_cluster` names, a dead address too (and refuses
                # `num_cpus` there).
                address = "local"
                # Pooled agents keep their CPU reservation while idle, so with only as
                # many logical CPUs as cores a few pools could starve the Ray Data
                # stages that feed them. Oversubscribe logically; the OS shares the cores.
                init_kwargs.setdefault("num_cpus", max(8, 4 * (os.cpu_count() or 1)))
        ray.init(address=address, namespace=namespace, **init_kwargs)
    actor = (
        ray.remote(Orchestrator)
        .options(
            name=name,
            namespace=namespace,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=-1,
            num_cpus=0,
            # On the head node: the one node an autoscaler never takes away, while
            # workers (spot instances, scale-down) may vanish mid-job.
            resources={HEAD_NODE_RESOURCE_NAME: 0.001},
            max_concurrency=1000,
            **({"runtime_env": {"env_vars": dict(env)}} if env else {}),
        )
        .remote(
            list(catalogs),
            state_url,
            results_uri,
            None if state_dir is None else os.fspath(state_dir),
        )
    )
    return SwarmClient(actor)


class SwarmClient:
    """A synchronous handle on the orchestrator (picklable: pass it to tasks).

    Every call rides out a restart of the orchestrator (Ray retries it on the new one).
    """

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def _call(self, call: Callable[[Any], Any], timeout_s: float | None = None) -> Any:
        """`ray.get(call(actor))`, again while the orchestrator restarts."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                return ray.get(call(self.actor), timeout=timeout_s)
            except RayActorError:
                if deadline is not None and time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def submit(self, request: TaskRequest | dict[str, Any] | None = None, **fields: Any) -> str:
        """Submit a task; returns its id at once. Raises `SwarmUserError` for bad input."""
        if request is None:
            request = TaskRequest(**fields)
        elif isinstance(request, dict):
            request = TaskRequest.model_validate({**request, **fields})
        task_id: str = self._call(lambda a: a.submit.remote(request))
        return task_id

    def start(
        self, request: TaskRequest | dict[str, Any] | None = None, **fields: Any
    ) -> TaskHandle:
        """Submit a task and return its handle (`submit` returns the id alone)."""
        return TaskHandle(self, self.submit(request, **fields))

    def task(self, task_id: str) -> TaskHandle:
        """A handle on a task submitted earlier (by this client or another)."""
        return TaskHandle(self, task_id)

    def wait(self, task_id: str, timeout_s: float | None = None) -> TaskRecord:
        """Block until the task ends; returns its record."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            step = 5.0 if left is None else min(5.0, left)

            def call(actor: Any, step: float = step) -> Any:
                return actor.wait.remote(task_id, step)

            record: TaskRecord = self._call(call)
            if record.machine.state.terminal or (
                deadline is not None and time.monotonic() >= deadline
            ):
                return record

    def run(self, request: TaskRequest | dict[str, Any] | None = None, **fields: Any) -> TaskRecord:
        """Submit and wait."""
        return self.wait(self.submit(request, **fields))

    def output(self, task_id: str) -> dict[str, Any] | None:
        """The task's output, fetched from the result store when it was large."""
        output: dict[str, Any] | None = self._call(lambda a: a.output.remote(task_id))
        return output

    def status(self, task_id: str) -> TaskStatus:
        """State, progress, sub-tasks, warnings, usage and output (the gateway's model)."""
        status: TaskStatus = self._call(lambda a: a.status.remote(task_id))
        return status

    def record(self, task_id: str) -> TaskRecord:
        """The full record: plan, audit log, scheduler log."""
        record: TaskRecord = self._call(lambda a: a.record.remote(task_id))
        return record

    def tasks(self, limit: int = 100) -> list[TaskStatus]:
        """Newest tasks first, in brief."""
        tasks: list[TaskStatus] = self._call(lambda a: a.tasks.remote(limit))
        return tasks

    def events(self, task_id: str, after_seq: int = 0, wait_s: float = 0.0) -> list[TaskEvent]:
        """Events after `after_seq` (long-polls up to `wait_s` when there are none)."""
        events: list[TaskEvent] = self._call(lambda a: a.events.remote(task_id, after_seq, wait_s))
        return events

    def follow(self, task_id: str, after_seq: int = 0) -> Iterator[TaskEvent]:
        """Yield events as they happen until the task ends."""
        while True:
            batch = self.events(task_id, after_seq, wait_s=2.0)
            for event in batch:
                after_seq = event.seq
                yield event
            if not batch and self.status(task_id).ended:
                return

    def cancel(self, task_id: str) -> TaskRecord:
        """Cancel a task."""
        record: TaskRecord = self._call(lambda a: a.cancel.remote(task_id))
        return record

    def answer(self, task_id: str, subtask_id: str, answer: dict[str, Any]) -> TaskStatus:
        """Answer a sub-task waiting for a person (`TaskStatus.waiting` lists them).

        Raises:
            AnswerRefusedError: the sub-task is not waiting (any more).
            InvalidInputError: the answer does not match the sub-task's schema.
        """
        status: TaskStatus = self._call(lambda a: a.answer.remote(task_id, subtask_id, answer))
        return status

    def trace(self, text: str, *, include_input: bool = True) -> list[dict[str, Any]]:
        """What produced each watermark found in `text` (full tokens or `wm:` short ids).

        Sub-task, capability, agent, timings, digests and, by default, the input.
        """
        tokens = find_tokens(text)
        traced: list[dict[str, Any]] = self._call(
            lambda a: a.trace_watermarks.remote(tokens, None, include_input)
        )
        return traced

    def info(self) -> dict[str, Any]:
        """Capabilities, templates, agents and counters."""
        info: dict[str, Any] = self._call(lambda a: a.info.remote())
        return info

    def shutdown(self) -> None:
        """Kill the orchestrator for good (its state stays in the store).

        Rollouts of tasks that just ended are written first (waiting up to 10 s).
        """
        with contextlib.suppress(Exception):  # gone, restarting or stuck: kill it anyway
            ray.get(self.actor.flush_rollouts.remote(), timeout=10)
        with contextlib.suppress(ValueError):  # already gone
            ray.kill(self.actor, no_restart=True)


M = TypeVar("M", bound=BaseModel)


class TaskHandle:
    """One task: follow it, wait for it, read its status and its output as a model.

    task = swarm.start(template="compare_documents", items=paths)
    for event in task.events():
        print(event.progress, event.summary)
    files = task.output(ReportFiles)
    """

    def __init__(self, client: SwarmClient, task_id: str) -> None:
        self.client = client
        self.id = task_id
        """The task id."""

    def __repr__(self) -> str:
        return f"TaskHandle({self.id!r})"

    def events(self, after_seq: int = 0) -> Iterator[TaskEvent]:
        """The task's events as they happen, until it ends."""
        return self.client.follow(self.id, after_seq)

    def wait(self, timeout_s: float | None = None) -> TaskRecord:
        """Block until the task ends; its record."""
        return self.client.wait(self.id, timeout_s)

    def status(self) -> TaskStatus:
        """State, progress, sub-tasks, warnings, usage and output."""
        return self.client.status(self.id)

    def record(self) -> TaskRecord:
        """The full record: plan, audit log, scheduler log."""
        return self.client.record(self.id)

    def cancel(self) -> TaskRecord:
        """Cancel the task."""
        return self.client.cancel(self.id)

    def answer(self, answer: dict[str, Any], subtask_id: str | None = None) -> TaskStatus:
        """Answer a sub-task waiting for a person: `subtask_id`, or the one that waits.

        Raises:
            AnswerRefusedError: no sub-task waits (or several do, and none was named), or
                the one named does not.
            InvalidInputError: the answer does not match the sub-task's schema.
        """
        if subtask_id is None:
            waiting = [w.subtask_id for w in self.status().waiting]
            if len(waiting) != 1:
                raise AnswerRefusedError(
                    f"task `{self.id}` has {len(waiting)} sub-tasks waiting for an answer "
                    f"({', '.join(waiting) or 'none'}); name one",
                    task_id=self.id,
                    reason="not_waiting",
                )
            subtask_id = waiting[0]
        return self.client.answer(self.id, subtask_id, answer)

    @overload
    def output(self, model: None = None) -> dict[str, Any] | None: ...

    @overload
    def output(self, model: type[M]) -> M: ...

    def output(self, model: type[M] | None = None) -> M | dict[str, Any] | None:
        """The task's output: as `model` (validated, so its fields are typed), or raw.

        Raises:
            SwarmRuntimeError: `model` is given and the task has no output (yet).
        """
        raw = self.client.output(self.id)
        if model is None:
            return raw
        if raw is None:
            state = self.status().state
            raise SwarmRuntimeError(f"task `{self.id}` has no output ({state})", task_id=self.id)
        return model.model_validate(raw)
