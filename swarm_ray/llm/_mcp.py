"""MCP tools through the official `mcp` SDK, for agents that run in threads.

An agent's loop is synchronous (it runs in a replica's worker thread), while the SDK is
async and its sessions live inside `async with` blocks. So each process keeps one
event loop in a background thread, and one session per principal and registered
server, opened on first use and kept: a stdio server is started once per process and
principal, not once per agent (fifty agents of one tenant in one replica share it; MCP
sessions take concurrent requests), and no tenant shares a session, or a stdio
server's process, with another. A session whose server dies is dropped and opened
again on the next call.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import threading
from dataclasses import dataclass
from typing import Any

from swarm_ray.core import AgentUnavailableError, SubTaskTimeoutError
from swarm_ray.llm._settings import McpServer

__all__: list[str] = []


BASE_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV")
"""What a stdio MCP server inherits unasked: enough to start a program, no secrets."""


def stdio_environment(server: McpServer) -> dict[str, str]:
    """The environment a stdio server starts with: only what the operator lists.

    The replica's environment holds secrets (Redis passwords, key file paths, API keys);
    a server gets `BASE_ENVIRONMENT`, the variables its registration names in `inherit`,
    and its own `env`.
    """
    names = (*BASE_ENVIRONMENT, *server.inherit)
    passed = {name: os.environ[name] for name in names if name in os.environ}
    return {**passed, **server.env}


@dataclass(frozen=True)
class McpTool:
    """One tool of a server, as the server lists it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    """The server marks it `readOnlyHint` (changes nothing); MCP's default is not."""


@dataclass(frozen=True)
class McpAnswer:
    """A tool's answer: text for the model, structured content if any, and whether it failed."""

    is_error: bool
    text: str
    structured: Any = None


@dataclass
class _Session:
    session: Any
    tools: tuple[McpTool, ...]
    stop: asyncio.Event
    owner: asyncio.Task[None]


class McpPool:
    """This process's MCP sessions, one per principal and server, on a private event loop."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp", daemon=True)
        self._thread.start()
        # Keyed by principal and registration (`_key`).
        self._sessions: dict[str, _Session] = {}
        self._opening: dict[str, asyncio.Future[_Session]] = {}

    def _run(self, coroutine: Any, timeout_s: float) -> Any:
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout_s)
        except TimeoutError:
            future.cancel()
            raise

    async def _own(self, server: McpServer, ready: asyncio.Future[_Session], key: str) -> None:
        """Hold one session open until told to stop (its `async with` blocks live here)."""
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        stop = asyncio.Event()
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command[0],
                args=list(server.command[1:]),
                env=stdio_environment(server),
            )
            transport: Any = stdio_client(params)
        else:
            assert server.url is not None
            transport = streamable_http_client(server.url)
        try:
            async with transport as streams, ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed = await session.list_tools()
                tools = tuple(
                    McpTool(
                        t.name,
                        t.description or "",
                        dict(t.input_schema or {}),
                        read_only=bool(t.annotations and t.annotations.read_only_hint),
                    )
                    for t in listed.tools
                )
                owner = asyncio.current_task()
                assert owner is not None
                ready.set_result(_Session(session, tools, stop, owner))
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
        finally:
            if key in self._sessions and self._sessions[key].stop is stop:
                del self._sessions[key]

    async def _session(self, server: McpServer, principal: str | None) -> _Session:
        key = _key(server, principal)
        if key in self._sessions and not self._sessions[key].owner.done():
            return self._sessions[key]
        if key not in self._opening:
            ready: asyncio.Future[_Session] = self._loop.create_future()
            self._opening[key] = ready
            self._loop.create_task(self._own(server, ready, key))
        try:
            session = await asyncio.wait_for(asyncio.shield(self._opening[key]), server.timeout_s)
        finally:
            opening = self._opening.get(key)
            if opening is not None and opening.done():
                del self._opening[key]
        self._sessions[key] = session
        return session

    def tools(
        self, name: str, server: McpServer, principal: str | None = None
    ) -> tuple[McpTool, ...]:
        """The tools `server` lists (`principal`'s session opened if need be).

        Raises:
            AgentUnavailableError: the server could not be started or reached.
        """
        try:
            session: _Session = self._run(self._session(server, principal), server.timeout_s + 5)
        except Exception as exc:
            raise AgentUnavailableError(
                f"MCP server `{name}` could not be reached: {type(exc).__name__}: {exc}",
                server=name,
            ) from None
        return session.tools

    def call(
        self,
        name: str,
        server: McpServer,
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        principal: str | None = None,
    ) -> McpAnswer:
        """Call `tool` on `server`, in `principal`'s session; a tool's error is `is_error`.

        Raises:
            SubTaskTimeoutError: no answer within `timeout_s`.
            AgentUnavailableError: the session broke (it is opened again next time).
        """

        async def call() -> Any:
            session = await self._session(server, principal)
            return await asyncio.wait_for(session.session.call_tool(tool, arguments), timeout_s)

        try:
            result = self._run(call(), timeout_s + server.timeout_s + 5)
        except TimeoutError:
            raise SubTaskTimeoutError(
                f"MCP tool `{name}.{tool}` gave no answer in {timeout_s} s", server=name
            ) from None
        except Exception as exc:
            raise AgentUnavailableError(
                f"MCP server `{name}` failed the call of `{tool}`: {type(exc).__name__}: {exc}",
                server=name,
            ) from None
        text = "\n".join(getattr(block, "text", "") for block in result.content).strip()
        structured = result.structured_content
        if not text and structured is not None:
            text = json.dumps(structured)
        return McpAnswer(is_error=bool(result.is_error), text=text, structured=structured)

    def close(self) -> None:
        """Stop every session (their servers exit) and the loop."""

        async def stop_all() -> None:
            owners = []
            for session in list(self._sessions.values()):
                session.stop.set()
                owners.append(session.owner)
            if owners:
                await asyncio.wait(owners, timeout=5)

        if self._loop.is_running():
            with contextlib.suppress(Exception):  # closing at exit: nothing left to tell
                self._run(stop_all(), 10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
        if not self._loop.is_running():
            self._loop.close()


def _key(server: McpServer, principal: str | None) -> str:
    """A session per principal and registration (the same server under two names shares).

    One tenant's calls never share another tenant's session: its state, its process.
    """
    return f"{principal or ''}\n{server.model_dump_json()}"


_pool: McpPool | None = None
_pool_lock = threading.Lock()


def mcp_pool() -> McpPool:
    """This process's pool (started on first use, closed at exit)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = McpPool()
            atexit.register(close_mcp_pool)
        return _pool


def close_mcp_pool() -> None:
    """Close this process's sessions now (their stdio servers exit); the next call reopens."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.close()
