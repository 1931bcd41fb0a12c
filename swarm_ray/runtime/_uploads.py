"""Uploads: files an HTTP caller sends, kept in the result store under its principal.

An HTTP caller never names a server path. It uploads a document or a video
(`POST /v1/files`), gets a file id (`file-` and 24 hex digits) and names that id as a
task item; the orchestrator resolves the id, among the caller's own uploads only, to the
place where the bytes lie. Layout under the result store's root:

    uploads/<principal tag>/<file id>/<name>          the bytes
    uploads/<principal tag>/<file id>/.upload.json    name, size, type, sha256, time

What may be uploaded is decided by the content, not the name or the declared type: the
first bytes must be a PDF or one of the video containers the video workload reads.

An upload lives until its owner deletes it (`DELETE /v1/files/{id}`) or, when the
operator sets `SWARM_RAY_UPLOAD_TTL` (seconds), until it is that old: an expired upload
is no longer found (a new task naming it is refused, it is not listed nor counted toward
the quota). Its bytes are removed by the orchestrator's sweep, once a `SWEEP_EVERY_S`,
which keeps every upload an open task names: a long job never loses its input because
the file outlived its TTL mid-run (it is freed at the next sweep after the task ends).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict

from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import InvalidInputError, LimitExceededError, StateStoreError
from swarm_ray.runtime._results import ResultStore

__all__: list[str] = []

FILE_ID = re.compile(r"^file-[0-9a-f]{24}$")
"""What a file id looks like (OpenAI's files API uses the same prefix)."""
_META = ".upload.json"
SWEEP_EVERY_S = 60.0
"""How often the orchestrator sweeps every principal's expired uploads, in seconds, by
default (`SWARM_RAY_UPLOAD_SWEEP_S`)."""
_SAFE = re.compile(r"[^A-Za-z0-9._\-]+")
PARTIAL_STALE_S = 3600.0
"""An upload in progress not written to for this long was left by a gateway that died:
its bytes no longer count toward the quota."""

_KINDS: dict[str, tuple[str, ...]] = {
    "application/pdf": (".pdf",),
    "video/mp4": (".mp4", ".m4v", ".mov"),
    "video/webm": (".webm", ".mkv"),
    "video/x-msvideo": (".avi",),
    "video/mp2t": (".ts",),
}


def sniff(head: bytes) -> str | None:
    """The content type the first bytes of a file show, or None when not accepted."""
    if b"%PDF-" in head[:1024]:
        return "application/pdf"
    if head[4:8] == b"ftyp":
        return "video/mp4"
    if head[:4] == b"\x1a\x45\xdf\xa3":
        return "video/webm"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "video/x-msvideo"
    if len(head) > 188 and head[0] == 0x47 and head[188] == 0x47:
        return "video/mp2t"
    return None


def _safe_name(name: str, kind: str) -> str:
    """A file name safe on any filesystem, ending in an extension of its sniffed type."""
    base = _SAFE.sub("_", name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).lstrip("._")[:100]
    extensions = _KINDS[kind]
    if not base.lower().endswith(extensions):
        base = f"{base or 'upload'}{extensions[0]}"
    return base


class UploadInfo(BaseModel):
    """What `POST /v1/files` answers and `GET /v1/files` lists."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """The file id to name in a task's items."""
    object: str = "file"
    filename: str
    """The name it was uploaded with, made safe."""
    bytes: int
    """Its size."""
    content_type: str
    """What its first bytes show it is."""
    sha256: str
    """Digest of its bytes."""
    created_at: float
    """When it was uploaded."""


@dataclass
class UploadWriter:
    """Streams one upload into the store; `commit()` publishes it, `abort()` drops it."""

    uploads: Uploads
    principal: Principal
    filename: str
    max_bytes: int
    limit: str = "max_upload_bytes"
    """The limit `max_bytes` comes from (named when it is passed)."""
    quota_bytes: int | None = None
    """The principal's byte quota, counted over its uploads and the uploads it has in
    progress in this process that began before this one, at each write (None: not
    counted here)."""
    used_bytes: int = 0
    """What the principal's other uploads held when this one started (`Uploads.usage`)."""
    file_id: str = ""
    size: int = 0

    def __post_init__(self) -> None:
        self.file_id = f"file-{secrets.token_hex(12)}"
        self._digest = hashlib.sha256()
        self._head = b""
        self._stream: Any | None = None
        self._temp = ""

    def write(self, chunk: bytes) -> None:
        """Append `chunk`; raises `LimitExceededError` past `max_bytes` or the quota."""
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise LimitExceededError(
                f"upload `{self.filename}` is over the limit of {self.max_bytes} bytes "
                f"(`{self.limit}`)",
                limit=self.limit,
                value=self.size,
                maximum=self.max_bytes,
            )
        self.uploads.hold(self)
        if self._stream is None:
            self._head += chunk
            if len(self._head) < 1024 and self.size < 1024:
                return
            self._open()
            chunk, self._head = self._head, b""
        self._digest.update(chunk)
        stream: Any = self._stream
        stream.write(chunk)

    def _open(self) -> Any:
        if sniff(self._head) is None:
            raise InvalidInputError(
                f"upload `{self.filename}` is neither a PDF nor a video this server reads "
                "(checked by its first bytes)",
                field="file",
                reason="type",
            )
        directory = self.uploads.directory(self.principal, self.file_id)
        fs = self.uploads.fs
        with self.uploads.guard("create"):
            fs.create_dir(directory, recursive=True)
            self._temp = f"{directory}/.partial"
            self._stream = fs.open_output_stream(self._temp, compression=None)
        return self._stream

    def commit(self) -> UploadInfo:
        """Close the stream, move the bytes under their name, write the metadata."""
        if self._stream is None:
            if not self._head:
                raise InvalidInputError(
                    f"upload `{self.filename}` is empty", field="file", reason="empty"
                )
            self._open()
            self._digest.update(self._head)
        stream: Any = self._stream
        if self._head:
            stream.write(self._head)
        stream.close()
        head = self._peek()
        kind = sniff(head) or "application/octet-stream"
        name = _safe_name(self.filename, kind)
        info = UploadInfo(
            id=self.file_id,
            filename=name,
            bytes=self.size,
            content_type=kind,
            sha256=self._digest.hexdigest(),
            created_at=self.uploads.clock(),
        )
        directory = self.uploads.directory(self.principal, self.file_id)
        with self.uploads.guard("commit"):
            self.uploads.fs.move(self._temp, f"{directory}/{name}")
            with self.uploads.fs.open_output_stream(
                f"{directory}/{_META}", compression=None
            ) as out:
                out.write(info.model_dump_json().encode())
        self.uploads.release(self)
        return info

    def _peek(self) -> bytes:
        with self.uploads.fs.open_input_stream(self._temp, compression=None) as f:
            data: bytes = f.read(1024)
        return data

    def abort(self) -> None:
        """Drop what was written."""
        self.uploads.release(self)
        with contextlib.suppress(Exception):
            if self._stream is not None:
                self._stream.close()
        with contextlib.suppress(OSError, pa.ArrowException):
            self.uploads.fs.delete_dir(self.uploads.directory(self.principal, self.file_id))


class Uploads:
    """The uploads area of a result store (see the module docstring)."""

    def __init__(self, store: ResultStore, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.fs: Any = store.filesystem
        self._root = f"{store.root}/uploads"
        self.clock = clock
        """The time uploads are made and expire by (a fake one in tests)."""
        self._writing: dict[str, dict[str, int]] = {}
        """Uploads in progress in this process: principal tag -> file id -> bytes so far."""
        self._writing_lock = threading.Lock()

    def hold(self, writer: UploadWriter) -> None:
        """Count `writer`'s bytes so far; raises `LimitExceededError` past its quota.

        The principal's uploads in progress here that began writing before this one
        count with it, so uploads side by side cannot pass the quota together before any
        of them is published (and counted); a later one never fails an earlier one, so of
        two that fit only alone, the first goes on and the second is refused, never both.
        """
        with self._writing_lock:
            mine = self._writing.setdefault(writer.principal.tag, {})
            mine[writer.file_id] = writer.size  # a new one goes last; the others keep their place
            held = writer.used_bytes
            for file_id, size in mine.items():  # in the order they began
                held += size
                if file_id == writer.file_id:
                    break
        if writer.quota_bytes is not None and held > writer.quota_bytes:
            raise LimitExceededError(
                f"upload `{writer.filename}`: this caller's uploads, with those in progress, "
                f"hold {held} bytes, over the `upload_quota_bytes` quota ({writer.quota_bytes})",
                limit="upload_quota_bytes",
                value=held,
                maximum=writer.quota_bytes,
            )

    def release(self, writer: UploadWriter) -> None:
        """Stop counting `writer` as in progress (published or dropped)."""
        with self._writing_lock:
            mine = self._writing.get(writer.principal.tag, {})
            mine.pop(writer.file_id, None)
            if not mine:
                self._writing.pop(writer.principal.tag, None)

    def _in_progress_here(self, principal: Principal) -> set[str]:
        with self._writing_lock:
            return set(self._writing.get(principal.tag, {}))

    def directory(self, principal: Principal, file_id: str) -> str:
        """Filesystem path of one upload's folder."""
        return f"{self._root}/{principal.tag}/{file_id}"

    def root_for(self, principal: Principal) -> str:
        """Where a principal's uploads lie, as a worker reads it (a path or a URI)."""
        return self._location(f"{self._root}/{principal.tag}")

    def _location(self, path: str) -> str:
        if isinstance(self.fs, pafs.LocalFileSystem):
            return path
        scheme = self.store.root_uri.split("://", 1)[0]
        return f"{scheme}://{path}"

    def writer(
        self,
        principal: Principal,
        filename: str,
        *,
        max_bytes: int,
        limit: str = "max_upload_bytes",
        quota_bytes: int | None = None,
        used_bytes: int = 0,
    ) -> UploadWriter:
        """A writer for one new upload of `principal` (`limit` names where `max_bytes` is from).

        With `quota_bytes`, each write counts every upload the principal has in progress
        in this process on top of `used_bytes` (see `hold`).
        """
        return UploadWriter(
            self, principal, filename or "upload", max_bytes, limit, quota_bytes, used_bytes
        )

    @staticmethod
    def ttl_s() -> float | None:
        """How long an upload lives (`SWARM_RAY_UPLOAD_TTL`, seconds), or None: until deleted."""
        value = os.environ.get("SWARM_RAY_UPLOAD_TTL", "").strip()
        return float(value) if value else None

    def _stored(self, principal: Principal, file_id: str) -> UploadInfo | None:
        return self._meta(self.directory(principal, file_id))

    def _meta(self, directory: str) -> UploadInfo | None:
        path = f"{directory}/{_META}"
        try:
            with self.fs.open_input_stream(path, compression=None) as f:
                return UploadInfo.model_validate_json(f.read())
        except (OSError, pa.ArrowException, ValueError):
            return None

    def info(self, principal: Principal, file_id: str) -> UploadInfo | None:
        """A live upload of `principal`'s, or None (another's, or expired, look the same)."""
        if not FILE_ID.match(file_id):
            return None
        info = self._stored(principal, file_id)
        return None if info is None or self._expired(info) else info

    def _expired(self, info: UploadInfo) -> bool:
        ttl = self.ttl_s()
        return ttl is not None and self.clock() - info.created_at > ttl

    def delete(self, principal: Principal, file_id: str) -> bool:
        """Remove one of `principal`'s uploads; False when there is none."""
        if not FILE_ID.match(file_id) or self._stored(principal, file_id) is None:
            return False
        with self.guard("delete"):
            self.fs.delete_dir(self.directory(principal, file_id))
        return True

    def usage(self, principal: Principal) -> tuple[int, int]:
        """Bytes and files of `principal`'s live uploads (what its quota counts).

        The bytes count its uploads in progress too (their `.partial` files, written in
        the last `PARTIAL_STALE_S`), but those of this process, which `hold` counts.
        """
        live = self.list(principal, limit=None)
        partial = self._partial_bytes(principal, skip=self._in_progress_here(principal))
        return sum(u.bytes for u in live) + partial, len(live)

    def _partial_bytes(self, principal: Principal, skip: Collection[str]) -> int:
        """Bytes of `principal`'s uploads in progress (other processes' or a crashed one's)."""
        owner_dir = f"{self._root}/{principal.tag}"
        with self.guard("list"):
            entries = self.fs.get_file_info(pafs.FileSelector(owner_dir, allow_not_found=True))
        folders = [
            e.path
            for e in entries
            if e.type == pafs.FileType.Directory
            and FILE_ID.match(e.base_name)
            and e.base_name not in skip
        ]
        if not folders:
            return 0
        with self.guard("list"):
            partials = self.fs.get_file_info([f"{folder}/.partial" for folder in folders])
        now = self.clock()
        return sum(
            p.size or 0
            for p in partials
            if p.type == pafs.FileType.File
            and (p.mtime is None or now - p.mtime.timestamp() < PARTIAL_STALE_S)
        )

    def resolve(self, principal: Principal, file_id: str, *, where: str) -> str:
        """The location of one of `principal`'s uploads; `InvalidInputError` if unknown."""
        info = self.info(principal, file_id)
        if info is None:
            raise InvalidInputError(
                f"`{where}`: no upload {file_id!r} of this caller's (`POST /v1/files` first)",
                field=where,
            )
        return self._location(f"{self.directory(principal, file_id)}/{info.filename}")

    def sweep(self, in_use: Collection[tuple[str, str]] = ()) -> int:
        """Remove every principal's expired uploads but those `in_use`; how many went.

        `in_use` holds (principal tag, file id) of the uploads open tasks name. Nothing
        expires without `SWARM_RAY_UPLOAD_TTL`.
        """
        if self.ttl_s() is None:
            return 0
        with self.guard("sweep"):
            owners = self.fs.get_file_info(pafs.FileSelector(self._root, allow_not_found=True))
        removed = 0
        for owner in owners:
            if owner.type != pafs.FileType.Directory:
                continue
            for entry, info in self._entries(owner.path):
                if self._expired(info) and (owner.base_name, info.id) not in in_use:
                    with contextlib.suppress(OSError, pa.ArrowException):
                        self.fs.delete_dir(entry)
                        removed += 1
        return removed

    def _entries(self, owner_dir: str) -> list[tuple[str, UploadInfo]]:
        """Every upload in one principal's folder (expired ones too), with its folder."""
        selector = pafs.FileSelector(owner_dir, allow_not_found=True)
        with self.guard("list"):
            entries = self.fs.get_file_info(selector)
        found = []
        for entry in entries:
            if entry.type != pafs.FileType.Directory or not FILE_ID.match(entry.base_name):
                continue
            info = self._meta(entry.path)
            if info is not None:
                found.append((entry.path, info))
        return found

    def list(self, principal: Principal, limit: int | None = 100) -> list[UploadInfo]:
        """The principal's live uploads, newest first (expired ones are left out)."""
        found = [
            info
            for _, info in self._entries(f"{self._root}/{principal.tag}")
            if not self._expired(info)
        ]
        found.sort(key=lambda i: i.created_at, reverse=True)
        return found if limit is None else found[:limit]

    @contextlib.contextmanager
    def guard(self, operation: str) -> Any:
        """Filesystem errors as `StateStoreError`."""
        try:
            yield
        except (OSError, pa.ArrowException) as exc:
            raise StateStoreError(
                f"uploads store failed to `{operation}`: {type(exc).__name__}: {exc}",
                operation=operation,
            ) from exc
