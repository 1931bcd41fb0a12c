"""The result store: where outputs live, so that task records hold references.

A sub-task's output can be megabytes (a parsed PDF, a facts table); copying it into every
snapshot of its task would make each state write as large as the task's whole history.
So an accepted output goes here first, and the state store records only the reference
this module returns. The root is a local directory by default and any `pyarrow.fs` URI
(`s3://bucket/prefix`, `gs://...`) on a cluster, where every node must reach the same
outputs.

A reference is the root URI plus the key (`file:///home/me/.swarm-ray/results/t1/s2.json`),
so it names its place on its own, readable in logs and by other tools.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]

from swarm_ray.core.model._errors import InvalidSpecError, StateStoreError
from swarm_ray.runtime._config import state_dir as default_state_dir

__all__: list[str] = []


_OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})
"""Filesystems whose uploads appear whole or not at all, so they need no rename."""


class ResultStore:
    """Outputs stored under one root, by key, and read back by reference.

    Writes are atomic: on a local or mounted filesystem the bytes go to a hidden temporary
    file beside the target, which is then renamed over it, so a reader (or an orchestrator
    restarting after a crash) sees the whole output or none of it; object stores publish
    an upload only when it completes, so there the store writes in place. A store holds
    no open handles and pickles, so it can be sent to Ray workers.

    Args:
        root_uri: A local path or any URI `pyarrow.fs.FileSystem.from_uri` accepts;
            defaults to `results/` under `default_state_dir()`.

    Raises:
        InvalidSpecError: `root_uri` is not a URI pyarrow can open.
    """

    def __init__(self, root_uri: str | None = None) -> None:
        if root_uri is None:
            root_uri = str(default_state_dir() / "results")
        if "://" in root_uri:
            try:
                fs, root = pafs.FileSystem.from_uri(root_uri)
            except (pa.ArrowException, ValueError, OSError) as exc:
                raise InvalidSpecError(
                    f"`root_uri` {root_uri!r} is not a filesystem URI pyarrow can open: {exc}",
                    root_uri=root_uri,
                ) from exc
        else:
            fs, root = pafs.LocalFileSystem(), str(Path(root_uri).expanduser().resolve())
        self._fs: Any = fs
        self._root: str = str(root).rstrip("/")
        if isinstance(fs, pafs.LocalFileSystem):
            self.root_uri = Path(self._root or "/").as_uri().rstrip("/")
        else:
            parts = urlsplit(root_uri)
            self.root_uri = f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")
        self._in_place = fs.type_name in _OBJECT_STORES

    def __repr__(self) -> str:
        return f"ResultStore({self.root_uri!r})"

    @property
    def filesystem(self) -> Any:
        """The `pyarrow.fs` filesystem the store writes to (uploads stream through it)."""
        return self._fs

    @property
    def root(self) -> str:
        """The root's path on `filesystem`."""
        return self._root

    def put_bytes(self, key: str, data: bytes) -> str:
        """Store `data` under `key`, replacing what was there, and return its reference.

        Raises:
            ValueError: `key` is empty, absolute, or has `.`, `..` or empty parts.
            StateStoreError: The write failed.
        """
        ref = self.ref(key)
        path = f"{self._root}/{key}"
        with self._guard("write", ref):
            if self._in_place:
                self._write(path, data)
                return ref
            parent, _, name = path.rpartition("/")
            self._fs.create_dir(parent, recursive=True)
            temp = f"{parent}/.{name}.tmp-{uuid.uuid4().hex}"
            try:
                self._write(temp, data)
                self._fs.move(temp, path)
            except BaseException:
                with contextlib.suppress(OSError, pa.ArrowException):
                    self._fs.delete_file(temp)
                raise
        return ref

    def ref(self, key: str) -> str:
        """The reference `put_bytes(key, ...)` returns (whether or not it was written).

        Raises:
            ValueError: `key` is not a valid key (see `put_bytes`).
        """
        _check_key(key)
        return f"{self.root_uri}/{quote(key, safe='/')}"

    def get_bytes(self, ref: str) -> bytes:
        """Return the bytes a reference names.

        Raises:
            StateStoreError: The reference is not under this store's root, names nothing,
                or the read failed.
        """
        path = self._path(ref)
        with self._guard("read", ref), self._fs.open_input_stream(path, compression=None) as f:
            data: bytes = f.read()
        return data

    def put_json(self, key: str, obj: Any) -> str:
        """Store `obj` as compact UTF-8 JSON under `key` and return its reference.

        Raises:
            TypeError: `obj` is not JSON-serialisable.
            ValueError: `key` is not a valid key (see `put_bytes`).
            StateStoreError: The write failed.
        """
        text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        return self.put_bytes(key, text.encode("utf-8"))

    def get_json(self, ref: str) -> Any:
        """Return the JSON value a reference names.

        Raises:
            StateStoreError: As `get_bytes`, or the stored bytes are not JSON.
        """
        data = self.get_bytes(ref)
        try:
            return json.loads(data)
        except ValueError as exc:
            raise StateStoreError(
                f"Result {ref!r} is not valid JSON: {exc}", operation="read", ref=ref
            ) from exc

    def exists(self, ref: str) -> bool:
        """Return whether a reference names a stored result."""
        path = self._path(ref)
        with self._guard("stat", ref):
            return bool(self._fs.get_file_info(path).type == pafs.FileType.File)

    def delete(self, ref: str) -> None:
        """Delete a stored result; deleting one that is gone is not an error.

        Deleting is idempotent because cleanup may run twice: once before a crash and
        again after the restart.
        """
        path = self._path(ref)
        with contextlib.suppress(FileNotFoundError), self._guard("delete", ref):
            self._fs.delete_file(path)

    def _write(self, path: str, data: bytes) -> None:
        # compression=None: pyarrow would otherwise compress by file extension (`.gz`).
        with self._fs.open_output_stream(path, compression=None) as out:
            out.write(data)

    def _path(self, ref: str) -> str:
        """Map a reference to its filesystem path, refusing ones outside the root."""
        prefix = f"{self.root_uri}/"
        key = unquote(ref[len(prefix) :]) if ref.startswith(prefix) else ""
        try:
            _check_key(key)
        except ValueError as exc:
            raise StateStoreError(
                f"Result reference {ref!r} is not under this store's root {self.root_uri!r}",
                operation="resolve",
                ref=ref,
            ) from exc
        return f"{self._root}/{key}"

    @contextlib.contextmanager
    def _guard(self, operation: str, ref: str) -> Iterator[None]:
        """Turn filesystem errors into `StateStoreError`: the one place that does.

        A missing file stays a `FileNotFoundError` inside the store until it leaves here,
        so `delete` can tell "already gone" from a failure.
        """
        try:
            yield
        except (OSError, pa.ArrowException) as exc:
            missing = isinstance(exc, FileNotFoundError)
            if missing and operation == "delete":
                raise
            if missing and operation == "read":
                problem = "no such result"
            else:
                problem = f"{type(exc).__name__}: {exc}"
            raise StateStoreError(
                f"Result store failed to `{operation}` {ref!r}: {problem}",
                operation=operation,
                ref=ref,
            ) from exc


def _check_key(key: str) -> None:
    """Refuse keys that could escape the root or that name no single file."""
    parts = key.split("/")
    if (
        not key
        or key.startswith("/")
        or "\\" in key
        or any(part in ("", ".", "..") for part in parts)
        or any(ord(char) < 32 for char in key)
    ):
        raise ValueError(
            f"`key` {key!r} must be a relative path of non-empty parts, without `.`, `..`,"
            " backslashes or control characters"
        )
