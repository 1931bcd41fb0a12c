"""`POST /v1/files`: a multipart upload streamed into the result store, size-capped.

The body is parsed as it arrives (`python-multipart`'s streaming parser, the one
FastAPI's own forms use), in a worker thread so a hostile body cannot hold the event
loop, and the one part named `file` goes straight to the store in chunks: nothing holds
the whole file in memory. What the file is comes from its first bytes
(`_uploads.sniff`), not its name or declared type: anything but a PDF or a video
container is refused with 415.

Limits (`UploadLimits`, from `GatewayConfig`), each answered with an error naming it:

- the whole body (`max_upload_bytes` plus 64 KiB of multipart framing): 413, from
  `Content-Length` at once or the moment the streamed bytes pass it;
- the file itself (`max_upload_bytes`): 413;
- at most 8 parts and 16 KiB of part headers in all: 413;
- a quota per principal, `upload_quota_bytes` (413) and `upload_quota_files` (429),
  counted over the caller's live uploads and those in progress before the upload starts
  (so a full quota refuses at once), at every write with the caller's uploads in
  progress that began before it counted (`Uploads.hold`), and again as the file is
  published, with this file counted, one commit at a time per principal: uploads running
  side by side cannot pass it together, nor fill the disk before any of them is
  published, and of two that fit only alone the first is kept, never both refused.
  The commit lock is per gateway replica; replicas of one gateway race only in the
  moment between a count and its commit.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from fastapi import HTTPException, Request
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

from swarm_ray.core import InvalidInputError, LimitExceededError, Principal, StateStoreError
from swarm_ray.gateway._http import unavailable
from swarm_ray.runtime._uploads import UploadInfo, Uploads, UploadWriter

__all__ = ["UploadLimits", "receive_upload"]

_FLUSH_BYTES = 1024 * 1024
"""Bytes gathered before they are written (off the event loop)."""
_FRAMING = 64 * 1024
"""Room for the multipart framing around the file in the body limit."""
MAX_PARTS = 8
MAX_HEADER_BYTES = 16 * 1024


@dataclass(frozen=True)
class UploadLimits:
    """What one upload and one principal's uploads may take."""

    max_bytes: int = 256 * 1024 * 1024
    quota_bytes: int = 1024 * 1024 * 1024
    quota_files: int = 100


def _over(limit: str, value: int, maximum: int, what: str) -> LimitExceededError:
    return LimitExceededError(
        f"{what} is over `{limit}` ({maximum})", limit=limit, value=value, maximum=maximum
    )


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
        self.parts = 0
        self.header_bytes = 0


def _bad(status: int, detail: str, code: str) -> HTTPException:
    return HTTPException(status, detail={"detail": detail, "code": code})


_COMMITS: dict[str, asyncio.Lock] = {}
"""One lock per principal that has published in this replica (principals come from the
operator's key file, so these are few)."""


async def _check_quota(
    uploads: Uploads, principal: Principal, limits: UploadLimits, size: int = 0
) -> int:
    """Bytes the caller may still upload with `size` more counted; raises the quota passed."""
    used_bytes, used_files = await asyncio.to_thread(uploads.usage, principal)
    if used_files >= limits.quota_files:
        raise _bad(
            429,
            f"this caller holds {used_files} uploads, the `upload_quota_files` quota "
            f"({limits.quota_files}); delete some (`DELETE /v1/files/{{id}}`)",
            "quota_exceeded",
        )
    if used_bytes >= limits.quota_bytes or used_bytes + size > limits.quota_bytes:
        adding = f", and this upload {size} more" if size else ""
        raise _bad(
            413,
            f"this caller's uploads hold {used_bytes} bytes{adding}, over the "
            f"`upload_quota_bytes` quota ({limits.quota_bytes}); delete some "
            "(`DELETE /v1/files/{id}`)",
            "quota_exceeded",
        )
    return limits.quota_bytes - used_bytes


async def _publish(
    writer: UploadWriter, uploads: Uploads, principal: Principal, limits: UploadLimits
) -> UploadInfo:
    """Count the quota again with this file in it, then commit; one at a time per principal."""
    async with _COMMITS.setdefault(principal.id, asyncio.Lock()):
        await _check_quota(uploads, principal, limits, size=writer.size)
        return await asyncio.to_thread(writer.commit)


async def receive_upload(
    request: Request, uploads: Uploads, principal: Principal, limits: UploadLimits
) -> UploadInfo:
    """Stream the request's `file` part into `uploads`; raise the HTTP error that fits."""
    kind, options = parse_options_header(request.headers.get("content-type"))
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary:
        raise _bad(
            415, "send the file as multipart/form-data with a part named `file`", "bad_upload"
        )
    max_body = limits.max_bytes + _FRAMING
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_body:
        raise _bad(
            413,
            f"the upload's body is over `max_upload_bytes` ({limits.max_bytes})",
            "limit_exceeded",
        )
    room = await _check_quota(uploads, principal, limits)
    max_bytes = min(limits.max_bytes, room)
    quota = "max_upload_bytes" if max_bytes == limits.max_bytes else "upload_quota_bytes"
    part = _Part()
    writer: UploadWriter | None = None
    pending: list[bytes] = []

    def counted(size: int) -> None:
        part.header_bytes += size
        if part.header_bytes > MAX_HEADER_BYTES:
            raise _over(
                "max_part_header_bytes", part.header_bytes, MAX_HEADER_BYTES, "part headers"
            )

    def header_field(data: bytes, start: int, end: int) -> None:
        counted(end - start)
        part.field += data[start:end]

    def header_value(data: bytes, start: int, end: int) -> None:
        counted(end - start)
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
        part.parts += 1
        if part.parts > MAX_PARTS:
            raise _over("max_upload_parts", part.parts, MAX_PARTS, "the number of parts")

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
        buffered = received = 0
        async for chunk in request.stream():
            received += len(chunk)
            if received > max_body:
                raise _over("max_upload_bytes", received, limits.max_bytes, "the upload's body")
            await asyncio.to_thread(parser.write, chunk)  # a hostile body costs a thread
            if part.files and writer is None:
                writer = uploads.writer(
                    principal,
                    part.filename,
                    max_bytes=max_bytes,
                    limit=quota,
                    # uploads side by side count each other's bytes as they are written
                    quota_bytes=limits.quota_bytes,
                    used_bytes=limits.quota_bytes - room,
                )
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
        return await _publish(writer, uploads, principal, limits)
    except LimitExceededError as exc:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        raise _bad(413, exc.message, "limit_exceeded") from None
    except MultipartParseError as exc:  # python-multipart's own header cap, or bad framing
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        if "header size" in str(exc):
            raise _bad(
                413,
                f"part headers are over `max_part_header_bytes` ({MAX_HEADER_BYTES})",
                "limit_exceeded",
            ) from None
        raise _bad(422, f"the multipart body is malformed: {exc}"[:300], "bad_upload") from None
    except InvalidInputError as exc:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        status = 415 if exc.details.get("reason") == "type" else 422
        raise _bad(status, exc.message, "bad_upload") from None
    except StateStoreError as exc:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        raise unavailable("the upload could not be stored", "state_store", exc) from None
    except BaseException:
        if writer is not None:
            await asyncio.to_thread(writer.abort)
        raise
