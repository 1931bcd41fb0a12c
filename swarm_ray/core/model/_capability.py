"""Capabilities are data: an id, schemas, resources and policies.

A `CapabilitySpec` says what a capability takes and returns (Pydantic models), what it
needs to run (`Resources`, fractional GPUs included), how long it may take, how it is
retried, what it falls back to and how confident it must be. The function that does the
work is named by `entrypoint` (`"package.module:function"`), so a spec pickles to any
Ray process and the process imports the code itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from swarm_ray.core.model._errors import ErrorCode

__all__ = [
    "BreakerPolicy",
    "CapabilitySpec",
    "ExecutorKind",
    "Resources",
    "RetryPolicy",
    "capability_maker",
]

CAPABILITY_ID_PATTERN = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$")
"""`{domain}.{category}.{name}`, lower case, e.g. `document.parsing.pdf`."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Resources(BaseModel):
    """What one agent of a capability needs from the cluster."""

    model_config = _FROZEN

    num_cpus: float = Field(default=1.0, ge=0)
    """CPU cores per agent; fractions let several agents share a core."""
    num_gpus: float = Field(default=0.0, ge=0)
    """GPUs per agent: 0, a fraction in (0, 1] (0.25 = four agents per GPU) or a whole number."""
    memory_bytes: int | None = Field(default=None, gt=0)
    """Host memory to reserve per agent, if any."""
    gpu_memory_bytes: int | None = Field(default=None, gt=0)
    """GPU memory an agent may use (an LLM engine sizes its cache from it)."""
    max_concurrency: int = Field(default=1, ge=1)
    """How many agents of this capability may run at once."""
    max_memory_bytes: int | None = Field(default=None, gt=0)
    """Hard cap on what one attempt may allocate (`RLIMIT_AS`, past the interpreter's own
    start-up); past it the attempt gets a `MemoryError` and fails with `resource_limit`.
    Any `max_*` runs each attempt in a limited child process of its pooled agent or Ray
    Data row (not Serve), forked from a zygote that imported the capability once."""
    max_cpu_s: float | None = Field(default=None, gt=0)
    """Hard cap on one attempt's CPU seconds (`RLIMIT_CPU`); past it the kernel stops it."""
    max_processes: int | None = Field(default=None, ge=0)
    """Processes (threads too) one attempt may start (`RLIMIT_NPROC`): a fork bomb's
    `fork` fails. Everything the attempt started is killed when it ends."""
    limits_untrusted_only: bool = False
    """Apply the `max_*` limits only to sub-tasks of untrusted principals' tasks (HTTP
    callers' uploads): trusted batch jobs keep running in-process, without the fork
    and the copy of input and result a limited child costs per attempt."""
    background: bool = False
    """Bulk work off the critical path: its pooled sub-agents run at a lower OS priority
    (nice 10), so agents of other capabilities sharing the cores go first. Ray's
    reservations are unchanged; only who waits for a busy core is. (Ray Data rows and
    Serve replicas run in shared or Serve-managed processes and are not reniced.)"""

    @field_validator("num_gpus")
    @classmethod
    def _gpu_fraction_or_whole(cls, value: float) -> float:
        if value > 1 and not float(value).is_integer():
            raise ValueError(
                f"`num_gpus` must be a fraction in (0, 1] or a whole number, got {value!r}"
            )
        return value

    def ray_options(self) -> dict[str, Any]:
        """Options for `ray.remote(...).options()` / Serve `ray_actor_options`."""
        options: dict[str, Any] = {"num_cpus": self.num_cpus}
        if self.num_gpus:
            options["num_gpus"] = self.num_gpus
        if self.memory_bytes is not None:
            options["memory"] = self.memory_bytes
        return options


_RETRYABLE = frozenset(
    {
        ErrorCode.TIMEOUT,
        ErrorCode.AGENT_UNAVAILABLE,
        ErrorCode.AGENT_ERROR,
        ErrorCode.SANITIZATION_FAILED,  # a model may answer differently next time
    }
)


class RetryPolicy(BaseModel):
    """How a failed sub-task is retried: exponential backoff on retryable codes."""

    model_config = _FROZEN

    max_attempts: int = Field(default=3, ge=1)
    """Attempts in all, the first included."""
    backoff_s: float = Field(default=0.2, ge=0)
    """Delay before the second attempt."""
    multiplier: float = Field(default=2.0, ge=1)
    """Each further delay is this times the previous one."""
    max_backoff_s: float = Field(default=30.0, ge=0)
    """Cap on one delay."""
    retry_on: frozenset[ErrorCode] = _RETRYABLE
    """Error codes worth another attempt; user errors such as invalid input are not."""

    def delay_s(self, attempt: int) -> float:
        """Delay before attempt number `attempt` (2 is the first retry)."""
        return float(min(self.max_backoff_s, self.backoff_s * self.multiplier ** (attempt - 2)))


class BreakerPolicy(BaseModel):
    """When a capability's circuit breaker opens and how long it cools down."""

    model_config = _FROZEN

    failure_threshold: int = Field(default=5, ge=1)
    """Consecutive run-time failures that open the breaker."""
    cooldown_s: float = Field(default=30.0, ge=0)
    """Time open before one trial sub-task is let through (half-open)."""


