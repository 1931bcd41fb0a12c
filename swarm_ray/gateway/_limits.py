"""Request limits at the gateway's door: every body is read the same way, before any parsing.

A pure ASGI middleware in front of the FastAPI app. Every HTTP request with a valid API
key, whatever its method, first needs a place among its key's calls in progress: at most
`calls_per_key` at once on one replica, one more is answered 429 at once. Each call holds
one of the replica's `max_ongoing_requests` slots, and Serve's proxy queues what finds
them all taken, in arrival order, whoever sent it; so one key opening hundreds of
connections must be refused while its calls still arrive, not after any grace, or
another key's call waits in that queue behind them (the gateway keeps the cap at a
quarter of the slots at most).

Then, for every request that carries a body (`POST`, `PUT`, `PATCH`), in this order:

- a request without a valid API key is answered 401 before its body is read;
- **budget of slow bodies**: a body not whole `body_grace_s` (0.5 s) after it began is
  a slow one, and needs a place: at most `bodies_per_key` of one key's principal and
  `bodies_per_address` of one client address at once; one more is answered 429. A burst
  of small requests arrives whole within the grace and is never counted; an upload takes
  its place from the start. A key holds no more than its own budget, so its excess never
  takes another key's room for longer than the grace (a body holds one of the replica's
  `max_ongoing_requests` slots while it arrives);
- **read deadline**: a body must arrive within `body_timeout_s` plus its size at
  `min_body_rate` bytes a second (so a slow sender cannot hold its slot for long by
  trickling bytes); past it the request is answered 408;
- **size**: a body over `max_body_bytes` is answered 413 (from `Content-Length` at once,
  or as soon as the streamed bytes pass the limit);
- **depth**: every body is scanned, whatever its type says, and one nested deeper than
  `max_depth` is answered 422, because a record nested a few hundred deep can be neither
  pickled to the orchestrator nor read back once stored;
- **type**: a non-empty body must be JSON (`application/json` or `application/*+json`,
  compared as FastAPI parses the header: case-insensitively, parameters apart); any other
  is answered 415.

The one exception is the upload route (`POST /v1/files`), which streams and caps its own
multipart body (`_files`): it gets the key check, the budget and the read deadline (a
late chunk raises 408 inside the route, which aborts the upload) but no buffering.

The depth scan is linear and runs in C for the most part: the text is first brought to
UTF-8 (JSON may come as UTF-16 or UTF-32, which `json.loads` reads), escapes are dropped,
strings are cut out by splitting on quotes, and only brackets outside strings are counted.
"""

from __future__ import annotations

import asyncio
import email.message
import json
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from fastapi import HTTPException

__all__ = ["BodyLimits", "GatewayLimits", "check_metadata", "give_back", "is_json", "json_nesting"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})
_SCAN_INLINE = 64 * 1024
"""Bodies up to this size are scanned on the event loop (well under a millisecond)."""
_UPLOAD = ("POST", "/v1/files")


@dataclass(frozen=True)
class GatewayLimits:
    """What the door lets through (set from `GatewayConfig`)."""

    max_body_bytes: int = 1024 * 1024
    max_depth: int = 32
    calls_per_key: int = 48
    """HTTP calls one principal may have in progress at once (429 over it, at once)."""
    max_upload_bytes: int = 256 * 1024 * 1024
    body_timeout_s: float = 10.0
    """Time any body has to arrive, on top of its size at `min_body_rate`."""
    min_body_rate: int = 64 * 1024
    """Bytes a second a body's deadline grows by as it arrives."""
    bodies_per_key: int = 8
    """Slow bodies one principal may have arriving at once (429 over it)."""
    bodies_per_address: int = 32
    """Slow bodies one client address may have arriving at once (429 over it)."""
    body_grace_s: float = 0.5
    """Time a body has to arrive whole before it is a slow one, which needs a place in
    the budgets: a burst of small requests from one key is never counted."""
    max_metadata_keys: int = 64
    """Labels in a task's `metadata`."""
    max_metadata_bytes: int = 16 * 1024
    """Bytes of a task's `metadata` as JSON."""


def is_json(content_type: str | None) -> bool:
    """Whether FastAPI reads a body of this `Content-Type` as JSON (its own test)."""
    if not content_type:
        return False
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


def _as_utf8(body: bytes) -> bytes:
    """The body as UTF-8, from the encoding `json.loads` would read it in.

    Raises:
        UnicodeDecodeError: When it is not text in that encoding.
    """
    encoding = json.detect_encoding(body)
    return body if encoding == "utf-8" else body.decode(encoding).encode()


