"""Intake: what a submitted request becomes before the orchestrator creates its task.

Everything here is decided before a task exists, off the orchestrator's event loop
(`Orchestrator.submit_many` runs `take_in` in a thread), so a large request cannot stall
other callers, and a request that breaks a limit or names what its caller may not use is
refused (422) with nothing saved:

1. limits (`_limits`): depth for every caller; sizes for untrusted ones; no `$`-key
   (`own_names`); a tenant's `parent_task_id` and `traceparent` name its own things;
   its disk quota (`_disk`) before a new task;
2. the task id, scoped to the caller (`_principal.scoped_task_id`) and naming the shard
   (`_shards.mark`); a reused id returns
   the existing task when the request is the same and `TaskConflictError` when it is not;
3. file ids (`file-...`) among the items become the caller's own uploads (`_uploads`);
4. what starts the task: `core.driver._request_plan.plan_request` makes a template's plan (with
   the task's directory for `$task_dir`, and for an untrusted caller every server path
   or URL in its inputs checked by `_access`) or chooses the planning capability to ask.
"""

from __future__ import annotations

import json
import logging
import secrets
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from swarm_ray.core.driver._commands import AskPlanner, PlanFailed, Planned
from swarm_ray.core.driver._request_plan import plan_request
from swarm_ray.core.durability._journal import StateStore
from swarm_ray.core.durability._tasklog import read_record
from swarm_ray.core.guards._access import AccessPolicy, input_roots, refuse_markers
from swarm_ray.core.guards._limits import RequestLimits
from swarm_ray.core.guards._principal import Principal, scoped_task_id
from swarm_ray.core.model._errors import (
    InputNotAllowedError,
    SwarmError,
    SwarmRuntimeError,
    SwarmUserError,
    TaskConflictError,
)
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.runtime._disk import DiskQuota
from swarm_ray.runtime._otel import tenant_traceparent
from swarm_ray.runtime._shards import mark
from swarm_ray.runtime._uploads import FILE_ID, Uploads

__all__: list[str] = []

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Layout:
    """Where the server keeps tasks' own files."""

    state_dir: Path
    """The state directory; each task's outputs go under `tasks/<task id>` in it."""
    uploads: Uploads
    """Uploaded files, by principal."""
    disk: DiskQuota = field(default_factory=DiskQuota.from_env)
    """What an untrusted principal's uploads and task folders may hold (`_disk`)."""
    shard: int = 0
    """The orchestrator shard whose tasks these are: their ids name it (`_shards.mark`)."""

    def workdir(self, task_id: str, request: TaskRequest, owner: str | None) -> str:
        """The task's output directory: the server's, or a trusted caller's `out_dir`."""
        chosen = request.params.get("out_dir")
        if owner is None and isinstance(chosen, str) and chosen:
            return chosen
        return str(self.state_dir / "tasks" / task_id)

    def policy(self, owner: str | None, workdir: str) -> AccessPolicy | None:
        """What a task's inputs may name: None (anything) for a trusted caller's task."""
        if owner is None:
            return None
        return AccessPolicy(
            read_roots=(self.uploads.root_for(Principal(id=owner)), workdir, *input_roots()),
            write_roots=(workdir,),
        )

    def policy_of(self, record: TaskRecord) -> AccessPolicy | None:
        """`policy` for a stored task."""
        workdir = record.workdir or str(self.state_dir / "tasks" / record.task_id)
        return self.policy(record.owner, workdir)

    def resolve(self, request: TaskRequest, owner: str | None) -> TaskRequest:
        """An untrusted request with the file ids among its items resolved (see below)."""
        if owner is None:
            return request
        return _resolve_files(request, Principal(id=owner), self.uploads)


@dataclass(frozen=True)
class Intake:
    """A request ready to become a task (or to return an existing one)."""

    task_id: str
    request: TaskRequest
    """As the caller sent it (what the record keeps)."""
    owner: str | None
    workdir: str
    existing: bool = False
    """The id already names this caller's same request: answer it, create nothing."""
    start: Planned | AskPlanner | PlanFailed | None = None
    """What starts the task (`plan_request`); None for an existing one."""


def take_in(
    request: TaskRequest,
    principal: Principal,
    *,
    registry: Registry,
    router: TemplateRouter,
    store: StateStore,
    layout: Layout,
    limits: RequestLimits,
) -> Intake:
    """Check and plan one request (see the module docstring). Raises user errors."""
    untrusted = not principal.trusted
    limits.check(request, untrusted=untrusted)
    request = own_names(request, principal, store)
    owner = principal.id if untrusted else None
    task_id = scoped_task_id(principal, request.task_id) or uuid.uuid4().hex[:16]
    task_id = mark(task_id, layout.shard)
    if request.task_id is not None and (record := read_record(store, task_id)) is not None:
        same = _without_id(record.request) == _without_id(request)
        if record.owner != owner or not same:
            raise TaskConflictError(
                f"task id {request.task_id!r} already names another request of this caller"
                if record.owner == owner
                else f"task id {request.task_id!r} is taken; choose another",
                task_id=request.task_id,
            )
        return Intake(task_id, request, owner, record.workdir or "", existing=True)
    layout.disk.check(
        principal, store=store, uploads=layout.uploads, tasks_dir=layout.state_dir / "tasks"
    )
    workdir = layout.workdir(task_id, request, owner)
    start = plan_request(
        layout.resolve(request, owner),
        registry=registry,
        router=router,
        policy=layout.policy(owner, workdir),
        task_id=task_id,
        workdir=workdir,
    )
    return Intake(task_id, request, owner, workdir, start=start)


