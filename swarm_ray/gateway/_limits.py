"""Request limits at the gateway's door: body size and JSON depth, before any parsing.

A pure ASGI middleware in front of the FastAPI app. For requests that carry a body
(`POST`, `PUT`, `PATCH`) other than uploads (`/v1/files` streams and caps its own):

- a request without a valid API key is answered 401 before its body is read;
- a body over `max_body_bytes` is answered 413 (from `Content-Length` at once, or as soon
  as the streamed bytes pass the limit);
- a JSON body nested deeper than `max_depth` is answered 422, because a record nested a
  few hundred deep cannot be read back once stored.

The depth scan is linear and runs in C for the most part: escapes are dropped, strings
are cut out by splitting on quotes, and only brackets outside strings are counted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

__all__ = ["BodyLimits", "GatewayLimits", "json_nesting"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_ESCAPE = re.compile(rb"\\.", re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


@dataclass(frozen=True)
class GatewayLimits:
    """What the door lets through (set from `GatewayConfig`)."""

    max_body_bytes: int = 1024 * 1024
    max_depth: int = 32
    max_upload_bytes: int = 256 * 1024 * 1024


def json_nesting(body: bytes) -> int:
    """Deepest bracket nesting of a JSON text, strings ignored (linear time)."""
    depth = deepest = 0
    for n, segment in enumerate(_ESCAPE.sub(b"", body).split(b'"')):
        if n % 2:  # inside a string
            continue
        for bracket in _BRACKET.findall(segment):
            if bracket in (b"[", b"{"):
                depth += 1
                deepest = max(deepest, depth)
            else:
                depth -= 1
    return deepest


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class BodyLimits:
    """The middleware (see the module docstring).

    Args:
        app: The app behind it.
        limits: Returns the limits in force (the replica sets them on start).
        authorised: Tells whether a request's `Authorization` header holds a valid key.
    """

    def __init__(
        self,
        app: ASGIApp,
        limits: Callable[[], GatewayLimits],
        authorised: Callable[[str], bool],
    ) -> None:
        self.app = app
        self.limits = limits
        self.authorised = authorised

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") not in _WITH_BODY:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if not self.authorised(headers.get("authorization", "")):
            await _answer(
                send, 401, {"detail": "missing or invalid API key", "code": "unauthorized"}
            )
            return
        if str(scope.get("path", "")).startswith("/v1/files"):
            await self.app(scope, receive, send)  # uploads stream and cap themselves
            return
        limits = self.limits()
        too_big = {
            "detail": f"request body over the limit of {limits.max_body_bytes} bytes",
            "code": "limit_exceeded",
        }
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limits.max_body_bytes:
            await _answer(send, 413, too_big)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # a disconnect: let the app see it
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body_bytes:
                await _answer(send, 413, too_big)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if (
            "json" in headers.get("content-type", "")
            and (depth := json_nesting(body)) > limits.max_depth
        ):
            problem = f"JSON body nested {depth} deep, at most {limits.max_depth} allowed"
            await _answer(
                send,
                422,
                {
                    "detail": [{"loc": ["body"], "msg": problem, "type": "limit_exceeded"}],
                    "code": "limit_exceeded",
                },
            )
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)
