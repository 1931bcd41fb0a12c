"""Bounded WebSockets: who may hold a socket open, for how long without a key, how big a frame.

Every open socket holds one of its replica's `max_ongoing_requests` slots, so sockets
must not be able to crowd out other calls. Per replica:

- **caps on keyed sockets**: at most `ws_per_principal` for one API key's principal,
  `ws_per_address` with a key from one client address, and `ws_max_open` in all (the
  gateway keeps it and the waiting budget under half and a quarter of the replica's
  `max_ongoing_requests`, so idle sockets of many keys never take the slots its other
  calls need). A socket over a cap is accepted and closed at once (1013, try again
  later);
- **sockets waiting for a key** have budgets of their own and never count against
  keyed ones: at most `ws_unauthenticated_per_address` from one address and
  `ws_unauthenticated` in all. Over a budget, the newcomer takes the place of the oldest
  waiting socket of its own address (over the address's budget), or of the address
  holding the most (over the total), which is closed with 1013. So sockets that never
  present a key crowd out only their own kind from their own address, and a browser,
  which sends its key the moment its socket opens, gets in;
- **key deadline**: a socket without an `Authorization` header must send its key
  (`{"type": "auth", "api_key": ...}`, see `_ws_auth`) within `ws_auth_timeout_s`
  (2 s by default), or it is closed (4401);
- **frame size**: a message over `ws_max_message_bytes` closes the socket (1009) before
  any handler looks at it (`SocketGuard`, in front of the app). Serve's HTTP proxy
  assembles a frame before it forwards it (uvicorn's own cap: 16 MiB), so this bounds
  what the replica keeps and parses, not what the proxy buffers;
- **idle deadline**: a socket that carries nothing either way for `ws_idle_timeout_s`
  (300 s by default) is closed (4408; a follower reconnects with `after_seq`), so a
  quiet task cannot hold its followers' slots for ever (`SocketGuard` too);
- **no chatter**: after the key a client has nothing to send; a message then closes
  the socket (1008), so nothing piles up unread behind a socket that only streams.

A socket that follows a task ends with the task; caps are per replica process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.websockets import WebSocket, WebSocketDisconnect

from swarm_ray.core import Principal
from swarm_ray.gateway._limits import give_back
from swarm_ray.gateway._ws_auth import presented_key

__all__ = ["SocketGuard", "SocketLimits", "SocketSlots"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
T = TypeVar("T")

TRY_LATER = 1013
TOO_BIG = 1009
POLICY = 1008
UNAUTHORIZED = 4401
IDLE = 4408


@dataclass(frozen=True)
class SocketLimits:
    """The caps and deadlines of one replica's sockets (from `GatewayConfig`)."""

    auth_timeout_s: float = 2.0
    max_message_bytes: int = 4096
    per_principal: int = 32
    per_address: int = 64
    unauthenticated: int = 64
    unauthenticated_per_address: int = 8
    max_open: int = 100
    idle_timeout_s: float = 300.0


