"""The gateway: a FastAPI ingress on Ray Serve in front of the orchestrator actor.

Replicas keep no state of their own: every request becomes a call on the detached
orchestrator through the async client (`AsyncSwarmClient`, awaited, never blocking the
replica's event loop; concurrent submits share one call, see `_coalesce`), so any number
of replicas answer alike, and `/metrics` shows swarm-level numbers whichever one answers.
Errors come back with the status that fits and swarm-ray's error code: a request that
fails validation gets 422 with field-level detail before anything is planned or run.

Every caller is an untrusted principal (its API key's, see `_auth`): it sees and cancels
only its own tasks (an admin sees all), names files by upload id (`POST /v1/files`),
never by server path, and is held to the request limits (`_limits`,
`swarm_ray.core.guards._limits`).
"""

import asyncio
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Query, Request, WebSocket
from fastapi import Path as PathParam
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials
from ray import serve
from starlette.websockets import WebSocketDisconnect, WebSocketState

from swarm_ray.core import (
    Principal,
    SwarmError,
    TaskRequest,
    TaskStatus,
    parse_traceparent,
)
from swarm_ray.gateway._auth import ApiKeys
from swarm_ray.gateway._coalesce import Coalescer, checked_apart
from swarm_ray.gateway._files import UploadLimits, receive_upload
from swarm_ray.gateway._http import (
    AUTH,
    Caller,
    Keys,
    bearer,
    check_key,
    http_error,
    orchestrator_answer,
    principal_id,
    sees_swarm,
    serialisable,
)
from swarm_ray.gateway._limits import BodyLimits, GatewayLimits, check_metadata
from swarm_ray.gateway._models import (
    CapabilityInfo,
    ErrorBody,
    GatewayConfig,
    HealthReport,
    HealthStatus,
    HumanAnswer,
    TaskAccepted,
    TaskReport,
    WatermarkQuery,
    WatermarkTrace,
)
from swarm_ray.gateway._prometheus import CONTENT_TYPE, render
from swarm_ray.gateway._redact import CallerNames
from swarm_ray.gateway._sockets import SocketGuard, SocketLimits, SocketSlots
from swarm_ray.gateway._ui import install_ui
from swarm_ray.runtime._aclient import AsyncSwarmClient
from swarm_ray.runtime._client import connect
from swarm_ray.runtime._config import state_dir as default_state_dir
from swarm_ray.runtime._config import tune_gc
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._uploads import UploadInfo, Uploads

__all__ = ["Gateway", "app", "build_app"]

T = TypeVar("T")
SHARDS_DOWN_HEADER = "X-Swarm-Shards-Down"
"""On a task listing: the orchestrator shards that did not answer, whose tasks it lacks."""

_TASK_ID = PathParam(pattern=r"^[A-Za-z0-9_\-]{1,80}$", description="A task id.")
_SUBTASK_ID = PathParam(
    pattern=r"^[A-Za-z0-9_.@\[\],\-]{1,200}$", description="A sub-task id (`review[0]`)."
)
_FILE_ID = PathParam(pattern=r"^file-[0-9a-f]{24}$", description="A file id.")
_CAPABILITY_ID = PathParam(pattern=r"^[a-z][a-z0-9_.]{2,127}$", description="A capability id.")
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "Missing or wrong API key."},
    404: {"model": ErrorBody, "description": "No such task or capability."},
    503: {"model": ErrorBody, "description": "The orchestrator is not reachable."},
}

app = FastAPI(
    title="swarm-ray",
    version="1",
    description=(
        "The HTTP face of a swarm-ray orchestrator: submit tasks, follow their events, "
        "read reports, list capabilities, trace watermarks. Every endpoint but `/health` "
        "needs `Authorization: Bearer <API key>`."
    ),
    openapi_url=None,  # served below, behind the key unless `public_docs`
    docs_url=None,
    redoc_url=None,
)
install_ui(app)  # the live task page at /ui/ (static files; its data comes from this API)


