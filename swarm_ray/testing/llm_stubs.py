"""Test doubles of the world outside: a scripted model and an OpenAI-compatible stub server.

- `scripted_brain` is a model whose every move is written in the task it is given: the
  user message carries `SCRIPT: [...]`, a JSON list of steps
  (`{"tool": NAME, "arguments": {...}}`, `final` ends), and `ROW: {...}` the JSON answer
  it gives when asked for one. `{item}` in a step is the task's `Item:` line, and
  `"$result.FIELD"` in the row is a field of the last tool answer (`"$result"`: all of
  it; `"$shown"`: that answer exactly as the model was shown it, marks and all). So a
  test states exactly which tools an agent calls, through any engine: `ScriptedEngine`
  (the JSON protocol, `EngineConfig(kind="scripted", script=("call:" + BRAIN,))`) or the
  stub server below (native function calling, through `OpenAIEngine`).
- `stub_app` is an OpenAI-compatible server (`/v1/chat/completions`, `/v1/models`) that
  answers with the brain, and can limit requests per second (429 with `Retry-After`),
  fail its first requests (503), demand an API key (and echo a wrong one back, as some
  providers do) and take a fixed time per request. `/stats` counts what it saw.
- `serve_in_thread` runs an ASGI app on a free local port in this process.

`python -m swarm_ray.testing.llm_stubs --port P --rps 10` serves the stub in its own process
(the budget benchmark's rate-limited provider).
"""

import argparse
import asyncio
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from swarm_ray.llm._engine import Message

__all__: list[str] = []

BRAIN = "swarm_ray.testing.llm_stubs:scripted_brain"
"""The brain's import path (`ScriptedEngine` script entry: `"call:" + BRAIN`)."""
_SCRIPT = re.compile(r"SCRIPT:\s*(\[.*?\])\s*(?:$|\n)", re.S)
_ROW = re.compile(r"ROW:\s*(\{.*?\})\s*(?:$|\n)", re.S)
_ITEM = re.compile(r"^Item:\s*(.+)$", re.M)


_TOOL_DATA = re.compile(r"^<tool_result [^>]*>\n(.*)\n</tool_result>$", re.S)
"""How the tool agent shows a tool's answer (`_tool_agent._as_tool_data`)."""


def _last_shown(messages: Sequence[Message]) -> str | None:
    """The last tool answer exactly as the model was shown it, marks and all."""
    for message in reversed(messages):
        if message.role in ("tool", "user") and _TOOL_DATA.match(message.content):
            return message.content
    return None


def _last_result(shown: str | None) -> Any:
    found = _TOOL_DATA.match(shown) if shown is not None else None
    if found is None:
        return None
    text = found.group(1)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _fill(value: Any, item: str, shown: str | None) -> Any:
    if isinstance(value, dict):
        return {k: _fill(v, item, shown) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, item, shown) for v in value]
    if isinstance(value, str):
        if value == "$shown":
            return shown
        if value == "$result":
            return _last_result(shown)
        if value.startswith("$result."):
            result = _last_result(shown)
            field = value.removeprefix("$result.")
            return result.get(field) if isinstance(result, dict) else None
        return value.replace("{item}", item)
    return value


def scripted_brain(messages: Sequence[Message], schema: dict[str, Any] | None) -> str:
    """The next move of the script in the conversation's first user message."""
    task = next((m.content for m in messages if m.role == "user"), "")
    item_match = _ITEM.search(task)
    item = item_match.group(1).strip() if item_match else ""
    shown = _last_shown(messages)
    last = messages[-1].content if messages else ""
    if last.startswith("Now give your final answer as JSON"):
        row = _ROW.search(task)
        return json.dumps(_fill(json.loads(row.group(1)) if row else {}, item, shown))
    script = _SCRIPT.search(task)
    if script is None:
        return json.dumps({"tool": "final", "arguments": {"answer": "no script"}})
    steps = json.loads(script.group(1))
    turn = sum(1 for m in messages if m.role == "assistant")
    step = steps[min(turn, len(steps) - 1)]
    return json.dumps(_fill(step, item, shown))


