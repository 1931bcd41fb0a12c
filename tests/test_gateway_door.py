"""The gateway's door, in process: body budgets and deadlines, content types, depth, batches,
sockets waiting for a key, and the proxy's own routes (no Ray; the live probes are in
`test_security.py`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from swarm_ray.core.guards._principal import Principal
from swarm_ray.gateway._limits import (
    BodyLimits,
    GatewayLimits,
    check_metadata,
    is_json,
    json_nesting,
)
from tests.support import wait_until

Message = MutableMapping[str, Any]
KEYS = {"Bearer ka": "alice", "Bearer kb": "bob"}
ALICE = Principal(id="alice")
BOB = Principal(id="bob")


# ---- what a body is -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "Application/JSON",
        "APPLICATION/JSON; charset=UTF-8",
        "application/json;;",
        "application/vnd.api+JSON",
        'application/json; boundary="x;y"',
    ],
)
def test_json_content_types_are_told_apart_as_fastapi_reads_them(content_type: str) -> None:
    assert is_json(content_type), content_type


@pytest.mark.parametrize(
    "content_type", [None, "", "text/plain", "application/ json", "json", "multipart/form-data"]
)
def test_other_content_types_are_not_json(content_type: str | None) -> None:
    assert not is_json(content_type), content_type


def test_json_nesting_reads_every_encoding_json_reads() -> None:
    nested = json.dumps({"p": [[[['x\\"[[[']]]]}, ensure_ascii=False)
    for encoding in ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-be"):
        assert json_nesting(nested.encode(encoding)) == 5, encoding
    assert json.loads(("[" * 40 + "]" * 40).encode("utf-16")) is not None
    assert json_nesting(("[" * 40 + "]" * 40).encode("utf-16")) == 40
    with pytest.raises(UnicodeDecodeError):
        json_nesting(b"\x00\x00\xfe\xff" + b"\xff" * 7)


def test_metadata_is_bounded_in_labels_and_bytes() -> None:
    from fastapi import HTTPException

    limits = GatewayLimits(max_metadata_keys=3, max_metadata_bytes=300)
    check_metadata({"team": "a", "batch": "b"}, limits)
    with pytest.raises(HTTPException) as refused:
        check_metadata({f"k{i}": "v" for i in range(4)}, limits)
    assert refused.value.status_code == 422 and "`max_metadata_keys`" in str(refused.value.detail)
    with pytest.raises(HTTPException) as refused:
        check_metadata({"k": "v" * 400}, limits)
    assert "`max_metadata_bytes`" in str(refused.value.detail)


# ---- the door -----------------------------------------------------------------------------


class _Client:
    """One request through `BodyLimits`: its body comes as the test releases it."""

    def __init__(
        self,
        door: BodyLimits,
        *,
        key: str = "ka",
        address: str = "10.0.0.1",
        path: str = "/v1/tasks",
        content_type: str | None = "application/json",
        chunks: list[bytes | None] | None = None,
        method: str = "POST",
    ) -> None:
        headers = [(b"authorization", f"Bearer {key}".encode())]
        if content_type is not None:
            headers.append((b"content-type", content_type.encode()))
        self.scope = {
            "type": "http",
            "method": method,
            "path": path,
            "root_path": "",
            "headers": headers,
            "client": (address, 4000),
        }
        self.door = door
        self.pending: asyncio.Queue[bytes | None] = asyncio.Queue()
        for chunk in chunks or []:
            self.pending.put_nowait(chunk)
        self.status: int | None = None
        self.body = b""
        self.started = asyncio.Event()

    def send_more(self, chunk: bytes | None) -> None:
        """Queue the next chunk; None ends the body."""
        self.pending.put_nowait(chunk)

    async def _receive(self) -> Message:
        chunk = await self.pending.get()
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def _send(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.started.set()
        else:
            self.body += message.get("body", b"")

    async def run(self) -> int:
        await self.door(self.scope, self._receive, self._send)
        assert self.status is not None
        return self.status


async def _echo(scope: Any, receive: Callable[[], Awaitable[Message]], send: Any) -> None:
    """The app behind the door: reads the whole body and answers its size."""
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = json.dumps({"size": size}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def _door(**limits: Any) -> BodyLimits:
    settings = GatewayLimits(**limits)
    return BodyLimits(_echo, limits=lambda: settings, principal=KEYS.get)


def test_a_body_that_does_not_arrive_in_time_is_answered_408() -> None:
    async def main() -> None:
        door = _door(body_timeout_s=0.3, min_body_rate=1024)
        silent = _Client(door)
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await silent.run() == 408
        assert 0.25 < loop.time() - started < 2.0
        assert b"body_timeout" in silent.body
        # Trickling bytes buys time only at `min_body_rate`: 2 bytes buy 2 ms.
        trickle = _Client(door, chunks=[b"{", b" "])
        assert await trickle.run() == 408
        # The upload route streams its own body: a late chunk is a 408 raised inside it.
        upload = _Client(door, path="/v1/files", content_type="multipart/form-data; boundary=b")
        from fastapi import HTTPException

        with pytest.raises(HTTPException) as late:
            await upload.run()
        assert late.value.status_code == 408
        assert not door.by_key and not door.by_address  # every body's place given back

    asyncio.run(main())


def test_one_keys_open_bodies_never_take_another_keys_room() -> None:
    async def main() -> None:
        door = _door(bodies_per_key=2, bodies_per_address=3, body_timeout_s=30, body_grace_s=0.2)
        slow = [_Client(door, key="ka") for _ in range(2)]
        running = [asyncio.create_task(c.run()) for c in slow]
        while door.by_key["alice"] < 2:  # slow once the grace is over
            await asyncio.sleep(0.01)
        # Alice's third slow body is refused once its grace is over; one that arrives
        # whole at once is never counted (a burst of small requests).
        excess = _Client(door, key="ka", chunks=[b"{"])
        assert await excess.run() == 429 and b"bodies_per_key" in excess.body
        burst = _Client(door, key="ka", chunks=[b"{}", None])
        assert await burst.run() == 200
        assert dict(door.by_key) == {"alice": 2}
        # Bob, from the same address, still gets in: the address has room for one more.
        bob = _Client(door, key="kb", chunks=[b'{"a": 1}', None])
        assert await bob.run() == 200 and json.loads(bob.body) == {"size": 8}
        # Another address is not counted with this one at all.
        elsewhere = _Client(door, key="kb", address="10.0.0.2", chunks=[b"{}", None])
        assert await elsewhere.run() == 200
        # Three bodies at once fill the address.
        held_bob = _Client(door, key="kb")
        holding = asyncio.create_task(held_bob.run())
        while door.by_address["10.0.0.1"] < 3:
            await asyncio.sleep(0.01)
        crowded = _Client(door, key="kb")
        assert await crowded.run() == 429 and b"bodies_per_address" in crowded.body
        upload = _Client(door, key="kb", path="/v1/files", chunks=[b"--b", None])
        assert await upload.run() == 429  # an upload over a budget: at once
        for client in [*slow, held_bob]:
            client.send_more(b"{}")
            client.send_more(None)
        assert await asyncio.gather(*running, holding) == [200, 200, 200]
        assert not door.by_key and not door.by_address

    asyncio.run(main())


def test_one_keys_calls_in_progress_are_capped_at_once_whatever_their_method() -> None:
    """A call over `calls_per_key` is refused as it comes, not after the body's grace:
    each call holds one of the replica's slots, and Serve's proxy queues whatever finds
    them all taken, another key's calls included."""

    async def main() -> None:
        door = _door(calls_per_key=3, body_timeout_s=30, body_grace_s=5)
        held = [_Client(door), _Client(door), _Client(door, method="GET")]
        running = [asyncio.create_task(c.run()) for c in held]
        while door.calls["alice"] < 3:
            await asyncio.sleep(0.01)
        loop = asyncio.get_running_loop()
        started = loop.time()
        for method in ("POST", "GET"):
            excess = _Client(door, method=method, chunks=[b"{}", None])
            assert await excess.run() == 429 and b"calls_per_key" in excess.body, method
        assert loop.time() - started < 1.0  # at once: the grace is 5 s
        # Bob, from the same address, is not counted with alice; nor is a call with no
        # valid key, which the app answers (401, or `/health`).
        for key, method in (("kb", "POST"), ("kb", "GET"), ("nobody", "GET")):
            other = _Client(door, key=key, method=method, chunks=[b"{}", None])
            assert await other.run() == 200, (key, method)
        assert dict(door.calls) == {"alice": 3}
        for client in held:
            client.send_more(None)
        assert await asyncio.gather(*running) == [200, 200, 200]
        assert not door.calls and not door.by_key
        again = _Client(door, chunks=[b"{}", None])
        assert await again.run() == 200

    asyncio.run(main())


