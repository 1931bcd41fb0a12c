"""A small MCP server of swarm-ray's own, with deterministic tools (tests and demos).

`python -m swarm_ray.testing.mcp_demo` serves over stdio; `--http PORT` serves streamable
HTTP on `http://127.0.0.1:PORT/mcp`. Its tools answer the same every time, so a test can
assert exactly what an agent got back:

- `add(a, b)`: the sum of two integers.
- `planet(name)`: a few fixed facts about a planet of the solar system (the
  wide-research demo looks each item up here), or an error naming the planet.
- `slow(seconds)`: sleeps, then says so (per-tool timeouts are tested with it).
- `note(text)`: keeps a note; the one tool not marked read-only (side effects are tested
  with it).
- `has_env(name)`: whether the server's environment holds a variable (what a stdio
  server is given is tested with it; the value is never told).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

__all__: list[str] = []

PLANETS: dict[str, dict[str, Any]] = {
    "mercury": {"order": 1, "moons": 0, "diameter_km": 4879, "rings": False},
    "venus": {"order": 2, "moons": 0, "diameter_km": 12104, "rings": False},
    "earth": {"order": 3, "moons": 1, "diameter_km": 12756, "rings": False},
    "mars": {"order": 4, "moons": 2, "diameter_km": 6792, "rings": False},
    "jupiter": {"order": 5, "moons": 95, "diameter_km": 142984, "rings": True},
    "saturn": {"order": 6, "moons": 146, "diameter_km": 120536, "rings": True},
    "uranus": {"order": 7, "moons": 28, "diameter_km": 51118, "rings": True},
    "neptune": {"order": 8, "moons": 16, "diameter_km": 49528, "rings": True},
}
"""The facts `planet` answers (NASA fact sheets, rounded)."""


def build_server() -> Any:
    """The `MCPServer` with the demo tools (mcp 2.x)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    app = MCPServer("swarm-ray-demo", log_level="WARNING")
    reads = ToolAnnotations(read_only_hint=True)  # they change nothing

    @app.tool(annotations=reads)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @app.tool(annotations=reads)
    def planet(name: str) -> dict[str, Any]:
        """Facts about a planet of the solar system: order from the sun, moons, diameter."""
        key = name.strip().lower()
        if key not in PLANETS:
            raise ToolError(f"no planet called {name!r}; known: {', '.join(PLANETS)}")
        return {"name": key, **PLANETS[key]}

    notes: list[str] = []

    @app.tool()
    def note(text: str) -> str:
        """Keep a note on the server (a tool with a side effect: not marked read-only)."""
        notes.append(text)
        return f"{len(notes)} notes kept"

    @app.tool(annotations=reads)
    def has_env(name: str) -> bool:
        """Whether this server's environment holds the variable `name`."""
        return name in os.environ

    @app.tool(annotations=reads)
    def echo(text: str) -> str:
        """Answer `text` unchanged: a page a tool fetched says whatever its author wrote."""
        return text

    @app.tool(annotations=reads)
    def slow(seconds: float) -> str:
        """Sleep `seconds` (at most 30), then say so."""
        time.sleep(min(30.0, max(0.0, seconds)))
        return f"slept {seconds} s"

    return app


def main(argv: list[str] | None = None) -> None:
    """Serve over stdio, or streamable HTTP with `--http PORT`."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP")
    args = parser.parse_args(argv)
    app = build_server()
    if args.http:
        app.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        app.run()


if __name__ == "__main__":
    main()
