"""What an operator registers by name: LLM endpoints, which capability uses which, MCP servers.

HTTP callers are untrusted, so a request never names a URL, a command or a file: it
names an endpoint or an MCP server that the operator registered, and the registration
says where it is. Registrations come from one YAML (or JSON) file named by
`SWARM_RAY_LLM_CONFIG`, read in every process that needs them (a mounted config map on
a cluster)::

    endpoints:                      # named engines (EngineConfig fields)
      hosted:
        kind: openai
        base_url: https://api.openai.com/v1
        model: gpt-4o-mini
        api_key_file: /run/secrets/openai
        limits: {requests_per_minute: 500, tokens_per_minute: 200000}
    capabilities:                   # capability id -> endpoint (else the global engine)
      llm.planning.plan: hosted
    mcp_servers:                    # named MCP servers: a command (stdio) or a URL
      demo: {command: [python, -m, swarm_ray.testing.mcp_demo], inherit: [DEMO_TOKEN]}
      search: {url: "http://search.internal:8000/mcp"}
    tenants:                        # which HTTP callers may use which (none by default)
      alice: {mcp_servers: [search], endpoints: [hosted]}
      "*": {mcp_servers: [demo]}    # every HTTP caller

A capability's input model may declare more in code (`ToolAgentIn.MCP_SERVERS`,
`ToolAgentIn.ENDPOINTS`), which ship with the capability itself.

Registrations here hold the operator's credentials, so an HTTP caller's task (a
sub-task with an `owner`) may use a registered endpoint or MCP server only when
`tenants` grants it to that principal or to `"*"`; to it, one not granted is "not
registered", like one that does not exist. Trusted callers use them all, and what a
capability declares in code comes with that capability.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from swarm_ray.core import InvalidSpecError, Resources
from swarm_ray.llm._engine import EngineConfig, EngineKind

__all__ = [
    "LLMSettings",
    "McpServer",
    "TenantTools",
    "engine_config_for",
    "llm_resources",
    "llm_settings",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
"""Names of endpoints and MCP servers: what a request may say."""


class McpServer(BaseModel):
    """An MCP server an operator registered: a command to start (stdio) or a URL (HTTP)."""

    model_config = _FROZEN

    command: tuple[str, ...] | None = None
    """argv of a server speaking MCP over stdio (started once per process, then kept)."""
    url: str | None = None
    """A streamable-HTTP MCP endpoint (`http://host:port/mcp`)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Environment of a stdio server, set here."""
    inherit: tuple[str, ...] = ()
    """Variables of the replica's environment a stdio server also gets (by name); it gets
    nothing else but `PATH`, `HOME`, the locale, `TMPDIR` and the Python path."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Deadline of connecting and of listing its tools."""

    @model_validator(mode="after")
    def _one_transport(self) -> Self:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs exactly one of `command` or `url`")
        if self.command is not None and not self.command:
            raise ValueError("`command` needs at least the program")
        if self.url is not None and not re.match(r"^https?://", self.url):
            raise ValueError(f"`url` must be http(s), got {self.url!r}")
        return self

    @classmethod
    def stdio(cls, *argv: str, **fields: Any) -> McpServer:
        """A server started as `argv`, speaking over its stdin and stdout."""
        return cls(command=tuple(argv), **fields)

    @classmethod
    def http(cls, url: str, **fields: Any) -> McpServer:
        """A server at a streamable-HTTP `url`."""
        return cls(url=url, **fields)


class TenantTools(BaseModel):
    """What one principal's tasks may use of the registrations."""

    model_config = _FROZEN

    mcp_servers: tuple[str, ...] = ()
    endpoints: tuple[str, ...] = ()