def own_names(request: TaskRequest, principal: Principal, store: StateStore) -> TaskRequest:
    """The request naming only what its caller owns (raises `InputNotAllowedError`).

    - No `$`-key in `params` or `items` (the swarm's markers; `_access.refuse_markers`).
    - A tenant's `parent_task_id` must be one of its own tasks (as the gateway handed its
      id back, or as the tenant chose it); another's, or none, is refused alike, so the
      answer tells nothing of other tenants' tasks. Its watermarks name that parent.
    - A tenant's `traceparent` starts a trace of its own (`_otel.tenant_traceparent`).

    Trusted callers name any parent and join any trace.
    """
    refuse_markers(request.params, "params")
    refuse_markers(request.items, "items")
    if principal.trusted:
        return request
    update: dict[str, str | None] = {}
    if request.parent_task_id is not None:
        update["parent_task_id"] = _own_task(store, principal, request.parent_task_id)
    if request.traceparent is not None:
        update["traceparent"] = tenant_traceparent(request.traceparent, principal)
    return request.model_copy(update=update) if update else request


def _own_task(store: StateStore, principal: Principal, task_id: str) -> str:
    """`task_id` as stored when it names one of `principal`'s tasks; raises otherwise."""
    for candidate in dict.fromkeys((task_id, scoped_task_id(principal, task_id) or task_id)):
        stored = store.get_task(candidate)
        if stored is not None and json.loads(stored.record_json).get("owner") == principal.id:
            return candidate
    raise InputNotAllowedError(
        f"`parent_task_id` {task_id[:80]!r} is not a task of this caller's",
        field="parent_task_id",
        reason="not_owner",
    )


def failure_of(exc: Exception, what: str) -> SwarmRuntimeError:
    """A bug met while handling one request, as that request's own error (HTTP 500).

    The caller hears an error id, never the traceback; the operator's log has both.
    """
    error_id = f"err-{secrets.token_hex(6)}"
    _log.error("%s failed (error id %s)", what, error_id, exc_info=exc)
    return SwarmRuntimeError(
        f"{what} failed on the server (error id `{error_id}`); the operator's log has the details",
        error_id=error_id,
    )


def take_in_each(
    requests: Sequence[TaskRequest],
    principals: Sequence[Principal],
    *,
    registry: Registry,
    router: TemplateRouter,
    store: StateStore,
    layout: Layout,
    limits: RequestLimits,
) -> list[Intake | SwarmError]:
    """`take_in` for each request of a batch: any exception is that request's alone.

    A user error comes back as it is (422); anything else as `failure_of` (500 with an
    error id). The other requests of the batch are taken in as if it were not there.
    """
    found: list[Intake | SwarmError] = []
    for request, principal in zip(requests, principals, strict=True):
        try:
            found.append(
                take_in(
                    request,
                    principal,
                    registry=registry,
                    router=router,
                    store=store,
                    layout=layout,
                    limits=limits,
                )
            )
        except SwarmUserError as exc:
            found.append(exc)
        except Exception as exc:  # a bug on one request must not fail its batch
            found.append(failure_of(exc, "taking in the request"))
    return found


def _without_id(request: TaskRequest) -> TaskRequest:
    """The request as compared for an idempotent submit (its id and trace context aside)."""
    return request.model_copy(update={"task_id": None, "traceparent": None})


def named_uploads(request: TaskRequest) -> list[str]:
    """The file ids (`file-...`) among the request's items and top-level params."""
    values = [*request.items, *request.params.values()]
    return [v for v in values if isinstance(v, str) and FILE_ID.match(v)]


def _resolve_files(request: TaskRequest, principal: Principal, uploads: Uploads) -> TaskRequest:
    """The request with each file id among its items and top-level params resolved.

    A file id (`file-...`) becomes the location of the caller's upload; a video's
    `params.path` is such a parameter.
    """
    items = tuple(
        uploads.resolve(principal, item, where=f"items[{n}]")
        if isinstance(item, str) and FILE_ID.match(item)
        else item
        for n, item in enumerate(request.items)
    )
    params = {
        name: uploads.resolve(principal, value, where=f"params.{name}")
        if isinstance(value, str) and FILE_ID.match(value)
        else value
        for name, value in request.params.items()
    }
    if items == request.items and params == request.params:
        return request
    return request.model_copy(update={"items": items, "params": params})


def plan_again(
    record: TaskRecord, *, registry: Registry, router: TemplateRouter, layout: Layout
) -> Planned | AskPlanner | PlanFailed:
    """A stored task's start made as `take_in` made it (`plan_request`).

    For a task that was stored before its plan (a restart in between). A request
    refused outright (a refused path) becomes `PlanFailed`: the task exists already.
    """
    workdir = record.workdir or str(layout.state_dir / "tasks" / record.task_id)
    try:
        return plan_request(
            layout.resolve(record.request, record.owner),
            registry=registry,
            router=router,
            policy=layout.policy(record.owner, workdir),
            task_id=record.task_id,
            workdir=workdir,
        )
    except SwarmError as exc:
        return PlanFailed(exc)
