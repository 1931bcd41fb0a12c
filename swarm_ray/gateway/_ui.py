"""The live task page: static files the gateway serves at `/ui/`, data from the public API.

`/ui/` lists the newest tasks and `/ui/tasks/{id}` draws one task's plan as a DAG grouped
by stage, coloured by status and updated live over `WS /v1/tasks/{id}/events`. The pages
hold no data and need no key: the JavaScript asks the API for everything with the key the
user types into the page's login form (kept in `sessionStorage`, never in a URL), so the
page sees exactly what the API lets that key see.

Everything ships inside the package (`swarm_ray/gateway/ui/`): no CDN, nothing fetched
from elsewhere at run time. The files are read once at import and served from memory, by
name from a fixed list, so no request can name a path on the server.
"""

from __future__ import annotations

from importlib import resources
from typing import Annotated

from fastapi import FastAPI, HTTPException
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, RedirectResponse, Response

__all__ = ["SECURITY_HEADERS", "install_ui"]

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}

SECURITY_HEADERS = {
    # Scripts, styles and sockets from this origin only: the key typed into the page can
    # go nowhere else, and no other site may frame the page.
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; "
        "base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _load() -> dict[str, tuple[bytes, str]]:
    folder = resources.files("swarm_ray.gateway") / "ui"
    files: dict[str, tuple[bytes, str]] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in _TYPES:
            files[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return files


_FILES = _load()
_TASK_ID = PathParam(pattern=r"^[A-Za-z0-9_\-]{1,64}$", description="A task id.")
_ASSET = PathParam(pattern=r"^[a-z_]{1,32}\.(js|css)$", description="A file of the page.")


def _page(name: str) -> Response:
    body, media_type = _FILES[name]
    return HTMLResponse(body, media_type=media_type, headers=SECURITY_HEADERS)


async def ui_root() -> RedirectResponse:
    """`/ui` without the slash: the task list."""
    return RedirectResponse("/ui/", status_code=308)


async def ui_tasks() -> Response:
    """The task list (its rows come from `GET /v1/tasks`)."""
    return _page("index.html")


async def ui_task(task_id: Annotated[str, _TASK_ID]) -> Response:
    """One task's live DAG (from `GET /v1/tasks/{id}` and its event socket)."""
    return _page("task.html")


async def ui_asset(name: Annotated[str, _ASSET]) -> Response:
    """A script or style sheet of the page, from the package."""
    if name not in _FILES:
        raise HTTPException(404, detail={"detail": f"no file `{name}`", "code": "not_found"})
    body, media_type = _FILES[name]
    return Response(body, media_type=media_type, headers=SECURITY_HEADERS)


def install_ui(app: FastAPI) -> None:
    """Add the page's routes to the gateway's FastAPI app (left out of the OpenAPI doc)."""
    app.get("/ui", include_in_schema=False)(ui_root)
    app.get("/ui/", include_in_schema=False)(ui_tasks)
    app.get("/ui/tasks/{task_id}", include_in_schema=False)(ui_task)
    app.get("/ui/static/{name}", include_in_schema=False)(ui_asset)