@pytest.mark.parametrize(
    ("content_type", "encoding"),
    [
        ("Application/JSON", "utf-8"),
        ("application/json; charset=utf-16", "utf-16"),
        ("text/plain", "utf-8"),
        (None, "utf-8"),
        ("application/x-www-form-urlencoded", "utf-8"),
    ],
)
def test_every_body_is_scanned_for_depth_whatever_its_type(
    content_type: str | None, encoding: str
) -> None:
    deep = ('{"template": "echo_fanout", "params": {"p": ' + "[" * 960 + "]" * 960 + "}}").encode(
        encoding
    )

    async def main() -> None:
        door = _door()
        refused = _Client(door, content_type=content_type, chunks=[deep, None])
        assert await refused.run() == 422, refused.body
        assert b"nested 962 deep" in refused.body
        shallow = _Client(door, content_type=content_type, chunks=[b'{"a": [1]}', None])
        expected = 200 if is_json(content_type) else 415
        assert await shallow.run() == expected, shallow.body

    asyncio.run(main())


def test_requests_without_a_key_are_refused_before_their_body() -> None:
    async def main() -> None:
        door = _door()
        stranger = _Client(door, key="nope")  # no body is ever sent: it is not waited for
        assert await stranger.run() == 401
        assert not door.by_key

    asyncio.run(main())


