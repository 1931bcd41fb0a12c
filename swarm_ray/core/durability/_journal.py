"""The task journal's contract: durable snapshots and append-only logs, and result blobs.

The driver writes every transition and every scheduler event through a `StateStore`
before it acts on it, and offloads large outputs to a `Blobs` store, keeping references.
This module holds only the contract (no backend): SQLite and Redis implement it in
`swarm_ray.runtime`, and so can anything else that keeps its promises.

Record versions. Every snapshot is stored with the record format's version it was
written in, and a log goes on in the version of its snapshot. A task stored by an older
swarm-ray is read in today's format (`StateStore.load_task`): each part written in version
N goes through the migration from N to N + 1, then the next, up to today's (the
migrations are given by the concrete store; they are pure JSON transforms). Nothing is
rewritten. When today's code goes on writing such a task, it first appends a version
mark (`mark_version`): the entries before it stay in the old version and are migrated
at every read, those after it are in today's. A part newer than the code is refused.
"""

from __future__ import annotations

import abc
import contextlib
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

from swarm_ray.core.model._errors import StateStoreError

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
    """Position in the task's log: 1, 2, 3, ... without gaps (0: made by a migration)."""
    kind: str
    payload_json: str
    dedupe_key: str | None
    at: float
    """Unix time of the append."""


VERSION_MARK = "version"
"""Kind of a log entry that says the entries before it were written in record version
`from` and those after it in `to` (payload `{"from": N, "to": M}`; see `mark_version`)."""


@dataclass(frozen=True, slots=True)
class TaskParts:
    """A stored task as a migration step reads and returns it, each part with its version.

    A step from version N changes the parts in version N into version N + 1's format and
    leaves the others alone; it may read them all (a log begun in one version goes on in
    the next). It may add entries, in version N. The versions themselves are moved on by
    `StateStore.load_task`, not by the step.
    """

    snapshot: dict[str, Any]
    """The snapshot, parsed."""
    snapshot_version: int
    entries: tuple[tuple[int, LogEntry], ...]
    """The log in order, version marks left out: (version it was written in, entry)."""

    def moved_on(self, version: int) -> TaskParts:
        """These parts with every one in `version` said to be in `version + 1`."""

        def on(v: int) -> int:
            return v + 1 if v == version else v

        return TaskParts(
            self.snapshot, on(self.snapshot_version), tuple((on(v), e) for v, e in self.entries)
        )


Migration = Callable[[TaskParts], TaskParts]
"""One step of the record format, from version N to N + 1 (see `TaskParts`)."""


@dataclass(frozen=True, slots=True)
class LoadedTask:
    """A stored task, snapshot and log together, in today's record format."""

    task_id: str
    record_json: str
    """The snapshot, migrated."""
    is_open: bool
    log: list[LogEntry]
    """The log, migrated, version marks left out."""
    snapshot_version: int
    """The version the snapshot was stored in (older than today's: it was migrated)."""
    log_version: int
    """The version the log's last entries were written in: a writer of a newer one marks
    the log (`StateStore.mark_version`) before it appends."""


