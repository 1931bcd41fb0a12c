"""What Serve's HTTP proxy answers by itself, closed: its middleware for the operator to set.

Serve's proxy (not the gateway's replicas) answers `GET /-/routes` itself, listing every
application and its route prefix to anyone, with no key, before any request reaches the
gateway's app; the app cannot refuse it. It also obeys two request headers a client may
send: `x-request-timeout-seconds` (0 turns the proxy's request timeout off) and
`x-request-disconnect-disabled: ?1` (the request is not cancelled when its client goes),
so a caller could make its request outlive both.

Ray 2.60 lets an operator wrap its proxy in middlewares named by an import path in the
environment of the Ray processes (`HTTPOptions.middlewares` is gone):

    RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH=swarm_ray.gateway:proxy_middlewares

set where Ray starts (before `ray start`, in a KubeRay pod's env, or before a driver's
`ray.init()` starts a local cluster). With it, `/-/routes` is answered 404, as any
unknown path, and the two headers are dropped before the proxy reads them.
`/-/healthz` stays: it tells only whether the proxy is up, and load balancers and
KubeRay probe it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.middleware import Middleware

from swarm_ray.runtime._client import SERVE_PROXY_CALLBACK

__all__ = ["PROXY_CALLBACK", "ProxyDoor", "proxy_middlewares"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PROXY_CALLBACK = SERVE_PROXY_CALLBACK
"""The value of `RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH` that installs `ProxyDoor`
(`connect()` sets it for a cluster it starts itself)."""
HIDDEN_ROUTES = frozenset({"/-/routes"})
"""Paths the proxy answers itself that no caller is told."""
DROPPED_HEADERS = frozenset({b"x-request-timeout-seconds", b"x-request-disconnect-disabled"})
"""Request headers that steer the proxy itself: never a caller's to send."""
_NOT_FOUND = json.dumps({"detail": "Not Found"}).encode()


class ProxyDoor:
    """ASGI middleware for Serve's proxy (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # The proxy's own test (`ASGIProxyRequest.route_path`), on the same scope.
        route = str(scope.get("path", ""))[len(str(scope.get("root_path", ""))) :]
        if route in HIDDEN_ROUTES:
            if scope["type"] == "websocket":  # closed before it is accepted: a 403
                await send({"type": "websocket.close", "code": 1008, "reason": ""})
                return
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(_NOT_FOUND)),
            ]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": _NOT_FOUND})
            return
        headers = scope.get("headers") or []
        if any(name.lower() in DROPPED_HEADERS for name, _ in headers):
            scope = dict(scope)
            scope["headers"] = [(n, v) for n, v in headers if n.lower() not in DROPPED_HEADERS]
        await self.app(scope, receive, send)


def proxy_middlewares() -> list[Middleware]:
    """The middlewares Serve's proxy calls for (`RAY_SERVE_HTTP_PROXY_CALLBACK_IMPORT_PATH`)."""
    return [Middleware(ProxyDoor)]