# ---- batches ------------------------------------------------------------------------------


def test_a_batch_sends_what_passes_and_fails_each_bad_item_alone() -> None:
    from swarm_ray.gateway._coalesce import Coalescer, checked_apart
    from swarm_ray.gateway._http import serialisable

    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    sent: list[list[Any]] = []

    async def send(items: list[Any]) -> list[Any]:
        sent.append(items)
        await asyncio.sleep(0)
        return [f"task-{item}" for item in items]

    async def main() -> None:
        calls = Coalescer(checked_apart(send, serialisable), max_inflight=1)
        await calls(0)  # one batch in flight, so the next ones gather
        items: list[Any] = [1, 2, deep, 3, deep, 4]
        answers = await asyncio.gather(*(calls(i) for i in items), return_exceptions=True)
        from fastapi import HTTPException

        for item, answer in zip(items, answers, strict=True):
            if item is deep:
                assert isinstance(answer, HTTPException) and answer.status_code == 422
            else:
                assert answer == f"task-{item}"
        assert [i for batch in sent for i in batch] == [0, 1, 2, 3, 4]
        only_bad = await asyncio.gather(calls(deep), return_exceptions=True)
        assert isinstance(only_bad[0], HTTPException) and len(sent) == 2  # nothing sent

    asyncio.run(main())


# ---- sockets waiting for a key --------------------------------------------------------------