@app.exception_handler(HTTPException)
async def _error_body(_request: Any, exc: HTTPException) -> JSONResponse:
    body = exc.detail if isinstance(exc.detail, dict) else {"detail": exc.detail}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


app.add_middleware(
    SocketGuard,
    limit=lambda: Keys.sockets.max_message_bytes,
    idle_s=lambda: Keys.sockets.idle_timeout_s,
)
app.add_middleware(
    BodyLimits,
    limits=lambda: Keys.limits,
    principal=principal_id,
)


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
@serve.ingress(app)
class Gateway:
    """One gateway replica."""

    def __init__(self, config: GatewayConfig | dict[str, Any] | None = None) -> None:
        self._config = GatewayConfig.model_validate(config or {})
        state_dir = self._config.state_dir or str(default_state_dir())
        self._keys = ApiKeys.from_config(self._config.api_keys_file, state_dir=state_dir)
        Keys.current = self._keys
        slots = max(4, self._config.max_ongoing_requests)
        Keys.limits = GatewayLimits(
            max_body_bytes=self._config.max_body_bytes,
            max_depth=self._config.max_json_depth,
            max_upload_bytes=self._config.max_upload_bytes,
            body_timeout_s=self._config.body_timeout_s,
            min_body_rate=self._config.min_body_rate,
            # One key's calls never hold more than a quarter of the replica's slots.
            calls_per_key=min(self._config.calls_per_key, slots // 4),
            bodies_per_key=self._config.bodies_per_key,
            bodies_per_address=self._config.bodies_per_address,
            body_grace_s=self._config.body_grace_s,
            max_metadata_keys=self._config.max_metadata_keys,
            max_metadata_bytes=self._config.max_metadata_bytes,
        )
        Keys.sockets = SocketLimits(
            auth_timeout_s=self._config.ws_auth_timeout_s,
            max_message_bytes=self._config.ws_max_message_bytes,
            per_principal=self._config.ws_per_principal,
            per_address=self._config.ws_per_address,
            # Sockets never hold more than three quarters of the replica's slots.
            unauthenticated=min(self._config.ws_unauthenticated, slots // 4),
            unauthenticated_per_address=self._config.ws_unauthenticated_per_address,
            max_open=min(self._config.ws_max_open, slots // 2),
            idle_timeout_s=self._config.ws_idle_timeout_s,
        )
        self._sockets = SocketSlots(Keys.sockets)
        # HTTP callers retry: a call fails at once while the orchestrator is away (503).
        self._swarm: AsyncSwarmClient = connect(
            catalogs=self._config.catalogs,
            state_dir=self._config.state_dir,
            name=self._config.orchestrator,
            namespace=self._config.namespace,
            orchestrators=self._config.orchestrators,
        ).aio.options(timeout_s=self._config.call_timeout_s, ride_out_restarts=False)
        self._storage_of: dict[str, str] | None = None
        self._uploads_area: Uploads | None = None
        self._names_of: CallerNames | None = None
        # Each request is checked on its own before it joins a batch: one that cannot
        # be sent fails its caller alone (422), never the batch it would have joined.
        self._submits: Coalescer[tuple[TaskRequest, Principal], str] = Coalescer(
            checked_apart(self._submit_batch, serialisable)
        )
        tune_gc()

    # ---- plumbing --------------------------------------------------------------------

    async def _call(self, call: Awaitable[T]) -> T:
        """Await a call of the async client (`self._swarm.METHOD(...)`).

        Swarm-ray errors become HTTP errors; an orchestrator that does not answer in time
        (or is restarting) is a 503 (`orchestrator_answer`). No error names a server path
        (`_shown`).
        """
        try:
            return await orchestrator_answer(call)
        except HTTPException as exc:
            raise await self._shown(exc) from None

    async def _shown(self, exc: HTTPException) -> HTTPException:
        """`exc` with every server path in its detail rewritten (`_redact`)."""
        try:
            names = await self._names()
        except HTTPException:  # the orchestrator is away: that error names no path
            return exc
        return HTTPException(exc.status_code, detail=names.data(exc.detail), headers=exc.headers)

    async def _submit_batch(
        self, batch: list[tuple[TaskRequest, Principal]]
    ) -> list[str | BaseException]:
        """Submit concurrent requests in one orchestrator call; each gets its own answer."""
        requests = [request for request, _ in batch]
        principals = [principal for _, principal in batch]
        answers = await self._call(self._swarm.submit_many(requests, principals))
        return [
            await self._shown(http_error(a)) if isinstance(a, SwarmError) else a for a in answers
        ]

    async def _storage(self) -> dict[str, str]:
        """Where the orchestrator keeps results and tasks' files (asked once)."""
        if self._storage_of is None:  # not `_call`: its errors are shown through `_names`
            self._storage_of = await orchestrator_answer(self._swarm.storage())
        return self._storage_of

    async def _uploads(self) -> Uploads:
        """The uploads area of the orchestrator's result store."""
        if self._uploads_area is None:
            self._uploads_area = Uploads(ResultStore((await self._storage())["results_uri"]))
        return self._uploads_area

    async def _names(self) -> CallerNames:
        """How server paths are shown to a caller (`_redact`)."""
        if self._names_of is None:
            storage = await self._storage()
            self._names_of = CallerNames(
                await self._uploads(), storage["tasks_dir"], storage.get("state_dir")
            )
        return self._names_of

    # ---- tasks -----------------------------------------------------------------------

    @app.post(
        "/v1/tasks",
        status_code=202,
        response_model=TaskAccepted,
        responses={
            **_ERRORS,
            409: {"model": ErrorBody, "description": "The task id names another request."},
            413: {"model": ErrorBody, "description": "The body is over the size limit."},
            422: {"model": ErrorBody, "description": "Invalid request, or over a limit."},
        },
    )
    async def submit(self, request: TaskRequest, caller: Caller, http: Request) -> TaskAccepted:
        """Validate, plan and start a task; returns its id at once.

        Items that are documents or videos are named by file id (`POST /v1/files`);
        a server path or URL is refused with 422 unless an operator allow-listed it.
        A W3C `traceparent` header places the task in the caller's trace; one that is
        not exactly valid (or sent twice) is ignored, as the standard asks.
        """
        check_metadata(request.metadata, Keys.limits)
        sent = http.headers.getlist("traceparent")
        if len(sent) == 1 and parse_traceparent(sent[0]) is not None:
            request = request.model_copy(update={"traceparent": sent[0]})
        task_id = await self._submits((request, caller))
        return TaskAccepted(
            task_id=task_id,
            state="accepted",
            status_url=f"/v1/tasks/{task_id}",
            events_url=f"/v1/tasks/{task_id}/events",
        )

    @app.get("/v1/tasks", response_model=list[TaskStatus], responses=_ERRORS)
    async def list_tasks(
        self,
        caller: Caller,
        response: Response,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> list[TaskStatus]:
        """The caller's newest tasks first (an admin's: everyone's).

        With orchestrator shards, a shard that is down leaves its tasks out: the list
        comes back, with `X-Swarm-Shards-Down` naming the shards missing from it.
        """
        tasks, down = await self._call(self._swarm.listing(limit, principal=caller))
        if down:
            response.headers[SHARDS_DOWN_HEADER] = ",".join(str(k) for k in down)
        names = await self._names()
        return [names.model(caller, t) for t in tasks]

    @app.get("/v1/tasks/{task_id}", response_model=TaskStatus, responses=_ERRORS)
    async def get_task(self, task_id: Annotated[str, _TASK_ID], caller: Caller) -> TaskStatus:
        """State, plan (each sub-task's status), result references, warnings."""
        status = await self._call(self._swarm.status(task_id, principal=caller))
        return (await self._names()).model(caller, status)

    @app.post("/v1/tasks/{task_id}/cancel", response_model=TaskStatus, responses=_ERRORS)
    async def cancel_task(self, task_id: Annotated[str, _TASK_ID], caller: Caller) -> TaskStatus:
        """Cancel a running task (an ended one is left as it is)."""
        await self._call(self._swarm.cancel(task_id, principal=caller))
        status = await self._call(self._swarm.status(task_id, principal=caller))
        return (await self._names()).model(caller, status)

    @app.post(
        "/v1/tasks/{task_id}/subtasks/{subtask_id}/answer",
        response_model=TaskStatus,
        responses={
            **_ERRORS,
            403: {"model": ErrorBody, "description": "Not the task owner's key."},
            409: {"model": ErrorBody, "description": "The sub-task is not waiting."},
            422: {"model": ErrorBody, "description": "The answer does not match its schema."},
        },
    )
    async def answer_subtask(
        self,
        task_id: Annotated[str, _TASK_ID],
        subtask_id: Annotated[str, _SUBTASK_ID],
        body: HumanAnswer,
        caller: Caller,
    ) -> TaskStatus:
        """Answer a sub-task waiting for a person (`waiting` in the task's status).

        Only the task's owner answers; the answer must match the sub-task's schema. It is
        recorded with the caller's principal before the sub-task runs with it.
        """
        status = await self._call(
            self._swarm.answer(task_id, subtask_id, body.answer, principal=caller)
        )
        return (await self._names()).model(caller, status)

    @app.get(
        "/v1/tasks/{task_id}/report",
        dependencies=AUTH,
        response_model=TaskReport,
        responses={
            **_ERRORS,
            409: {"model": ErrorBody, "description": "The task has not completed."},
            200: {"content": {"text/markdown": {}}},
        },
    )
    async def get_report(
        self,
        task_id: Annotated[str, _TASK_ID],
        caller: Caller,
        format: Annotated[str, Query(pattern="^(json|markdown)$")] = "json",
    ) -> Any:
        """The output of a completed task; `format=markdown` for a Markdown report file."""
        status = await self._call(self._swarm.status(task_id, principal=caller))
        if status.state != "completed":
            raise HTTPException(
                409,
                detail={
                    "detail": f"task `{task_id}` is {status.state}, not completed",
                    "code": "not_completed",
                },
            )
        output = status.output
        if output is None:
            output = await self._call(self._swarm.output(task_id, principal=caller))
        if format == "markdown":
            text = await self._call(self._swarm.markdown(task_id, principal=caller))
            if text is None:
                raise HTTPException(
                    404,
                    detail={
                        "detail": f"task `{task_id}` has no Markdown report readable here",
                        "code": "no_markdown",
                    },
                )
            shown = (await self._names()).text(caller, text)
            return PlainTextResponse(shown, media_type="text/markdown")
        report = TaskReport(
            task_id=task_id, state=status.state, output=output, warnings=status.warnings
        )
        return (await self._names()).model(caller, report)

    @app.websocket("/v1/tasks/{task_id}/events")
    async def task_events(self, websocket: WebSocket, task_id: str, after_seq: int = 0) -> None:
        """Task events as JSON messages; reconnect with `after_seq` to get what was missed.

        The socket closes with 1000 once the task has ended and every event was sent,
        4401 without a valid key (`Authorization: Bearer ...` on the handshake, or from a
        browser a first message `{"type": "auth", "api_key": ...}` within 2 s: see
        `_ws_auth`), 4404 for an unknown task, 1011 when the orchestrator does not answer
        (reconnect with `after_seq` once it is back), 1013 over a socket cap, 1009 for a
        message over the size limit, 4408 after `ws_idle_timeout_s` with nothing sent
        either way (reconnect with `after_seq`; see `_sockets`).
        """
        async with self._sockets.admitted(websocket, self._keys.principal) as caller:
            if caller is not None:  # else refused and closed (see `_sockets`)
                await self._stream_events(websocket, task_id, after_seq, caller)

    async def _stream_events(
        self, websocket: WebSocket, task_id: str, after_seq: int, caller: Principal
    ) -> None:
        seq = max(0, after_seq)
        names = await self._names()
        try:
            # A socket closed under the loop (its client gone, or `SocketGuard` closed it)
            # ends it at the next poll, not when the task ends.
            while websocket.client_state is WebSocketState.CONNECTED:
                try:
                    # A long poll: the client allows it `event_poll_s` on top of its timeout.
                    batch = await self._call(
                        self._swarm.events(
                            task_id, seq, self._config.event_poll_s, principal=caller
                        )
                    )
                except HTTPException as exc:
                    if exc.status_code == 404:
                        await websocket.close(code=4404, reason=f"task `{task_id}` is not known")
                    else:  # the orchestrator is away: the client reconnects with its seq
                        await websocket.close(code=1011, reason="orchestrator unavailable")
                    return
                for event in batch:
                    await websocket.send_text(names.text(caller, event.model_dump_json()))
                    seq = event.seq
                if not batch:
                    status = await self._call(self._swarm.status(task_id, principal=caller))
                    if status.ended:
                        # It may have ended after the poll came back empty: its last events
                        # (the end's own among them) are sent before the close.
                        rest = await self._call(
                            self._swarm.events(task_id, seq, 0.0, principal=caller)
                        )
                        for event in rest:
                            await websocket.send_text(names.text(caller, event.model_dump_json()))
                        await websocket.close(code=1000, reason=f"task {status.state}")
                        return
        except WebSocketDisconnect:
            return

    # ---- uploads ---------------------------------------------------------------------

    @app.post(
        "/v1/files",
        status_code=201,
        response_model=UploadInfo,
        responses={
            **_ERRORS,
            413: {"model": ErrorBody, "description": "Over the size limit or byte quota."},
            415: {"model": ErrorBody, "description": "Not a PDF or a video."},
            429: {"model": ErrorBody, "description": "Over the caller's file quota."},
        },
    )
    async def upload(self, request: Request, caller: Caller) -> UploadInfo:
        """Upload a PDF or a video (multipart, part `file`); returns its file id.

        Name the id as a task item (`"items": ["file-..."]`); only its uploader can.
        """
        limits = UploadLimits(
            max_bytes=self._config.max_upload_bytes,
            quota_bytes=self._config.upload_quota_bytes,
            quota_files=self._config.upload_quota_files,
        )
        return await receive_upload(request, await self._uploads(), caller, limits)

    @app.get("/v1/files", response_model=list[UploadInfo], responses=_ERRORS)
    async def files(
        self, caller: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[UploadInfo]:
        """The caller's uploads, newest first."""
        return await asyncio.to_thread((await self._uploads()).list, caller, limit)

    @app.get("/v1/files/{file_id}", response_model=UploadInfo, responses=_ERRORS)
    async def file(self, file_id: Annotated[str, _FILE_ID], caller: Caller) -> UploadInfo:
        """One of the caller's uploads."""
        info = await asyncio.to_thread((await self._uploads()).info, caller, file_id)
        if info is None:
            raise HTTPException(
                404, detail={"detail": f"file `{file_id}` is not known", "code": "not_found"}
            )
        return info

    @app.delete("/v1/files/{file_id}", status_code=204, responses=_ERRORS)
    async def delete_file(self, file_id: Annotated[str, _FILE_ID], caller: Caller) -> Response:
        """Delete one of the caller's uploads (it no longer counts against its quota)."""
        if not await asyncio.to_thread((await self._uploads()).delete, caller, file_id):
            raise HTTPException(
                404, detail={"detail": f"file `{file_id}` is not known", "code": "not_found"}
            )
        return Response(status_code=204)

    # ---- documentation ---------------------------------------------------------------

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(
        self,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    ) -> JSONResponse:
        """The OpenAPI document (needs a key unless `public_docs`)."""
        if not self._config.public_docs:
            check_key(credentials)
        # The app Serve runs (routes bound to this replica), not the module-level template.
        return JSONResponse(request.app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> HTMLResponse:
        """Swagger UI over `/openapi.json`."""
        if not self._config.public_docs:
            check_key(credentials)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="swarm-ray API")

    # ---- catalogue, health, metrics, provenance --------------------------------------

    @app.get(
        "/v1/capabilities",
        dependencies=AUTH,
        response_model=list[CapabilityInfo],
        responses=_ERRORS,
    )
    async def capabilities(self) -> list[dict[str, Any]]:
        """Every registered capability with its input and output JSON Schemas."""
        return await self._call(self._swarm.catalogue(schemas=True))

    @app.get(
        "/v1/capabilities/{capability_id}",
        dependencies=AUTH,
        response_model=CapabilityInfo,
        responses=_ERRORS,
    )
    async def capability(self, capability_id: Annotated[str, _CAPABILITY_ID]) -> dict[str, Any]:
        """One capability with its JSON Schemas."""
        return await self._call(self._swarm.capability(capability_id))

    @app.get(
        "/health",
        response_model=HealthReport | HealthStatus,
        responses={503: {"model": HealthStatus}},
    )
    async def health(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> Any:
        """`ok`, `degraded` or `down`; with an admin key, each capability and the score.

        `swarm_health_score = 0.4 x success rate + 0.3 x latency score + 0.3 x agent
        availability` (see `swarm_ray.runtime._health`). To anyone but an admin (unless
        `SWARM_RAY_METRICS_PUBLIC=1`) only the status is told, so probes and load balancers
        need no key and tenants learn nothing of the swarm beyond their own tasks.
        """
        detailed = sees_swarm(credentials)
        try:
            report = await self._call(self._swarm.options(timeout_s=5.0).health())
        except HTTPException:
            return JSONResponse({"status": "down"}, status_code=503)
        everyone_in = all(c["in_dispatch"] for c in report["capabilities"].values())
        healthy = (
            report["swarm_health_score"] >= 0.8
            and everyone_in
            and not report.get("audit_error")
            and not report.get("shards_down")
        )
        status = "ok" if healthy else "degraded"
        if not detailed:
            return HealthStatus(status=status)
        return HealthReport(status=status, **report)

    @app.get(
        "/metrics",
        response_class=Response,
        responses={
            **_ERRORS,
            200: {"content": {CONTENT_TYPE: {}}},
            403: {"model": ErrorBody, "description": "Not an admin key."},
        },
    )
    async def metrics(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
    ) -> Response:
        """Swarm metrics in the Prometheus text format (the same from every replica).

        Swarm-wide counts and endpoint names are the operator's: an admin key is needed,
        unless `SWARM_RAY_METRICS_PUBLIC=1` (a scraper on a private network).
        """
        if not sees_swarm(credentials):
            check_key(credentials)  # no good key: 401; a tenant's: 403
            raise HTTPException(
                403,
                detail={"detail": "`/metrics` needs an admin key", "code": "forbidden"},
            )
        snapshot = await self._call(self._swarm.metrics())
        return Response(render(snapshot), media_type=CONTENT_TYPE)

    @app.post(
        "/v1/debug/watermark/extract",
        response_model=list[WatermarkTrace],
        response_model_exclude_unset=True,
        responses={**_ERRORS, 422: {"model": ErrorBody, "description": "No token in the text."}},
    )
    async def extract_watermark(
        self, query: WatermarkQuery, caller: Caller
    ) -> list[dict[str, Any]]:
        """The sub-task, agent and time behind each watermark in a pasted passage.

        Takes full tokens and the short ids reports print (`wm:TASK:SIGNATURE`). Only the
        caller's own tasks are looked up (an admin's: any); the sub-task's input comes
        back with `include_input`, to the task's owner only.
        """
        found = await self._call(
            self._swarm.trace(query.text, include_input=query.include_input, principal=caller)
        )
        traces: list[dict[str, Any]] = (await self._names()).data(found)  # no server path
        if not traces:
            raise HTTPException(
                422,
                detail={
                    "detail": [
                        {
                            "loc": ["body", "text"],
                            "msg": "no watermark token found",
                            "type": "value_error",
                        }
                    ],
                    "code": "no_watermark",
                },
            )
        return traces


def build_app(args: GatewayConfig) -> Any:
    """The gateway application, for `serve run` / `serve deploy` (`import_path`)."""
    config = GatewayConfig.model_validate(args)
    return Gateway.options(  # type: ignore[attr-defined]
        num_replicas=config.num_replicas, max_ongoing_requests=config.max_ongoing_requests
    ).bind(config)
