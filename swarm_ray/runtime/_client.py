"""`swarm_ray.connect()`: get or create the orchestrator from any Ray process.

Works the same from a driver script, a `ray job submit` entrypoint, a notebook or a Serve
replica, on a local cluster (started here when none runs) or on one given by address.
The orchestrator is a named detached actor, so every caller in the namespace shares it.

`SwarmClient` is the synchronous face of `AsyncSwarmClient` (`_aclient`, which holds the
calls themselves), and `TaskHandle` the one way to ask about one task.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

import ray
from pydantic import BaseModel
from ray._common.constants import HEAD_NODE_RESOURCE_NAME
from ray.exceptions import AuthenticationError

from swarm_ray.core.model._errors import InvalidSpecError, SwarmRuntimeError
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._task import TaskEvent, TaskRequest
from swarm_ray.core.views._views import TaskStatus
from swarm_ray.runtime._aclient import AsyncSwarmClient
from swarm_ray.runtime._config import ORCHESTRATOR_RESOURCE, orchestrator_resource
from swarm_ray.runtime._config import state_dir as default_state_dir
from swarm_ray.runtime._loop import LOOP as _LOOP
from swarm_ray.runtime._orchestrator import Orchestrator
from swarm_ray.runtime._placement import autoscaling
from swarm_ray.runtime._shards import retired, shard_name, shards_from_env

__all__ = ["SwarmClient", "TaskHandle", "connect"]

T = TypeVar("T")

ORCHESTRATOR_NAME = "swarm-ray-orchestrator"
"""Name of the detached orchestrator actor."""
NAMESPACE = "swarm-ray"
"""Ray namespace of the orchestrator and its agents."""
DEFAULT_CATALOGS = ("swarm_ray.catalog:default_catalog",)

SERVE_PROXY_CALLBACK = "swarm_ray.gateway:proxy_middlewares"
"""`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH` for a cluster `connect()` starts: Serve's
proxy then runs the gateway's middleware (`/-/routes` closed, timeout headers dropped)."""
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


class _TokenNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Token authentication is enabled for this")


@contextlib.contextmanager
def _without_token_notice() -> Iterator[None]:
    """Leave out Ray's warning that a new local cluster has token authentication on.

    It is Ray's default, which `connect()` keeps, and the warning only says how to opt
    out (`RAY_AUTH_MODE=disabled`); every `make report` printed it among the progress.
    With `RAY_AUTH_MODE` set, Ray prints nothing and this is not used.
    """
    logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    notice = _TokenNotice()
    logger.addFilter(notice)
    try:
        yield
    finally:
        logger.removeFilter(notice)


