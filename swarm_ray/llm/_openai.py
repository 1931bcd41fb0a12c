"""`OpenAIEngine`: any OpenAI-compatible chat-completions endpoint, over HTTP.

A hosted API, a vLLM or llama.cpp server on the user's own cluster: one engine. It
speaks `POST {base_url}/chat/completions` and reads the answer's text, tool calls, token
usage and finish reason, so every capability written against `Engine` (the planner, the
document LLM extractor, the tool agent) runs unchanged against it.

Why httpx and not the official `openai` client: the engine must see every attempt
(each 429 and its `Retry-After` goes to the endpoint's cluster-wide budget actor, which
makes every other caller wait too), send the non-standard `response_format` of
llama.cpp's server, and keep the API key out of every repr, log line and error; the
`openai` client retries inside itself, where none of that can be seen, and would bring a
second HTTP stack for the same few requests. httpx is already the project's HTTP
client and is thread-safe, so one pooled client serves every thread of a replica.

Structured output: `response_format={"type": "json_schema", ...}` is what vLLM and
hosted APIs take; llama-cpp-python's server refuses it (an HTTP 500) but accepts
`{"type": "json_object", "schema": ...}`. The first structured call tries `json_schema`
and, when the endpoint refuses the format, falls back to `json_object` once and keeps
using the form that worked (per engine, so per endpoint and process).

The API key is read where the engine loads (a secret file, else an environment
variable) and kept in `_Secret`, whose repr is masked; any error text quoting it back
has it scrubbed.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from swarm_ray.core import (
    AgentExecutionError,
    AgentUnavailableError,
    InvalidSpecError,
    SwarmError,
    TokenUsage,
)
from swarm_ray.llm._engine import (
    Completion,
    EngineConfig,
    GenerationParams,
    Message,
    ToolCall,
)

__all__ = ["OpenAIEngine"]

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
"""Statuses worth another try: rate limits, timeouts and server trouble."""
_FORMAT_REFUSED = frozenset({400, 422, 500, 501})
"""Statuses with which an endpoint refuses an unknown `response_format` type."""
_MAX_BACKOFF_S = 30.0
_MAX_RETRY_AFTER_S = 120.0


class _Secret:
    """An API key that never shows in a repr, a log line or a pickle."""

    __slots__ = ("_value",)

    def __init__(self, value: str | None) -> None:
        self._value = value

    def reveal(self) -> str | None:
        return self._value

    def scrub(self, text: str) -> str:
        """`text` with the key (if any) masked."""
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "_Secret('***')" if self._value else "_Secret(None)"

    def __reduce__(self) -> Any:
        raise TypeError("an API key is not pickled; each process reads its own")


def read_api_key(config: EngineConfig) -> _Secret:
    """The endpoint's key from `api_key_file`, else the `api_key_env` variable, else none.

    Raises:
        InvalidSpecError: the key file is named but cannot be read.
    """
    import os

    if config.api_key_file:
        try:
            value = Path(config.api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InvalidSpecError(
                f"API key file `{config.api_key_file}` cannot be read: {exc.strerror}"
            ) from None
        return _Secret(value or None)
    if config.api_key_env:
        return _Secret(os.environ.get(config.api_key_env) or None)
    return _Secret(None)


def endpoint_label(base_url: str, model: str | None = None) -> str:
    """`host[:port]/path` of an endpoint, with no user info or query (keys hide there)."""
    parts = urlsplit(base_url)
    host = parts.hostname or "?"
    if parts.port:
        host = f"{host}:{parts.port}"
    label = f"{host}{parts.path.rstrip('/')}"
    if model and model.startswith("/"):  # llama.cpp's server names its model by its path
        model = model.rsplit("/", 1)[-1]
    return f"{label}#{model}" if model else label


def retry_after_s(value: str | None) -> float | None:
    """Seconds a `Retry-After` header asks for (a number or an HTTP date), if any."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return min(_MAX_RETRY_AFTER_S, max(0.0, seconds))


def _backoff_s(retry: int) -> float:
    """Delay before retry number `retry` (1-based) without a `Retry-After`: jittered."""
    return float(min(_MAX_BACKOFF_S, 0.5 * 2 ** (retry - 1)) * random.uniform(0.5, 1.0))


def _estimate_tokens(body: Mapping[str, Any]) -> int:
    """A budget reservation: about four characters a token, plus the completion cap."""
    return len(json.dumps(body.get("messages", ()))) // 4 + int(body.get("max_tokens") or 0)