class ExecutorKind(StrEnum):
    """Where a capability's sub-tasks run."""

    ACTOR = "actor"
    """A pooled sub-agent actor."""
    SERVE = "serve"
    """A Ray Serve deployment (model-backed capabilities)."""
    DATA = "data"
    """A row of a Ray Data stage (sharded inputs)."""


class CapabilitySpec(BaseModel):
    """A registered capability: data plus the name of a function."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    id: str
    """`{domain}.{category}.{name}`, e.g. `document.parsing.pdf`."""
    description: str
    """What it does, for the catalogue and the LLM planner."""
    input_model: type[BaseModel]
    """Pydantic model every input is validated against before dispatch."""
    output_model: type[BaseModel]
    """Pydantic model every output is validated against before it is accepted."""
    version: str = "1"
    """Bumped when behaviour changes; recorded with each result."""
    entrypoint: str | None = None
    """`"package.module:function"` that runs it (input model in, output model out)."""
    executor: ExecutorKind = ExecutorKind.ACTOR
    """Which executor hosts it."""
    deployment: str | None = None
    """`"package.module:function"` building the Serve app of a `serve` capability from its
    spec (model-backed agents bring their own); None is the generic deployment."""
    resources: Resources = Field(default_factory=Resources)
    """Per-agent resources and the concurrency cap."""
    timeout_s: float = Field(default=60.0, gt=0)
    """Deadline of one attempt."""
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    """Retry policy for run-time failures."""
    breaker: BreakerPolicy = Field(default_factory=BreakerPolicy)
    """Circuit breaker policy."""
    fallback: str | None = None
    """Capability to switch to when retries run out or confidence is too low."""
    confidence_threshold: float = Field(default=0.0, ge=0.0, le=1.0)
    """Outputs under this confidence trigger the fallback, or a warning without one."""
    tags: tuple[str, ...] = ()
    """Free labels for the catalogue (`llm`, `gpu`, ...)."""
    health_check: str | None = None
    """`"package.module:function"` a Serve replica calls (no arguments) to check its
    health; raising means unhealthy. Three failed checks in a row take the capability out
    of dispatch until one passes."""
    sanitize: bool = True
    """Outputs pass the sanitizer (dangerous commands, secrets, refused calls in code
    fields) before they are accepted; off only for trusted bulk data."""
    side_effects: bool = False
    """Running it changes something outside the swarm (sends a message, writes a record,
    spends money). A tool agent calls such a capability after a tool's result entered
    its conversation only when its request sets `allow_side_effects` (a result could
    carry instructions that are not the caller's). Its attempts record that they started
    and what they returned; one in flight when the orchestrator stopped is not run again
    but waits as `needs_review` for its task's owner (unless `rerun_safe`)."""
    rerun_safe: bool = False
    """Running it again is harmless even with side effects (the service behind it honours
    the sub-task's `Idempotency-Key`, say): an attempt in doubt after a restart re-runs."""

    @field_validator("id")
    @classmethod
    def _id_shape(cls, value: str) -> str:
        if not CAPABILITY_ID_PATTERN.match(value):
            raise ValueError(
                f"capability id {value!r} must look like `domain.category.name` "
                "(lower case letters, digits and underscores)"
            )
        return value

    @field_validator("entrypoint", "health_check")
    @classmethod
    def _entrypoint_shape(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[\w.]+:[\w.]+$", value):
            raise ValueError(f"entrypoint {value!r} must look like `package.module:function`")
        return value

    @model_validator(mode="after")
    def _no_self_fallback(self) -> Self:
        if self.fallback == self.id:
            raise ValueError(f"capability `{self.id}` cannot fall back to itself")
        r = self.resources
        limited = (r.max_memory_bytes, r.max_cpu_s, r.max_processes) != (None, None, None)
        if limited and self.executor is ExecutorKind.SERVE:
            raise ValueError(
                f"capability `{self.id}`: hard limits (`max_memory_bytes`, `max_cpu_s`, "
                f"`max_processes`) need the `actor` or `data` executor, not `{self.executor}`"
            )
        return self

    def summary(self) -> dict[str, Any]:
        """JSON-ready description without the schemas (the catalogue line)."""
        return {
            "id": self.id,
            "description": self.description,
            "version": self.version,
            "executor": str(self.executor),
            "resources": self.resources.model_dump(),
            "timeout_s": self.timeout_s,
            "fallback": self.fallback,
            "confidence_threshold": self.confidence_threshold,
            "tags": list(self.tags),
            "side_effects": self.side_effects,
        }


def capability_maker(module: str, **defaults: Any) -> Callable[..., CapabilitySpec]:
    """A short way to declare the specs of a workload whose functions live in `module`.

    `make(id, description, function_name, input_model, output_model, **fields)` returns a
    validated `CapabilitySpec` with `entrypoint="module:function_name"`; `defaults` (tags,
    resources, ...) apply to every spec and `fields` override them.
    """

    def make(
        capability_id: str,
        description: str,
        function: str,
        input_model: type[BaseModel],
        output_model: type[BaseModel],
        **fields: Any,
    ) -> CapabilitySpec:
        return CapabilitySpec.model_validate(
            {
                "id": capability_id,
                "description": description,
                "input_model": input_model,
                "output_model": output_model,
                "entrypoint": f"{module}:{function}",
                **defaults,
                **fields,
            }
        )

    return make
