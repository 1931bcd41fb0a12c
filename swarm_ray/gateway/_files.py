"""`POST /v1/files`: a multipart upload streamed into the result store, size-capped.

The body is parsed as it arrives (`python-multipart`'s streaming parser, the one
FastAPI's own forms use), and the one part named `file` goes straight to the store in
chunks: nothing holds the whole file in memory, and the upload stops with 413 the moment
it passes the limit. What the file is comes from its first bytes (`_uploads.sniff`), not
its name or declared type: anything but a PDF or a video container is refused with 415.
"""

from __future__ import annotations

import asyncio

from fastapi import HTTPException, Request
from python_multipart.multipart import MultipartParser, parse_options_header

from swarm_ray.core._errors import InvalidInputError, LimitExceededError, StateStoreError
from swarm_ray.core._principal import Principal
from swarm_ray.runtime._uploads import UploadInfo, Uploads, UploadWriter

__all__ = ["receive_upload"]

_FLUSH_BYTES = 1024 * 1024
"""Bytes gathered before they are written (off the event loop)."""


class _Part:
    """The multipart callbacks' state: which part is open and what it carries."""

    def __init__(self) -> None:
        self.field = b""
        self.value = b""
        self.headers: dict[bytes, bytes] = {}
        self.name = b""
        self.filename = ""
        self.buffer: list[bytes] = []
        self.files = 0


def _bad(status: int, detail: str, code: str) -> HTTPException:
    return HTTPException(status, detail={"detail": detail, "code": code})


async def receive_upload(
    request: Request, uploads: Uploads, principal: Principal, *, max_bytes: int
) -> UploadInfo:
    """Stream the request's `file` part into `uploads`; raise the HTTP error that fits."""
    kind, options = parse_options_header(request.headers.get("content-type"))
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise _bad(
            415, "send the file as multipart/form-data with a part named `file`", "bad_upload"
        )
    part = _Part()
    writer: UploadWriter | None = None
    pending: list[bytes] = []

    def header_field(data: bytes, start: int, end: int) -> None:
        part.field += data[start:end]

    def header_value(data: bytes, start: int, end: int) -> None:
        part.value += data[start:end]

    def header_end() -> None:
        part.headers[part.field.lower()] = part.value
        part.field = part.value = b""

    def headers_finished() -> None:
        _, disposition = parse_options_header(part.headers.get(b"content-disposition", b""))
        part.name = disposition.get(b"name", b"")
        part.filename = disposition.get(b"filename", b"").decode("utf-8", "replace")
        if part.name == b"file":
            part.files += 1

    def part_data(data: bytes, start: int, end: int) -> None:
        if part.name == b"file" and part.files == 1:
            pending.append(data[start:end])

    def part_begin() -> None:
        part.headers = {}

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": part_begin,
            "on_header_field": header_field,
            "on_header_value": header_value,
            "on_header_end": header_end,
            "on_headers_finished": headers_finished,
            "on_part_data": part_data,
        },
    )
    try:
        buffered = 0
        async for chunk in request.stream():
            parser.write(chunk)
            if part.files and writer is None:
                writer = uploads.writer(principal, part.filename, max_bytes=max_bytes)
            buffered += sum(len(p) for p in pending)
            if writer is not None and (buffered >= _FLUSH_BYTES or len(pending) > 64):
                data, pending[:] = b"".join(pending), []
                buffered = 0
                await asyncio.to_thread(writer.write, data)
        parser.finalize()
        if writer is None:
            raise _bad(422, "the upload has no part named `file`", "bad_upload")
        if part.files > 1:
            raise _bad(422, "send one file per upload", "bad_upload")
        if pending:
            await asyncio.to_thread(writer.write, b"".join(pending))
        return await asyncio.to_thread(writer.commit)
    except LimitExceededError as exc:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        raise _bad(413, exc.message, "limit_exceeded") from None
    except InvalidInputError as exc:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        status = 415 if exc.details.get("reason") == "type" else 422
        raise _bad(status, exc.message, "bad_upload") from None
    except StateStoreError as exc:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        raise _bad(503, exc.message, "state_store") from None
    except BaseException:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        raise