def _refused_token(exc: BaseException) -> bool:
    """Whether `ray.init` failed because the cluster wants a token this process lacks.

    Ray words it in a `ConnectionError` raised from a `RuntimeError` whose message holds
    the `AuthenticationError`'s traceback as text.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AuthenticationError) or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _wants_token(address: str) -> bool:
    """Whether the cluster at `address` (`host:port`) refuses a caller without a token.

    One call to its control store with no token, answered at once. `ray.init` would
    retry for about 20 s, printing a warning a second, before it fails.
    """
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or "://" in address:
        return False
    try:
        import grpc  # type: ignore[import-untyped]
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # a Ray that moved them: `ray.init` answers, slowly
        return False
    with grpc.insecure_channel(address) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)  # type: ignore[no-untyped-call]
        try:
            stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=3)  # type: ignore[attr-defined]
        except grpc.RpcError as exc:
            return bool(exc.code() == grpc.StatusCode.UNAUTHENTICATED)
    return False


def _token_advice(address: str | None) -> str:
    where = f"`{address}`" if address else "the cluster"
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token":
        return (
            f"Ray cluster {where} uses token authentication: set `RAY_AUTH_MODE=token` "
            "(and `RAY_AUTH_TOKEN` to its token, on a machine other than its head)"
        )
    return (
        f"Ray cluster {where} refused this process's token: set `RAY_AUTH_TOKEN` (or "
        "`RAY_AUTH_TOKEN_PATH`) to the token in `~/.ray/auth_token` on its head"
    )


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
    orchestrators: int | None = None,
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
        orchestrators: How many orchestrator shards take new tasks (default
            `SWARM_RAY_ORCHESTRATORS`, else 1: one orchestrator, as before shards). Shard
            `k > 0` is the actor `NAME-s{k}` with a store of its own (`_shards`); a shard
            past this number that still has tasks in the state directory is started too,
            to answer for them, and takes no new ones.
        **init_kwargs: Passed to `ray.init` when this call starts or joins the cluster.

    Raises:
        InvalidSpecError: the cluster uses token authentication and this process has
            no token for it (the message says what to set).

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
                # Serve's proxy on this cluster runs the gateway's middleware, which closes
                # `/-/routes` to strangers (the variable must be set where Ray starts).
                os.environ.setdefault(
                    "RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH", SERVE_PROXY_CALLBACK
                )
                # As many logical CPUs as cores, as on a cluster `ray start` starts: the
                # executors fit pools and stages to what the cluster has (`_placement`).
                # The raylet still may start more workers at once than there are cores:
                # pools of agents start together, and past the limit it warned in the
                # job's output ("8 PYTHON worker processes ... 4x the maximum expected
                # startup concurrency").
                init_kwargs["_system_config"] = {
                    "worker_maximum_startup_concurrency": max(8, 4 * (os.cpu_count() or 1)),
                    **init_kwargs.get("_system_config", {}),
                }
        joining = address or os.environ.get("RAY_ADDRESS", "")
        tokenless = os.environ.get("RAY_AUTH_MODE", "").strip().lower() != "token"
        if joining != "local" and tokenless and _wants_token(joining):
            raise InvalidSpecError(_token_advice(joining))
        quiet = address == "local" and "RAY_AUTH_MODE" not in os.environ
        with _without_token_notice() if quiet else contextlib.nullcontext():
            try:
                ray.init(address=address, namespace=namespace, **init_kwargs)
            except (ConnectionError, RuntimeError) as exc:
                if _refused_token(exc):
                    raise InvalidSpecError(_token_advice(address)) from None
                raise
    spread = shards_from_env(orchestrators)
    home = Path(state_dir).expanduser() if state_dir is not None else default_state_dir()
    indices = [*range(spread), *retired(home, state_url, spread)]
    sharded = len(indices) > 1
    actors = {
        k: _orchestrator(
            shard_name(name, k),
            namespace,
            env,
            list(catalogs),
            state_url,
            results_uri,
            None if state_dir is None else os.fspath(state_dir),
            shard=k,
            sharded=sharded,
        )
        for k in indices
    }
    aio = AsyncSwarmClient(actors[0], shards=actors, spread=spread, name=f"{namespace}/{name}")
    return SwarmClient(aio)


def _orchestrator(
    name: str,
    namespace: str,
    env: Mapping[str, str] | None,
    *args: Any,
    shard: int,
    sharded: bool,
) -> Any:
    """Get or create one orchestrator (shard) actor, detached (`_orchestrator_nodes`)."""
    shard_args = {"shard": shard, "sharded": True} if sharded else {}
    return (
        ray.remote(Orchestrator)
        .options(
            name=name,
            namespace=namespace,
            lifetime="detached",
            get_if_exists=True,
            max_restarts=-1,
            max_task_retries=-1,
            num_cpus=0,
            resources=_orchestrator_nodes(),
            max_concurrency=1000,
            **({"runtime_env": {"env_vars": dict(env)}} if env else {}),
        )
        .remote(*args, **shard_args)
    )


def _orchestrator_nodes() -> dict[str, float]:
    """Where the orchestrator shards live, as the resource each takes 0.001 of.

    On the head node, the one node an autoscaler never takes away while workers (spot
    instances, scale-down) may vanish mid-job; or on the nodes of the operator's own
    group (`SWARM_RAY_ORCHESTRATOR_RESOURCE`).

    Raises:
        InvalidSpecError: the named resource is on no node, and no autoscaler may add one
            (the shards would wait to be placed for ever).
    """
    name = orchestrator_resource()
    if name is None:
        return {HEAD_NODE_RESOURCE_NAME: 0.001}
    if name not in ray.cluster_resources() and not autoscaling():  # type: ignore[no-untyped-call]
        raise InvalidSpecError(
            f"no node declares the resource `{name}` that `{ORCHESTRATOR_RESOURCE}` names for "
            "the orchestrators (start their nodes with `ray start --resources "
            f"'{{\"{name}\": 8}}'`, or set `SWARM_RAY_AUTOSCALING=1` if an autoscaler adds them)"
        )
    return {name: 0.001}


class SwarmClient:
    """A synchronous client of the orchestrator (picklable: pass it to tasks).

    It runs the calls of `aio` (an `AsyncSwarmClient`, the one place that knows the
    orchestrator's methods) on an event loop of its own (`_loop.LOOP`, one per process), so it works
    the same in a script, a notebook, a `ray job submit` driver, a Ray actor and an
    agent, whether or not the calling thread runs an event loop. Calls about one task go
    through its handle: `client.task(task_id).status()`, or the one `start` returns.
    Every call rides out a restart of the orchestrator.
    """

    def __init__(self, aio: AsyncSwarmClient) -> None:
        self.aio = aio
        """The async client this one wraps (for code that runs on an event loop)."""

    def __repr__(self) -> str:
        return f"SwarmClient({self.aio!r})"

    @property
    def actor(self) -> Any:
        """The orchestrator's actor handle."""
        return self.aio.actor

    def submit(self, request: TaskRequest | dict[str, Any] | None = None, **fields: Any) -> str:
        """Submit a task; returns its id at once. Raises `SwarmUserError` for bad input."""
        if request is None:
            request = TaskRequest(**fields)
        elif isinstance(request, dict):
            request = TaskRequest.model_validate({**request, **fields})
        return _LOOP.run(self.aio.submit(request))

    def start(
        self, request: TaskRequest | dict[str, Any] | None = None, **fields: Any
    ) -> TaskHandle:
        """Submit a task and return its handle (`submit` returns the id alone)."""
        return self.task(self.submit(request, **fields))

    def task(self, task_id: str) -> TaskHandle:
        """A handle on a task submitted earlier (by this client or another)."""
        return TaskHandle(self, task_id)

    def run(self, request: TaskRequest | dict[str, Any] | None = None, **fields: Any) -> TaskRecord:
        """Submit and wait; the task's record once it ends."""
        return self.start(request, **fields).wait()

    def tasks(self, limit: int = 100) -> list[TaskStatus]:
        """Newest tasks first, in brief."""
        return _LOOP.run(self.aio.tasks(limit))

    def trace(self, text: str, *, include_input: bool = True) -> list[dict[str, Any]]:
        """What produced each watermark found in `text` (full tokens or `wm:` short ids).

        Sub-task, capability, agent, timings, digests and, by default, the input.
        """
        return _LOOP.run(self.aio.trace(text, include_input=include_input))

    def info(self) -> dict[str, Any]:
        """Capabilities, templates, agents and counters."""
        return _LOOP.run(self.aio.info())

    def shutdown(self) -> None:
        """Kill the orchestrator for good (its state stays in the store).

        Rollouts of tasks that just ended are written first (waiting up to 10 s).
        """
        _LOOP.run(self.aio.shutdown())


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
        return _LOOP.iterate(self.client.aio.follow(self.id, after_seq))

    def events_so_far(self, after_seq: int = 0, wait_s: float = 0.0) -> list[TaskEvent]:
        """The events after `after_seq` now (waiting up to `wait_s` for one if none)."""
        return _LOOP.run(self.client.aio.events(self.id, after_seq, wait_s))

    def wait(self, timeout_s: float | None = None) -> TaskRecord:
        """Block until the task ends (or `timeout_s` passes); its record."""
        return _LOOP.run(self.client.aio.wait(self.id, timeout_s))

    def status(self) -> TaskStatus:
        """State, progress, sub-tasks, warnings, usage and output (the gateway's model)."""
        return _LOOP.run(self.client.aio.status(self.id))

    def record(self) -> TaskRecord:
        """The full record: plan, audit log, scheduler log."""
        return _LOOP.run(self.client.aio.record(self.id))

    def cancel(self) -> TaskRecord:
        """Cancel the task (an ended one is left as it is); its record."""
        return _LOOP.run(self.client.aio.cancel(self.id))

    def answer(self, answer: dict[str, Any], subtask_id: str | None = None) -> TaskStatus:
        """Answer a sub-task waiting for a person: `subtask_id`, or the one that waits.

        Raises:
            AnswerRefusedError: no sub-task waits (or several do, and none was named), or
                the one named does not.
            InvalidInputError: the answer does not match the sub-task's schema.
        """
        return _LOOP.run(self.client.aio.answer(self.id, subtask_id, answer))

    @overload
    def output(self, model: None = None) -> dict[str, Any] | None: ...

    @overload
    def output(self, model: type[M]) -> M: ...

    def output(self, model: type[M] | None = None) -> M | dict[str, Any] | None:
        """The task's output: as `model` (validated, so its fields are typed), or raw.

        Raises:
            SwarmRuntimeError: `model` is given and the task has no output (yet).
        """
        raw = _LOOP.run(self.client.aio.output(self.id))
        if model is None:
            return raw
        if raw is None:
            state = self.status().state
            raise SwarmRuntimeError(f"task `{self.id}` has no output ({state})", task_id=self.id)
        return model.model_validate(raw)