class StateStore(abc.ABC):
    """Durable task snapshots plus a per-task append-only log.

    Every method is synchronous and thread-safe, because the orchestrator is a threaded
    Ray actor. `append` numbers entries 1, 2, 3, ... per task; given a `dedupe_key` that
    the task's log already holds, it writes nothing and returns that entry's number, so a
    restarted orchestrator that replays a result does not record it twice. A store is a
    context manager that closes itself; after `close` every call raises.

    Args:
        supported_schema_version: The newest record schema this process understands;
            `get_task` and `load_task` refuse newer records rather than misreading them.
        migrations: Version N -> the step from record version N to N + 1 (module
            docstring), up to `supported_schema_version`.
    """

    backend: ClassVar[str]
    """Backend name used in error messages."""
    _backend_errors: ClassVar[tuple[type[BaseException], ...]]
    """Exceptions of the backend library that `_guard` turns into `StateStoreError`."""

    def __init__(
        self,
        location: str,
        *,
        supported_schema_version: int,
        migrations: Mapping[int, Migration],
    ) -> None:
        self.location = location
        """Where the data lives (a path, or a URL without password), for messages."""
        self.supported_schema_version = supported_schema_version
        self._migrations = migrations
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
        if stored is not None:
            self._check_version(task_id, stored.schema_version)
        return stored

    def load_task(self, task_id: str) -> LoadedTask | None:
        """A task's snapshot and log together, in today's format; None when there is none.

        Parts stored in an older record version are migrated in memory, a step a version
        (module docstring); a task stored in today's is returned as it is.

        Raises:
            StateStoreError: The backend failed, a part is newer than
                `supported_schema_version`, or no migration reads its version.
        """
        stored = self.get_task(task_id)
        if stored is None:
            return None
        log = self.read_log(task_id)
        today = self.supported_schema_version
        marks = [e for e in log if e.kind == VERSION_MARK]
        if stored.schema_version == today and not marks:
            return LoadedTask(task_id, stored.record_json, stored.is_open, log, today, today)
        parts, log_version = _versioned(stored, log)
        for version in {log_version, *(v for v, _ in parts.entries)}:
            self._check_version(task_id, version)
        oldest = min([parts.snapshot_version, *(v for v, _ in parts.entries)])
        for version in range(oldest, today):
            step = self._migrations.get(version)
            if step is None:
                raise StateStoreError(
                    f"Task {task_id!r} holds records of `schema_version` {version!r}, which"
                    f" this swarm-ray cannot migrate to {today!r}",
                    task_id=task_id,
                    schema_version=version,
                    supported_schema_version=today,
                )
            parts = step(parts).moved_on(version)
        return LoadedTask(
            task_id,
            json.dumps(parts.snapshot),
            stored.is_open,
            [entry for _, entry in parts.entries],
            stored.schema_version,
            log_version,
        )

    def mark_version(self, task_id: str, written_in: int) -> None:
        """Mark the task's log: what follows is in `supported_schema_version`.

        What came before is in `written_in` (`LoadedTask.log_version`). Once a version.
        """
        to = self.supported_schema_version
        payload = json.dumps({"from": written_in, "to": to})
        self.append(task_id, VERSION_MARK, payload, dedupe_key=f"{VERSION_MARK}:{to}")

    def _check_version(self, task_id: str, version: int) -> None:
        """Refuse a record newer than this process understands, by name."""
        if version > self.supported_schema_version:
            raise StateStoreError(
                f"Task {task_id!r} was stored with `schema_version` {version!r},"
                f" newer than the supported {self.supported_schema_version!r};"
                " upgrade swarm-ray to read it",
                task_id=task_id,
                schema_version=version,
                supported_schema_version=self.supported_schema_version,
            )

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

    def _guard(self, operation: str, task_id: str | None = None) -> _Guard:
        """Turn the backend's errors into `StateStoreError`: the one place that does."""
        return _Guard(self, operation, task_id)


class _Guard:
    """`StateStore._guard`: a plain context manager, since every store call enters one.

    The error's words are made only when there is an error (a generator-based manager
    and its eager message cost about a tenth of a log append).
    """

    __slots__ = ("_operation", "_store", "_task_id")

    def __init__(self, store: StateStore, operation: str, task_id: str | None) -> None:
        self._store = store
        self._operation = operation
        self._task_id = task_id

    def __enter__(self) -> None:
        if self._store._closed:
            raise self._error("is closed; cannot", "")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, _tb: object
    ) -> None:
        if exc is not None and isinstance(exc, self._store._backend_errors):
            raise self._error("failed to", f": {type(exc).__name__}: {exc}") from exc

    def _error(self, verb: str, problem: str) -> StateStoreError:
        store, operation, task_id = self._store, self._operation, self._task_id
        where = "" if task_id is None else f" for task {task_id!r}"
        return StateStoreError(
            f"`{store.backend}` state store at {store.location!r} {verb} `{operation}`"
            f"{where}{problem}",
            backend=store.backend,
            operation=operation,
            task_id=task_id,
        )


def _versioned(stored: StoredTask, log: list[LogEntry]) -> tuple[TaskParts, int]:
    """A task's parts, each with the version it was written in, and its log's last version.

    Entries before the first mark are in its `from`; after a mark, in its `to`. A log
    without marks is in its snapshot's version.
    """
    marks = [json.loads(e.payload_json) for e in log if e.kind == VERSION_MARK]
    version = int(marks[0]["from"]) if marks else stored.schema_version
    entries: list[tuple[int, LogEntry]] = []
    for entry in log:
        if entry.kind == VERSION_MARK:
            version = int(json.loads(entry.payload_json)["to"])
        else:
            entries.append((version, entry))
    parts = TaskParts(json.loads(stored.record_json), stored.schema_version, tuple(entries))
    return parts, version
