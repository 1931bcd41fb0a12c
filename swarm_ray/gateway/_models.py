"""Request and response bodies of the gateway (they make up its OpenAPI document)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CapabilityHealth",
    "CapabilityInfo",
    "ErrorBody",
    "GatewayConfig",
    "HealthReport",
    "HealthStatus",
    "HumanAnswer",
    "TaskAccepted",
    "TaskReport",
    "WatermarkQuery",
    "WatermarkTrace",
]


class GatewayConfig(BaseModel):
    """Options of the gateway application (the `args` of a Serve config file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    orchestrator: str = "swarm-ray-orchestrator"
    """Name of the orchestrator actor to use (created when none runs)."""
    namespace: str = "swarm-ray"
    """Its Ray namespace."""
    orchestrators: int | None = Field(default=None, ge=1, le=999)
    """Orchestrator shards taking new tasks (default `SWARM_RAY_ORCHESTRATORS`, else 1);
    calls about a task go to the shard its id names (`swarm_ray.runtime._shards`)."""
    catalogs: tuple[str, ...] = ("swarm_ray.catalog:default_catalog",)
    """Catalogs an orchestrator created by the gateway loads."""
    state_dir: str | None = None
    """State directory (default `SWARM_RAY_STATE_DIR` or `~/.swarm-ray`)."""
    api_keys_file: str | None = None
    """File of API keys, one per line (see `swarm_ray.gateway._auth`)."""
    num_replicas: int = Field(default=1, ge=1)
    """Gateway replicas."""
    max_ongoing_requests: int = Field(default=200, ge=1)
    """Requests one replica handles at once (they mostly wait on the orchestrator)."""
    call_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait on the orchestrator for one request."""
    event_poll_s: float = Field(default=5.0, gt=0)
    """How long one long-poll for task events waits before the socket checks in again."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """Largest JSON body (413 above it)."""
    max_json_depth: int = Field(default=32, ge=2, le=200)
    """Deepest JSON nesting of a body (422 above it)."""
    max_upload_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    """Largest upload (413 above it)."""
    body_timeout_s: float = Field(default=10.0, gt=0, le=300)
    """Time a request body has to arrive, on top of its size at `min_body_rate` (408
    past it): a slow sender cannot hold one of the replica's slots for long."""
    min_body_rate: int = Field(default=64 * 1024, ge=1024)
    """Bytes a second by which a body's deadline grows as it arrives."""
    calls_per_key: int = Field(default=48, ge=1)
    """HTTP calls one principal may have in progress at once on one replica, any method
    (429 over, at once). Kept at a quarter of `max_ongoing_requests` at most: each call
    holds one of the replica's slots, and a call that finds none free waits in the
    proxy's queue behind whoever filled them."""
    bodies_per_key: int = Field(default=8, ge=1)
    """Slow request bodies (not whole after `body_grace_s`) one principal may have
    arriving at once on one replica (429 over)."""
    bodies_per_address: int = Field(default=32, ge=1)
    """Slow request bodies one client address may have arriving at once on one replica
    (429 over). Behind a load balancer every client has its address: raise it there."""
    body_grace_s: float = Field(default=0.5, gt=0, le=10)
    """Time a body has to arrive whole before it is a slow one and needs a place under
    `bodies_per_key` and `bodies_per_address`: a burst of small requests never does."""
    max_metadata_keys: int = Field(default=64, ge=1)
    """Labels a task's `metadata` may hold (422 above it)."""
    max_metadata_bytes: int = Field(default=16 * 1024, ge=256)
    """Bytes a task's `metadata` may take as JSON (422 above it)."""
    upload_quota_bytes: int = Field(default=1024 * 1024 * 1024, ge=1024)
    """Bytes one principal's live uploads may hold (413 once they do)."""
    upload_quota_files: int = Field(default=100, ge=1)
    """Live uploads one principal may hold (429 once it does)."""
    ws_auth_timeout_s: float = Field(default=2.0, gt=0, le=30)
    """How long a WebSocket without an `Authorization` header may take to send its key."""
    ws_max_message_bytes: int = Field(default=4096, ge=256)
    """Largest WebSocket message a client may send (its auth message); 1009 above it."""
    ws_per_principal: int = Field(default=32, ge=1)
    """Open WebSockets one principal may hold on one replica."""
    ws_per_address: int = Field(default=64, ge=1)
    """Open WebSockets with a key one client address may hold on one replica (those
    still waiting for their key count under `ws_unauthenticated_per_address`)."""
    ws_unauthenticated: int = Field(default=64, ge=1)
    """WebSockets one replica keeps open, in total, that have not shown a key yet. Over
    it, a new one takes the place of the oldest from the address holding the most."""
    ws_max_open: int = Field(default=100, ge=1)
    """WebSockets with a key one replica keeps open in all, whoever holds them. The
    gateway uses at most half its `max_ongoing_requests` (and a quarter for
    `ws_unauthenticated`): every open socket holds a slot, and other calls need some."""
    ws_unauthenticated_per_address: int = Field(default=8, ge=1)
    """WebSockets from one client address that have not shown a key yet. Over it, a new
    one takes the place of that address's oldest: a client flooding sockets that never
    present a key closes its own, while a browser that sends its key at once gets in."""
    ws_idle_timeout_s: float = Field(default=300.0, gt=0)
    """How long a WebSocket may carry nothing either way before it is closed (4408): a
    quiet task's followers reconnect with `after_seq` rather than hold a slot for ever."""
    public_docs: bool = False
    """Serve `/openapi.json` and `/docs` without a key (by default they need one, like
    every endpoint but `/health`; Swagger UI in a browser needs them public)."""


class ErrorBody(BaseModel):
    """Every error response: what went wrong, and for bad input which fields."""

    detail: Any
    """A message, or a list of `{loc, msg, type}` field errors."""
    code: str | None = None
    """swarm-ray's error code (`invalid_input`, `task_not_found`, ...)."""
    error_id: str | None = None
    """On a 500 or 503: the id under which the operator's log has the details."""


class TaskAccepted(BaseModel):
    """The answer to `POST /v1/tasks`."""

    task_id: str
    state: str
    status_url: str
    events_url: str


class HumanAnswer(BaseModel):
    """A person's answer to a sub-task waiting for one (`TaskStatus.waiting`)."""

    model_config = ConfigDict(extra="forbid")

    answer: dict[str, Any]
    """A JSON object matching the sub-task's `answer_schema`."""


class TaskReport(BaseModel):
    """The output of a completed task."""

    task_id: str
    state: str
    output: dict[str, Any] | None
    warnings: list[str] = []


class CapabilityInfo(BaseModel):
    """A registered capability with its JSON Schemas."""

    model_config = ConfigDict(extra="allow")

    id: str
    description: str
    version: str
    executor: str
    resources: dict[str, Any]
    timeout_s: float
    fallback: str | None = None
    confidence_threshold: float
    tags: list[str] = []
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]