@dataclass
class SocketSlots:
    """Counts of a replica's open sockets; `admitted` holds one for a socket's life."""

    limits: SocketLimits = field(default_factory=SocketLimits)
    by_address: Counter[str] = field(default_factory=Counter)
    """Sockets with a key, per client address."""
    by_principal: Counter[str] = field(default_factory=Counter)
    waiting_by_address: dict[str, list[asyncio.Event]] = field(default_factory=dict)
    """Sockets accepted that have not shown a key yet, oldest first, per address; an
    event is set when its socket is to give its place to a newer one."""

    @property
    def waiting(self) -> int:
        """Sockets accepted that have not shown a key yet."""
        return sum(map(len, self.waiting_by_address.values()))

    @contextlib.asynccontextmanager
    async def admitted(
        self, websocket: WebSocket, principal_of: Callable[[str | None], Principal | None]
    ) -> AsyncIterator[Principal | None]:
        """The socket's principal once accepted and within every cap; None when refused.

        A refused socket is closed here (with the code that says why); the caller
        just returns. The slots are released when the block ends.
        """
        address = websocket.client.host if websocket.client is not None else "?"
        if websocket.headers.get("authorization") is not None:
            key = await self._keyed_at_handshake(websocket, address)
        else:
            key = await self._keyed_by_message(websocket, address)
        if key is None:  # refused and closed
            yield None
            return
        principal = principal_of(key)
        if principal is None:
            await websocket.close(code=UNAUTHORIZED, reason="missing or invalid API key")
            yield None
            return
        if self.by_address[address] >= self.limits.per_address:
            await websocket.close(code=TRY_LATER, reason="too many sockets; try again later")
            yield None
            return
        if self.by_principal[principal.id] >= self.limits.per_principal:
            await websocket.close(code=TRY_LATER, reason="too many sockets for this key")
            yield None
            return
        if self.by_principal.total() >= self.limits.max_open:
            await websocket.close(code=TRY_LATER, reason="too many sockets; try again later")
            yield None
            return
        self.by_address[address] += 1
        self.by_principal[principal.id] += 1
        watcher = asyncio.create_task(_refuse_chatter(websocket))
        try:
            yield principal
        finally:
            watcher.cancel()
            give_back(self.by_address, address)
            give_back(self.by_principal, principal.id)

    async def _keyed_at_handshake(self, websocket: WebSocket, address: str) -> str | None:
        """The key of the handshake's header ('' for a malformed one), None when refused."""
        if self.by_address[address] >= self.limits.per_address:
            await _refuse(websocket, "too many sockets; try again later")
            return None
        await websocket.accept()
        return await presented_key(websocket, timeout_s=self.limits.auth_timeout_s) or ""

    async def _keyed_by_message(self, websocket: WebSocket, address: str) -> str | None:
        """The key of the socket's first message ('' for none in time), None when refused.

        The socket waits in its address's queue meanwhile, and gives its place up (1013)
        if a newer one needs it (see the module docstring).
        """
        # The place is taken before the first await, so sockets arriving together cannot
        # all pass the count before any of them is counted.
        evicted = self._wait_in_line(address)
        try:
            await websocket.accept()
            key = await _first(
                presented_key(websocket, timeout_s=self.limits.auth_timeout_s), evicted.wait()
            )
        finally:
            self._leave_line(address, evicted)
        if evicted.is_set():
            with contextlib.suppress(Exception):  # it may be gone already
                await websocket.close(code=TRY_LATER, reason="too many sockets waiting for a key")
            return None
        return key or ""

    def _wait_in_line(self, address: str) -> asyncio.Event:
        """A place among the sockets waiting for a key, freed by evicting one if need be."""
        line = self.waiting_by_address.get(address, [])
        if len(line) >= self.limits.unauthenticated_per_address:
            self._evict(address)
        elif self.waiting >= self.limits.unauthenticated:
            # The address holding the most gives a place; on a tie, the newcomer's own.
            fullest = max(
                self.waiting_by_address,
                key=lambda a: (len(self.waiting_by_address[a]), a == address),
            )
            self._evict(fullest)
        place = asyncio.Event()
        self.waiting_by_address.setdefault(address, []).append(place)
        return place

    def _evict(self, address: str) -> None:
        line = self.waiting_by_address[address]
        line.pop(0).set()
        if not line:
            del self.waiting_by_address[address]

    def _leave_line(self, address: str, place: asyncio.Event) -> None:
        line = self.waiting_by_address.get(address)
        if line is not None and place in line:
            line.remove(place)
            if not line:
                del self.waiting_by_address[address]


async def _refuse(websocket: WebSocket, reason: str) -> None:
    await websocket.accept()  # so the client hears why, not a bare 403
    await websocket.close(code=TRY_LATER, reason=reason)


async def _refuse_chatter(websocket: WebSocket) -> None:
    """Close a socket whose client sends anything after its key (1008)."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, asyncio.CancelledError):
        message = await websocket.receive()
        if message.get("type") == "websocket.receive":
            await websocket.close(code=POLICY, reason="this socket takes no messages")


class SocketGuard:
    """ASGI middleware: closes a socket whose message is too big or that has gone idle.

    A message over the limit closes it with 1009, nothing either way for the idle
    deadline with 4408; the app then hears that its client is gone.

    Args:
        app: The app behind it.
        limit: Returns the largest message in bytes (the replica sets it on start).
        idle_s: Returns how long a socket may carry nothing either way, in seconds.
    """

    def __init__(
        self,
        app: ASGIApp,
        limit: Callable[[], int],
        idle_s: Callable[[], float] = lambda: SocketLimits.idle_timeout_s,
    ) -> None:
        self.app = app
        self.limit = limit
        self.idle_s = idle_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return

        closed: int | None = None  # the code this guard closed with: the app's sends drop
        gone = asyncio.Event()
        heard = asyncio.Event()  # a message went either way since the idle watch looked

        async def close(code: int) -> None:
            nonlocal closed
            if closed is None:
                closed = code
                gone.set()
                with contextlib.suppress(Exception):
                    await send({"type": "websocket.close", "code": code, "reason": ""})

        async def watch_idle() -> None:
            while True:
                try:
                    await asyncio.wait_for(heard.wait(), self.idle_s())
                except TimeoutError:
                    await close(IDLE)
                    return
                heard.clear()

        async def bounded() -> Message:
            message = await _first(receive(), gone.wait())
            if message is None:  # closed here while the app waited
                return {"type": "websocket.disconnect", "code": closed}
            heard.set()
            if message["type"] == "websocket.receive":
                text, data = message.get("text") or "", message.get("bytes") or b""
                if len(text.encode()) + len(data) > self.limit():
                    await close(TOO_BIG)
                    return {"type": "websocket.disconnect", "code": TOO_BIG}
            return message

        async def guarded(message: Message) -> None:
            if closed is None:  # the app does not know the socket is gone: drop what it says
                heard.set()
                await send(message)

        watcher = asyncio.create_task(watch_idle())
        try:
            await self.app(scope, bounded, guarded)
        finally:
            watcher.cancel()


async def _first(message: Awaitable[T], stop: Awaitable[Any]) -> T | None:
    """The result, or None if `stop` comes first (the pending awaitable is cancelled)."""
    getting, stopping = asyncio.ensure_future(message), asyncio.ensure_future(stop)
    try:
        await asyncio.wait({getting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        got = getting.done()
        if not got:
            getting.cancel()
    return getting.result() if got else None
