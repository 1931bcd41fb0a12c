"""The task journal's contract: durable snapshots and append-only logs, and result blobs.

The driver writes every transition and every scheduler event through a `StateStore`
before it acts on it, and offloads large outputs to a `Blobs` store, keeping references.
This module holds only the contract (no backend): SQLite and Redis implement it in
`swarm_ray.runtime`, and so can anything else that keeps its promises.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

from swarm_ray.core._errors import StateStoreError

__all__: list[str] = []

OFFLOAD_LIMIT_BYTES = 64 * 1024
"""Payloads above this size go to the result store rather than into a task record."""


def should_offload(payload_json: str, limit_bytes: int = OFFLOAD_LIMIT_BYTES) -> bool:
    """Return whether a payload is too large to keep inline in a task record.

    Args:
        payload_json: The serialised payload.
        limit_bytes: The largest payload, in UTF-8 bytes, that stays inline.
    """
    # A character is at least one byte: a long string needs no encoding to decide.
    return len(payload_json) > limit_bytes or len(payload_json.encode("utf-8")) > limit_bytes


class Blobs(Protocol):
    """Where large outputs go (`swarm_ray.runtime._results.ResultStore` is one)."""

    def put_bytes(self, key: str, data: bytes) -> str:
        """Store `data` under `key`; return its reference."""
        ...

    def get_json(self, ref: str) -> Any:
        """The JSON value a reference names."""
        ...

    @property
    def root_uri(self) -> str:
        """Where the store is (agents that record results open it by this)."""
        ...

    def ref(self, key: str) -> str:
        """The reference of `key` (whether or not anything was stored under it)."""
        ...

    def exists(self, ref: str) -> bool:
        """Whether something is stored under the reference."""
        ...


@dataclass(frozen=True, slots=True)
class StoredTask:
    """The latest snapshot of one task, as the store holds it."""

    task_id: str
    record_json: str
    """The caller's serialised record, returned unchanged."""
    is_open: bool
    """Whether the task still needs work; restart recovery reloads only open tasks."""
    schema_version: int
    updated_at: float
    """Unix time of the last `put_task`."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One entry of a task's append-only log."""

    seq: int
    """Position in the task's log: 1, 2, 3, ... without gaps."""
    kind: str
    payload_json: str
    dedupe_key: str | None
    at: float
    """Unix time of the append."""


class StateStore(abc.ABC):
    """Durable task snapshots plus a per-task append-only log.

    Every method is synchronous and thread-safe, because the orchestrator is a threaded
    Ray actor. `append` numbers entries 1, 2, 3, ... per task; given a `dedupe_key` that
    the task's log already holds, it writes nothing and returns that entry's number, so a
    restarted orchestrator that replays a result does not record it twice. A store is a
    context manager that closes itself; after `close` every call raises.

    Args:
        supported_schema_version: The newest record schema this process understands;
            `get_task` refuses newer records rather than misreading them.
    """

    backend: ClassVar[str]
    """Backend name used in error messages."""
    _backend_errors: ClassVar[tuple[type[BaseException], ...]]
    """Exceptions of the backend library that `_guard` turns into `StateStoreError`."""

    def __init__(self, location: str, *, supported_schema_version: int = 1) -> None:
        self.location = location
        """Where the data lives (a path, or a URL without password), for messages."""
        self.supported_schema_version = supported_schema_version
        self._closed = False

    @abc.abstractmethod
    def put_task(
        self,
        task_id: str,
        record_json: str,
        *,
        is_open: bool,
        schema_version: int,
        owner: str | None = None,
    ) -> None:
        """Insert or replace the latest snapshot of a task (`owner` is kept from the first)."""

    @abc.abstractmethod
    def quarantine(self, task_id: str) -> None:
        """Mark a task closed without touching its snapshot (one that cannot be loaded)."""

    def get_task(self, task_id: str) -> StoredTask | None:
        """Return a task's snapshot, or None when the store has no such task.

        Raises:
            StateStoreError: The backend failed, or the record's schema version is newer
                than `supported_schema_version`.
        """
        stored = self._get_task(task_id)
        if stored is not None and stored.schema_version > self.supported_schema_version:
            raise StateStoreError(
                f"Task {task_id!r} was stored with `schema_version` {stored.schema_version!r},"
                f" newer than the supported {self.supported_schema_version!r};"
                " upgrade swarm-ray to read it",
                task_id=task_id,
                schema_version=stored.schema_version,
                supported_schema_version=self.supported_schema_version,
            )
        return stored

    @abc.abstractmethod
    def _get_task(self, task_id: str) -> StoredTask | None:
        """Read a snapshot without the schema check."""

    @abc.abstractmethod
    def list_tasks(
        self, *, open_only: bool = False, newest: int | None = None, owner: str | None = None
    ) -> list[str]:
        """Return task ids, oldest first (by first insertion).

        Only the last `newest` when given, and only those of `owner` when given.
        """

    @abc.abstractmethod
    def append(
        self, task_id: str, kind: str, payload_json: str, *, dedupe_key: str | None = None
    ) -> int:
        """Append to a task's log and return the entry's sequence number (see class)."""

    @abc.abstractmethod
    def read_log(self, task_id: str, *, after_seq: int = 0) -> list[LogEntry]:
        """Return the task's log entries with `seq > after_seq`, in order."""

    @abc.abstractmethod
    def delete_task(self, task_id: str) -> None:
        """Delete a task's snapshot and log; a later append starts again at 1."""

    def close(self) -> None:
        """Release the connection. Idempotent."""
        if not self._closed:
            self._closed = True
            self._close()

    @abc.abstractmethod
    def _close(self) -> None:
        """Release the backend's resources."""

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Group the writes of one synchronous unit of work (never across an `await`).

        A backend may commit them together at the end, which is cheaper than one commit
        each; what was written is committed even when the unit raises, as it would have
        been write by write. The default commits each write as it comes.
        """
        yield

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location!r})"

    @contextlib.contextmanager
    def _guard(self, operation: str, task_id: str | None = None) -> Iterator[None]:
        """Turn the backend's errors into `StateStoreError`: the one place that does."""
        store = f"`{self.backend}` state store at {self.location!r}"
        where = "" if task_id is None else f" for task {task_id!r}"
        details = {"backend": self.backend, "operation": operation, "task_id": task_id}
        if self._closed:
            raise StateStoreError(f"{store} is closed; cannot `{operation}`{where}", **details)
        try:
            yield
        except self._backend_errors as exc:
            problem = f"{type(exc).__name__}: {exc}"
            raise StateStoreError(
                f"{store} failed to `{operation}`{where}: {problem}", **details
            ) from exc