class LLMSettings(BaseModel):
    """The operator's registrations (the `SWARM_RAY_LLM_CONFIG` file)."""

    model_config = _FROZEN

    endpoints: dict[str, EngineConfig] = Field(default_factory=dict)
    """Named engines."""
    capabilities: dict[str, str] = Field(default_factory=dict)
    """Capability id -> endpoint name: the engine that capability's agents use."""
    mcp_servers: dict[str, McpServer] = Field(default_factory=dict)
    """Named MCP servers."""
    tenants: dict[str, TenantTools] = Field(default_factory=dict)
    """Principal id (or `*`, every HTTP caller) -> the registrations it may use."""
    compute_prices: dict[str, float] = Field(default_factory=dict)
    """Capability id -> price per second of its attempts' run time (read and applied by
    the orchestrator, `runtime._config.compute_prices`; checked here with the file)."""

    @field_validator("compute_prices")
    @classmethod
    def _prices(cls, value: dict[str, float]) -> dict[str, float]:
        for cid, price in value.items():
            if price < 0:
                raise ValueError(f"`compute_prices.{cid}` is {price}; a price is >= 0")
        return value

    def grants(self, kind: str, name: str, owner: str | None) -> bool:
        """Whether a task of `owner` (None: a trusted caller) may use registration `name`."""
        if owner is None:
            return True
        field = "endpoints" if kind == "endpoint" else "mcp_servers"
        return any(
            name in getattr(self.tenants[who], field) for who in (owner, "*") if who in self.tenants
        )

    @model_validator(mode="after")
    def _names(self) -> Self:
        for kind, names in (("endpoint", self.endpoints), ("MCP server", self.mcp_servers)):
            for name in names:
                if not NAME.match(name):
                    raise ValueError(f"{kind} name {name!r} must match `{NAME.pattern}`")
        for cid, endpoint in self.capabilities.items():
            if endpoint not in self.endpoints:
                raise ValueError(f"capability `{cid}` names unknown endpoint `{endpoint}`")
        return self

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LLMSettings:
        """Read and check a settings file.

        Raises:
            InvalidSpecError: unreadable, not YAML, or not valid settings.
        """
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
            return cls.model_validate(data)
        except OSError as exc:
            raise InvalidSpecError(f"LLM settings file `{path}` cannot be read: {exc}") from None
        except (yaml.YAMLError, ValidationError) as exc:
            raise InvalidSpecError(f"LLM settings file `{path}` is invalid: {exc}") from None


@functools.cache
def _load(path: str) -> LLMSettings:
    return LLMSettings.load(path)


def llm_settings() -> LLMSettings:
    """This process's registrations: the `SWARM_RAY_LLM_CONFIG` file, or none."""
    path = os.environ.get("SWARM_RAY_LLM_CONFIG")
    return _load(path) if path else LLMSettings()


def engine_config_for(capability_id: str | None = None) -> EngineConfig:
    """The engine a capability's agents use: its registered endpoint, else the global one."""
    settings = llm_settings()
    endpoint = settings.capabilities.get(capability_id or "")
    if endpoint is not None:
        return settings.endpoints[endpoint]
    return EngineConfig.from_env()


def resolve(
    kind: str,
    name: str,
    declared: Mapping[str, Any],
    registered: Mapping[str, Any],
    owner: str | None = None,
) -> Any:
    """A registration by name: the capability's own declaration first, then the file's.

    `owner` is the principal whose task asks (None: a trusted caller's); a registration
    of the file it was not granted (`tenants`) is answered as not registered.

    Raises:
        InvalidSpecError: nobody registered `name`, or not for `owner`.
    """
    if name in declared:
        return declared[name]
    if name in registered and llm_settings().grants(kind, name, owner):
        return registered[name]
    # The names registered are the operator's: a caller hears only that this one is not.
    raise InvalidSpecError(
        f"{kind} `{name}` is not registered; the operator registers them in `SWARM_RAY_LLM_CONFIG`",
        kind=kind,
        name=name,
    )


def llm_resources(capability_id: str | None = None) -> Resources:
    """Per-replica resources of an LLM capability, by the engine it will use.

    A local model: one CPU (or `SWARM_RAY_LLM_NUM_GPUS` of a GPU) and one call at a time.
    An OpenAI-compatible endpoint: a quarter of a CPU and 64 sub-tasks at once.
    """
    if engine_config_for(capability_id).kind is EngineKind.OPENAI:
        return Resources(num_cpus=0.25, max_concurrency=64)
    gpus = float(os.environ.get("SWARM_RAY_LLM_NUM_GPUS", "0") or 0)
    return Resources(num_cpus=1.0, num_gpus=gpus, max_concurrency=1)
