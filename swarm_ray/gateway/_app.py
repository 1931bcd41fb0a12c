"""The gateway: a FastAPI ingress on Ray Serve in front of the orchestrator actor.

Replicas keep no state of their own: every request becomes a call on the detached
orchestrator (awaited, never blocking the replica's event loop; concurrent submits share
one call, see `_coalesce`), so any number of replicas answer alike, and `/metrics` shows
swarm-level numbers whichever one answers.
Errors come back with the status that fits and swarm-ray's error code: a request that
fails validation gets 422 with field-level detail before anything is planned or run.
"""

import asyncio
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, WebSocket
from fastapi import Path as PathParam
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from ray import serve
from ray.exceptions import RayActorError, RayTaskError
from starlette.websockets import WebSocketDisconnect, WebSocketState

from swarm_ray._client import connect
from swarm_ray._config import state_dir as default_state_dir
from swarm_ray._config import tune_gc
from swarm_ray._errors import (
    InvalidInputError,
    SwarmError,
    SwarmUserError,
    TaskNotFoundError,
    UnknownCapabilityError,
)
from swarm_ray._task import TaskEvent, TaskRequest
from swarm_ray.gateway._auth import ApiKeys
from swarm_ray.gateway._coalesce import Coalescer
from swarm_ray.gateway._models import (
    CapabilityInfo,
    ErrorBody,
    GatewayConfig,
    HealthReport,
    TaskAccepted,
    TaskReport,
    TaskStatus,
    TaskSummary,
    WatermarkQuery,
    WatermarkTrace,
)
from swarm_ray.gateway._prometheus import CONTENT_TYPE, render
from swarm_ray.gateway._ui import install_ui
from swarm_ray.gateway._ws_auth import presented_key

__all__ = ["Gateway", "app", "build_app"]

_TERMINAL = frozenset({"completed", "failed", "cancelled"})
_TASK_ID = PathParam(pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="A task id.")
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
_bearer = HTTPBearer(auto_error=False, description="An API key from the gateway's keys.")
install_ui(app)  # the live task page at /ui/ (static files; its data comes from this API)


class _Keys:
    """The replica's API keys (one gateway per replica process), read by `_require_key`."""

    current: ApiKeys | None = None