def test_sockets_without_a_key_crowd_out_only_their_own_address() -> None:
    """Two wait per address, three in all: a browser sending its key at once gets in."""
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocket, WebSocketDisconnect

    from swarm_ray.gateway._sockets import SocketLimits, SocketSlots

    slots = SocketSlots(
        SocketLimits(unauthenticated=3, unauthenticated_per_address=2, auth_timeout_s=30)
    )

    async def follow(websocket: WebSocket) -> None:
        address = websocket.headers["x-address"]  # as if from several client addresses
        websocket.scope["client"] = (address, 1)
        async with slots.admitted(websocket, lambda k: {"ka": ALICE, "kb": BOB}.get(k or "")) as p:
            if p is not None:
                await websocket.send_json({"hello": p.id})
                await websocket.receive_text()

    client = TestClient(Starlette(routes=[WebSocketRoute("/ws", follow)]))

    def opened(address: str) -> Any:
        return client.websocket_connect("/ws", headers={"x-address": address})

    def waiting() -> dict[str, int]:
        return {a: len(line) for a, line in slots.waiting_by_address.items()}

    with opened("a") as a1, opened("a") as a2:
        wait_until(lambda: waiting() == {"a": 2}, 5, "two sockets from `a` to wait")
        with opened("a") as a3:  # over `a`'s budget: a1, the oldest, gives its place
            with pytest.raises(WebSocketDisconnect) as closed:
                a1.receive_json()
            assert closed.value.code == 1013
            wait_until(lambda: waiting() == {"a": 2}, 5, "a3 to wait in a1's place")
            with opened("b") as browser:  # another address: room in all
                browser.send_text(json.dumps({"type": "auth", "api_key": "kb"}))
                assert browser.receive_json() == {"hello": "bob"}
                with opened("b") as b2, opened("c") as c1:
                    # Three wait in all: `c` took the place of the oldest of `a`, the fullest.
                    with pytest.raises(WebSocketDisconnect) as closed:
                        a2.receive_json()
                    assert closed.value.code == 1013
                    wait_until(lambda: waiting() == {"a": 1, "b": 1, "c": 1}, 5, "fair shares")
                    c1.send_text(json.dumps({"type": "auth", "api_key": "ka"}))
                    assert c1.receive_json() == {"hello": "alice"}
                    b2.close()
                a3.close()
    wait_until(lambda: not slots.waiting_by_address, 5, "every waiting place to be given back")
    wait_until(lambda: not slots.by_principal and not slots.by_address, 5, "every slot back")


# ---- Serve's proxy ------------------------------------------------------------------------


def test_the_proxy_door_hides_the_route_list_and_drops_the_proxys_own_headers() -> None:
    from swarm_ray.gateway._proxy import ProxyDoor, proxy_middlewares

    seen: list[dict[str, Any]] = []

    async def proxy(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"routes"})

    async def call(path: str, headers: list[tuple[bytes, bytes]], root: str = "") -> int:
        answer: list[int] = []

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer.append(message["status"])

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        scope = {"type": "http", "path": path, "root_path": root, "headers": headers}
        await ProxyDoor(proxy)(scope, receive, send)
        return answer[0]

    async def main() -> None:
        assert await call("/-/routes", []) == 404
        assert await call("/api/-/routes", [], root="/api") == 404
        assert not seen
        assert await call("/-/healthz", []) == 200
        sent = [
            (b"X-Request-Timeout-Seconds", b"0"),
            (b"x-request-disconnect-disabled", b"?1"),
            (b"authorization", b"Bearer k"),
        ]
        assert await call("/v1/tasks", sent) == 200
        assert seen[-1]["headers"] == [(b"authorization", b"Bearer k")]

    asyncio.run(main())
    assert [m.cls for m in proxy_middlewares()] == [ProxyDoor]


def test_keyed_sockets_of_many_keys_are_capped_in_all() -> None:
    """`max_open` 2: a third key's socket is refused (1013), whoever holds the two."""
    from starlette.applications import Starlette
    from starlette.routing import WebSocketRoute
    from starlette.testclient import TestClient
    from starlette.websockets import WebSocket, WebSocketDisconnect

    from swarm_ray.gateway._sockets import SocketLimits, SocketSlots

    slots = SocketSlots(SocketLimits(max_open=2))
    carol = Principal(id="carol")
    principals = {"ka": ALICE, "kb": BOB, "kc": carol}

    async def follow(websocket: WebSocket) -> None:
        async with slots.admitted(websocket, lambda k: principals.get(k or "")) as principal:
            if principal is not None:
                await websocket.send_json({"hello": principal.id})
                await websocket.receive_text()

    client = TestClient(Starlette(routes=[WebSocketRoute("/ws", follow)]))

    def opened(key: str) -> Any:
        return client.websocket_connect("/ws", headers={"Authorization": f"Bearer {key}"})

    with opened("ka") as a, opened("kb") as b:
        assert a.receive_json() == {"hello": "alice"} and b.receive_json() == {"hello": "bob"}
        with opened("kc") as c:
            with pytest.raises(WebSocketDisconnect) as closed:
                c.receive_json()
            assert closed.value.code == 1013
    with opened("kc") as c:  # the slots came back
        assert c.receive_json() == {"hello": "carol"}