class _Refused(Exception):
    """The endpoint answered an error status (internal: turned into a swarm error)."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(status, text)
        self.status = status
        self.text = text


class OpenAIEngine:
    """Chat completions from an OpenAI-compatible endpoint; safe to call from many threads."""

    concurrent = True
    """The endpoint serves calls side by side, so `LLMAgent` lets sub-tasks in together."""

    def __init__(self, config: EngineConfig) -> None:
        import httpx

        if not config.base_url or urlsplit(config.base_url).scheme not in ("http", "https"):
            raise InvalidSpecError(
                f"engine `openai` needs `base_url`, an http(s) URL, got {config.base_url!r:.80}"
            )
        self._config = config
        self._base = config.base_url.rstrip("/")
        self._key = read_api_key(config)
        headers = {"Authorization": f"Bearer {self._key.reveal()}"} if self._key.reveal() else {}
        pool = config.limits.max_concurrent or 64
        self._http = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(config.timeout_s, connect=min(10.0, config.timeout_s)),
            limits=httpx.Limits(max_connections=pool, max_keepalive_connections=pool),
        )
        self._lock = threading.Lock()
        self._json_form: str | None = None  # `json_schema` or `json_object` once known
        self.stats = {"requests": 0, "retries": 0, "rate_limited": 0}
        """Attempts sent, retries made and 429s seen by this engine."""
        self._model = config.model or self._first_model()
        self.endpoint = endpoint_label(self._base, self._model)
        """Where calls go (`host:port/path#model`), safe to show."""
        self._budget: Any = None
        if config.limits.any:
            from swarm_ray.llm._budget import budget_client

            self._budget = budget_client(self.endpoint, config.limits, config.timeout_s)

    def __repr__(self) -> str:
        return f"OpenAIEngine({self.endpoint!r})"

    @property
    def model(self) -> str:
        """The model's name on the endpoint."""
        return self._model

    def _first_model(self) -> str:
        try:
            response = self._http.get(f"{self._base}/models")
            response.raise_for_status()
            models = response.json().get("data") or []
            return str(models[0]["id"])
        except Exception as exc:
            raise InvalidSpecError(
                f"no `model` configured for endpoint `{endpoint_label(self._base)}` and its "
                f"`/models` lists none: {self._key.scrub(f'{type(exc).__name__}: {exc}')}"
            ) from None

    # ---- one request, with retries and the budget ------------------------------------

    def _count(self, name: str) -> None:
        with self._lock:
            self.stats[name] += 1

    def _post(self, body: dict[str, Any], *, retry_errors: bool = True) -> dict[str, Any]:
        """POST a chat completion; retry 429, 5xx and connection errors with backoff.

        `retry_errors=False` answers any error status at once (probing a format).

        Raises:
            _Refused: an error status that is not retried, or retries ran out.
            AgentUnavailableError: the endpoint could not be reached, retries included.
        """
        import httpx

        estimate = _estimate_tokens(body)
        retry = 0
        first_asked = time.time()  # a retry keeps its place in the budget's line
        while True:
            lease = None
            if self._budget is not None:
                lease = self._budget.acquire(estimate, since=first_asked)
            self._count("requests")
            try:
                response = self._http.post(f"{self._base}/chat/completions", json=body)
            except httpx.TransportError as exc:  # timeouts, refused connections
                if lease is not None:
                    self._budget.release(lease, 0)
                if retry >= self._config.max_retries:
                    raise AgentUnavailableError(
                        f"endpoint `{self.endpoint}` unreachable after {retry + 1} attempt(s): "
                        f"{self._key.scrub(f'{type(exc).__name__}: {exc}')}",
                        endpoint=self.endpoint,
                    ) from None
                retry += 1
                self._count("retries")
                time.sleep(_backoff_s(retry))
                continue
            status = response.status_code
            if status == 200:
                data: dict[str, Any] = response.json()
                usage = data.get("usage") or {}
                if lease is not None:
                    self._budget.release(lease, int(usage.get("total_tokens") or 0))
                return data
            wait = retry_after_s(response.headers.get("retry-after"))
            if status == 429:
                self._count("rate_limited")
            if lease is not None:
                self._budget.release(lease, 0, rate_limited=status == 429, retry_after_s=wait)
            retryable = status in _RETRY_STATUS and (retry_errors or status == 429)
            if not retryable or retry >= self._config.max_retries:
                raise _Refused(status, self._key.scrub(response.text[:500]))
            retry += 1
            self._count("retries")
            time.sleep(wait if wait is not None else _backoff_s(retry))

    def _error(self, refused: _Refused) -> SwarmError:
        message = f"endpoint `{self.endpoint}` answered HTTP {refused.status}: {refused.text}"
        if refused.status in (401, 403, 404):
            return InvalidSpecError(message, endpoint=self.endpoint, status=refused.status)
        if refused.status in _RETRY_STATUS:
            return AgentUnavailableError(message, endpoint=self.endpoint, status=refused.status)
        return AgentExecutionError(message, endpoint=self.endpoint, status=refused.status)

    def _body(self, messages: Sequence[Message], params: GenerationParams) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "messages": [m.wire() for m in messages],
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        return body

    def _structured(self, body: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
        """POST with the response format this endpoint takes (found on the first call)."""
        forms = {
            "json_schema": {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema},
            },
            "json_object": {"type": "json_object", "schema": schema},
        }
        form = self._json_form
        if form is not None:
            return self._post({**body, "response_format": forms[form]})
        try:
            data = self._post({**body, "response_format": forms["json_schema"]}, retry_errors=False)
        except _Refused as refused:
            if not _refuses_format(refused):
                raise
            data = self._post({**body, "response_format": forms["json_object"]})
            form = "json_object"
        else:
            form = "json_schema"
        with self._lock:
            self._json_form = form
        return data

    def _completion(self, data: dict[str, Any], seconds: float) -> Completion:
        choice = (data.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        usage = data.get("usage") or {}
        calls = tuple(
            ToolCall(
                id=str(call.get("id") or f"call_{n}"),
                name=str(call.get("function", {}).get("name", "")),
                arguments=_arguments_text(call.get("function", {}).get("arguments")),
            )
            for n, call in enumerate(message.get("tool_calls") or ())
        )
        return Completion(
            text=message.get("content") or "",
            model=str(data.get("model") or self._model),
            usage=TokenUsage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                calls=1,
                seconds=seconds,
            ),
            finish_reason=choice.get("finish_reason"),
            tool_calls=calls,
        )

    # ---- the Engine interface ----------------------------------------------------------

    def complete(
        self,
        messages: Sequence[Message],
        params: GenerationParams,
        *,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """One chat completion; with `json_schema`, the endpoint's structured output.

        Raises:
            AgentUnavailableError: unreachable, or 429 / 5xx after every retry.
            InvalidSpecError: the endpoint refused the key or does not know the model.
            AgentExecutionError: any other refusal.
        """
        body = self._body(messages, params)
        started = time.perf_counter()
        try:
            data = self._post(body) if json_schema is None else self._structured(body, json_schema)
        except _Refused as refused:
            raise self._error(refused) from None
        return self._completion(data, time.perf_counter() - started)

    def complete_tools(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]],
        params: GenerationParams,
        *,
        tool_choice: str | Mapping[str, Any] = "auto",
    ) -> Completion:
        """One chat completion offering `tools` (OpenAI function declarations).

        Each tool is `{"name", "description", "parameters"}` (a JSON Schema); the model
        answers text, or `tool_calls` whose arguments are still to be checked.
        """
        body = self._body(messages, params)
        body["tools"] = [{"type": "function", "function": dict(tool)} for tool in tools]
        body["tool_choice"] = tool_choice
        started = time.perf_counter()
        try:
            data = self._post(body)
        except _Refused as refused:
            raise self._error(refused) from None
        return self._completion(data, time.perf_counter() - started)

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()


def _refuses_format(refused: _Refused) -> bool:
    """Whether an error answer refuses the `json_schema` response format itself.

    llama-cpp-python's server answers 500 naming `response_format` (its validation
    error); a 500 that does not name it is server trouble, not a refusal.
    """
    if refused.status not in _FORMAT_REFUSED:
        return False
    return refused.status in (400, 422) or any(
        word in refused.text for word in ("response_format", "json_schema")
    )


def _arguments_text(arguments: Any) -> str:
    """Arguments as JSON text (some servers send an object instead of a string)."""
    if arguments is None:
        return "{}"
    return arguments if isinstance(arguments, str) else json.dumps(arguments)