def json_nesting(body: bytes) -> int:
    """Deepest bracket nesting of a JSON text, strings ignored (linear time).

    Raises:
        UnicodeDecodeError: When the body is not text in the encoding JSON detects.
    """
    depth = deepest = 0
    text = _as_utf8(body)
    if b"\\" in text:  # escapes pair from the left: escaped backslashes first, then quotes
        text = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    for n, segment in enumerate(text.split(b'"')):
        if n % 2:  # inside a string
            continue
        brackets = segment.translate(None, _NOT_BRACKETS)
        if brackets:  # the running depth, in C: +1 for `[{`, -1 for `]}`
            running = list(accumulate(map(_STEP.__getitem__, brackets), initial=depth))
            deepest = max(deepest, max(running))
            depth = running[-1]
    return deepest


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def check_metadata(metadata: Mapping[str, str], limits: GatewayLimits) -> None:
    """Refuse `metadata` over `max_metadata_keys` or `max_metadata_bytes` (422)."""
    size = len(json.dumps(metadata))
    for limit, value, maximum, what in (
        ("max_metadata_keys", len(metadata), limits.max_metadata_keys, "labels"),
        ("max_metadata_bytes", size, limits.max_metadata_bytes, "bytes as JSON"),
    ):
        if value > maximum:
            problem = (
                f"request over the `{limit}` limit: `metadata` holds {value} {what}, "
                f"at most {maximum} allowed"
            )
            raise HTTPException(
                422,
                detail={
                    "detail": [{"loc": ["body", "metadata"], "msg": problem, "type": limit}],
                    "code": "limit_exceeded",
                },
            )


async def _answer(
    send: Send, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None
) -> None:
    payload = json.dumps(body).encode()
    sent = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    sent += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    if status == 401:
        sent.append((b"www-authenticate", b"Bearer"))
    # Tell the server not to wait for the rest of a body that will not be read.
    sent.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": sent})
    await send({"type": "http.response.body", "body": payload})


def _field_error(problem: str, kind: str, code: str) -> dict[str, Any]:
    return {"detail": [{"loc": ["body"], "msg": problem, "type": kind}], "code": code}


_RETRY = {"retry-after": "1"}


def give_back(counter: Counter[str], name: str) -> None:
    """One place of `name` given back; a name with none left leaves the counter."""
    counter[name] -= 1
    if counter[name] <= 0:
        del counter[name]


class _Late(Exception):
    """The body did not arrive by its deadline."""


class _Grace(Exception):
    """The body is not whole after `body_grace_s`: from now on it is a slow one."""


class _Place:
    """A buffered body's place in its key's and address's budgets, once it turns slow."""

    def __init__(self, door: BodyLimits, key: str, address: str, limits: GatewayLimits) -> None:
        self.door = door
        self.key = key
        self.address = address
        self.limits = limits
        self.held = False

    def take(self) -> dict[str, Any] | None:
        """Take the place; the refusal naming the budget that is full, if one is."""
        over = self._over()
        if over is None:
            self.door.by_key[self.key] += 1
            self.door.by_address[self.address] += 1
            self.held = True
        return over

    def _over(self) -> dict[str, Any] | None:
        for count, limit, maximum, whose in (
            (self.door.by_key[self.key], "bodies_per_key", self.limits.bodies_per_key, "this key"),
            (
                self.door.by_address[self.address],
                "bodies_per_address",
                self.limits.bodies_per_address,
                "this address",
            ),
        ):
            if count >= maximum:
                return {
                    "detail": f"{whose} has {count} slow request bodies arriving, the `{limit}` "
                    f"budget ({maximum}); try again once they are sent",
                    "code": "limit_exceeded",
                }
        return None

    def release(self) -> None:
        if self.held:
            self.held = False
            give_back(self.door.by_key, self.key)
            give_back(self.door.by_address, self.address)


