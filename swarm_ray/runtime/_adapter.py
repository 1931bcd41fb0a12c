"""External HTTP APIs as capabilities: declared schemas, timeout, breaker, fallback answer.

An ERP, a weather service, a payment sandbox: the orchestrator should only ever see
structured data from them, and a down API should degrade a task, not break it. An
`HttpAdapter` is the declaration, and also the capability's function: put one at module
level and name it as the entrypoint (`"my_pkg.apis:weather"`), with the capability's
input model as the request schema and `response_model` as the answer's::

    weather = HttpAdapter(
        url="${WEATHER_API}/v1/current/{city}",    # operator's URL; `{city}` from the input
        method="GET",
        response_model=Weather,
        timeout_s=5,
        fallback={"temp_c": None, "source": "unavailable"},
    )

- **Request**: the URL is the operator's (environment variables expanded where the
  adapter runs); `{field}` placeholders take input fields, URL-quoted, so an input can
  never change the host or the path's shape: `.`, `..` and empty values are refused,
  and the final URL's path (as httpx sends it) must keep the template's segments.
  `query` fields go in the query string, the
  rest in a JSON body (not for GET).
- **Answer**: the JSON (or the part at `response_path`) must validate against
  `response_model`; a 4xx answer is the request's fault (`invalid_input`, no retry).
- **Down** (connection error, timeout, 429, 5xx, an answer of the wrong shape): the
  declared `fallback` is answered with a warning and `fallback_confidence`, or without
  one the attempt fails (`agent_unavailable`) so retries and the capability's fallback
  apply.
- **Idempotency**: a call other than GET sends the sub-task's `Idempotency-Key`, the
  same for every attempt of it, so a service that honours it does a side effect once
  however often the attempt is retried.
- **Breaker**: after `failure_threshold` failures in a row the adapter stops calling
  for `cooldown_s` (answering the fallback at once), then lets one call through. Its
  state lives in the agent's process: host an adapter on one Serve replica
  (`HttpAdapter.spec`) and the breaker is the capability's.

Tag the capability `tool` and tool-using agents may call it (as a child sub-task).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal, Self
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from swarm_ray.core.model._capability import CapabilitySpec, ExecutorKind, Resources, RetryPolicy
from swarm_ray.core.model._errors import AgentUnavailableError, InvalidInputError, InvalidSpecError
from swarm_ray.runtime._agent import AgentReply, current_subtask

__all__ = ["HttpAdapter"]


@dataclass
class _Breaker:
    failures: int = 0
    open_until: float = 0.0


_breakers: dict[str, _Breaker] = {}
_lock = threading.Lock()


def _same_shape(template: str, url: str, key: str) -> None:
    """Refuse a URL whose origin or path (as httpx sends it) is not the template's shape.

    Each literal segment of the template's path must come back in place and no segment
    may be added or lost; a filled placeholder's segment may be anything but empty.
    """
    import httpx

    want, got = httpx.URL(template.replace("{", "%7B").replace("}", "%7D")), httpx.URL(url)
    wanted = want.raw_path.split(b"?", 1)[0].split(b"/")
    sent = got.raw_path.split(b"?", 1)[0].split(b"/")
    same = (want.scheme, want.host, want.port) == (got.scheme, got.host, got.port) and len(
        wanted
    ) == len(sent)
    for expected, actual in zip(wanted, sent, strict=False):
        if not same:
            break
        same = bool(actual) if b"%7B" in expected else expected == actual
    if not same:
        raise InvalidInputError(
            f"the request's URL path does not keep the shape of `{key}`",
            reason="path_shape",
        )


class HttpAdapter(BaseModel):
    """A third-party HTTP API as a capability's function (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    url: str
    """The operator's URL; `${ENV}` expanded where it runs, `{field}` from the input."""
    response_model: type[BaseModel]
    """The answer's schema (the capability's output model)."""
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE"] = "POST"
    """HTTP method."""
    query: tuple[str, ...] = ()
    """Input fields sent in the query string."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Request headers (`${ENV}` expanded: keys stay out of code and records)."""
    response_path: str | None = None
    """Dotted path of the answer inside the JSON (`data.current`); None is all of it."""
    timeout_s: float = Field(default=10.0, gt=0)
    """Deadline of one call."""
    failure_threshold: int = Field(default=3, ge=1)
    """Failures in a row that open the breaker."""
    cooldown_s: float = Field(default=30.0, ge=0)
    """How long the breaker stays open before one trial call."""
    fallback: dict[str, Any] | None = None
    """The answer given while the API is down (validated against `response_model`)."""
    fallback_confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    """Confidence of a fallback answer (under a spec's threshold, its fallback runs)."""

    @model_validator(mode="after")
    def _fallback_fits(self) -> Self:
        if self.fallback is not None:
            try:
                self.response_model.model_validate(self.fallback)
            except ValidationError as exc:
                raise ValueError(f"`fallback` does not fit `response_model`: {exc}") from None
        return self

    @property
    def _key(self) -> str:
        return f"{self.method} {self.url}"

    def _request(self, data: dict[str, Any]) -> tuple[str, dict[str, Any], Any]:
        fields = dict(data)
        template = os.path.expandvars(self.url)
        url = template
        for name in list(fields):
            placeholder = "{" + name + "}"
            if placeholder in url:
                value = str(fields.pop(name))
                if value in ("", ".", ".."):  # quoted as they are: they move the path
                    raise InvalidInputError(
                        f"`{name}` may not be {value!r}: it would change the path of `{self._key}`",
                        field=name,
                        reason="path_shape",
                    )
                url = url.replace(placeholder, quote(value, safe=""))
        if "{" in url or "${" in url:
            raise InvalidSpecError(f"adapter URL {self.url!r} has an unfilled placeholder")
        _same_shape(template, url, self._key)
        params = {name: fields.pop(name) for name in self.query if name in fields}
        body = fields if self.method != "GET" and fields else None
        return url, params, body

    def _answer(self, payload: Any) -> BaseModel:
        for part in (self.response_path or "").split("."):
            if part:
                payload = payload.get(part) if isinstance(payload, dict) else None
        return self.response_model.model_validate(payload)

    def __call__(self, data: BaseModel) -> AgentReply:
        """Call the API for one input; answer its validated response or the fallback."""
        import httpx

        url, params, body = self._request(data.model_dump(mode="json"))
        with _lock:
            breaker = _breakers.setdefault(self._key, _Breaker())
            is_open = breaker.open_until > time.monotonic()
            if is_open:
                why = f"circuit open after {breaker.failures} failures in a row"
            elif breaker.failures >= self.failure_threshold:  # half-open: one trial
                breaker.open_until = time.monotonic() + self.cooldown_s
        if not is_open:
            headers = {k: os.path.expandvars(v) for k, v in self.headers.items()}
            subtask = current_subtask()
            if subtask is not None and self.method != "GET":  # one key for every attempt
                headers.setdefault("Idempotency-Key", subtask.idempotency_key)
            try:
                response = httpx.request(
                    self.method,
                    url,
                    params=params,
                    json=body,
                    headers=headers,
                    timeout=self.timeout_s,
                )
                status = response.status_code
                if 400 <= status < 500 and status not in (408, 429):
                    self._settle(ok=True)  # the API is up: the request was at fault
                    raise InvalidInputError(
                        f"API `{self._key}` refused the request with HTTP {status}: "
                        f"{response.text[:300]}",
                        status=status,
                    )
                if status >= 400:
                    why = f"HTTP {status}"
                else:
                    answer = self._answer(response.json())
                    self._settle(ok=True)
                    return AgentReply(output=answer)
            except httpx.HTTPError as exc:
                why = f"{type(exc).__name__}: {exc}"
            except (ValidationError, ValueError) as exc:
                why = f"an answer that does not fit `{self.response_model.__name__}`: {exc}"
            self._settle(ok=False)
        message = f"API `{self._key}` is down ({why})"
        if self.fallback is None:
            raise AgentUnavailableError(message, api=self._key)
        return AgentReply(
            output=self.response_model.model_validate(self.fallback),
            confidence=self.fallback_confidence,
            warnings=(f"{message}; answered the declared fallback",),
        )

    def _settle(self, *, ok: bool) -> None:
        with _lock:
            breaker = _breakers.setdefault(self._key, _Breaker())
            if ok:
                breaker.failures, breaker.open_until = 0, 0.0
                return
            breaker.failures += 1
            if breaker.failures >= self.failure_threshold:
                breaker.open_until = time.monotonic() + self.cooldown_s

    def spec(
        self,
        capability_id: str,
        description: str,
        input_model: type[BaseModel],
        entrypoint: str,
        **fields: Any,
    ) -> CapabilitySpec:
        """The capability of this adapter, on one Serve replica (so one breaker).

        `entrypoint` is the import path of this very object (`"my_pkg.apis:weather"`);
        `fields` override the spec's defaults (tags `("tool",)`, a timeout over the
        adapter's, two attempts, 16 calls at once).
        """
        defaults: dict[str, Any] = {
            "executor": ExecutorKind.SERVE,
            "resources": Resources(num_cpus=0.1, max_concurrency=16),
            "timeout_s": self.timeout_s * 2 + 5,
            "retry": RetryPolicy(max_attempts=2, backoff_s=0.5),
            "tags": ("tool",),
        }
        return CapabilitySpec(
            id=capability_id,
            description=description,
            input_model=input_model,
            output_model=self.response_model,
            entrypoint=entrypoint,
            **{**defaults, **fields},
        )