class CapabilityHealth(BaseModel):
    """Health of one capability (see `swarm_ray.runtime._health`)."""

    status: str
    in_dispatch: bool
    version: str
    model: str | None = None
    executor: str
    attempts: int
    success_rate: float | None = None
    latency_ms: float | None = None
    consecutive_probe_failures: int
    last_error: str | None = None


class HealthReport(BaseModel):
    """`GET /health`: the swarm health score, its parts and every capability."""

    status: str
    """`ok`, `degraded` (score under 0.8 or a capability out) or `down`."""
    swarm_health_score: float
    success_rate: float
    latency_score: float
    availability: float
    capabilities: dict[str, CapabilityHealth] = {}
    open_tasks: int = 0
    uptime_s: float = 0.0
    audit_error: str | None = None
    """Set while the audit trail cannot be written (a full disk): tasks go on without it."""
    shards_down: list[int] = []
    """Orchestrator shards that did not answer: their tasks wait (`degraded`)."""


class HealthStatus(BaseModel):
    """`GET /health` without an API key: only whether the swarm is well."""

    status: str
    """`ok`, `degraded` or `down`."""


class WatermarkQuery(BaseModel):
    """A pasted passage, Parquet cell or token."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=200_000)
    """A report line, a Parquet cell, a log: full tokens and short ids are found in it."""
    include_input: bool = False
    """Also return each sub-task's input (only for the caller's own tasks)."""


class WatermarkTrace(BaseModel):
    """What produced one watermark token found in the passage."""

    model_config = ConfigDict(extra="allow")

    token: str
    valid: bool
    reason: str | None = None
    task_id: str | None = None
    subtask_id: str | None = None
    capability_id: str | None = None
    agent: str | None = None
    input: dict[str, Any] | None = None
    issued_at: float | None = None
    finished_at: float | None = None