def stub_app(
    *,
    brain: Callable[[Sequence[Message], dict[str, Any] | None], str] = scripted_brain,
    rps: float | None = None,
    fail_first: int = 0,
    api_key: str | None = None,
    latency_s: float = 0.0,
) -> Any:
    """An OpenAI-compatible chat server answering with `brain` (see the module docstring).

    (This module has no postponed annotations: FastAPI reads the handlers' at runtime.)
    """
    app = FastAPI()
    seen: deque[float] = deque()
    stats = {"requests": 0, "ok": 0, "rate_limited": 0, "failed": 0, "max_per_s": 0}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": "stub-model", "object": "model"}]}

    @app.get("/stats")
    async def get_stats() -> dict[str, Any]:
        return dict(stats)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        stats["requests"] += 1
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        if api_key is not None and given != api_key:
            error = {"message": f"Incorrect API key provided: {given}", "type": "auth"}
            return JSONResponse({"error": error}, status_code=401)
        now = time.monotonic()
        while seen and seen[0] <= now - 1.0:
            seen.popleft()
        if rps is not None and len(seen) >= rps:
            stats["rate_limited"] += 1
            wait = max(0.05, seen[0] + 1.0 - now)
            return JSONResponse(
                {"error": {"message": "rate limited", "type": "rate_limit"}},
                status_code=429,
                headers={"Retry-After": f"{wait:.2f}"},
            )
        seen.append(now)
        stats["max_per_s"] = max(stats["max_per_s"], len(seen))
        if stats["requests"] <= fail_first:
            stats["failed"] += 1
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        body = await request.json()
        if latency_s:
            await asyncio.sleep(latency_s)
        messages = [
            Message(
                role=m["role"], content=m.get("content") or "", tool_call_id=m.get("tool_call_id")
            )
            for m in body["messages"]
        ]
        form = body.get("response_format") or {}
        schema = (form.get("json_schema") or {}).get("schema") or form.get("schema")
        text = brain(messages, schema)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
        if body.get("tools"):
            move = json.loads(text)
            if move.get("tool") not in (None, "final"):
                arguments = json.dumps(move.get("arguments") or {})
                call = {"name": move["tool"], "arguments": arguments}
                message = {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": f"call_{stats['requests']}", "type": "function", "function": call}
                    ],
                }
                finish = "tool_calls"
            else:
                message["content"] = str((move.get("arguments") or {}).get("answer", ""))
        stats["ok"] += 1
        words = sum(len(str(m.get("content") or "").split()) for m in body["messages"])
        return {
            "id": f"stub-{stats['requests']}",
            "object": "chat.completion",
            "model": "stub-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": words,
                "completion_tokens": len(text.split()),
                "total_tokens": words + len(text.split()),
            },
        }

    return app


def flaky_api_app() -> Any:
    """A weather API that fails on demand (the adapter tests' third party).

    `GET /v1/current/{city}?units=` answers `{"data": {"city", "temp_c"}}`, or 404 for
    `nowhere`; `POST /mode {"mode": ...}` switches it: `ok`, `down` (503), `slow` (3 s),
    `garbage` (an answer of the wrong shape). `GET /calls` counts the weather calls.
    """
    app = FastAPI()
    state: dict[str, Any] = {"mode": "ok", "calls": 0}

    @app.post("/mode")
    async def set_mode(request: Request) -> dict[str, Any]:
        state["mode"] = (await request.json())["mode"]
        return dict(state)

    @app.get("/calls")
    async def calls() -> dict[str, Any]:
        return dict(state)

    @app.get("/v1/current/{city}")
    async def current(city: str, units: str = "metric") -> Any:
        state["calls"] += 1
        mode = state["mode"]
        if mode == "down":
            return JSONResponse({"error": "maintenance"}, status_code=503)
        if mode == "slow":
            await asyncio.sleep(3)
        if mode == "garbage":
            return {"data": {"weather": "nice"}}
        if city == "nowhere":
            return JSONResponse({"error": f"no city {city!r}"}, status_code=404)
        temp = 21.5 if units == "metric" else 70.7
        return {"data": {"city": city, "temp_c": temp}}

    return app


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serve_in_thread(app: Any, port: int | None = None) -> Iterator[str]:
    """Run `app` with uvicorn on `127.0.0.1`; yields its base URL, stops on exit."""
    import uvicorn

    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"uvicorn:{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"stub server on port {port} did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    """Serve the stub in this process (for benchmarks)."""
    import uvicorn

    parser = argparse.ArgumentParser(description="OpenAI-compatible stub server")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rps", type=float, default=None, help="429 above this many req/s")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    args = parser.parse_args(argv)
    app = stub_app(rps=args.rps, latency_s=args.latency)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
