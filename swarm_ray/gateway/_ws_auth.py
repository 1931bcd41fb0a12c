"""The API key of a WebSocket client: from its handshake header or its first message.

Programs send `Authorization: Bearer <key>` on the handshake. Browsers cannot set that
header on a WebSocket, and a key in the URL would land in proxy logs and history, so a
client without the header sends the key as its first message instead:
`{"type": "auth", "api_key": "<key>"}`. The socket is accepted first (so the client can
send it), but nothing about the task is sent until the key is checked, and a client that
stays silent past the deadline, or sends anything else, gets no key (the caller closes
the socket with 4401).
"""

from __future__ import annotations

import asyncio
import json

from starlette.websockets import WebSocket, WebSocketDisconnect

__all__ = ["AUTH_MESSAGE_TIMEOUT_S", "presented_key"]

AUTH_MESSAGE_TIMEOUT_S = 2.0
"""How long an accepted socket without the header may take to send its key."""
_MAX_MESSAGE = 4096
"""An auth message longer than this is not one (keys are far shorter)."""


async def presented_key(
    websocket: WebSocket, timeout_s: float = AUTH_MESSAGE_TIMEOUT_S
) -> str | None:
    """The key the client presents, or None; call after `websocket.accept()`.

    Args:
        websocket: The accepted socket.
        timeout_s: The longest wait for the first message when there is no header.
    """
    header = websocket.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        return token.strip() if scheme.lower() == "bearer" else None
    try:
        text = await asyncio.wait_for(websocket.receive_text(), timeout_s)
    except (TimeoutError, WebSocketDisconnect, KeyError, RuntimeError):
        return None  # silent, gone, or a binary frame (`receive_text` raises KeyError)
    if len(text) > _MAX_MESSAGE:
        return None
    try:
        message = json.loads(text)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("type") != "auth":
        return None
    key = message.get("api_key")
    return key if isinstance(key, str) else None