async def _require_key(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Refuse the request before its body is even validated unless its key is good."""
    _check_key(credentials)


def _check_key(credentials: HTTPAuthorizationCredentials | None) -> None:
    keys = _Keys.current
    if credentials is None or keys is None or not keys.accepts(credentials.credentials):
        raise HTTPException(
            401,
            detail={"detail": "missing or invalid API key", "code": "unauthorized"},
            headers={"WWW-Authenticate": "Bearer"},
        )


_AUTH = [Depends(_require_key)]


def _http_error(exc: SwarmError) -> HTTPException:
    """Translate a swarm-ray error into the HTTP error that fits (in one place)."""
    code = str(exc.code)
    if isinstance(exc, TaskNotFoundError | UnknownCapabilityError):
        return HTTPException(404, detail={"detail": exc.message, "code": code})
    if isinstance(exc, InvalidInputError):
        fields = [
            {
                "loc": ["body", "input", *str(err.get("field", "")).split(".")],
                "msg": f"{err.get('problem')} (capability `{exc.details.get('capability_id')}`)",
                "type": code,
            }
            for err in exc.details.get("errors", [])
        ] or [{"loc": ["body"], "msg": exc.message, "type": code}]
        return HTTPException(422, detail={"detail": fields, "code": code})
    if isinstance(exc, SwarmUserError):
        return HTTPException(
            422,
            detail={"detail": [{"loc": ["body"], "msg": exc.message, "type": code}], "code": code},
        )
    return HTTPException(500, detail={"detail": exc.message, "code": code})


@app.exception_handler(HTTPException)
async def _error_body(_request: Any, exc: HTTPException) -> JSONResponse:
    body = exc.detail if isinstance(exc.detail, dict) else {"detail": exc.detail}
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


@serve.deployment(ray_actor_options={"num_cpus": 0.1})
@serve.ingress(app)
class Gateway:
    """One gateway replica."""

    def __init__(self, config: GatewayConfig | dict[str, Any] | None = None) -> None:
        self._config = GatewayConfig.model_validate(config or {})
        state_dir = self._config.state_dir or str(default_state_dir())
        self._keys = ApiKeys.from_config(self._config.api_keys_file, state_dir=state_dir)
        _Keys.current = self._keys
        client = connect(
            catalogs=self._config.catalogs,
            state_dir=self._config.state_dir,
            name=self._config.orchestrator,
            namespace=self._config.namespace,
        )
        self._actor = client.actor
        self._submits: Coalescer[TaskRequest, str] = Coalescer(self._submit_batch)
        tune_gc()

    # ---- plumbing --------------------------------------------------------------------

    async def _call(self, method: str, *args: Any, timeout_s: float | None = None) -> Any:
        """Call the orchestrator; swarm-ray errors become HTTP errors."""
        try:
            return await asyncio.wait_for(
                getattr(self._actor, method).remote(*args),
                timeout_s or self._config.call_timeout_s,
            )
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, SwarmError) else exc
            if isinstance(cause, SwarmError):
                raise _http_error(cause) from None
            raise
        except SwarmError as exc:
            raise _http_error(exc) from None
        except (TimeoutError, RayActorError) as exc:
            raise HTTPException(
                503,
                detail={"detail": f"orchestrator did not answer `{method}`: {exc}"[:500]},
            ) from None

    async def _submit_batch(self, requests: list[TaskRequest]) -> list[str | BaseException]:
        """Submit concurrent requests in one orchestrator call; each gets its own answer."""
        answers: list[str | SwarmError] = await self._call("submit_many", requests)
        return [_http_error(a) if isinstance(a, SwarmError) else a for a in answers]

    # ---- tasks -----------------------------------------------------------------------

    @app.post(
        "/v1/tasks",
        dependencies=_AUTH,
        status_code=202,
        response_model=TaskAccepted,
        responses={**_ERRORS, 422: {"model": ErrorBody, "description": "Invalid request."}},
    )
    async def submit(self, request: TaskRequest) -> TaskAccepted:
        """Validate, plan and start a task; returns its id at once."""
        task_id = await self._submits(request)
        return TaskAccepted(
            task_id=task_id,
            state="accepted",
            status_url=f"/v1/tasks/{task_id}",
            events_url=f"/v1/tasks/{task_id}/events",
        )

    @app.get("/v1/tasks", dependencies=_AUTH, response_model=list[TaskSummary], responses=_ERRORS)
    async def list_tasks(
        self, limit: Annotated[int, Query(ge=1, le=1000)] = 100
    ) -> list[dict[str, Any]]:
        """The newest tasks first."""
        tasks: list[dict[str, Any]] = await self._call("tasks", limit)
        return tasks

    @app.get(
        "/v1/tasks/{task_id}", dependencies=_AUTH, response_model=TaskStatus, responses=_ERRORS
    )
    async def get_task(self, task_id: Annotated[str, _TASK_ID]) -> dict[str, Any]:
        """State, plan (each sub-task's status), result references, warnings."""
        status: dict[str, Any] = await self._call("status", task_id)
        return status

    @app.post(
        "/v1/tasks/{task_id}/cancel",
        dependencies=_AUTH,
        response_model=TaskSummary,
        responses=_ERRORS,
    )
    async def cancel_task(self, task_id: Annotated[str, _TASK_ID]) -> dict[str, Any]:
        """Cancel a running task (an ended one is left as it is)."""
        await self._call("cancel", task_id)
        status: dict[str, Any] = await self._call("status", task_id)
        return status

    @app.get(
        "/v1/tasks/{task_id}/report",
        dependencies=_AUTH,
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
        format: Annotated[str, Query(pattern="^(json|markdown)$")] = "json",
    ) -> Any:
        """The output of a completed task; `format=markdown` for a Markdown report file."""
        status: dict[str, Any] = await self._call("status", task_id)
        if status["state"] != "completed":
            raise HTTPException(
                409,
                detail={
                    "detail": f"task `{task_id}` is {status['state']}, not completed",
                    "code": "not_completed",
                },
            )
        output = status.get("output")
        if output is None:
            output = await self._call("output", task_id)
        if format == "markdown":
            path = (output or {}).get("markdown_path")
            if not path or not Path(path).is_file():
                raise HTTPException(
                    404,
                    detail={
                        "detail": f"task `{task_id}` has no Markdown report readable here",
                        "code": "no_markdown",
                    },
                )
            return PlainTextResponse(
                Path(path).read_text(encoding="utf-8"), media_type="text/markdown"
            )
        return TaskReport(
            task_id=task_id, state=status["state"], output=output, warnings=status["warnings"]
        )

    @app.websocket("/v1/tasks/{task_id}/events")
    async def task_events(self, websocket: WebSocket, task_id: str, after_seq: int = 0) -> None:
        """Task events as JSON messages; reconnect with `after_seq` to get what was missed.

        The socket closes with 1000 once the task has ended and every event was sent,
        4401 without a valid key (`Authorization: Bearer ...` on the handshake, or from a
        browser a first message `{"type": "auth", "api_key": ...}`: see `_ws_auth`), 4404
        for an unknown task, and 1011 when the orchestrator does not answer (reconnect
        with `after_seq` once it is back).
        """
        await websocket.accept()
        if not self._keys.accepts(await presented_key(websocket)):
            await websocket.close(code=4401, reason="missing or invalid API key")
            return
        seq = max(0, after_seq)
        try:
            while True:
                try:
                    batch: list[TaskEvent] = await self._call(
                        "events",
                        task_id,
                        seq,
                        self._config.event_poll_s,
                        timeout_s=self._config.event_poll_s + self._config.call_timeout_s,
                    )
                except HTTPException as exc:
                    if exc.status_code == 404:
                        await websocket.close(code=4404, reason=f"task `{task_id}` is not known")
                    else:  # the orchestrator is away: the client reconnects with its seq
                        await websocket.close(code=1011, reason="orchestrator unavailable")
                    return
                for event in batch:
                    await websocket.send_text(event.model_dump_json())
                    seq = event.seq
                if not batch:
                    status = await self._call("status", task_id)
                    if status["state"] in _TERMINAL:
                        await websocket.close(code=1000, reason=f"task {status['state']}")
                        return
                elif websocket.client_state is not WebSocketState.CONNECTED:
                    return
        except WebSocketDisconnect:
            return

    # ---- documentation ---------------------------------------------------------------

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi(
        self,
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> JSONResponse:
        """The OpenAPI document (needs a key unless `public_docs`)."""
        if not self._config.public_docs:
            _check_key(credentials)
        # The app Serve runs (routes bound to this replica), not the module-level template.
        return JSONResponse(request.app.openapi())

    @app.get("/docs", include_in_schema=False)
    async def docs(
        self, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
    ) -> HTMLResponse:
        """Swagger UI over `/openapi.json`."""
        if not self._config.public_docs:
            _check_key(credentials)
        return get_swagger_ui_html(openapi_url="/openapi.json", title="swarm-ray API")

    # ---- catalogue, health, metrics, provenance --------------------------------------

    @app.get(
        "/v1/capabilities",
        dependencies=_AUTH,
        response_model=list[CapabilityInfo],
        responses=_ERRORS,
    )
    async def capabilities(self) -> list[dict[str, Any]]:
        """Every registered capability with its input and output JSON Schemas."""
        catalogue: list[dict[str, Any]] = await self._call("catalogue", True)
        return catalogue

    @app.get(
        "/v1/capabilities/{capability_id}",
        dependencies=_AUTH,
        response_model=CapabilityInfo,
        responses=_ERRORS,
    )
    async def capability(self, capability_id: Annotated[str, _CAPABILITY_ID]) -> dict[str, Any]:
        """One capability with its JSON Schemas."""
        info: dict[str, Any] = await self._call("capability", capability_id)
        return info

    @app.get("/health", response_model=HealthReport, responses={503: {"model": HealthReport}})
    async def health(self) -> Any:
        """Each capability's status, latency and version, and the swarm health score.

        `swarm_health_score = 0.4 x success rate + 0.3 x latency score + 0.3 x agent
        availability` (see `swarm_ray._health`). No API key needed.
        """
        try:
            report: dict[str, Any] = await self._call("health", timeout_s=5.0)
        except HTTPException:
            down = HealthReport(
                status="down",
                swarm_health_score=0.0,
                success_rate=0.0,
                latency_score=0.0,
                availability=0.0,
            )
            return JSONResponse(down.model_dump(mode="json"), status_code=503)
        everyone_in = all(c["in_dispatch"] for c in report["capabilities"].values())
        healthy = report["swarm_health_score"] >= 0.8 and everyone_in
        return HealthReport(status="ok" if healthy else "degraded", **report)

    @app.get(
        "/metrics",
        dependencies=_AUTH,
        response_class=Response,
        responses={**_ERRORS, 200: {"content": {CONTENT_TYPE: {}}}},
    )
    async def metrics(self) -> Response:
        """Swarm metrics in the Prometheus text format (the same from every replica)."""
        snapshot: dict[str, Any] = await self._call("metrics")
        return Response(render(snapshot), media_type=CONTENT_TYPE)

    @app.post(
        "/v1/debug/watermark/extract",
        dependencies=_AUTH,
        response_model=list[WatermarkTrace],
        responses={**_ERRORS, 422: {"model": ErrorBody, "description": "No token in the text."}},
    )
    async def extract_watermark(self, query: WatermarkQuery) -> list[dict[str, Any]]:
        """The sub-task, agent, input and time behind each watermark in a pasted passage."""
        traces: list[dict[str, Any]] = await self._call("trace_watermarks", query.text)
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