class BodyLimits:
    """The middleware (see the module docstring).

    Args:
        app: The app behind it.
        limits: Returns the limits in force (the replica sets them on start).
        principal: The principal id a request's `Authorization` header holds a valid
            key of, else None.
    """

    def __init__(
        self,
        app: ASGIApp,
        limits: Callable[[], GatewayLimits],
        principal: Callable[[str], str | None],
    ) -> None:
        self.app = app
        self.limits = limits
        self.principal = principal
        self.by_key: Counter[str] = Counter()
        """Slow bodies (and uploads) arriving now, per principal."""
        self.by_address: Counter[str] = Counter()
        """Slow bodies (and uploads) arriving now, per client address."""
        self.calls: Counter[str] = Counter()
        """HTTP calls in progress, per principal."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        key = self.principal(headers.get("authorization", ""))
        with_body = scope.get("method") in _WITH_BODY
        if key is None:
            if with_body:
                await _answer(
                    send, 401, {"detail": "missing or invalid API key", "code": "unauthorized"}
                )
            else:  # the app answers: 401, or a route open to all (`/health`)
                await self.app(scope, receive, send)
            return
        limits = self.limits()
        if self.calls[key] >= limits.calls_per_key:
            busy = {
                "detail": f"this key has {self.calls[key]} calls in progress, the "
                f"`calls_per_key` budget ({limits.calls_per_key}); try again once one is "
                "answered",
                "code": "limit_exceeded",
            }
            await _answer(send, 429, busy, _RETRY)
            return
        self.calls[key] += 1
        try:
            if with_body:
                await self._with_body(scope, receive, send, headers, key, limits)
            else:
                await self.app(scope, receive, send)
        finally:
            give_back(self.calls, key)

    async def _with_body(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        key: str,
        limits: GatewayLimits,
    ) -> None:
        client = scope.get("client")
        address = str(client[0]) if client else "?"
        path = str(scope.get("path", ""))[len(str(scope.get("root_path", ""))) :]
        place = _Place(self, key, address, limits)
        try:
            if (scope.get("method"), path) == _UPLOAD:  # an upload takes its place at once
                over = place.take()
                if over is not None:
                    await _answer(send, 429, over, _RETRY)
                    return
                await self.app(scope, _Deadline(limits).receiving(receive, place.release), send)
                return
            await self._buffered(scope, receive, send, headers, limits, place)
        finally:
            place.release()

    async def _buffered(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        headers: dict[str, str],
        limits: GatewayLimits,
        place: _Place,
    ) -> None:
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
        deadline = _Deadline(limits)
        while True:
            try:
                message = await deadline.next(receive, grace=not place.held)
            except _Grace:  # not whole yet: a slow body, which needs a place in the budgets
                over = place.take()
                if over is not None:
                    await _answer(send, 429, over, _RETRY)
                    return
                continue
            except _Late:
                await _answer(send, 408, deadline.refusal())
                return
            if message["type"] != "http.request":
                await self.app(scope, receive, send)  # a disconnect: let the app see it
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body_bytes:
                await _answer(send, 413, too_big)
                return
            chunks.append(chunk)
            deadline.received(len(chunk))
            if not message.get("more_body", False):
                break
        place.release()  # read: it no longer counts against the budgets
        body = b"".join(chunks)
        content_type = headers.get("content-type")
        if len(body) <= _SCAN_INLINE:
            refused = _refusal(body, content_type, limits)
        else:  # a big body is scanned beside the event loop, which goes on answering
            refused = await asyncio.to_thread(_refusal, body, content_type, limits)
        if refused is not None:
            await _answer(send, *refused)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def _refusal(
    body: bytes, content_type: str | None, limits: GatewayLimits
) -> tuple[int, dict[str, Any]] | None:
    """The status and body that refuse a read body, or None when it may pass."""
    if not body:
        return None
    try:
        depth = json_nesting(body)
    except UnicodeDecodeError:
        return 422, _field_error("the body is not JSON text", "json_invalid", "invalid_body")
    if depth > limits.max_depth:
        problem = f"JSON body nested {depth} deep, at most {limits.max_depth} allowed"
        return 422, _field_error(problem, "limit_exceeded", "limit_exceeded")
    if not is_json(content_type):
        return 415, {
            "detail": f"a request body must be JSON (`Content-Type: application/json`), "
            f"not {content_type!r}",
            "code": "unsupported_media_type",
        }
    return None


class _Deadline:
    """When a body must have arrived: `body_timeout_s` plus its size at `min_body_rate`."""

    def __init__(self, limits: GatewayLimits) -> None:
        self.limits = limits
        self.loop = asyncio.get_running_loop()
        self.started = self.loop.time()
        self.size = 0

    def received(self, size: int) -> None:
        self.size += size

    def left(self) -> float:
        allowed = self.limits.body_timeout_s + self.size / self.limits.min_body_rate
        return self.started + allowed - self.loop.time()

    async def next(self, receive: Receive, *, grace: bool = False) -> Message:
        """The next message of the body, or `_Late` past the deadline.

        With `grace`, `_Grace` once `body_grace_s` has passed since the body began (a
        message cut short by it is not lost: `receive` is asked again).
        """
        left = self.left()
        if grace:
            graced = self.started + self.limits.body_grace_s - self.loop.time()
            if graced < left:
                try:
                    return await asyncio.wait_for(receive(), max(graced, 0.0))
                except TimeoutError:
                    raise _Grace from None
        try:
            return await asyncio.wait_for(receive(), max(left, 0.0))
        except TimeoutError:
            raise _Late from None

    def refusal(self) -> dict[str, Any]:
        return {
            "detail": f"the request body did not arrive in time ({self.limits.body_timeout_s} s "
            f"plus {self.limits.min_body_rate} bytes a second; {self.size} bytes came)",
            "code": "body_timeout",
        }

    def receiving(self, receive: Receive, release: Callable[[], None]) -> Receive:
        """`receive` for an app that streams the body itself: 408 raised past the deadline.

        Once the last chunk is in, later calls (a wait for the disconnect) pass through.
        """
        done = False

        async def timed() -> Message:
            nonlocal done
            if done:
                return await receive()
            try:
                message = await self.next(receive)
            except _Late:
                raise HTTPException(408, detail=self.refusal()) from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                done = True
                release()
            else:
                self.received(len(message.get("body", b"")))
            return message

        return timed
