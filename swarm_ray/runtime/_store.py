"""The state store: durable task snapshots and append-only task logs.

The orchestrator writes every transition and every accepted sub-task result here
*before* it acts on them, so that after its process dies a new one can reload the open
tasks and dispatch only what is not done. The store keeps opaque JSON text: the caller
serialises its own records and stamps them with a schema version, which keeps this module
free of any model and lets a reader refuse records written by a newer swarm-ray. Older
ones are read in today's format: `load_task` runs the record migrations of
`_migrations` (see `core.durability._journal`).

Two backends share one contract: `SQLiteStateStore`, the default (embedded, one file in
WAL mode, nothing to run), and `RedisStateStore`, for clusters where the orchestrator may
restart on another node. `open_state_store` picks one from a URL. Every backend failure
surfaces as `StateStoreError`, translated in one place (`StateStore._guard`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from swarm_ray.core.durability._journal import LogEntry, StateStore, StoredTask
from swarm_ray.core.model._errors import InvalidSpecError, StateStoreError
from swarm_ray.core.model._record import SCHEMA_VERSION
from swarm_ray.runtime._config import state_dir as default_state_dir
from swarm_ray.runtime._migrations import MIGRATIONS

__all__: list[str] = []

STORE_LAYOUT_VERSION = 2
"""Version of the SQLite file's own tables (not of the records they hold); see
`_LAYOUT_STEPS` for what each version changed."""

_SQLITE_TABLES = (
    "CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY AUTOINCREMENT,"
    " task_id TEXT NOT NULL UNIQUE, record_json TEXT NOT NULL, is_open INTEGER NOT NULL,"
    " schema_version INTEGER NOT NULL, updated_at REAL NOT NULL, owner TEXT)",
    "CREATE INDEX IF NOT EXISTS tasks_open ON tasks (is_open, id)",
    "CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, id)",
    "CREATE TABLE IF NOT EXISTS log (task_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " kind TEXT NOT NULL, payload_json TEXT NOT NULL, dedupe_key TEXT, at REAL NOT NULL,"
    " PRIMARY KEY (task_id, seq))",
    "CREATE UNIQUE INDEX IF NOT EXISTS log_dedupe ON log (task_id, dedupe_key)"
    " WHERE dedupe_key IS NOT NULL",
)
"""A new file's tables, at `STORE_LAYOUT_VERSION`."""
_SEQ_CACHE = 4096
"""Tasks whose next log seq a SQLite store remembers (the open ones, in practice)."""
_SQLITE_LAYOUT = "SELECT value FROM meta WHERE key = 'layout_version'"


def _layout_1_to_2(conn: sqlite3.Connection) -> None:
    """Tasks have owners: the `owner` column and the index that lists a principal's tasks.

    Layout 1 files written after owners came already have both (they used to be added at
    every open), so the column is added only where it is missing.
    """
    columns = {row[1] for row in conn.execute("PRAGMA table_info(tasks)")}
    if "owner" not in columns:
        conn.execute("ALTER TABLE tasks ADD COLUMN owner TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS tasks_owner ON tasks (owner, id)")


_LAYOUT_STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _layout_1_to_2}
"""From layout N to N + 1, one function a version; run in order when a file is opened."""


class SQLiteStateStore(StateStore):
    """State in one SQLite file: the default, since it needs no server.

    WAL mode lets readers run while the orchestrator writes, and `synchronous=NORMAL`
    keeps every committed write through a crash of the process (not of the machine),
    which is the failure the orchestrator recovers from. One connection serves all
    threads under a lock; other processes may open the same file. A file of an older
    layout is brought up to today's when it is opened, one step a version
    (`_LAYOUT_STEPS`), and one of a newer layout is refused.

    Args:
        path: The database file; parent directories are created.
        supported_schema_version: See `StateStore`.
        busy_timeout_s: How long to wait for another process's write lock.
    """

    backend = "sqlite"
    _backend_errors = (sqlite3.Error, OSError)

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        supported_schema_version: int = SCHEMA_VERSION,
        busy_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(
            os.fspath(path),
            supported_schema_version=supported_schema_version,
            migrations=MIGRATIONS,
        )
        self._lock = threading.Lock()
        self._batching = False
        self._next_seq: dict[str, int] = {}
        """Next log seq of tasks whose last entry this connection wrote (see `append`)."""
        with self._guard("open"):
            if self.location != ":memory:":
                Path(self.location).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.location, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                if self._layout() != STORE_LAYOUT_VERSION:
                    self._lay_out()
            except BaseException:
                self._conn.close()
                raise

    def _layout(self) -> int | None:
        """The file's `layout_version`; None for a new file (no tables yet)."""
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        row = self._conn.execute(_SQLITE_LAYOUT).fetchone()
        return None if row is None else int(row[0])

    def _lay_out(self) -> None:
        """Create a new file's tables, or bring an older file's up to today's layout.

        One transaction holding the write lock, so of two processes opening one old file,
        the second finds it done. A file of a newer layout is refused, by name.
        """
        with self._transaction():
            found = self._layout()
            if found is None:
                for statement in _SQLITE_TABLES:
                    self._conn.execute(statement)
                found = STORE_LAYOUT_VERSION
                self._conn.execute("INSERT INTO meta VALUES ('layout_version', ?)", (str(found),))
            if found > STORE_LAYOUT_VERSION:
                raise StateStoreError(
                    f"State file {self.location!r} has `layout_version` {found!r},"
                    f" newer than the supported {STORE_LAYOUT_VERSION!r}; upgrade swarm-ray",
                    backend=self.backend,
                    operation="open",
                )
            for version in range(found, STORE_LAYOUT_VERSION):
                _LAYOUT_STEPS[version](self._conn)
            self._conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'layout_version'",
                (str(STORE_LAYOUT_VERSION),),
            )

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        if self._batching:
            yield
            return
        self._batching = True
        try:
            yield
        finally:
            self._batching = False
            with self._guard("commit"), self._lock:
                if self._conn.in_transaction:
                    self._conn.execute("COMMIT")

    def _write(self) -> None:
        """Open the batch's transaction at its first write (call holding the lock)."""
        if self._batching and not self._conn.in_transaction:
            self._conn.execute("BEGIN IMMEDIATE")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        """Run a write transaction that takes the file's write lock up front."""
        if self._batching:  # the batch's transaction holds the lock and commits
            self._write()
            yield
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise

    def put_task(
        self,
        task_id: str,
        record_json: str,
        *,
        is_open: bool,
        schema_version: int,
        owner: str | None = None,
    ) -> None:
        with self._guard("put_task", task_id), self._lock:
            self._write()
            self._conn.execute(
                "INSERT INTO tasks (task_id, record_json, is_open, schema_version, updated_at,"
                " owner) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (task_id) DO UPDATE SET"
                " record_json = excluded.record_json, is_open = excluded.is_open,"
                " schema_version = excluded.schema_version, updated_at = excluded.updated_at",
                (task_id, record_json, int(is_open), schema_version, time.time(), owner),
            )

    def quarantine(self, task_id: str) -> None:
        with self._guard("quarantine", task_id), self._lock:
            self._write()
            self._conn.execute("UPDATE tasks SET is_open = 0 WHERE task_id = ?", (task_id,))

    def _get_task(self, task_id: str) -> StoredTask | None:
        with self._guard("get_task", task_id), self._lock:
            row = self._conn.execute(
                "SELECT record_json, is_open, schema_version, updated_at FROM tasks"
                " WHERE task_id = ?",
                (task_id,),
            ).fetchone()
        return None if row is None else StoredTask(task_id, row[0], bool(row[1]), row[2], row[3])

    def list_tasks(
        self, *, open_only: bool = False, newest: int | None = None, owner: str | None = None
    ) -> list[str]:
        conditions: list[str] = []
        args: list[str | int] = []
        if open_only:
            conditions.append("is_open = 1")
        if owner is not None:
            conditions.append("owner = ?")
            args.append(owner)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        # The newest by descending id through an index: a listing reads `newest` rows,
        # however many tasks the store holds.
        limit = ""
        if newest is not None:
            limit = " LIMIT ?"
            args.append(max(0, newest))
        query = f"SELECT task_id FROM tasks{where} ORDER BY id DESC{limit}"
        with self._guard("list_tasks"), self._lock:
            rows = self._conn.execute(query, args).fetchall()
        return [row[0] for row in reversed(rows)]

    def append(
        self, task_id: str, kind: str, payload_json: str, *, dedupe_key: str | None = None
    ) -> int:
        with self._guard("append", task_id), self._lock:
            seq = self._next_seq.get(task_id)
            if seq is not None:
                # Fast path: this connection wrote the task's last entry, so one
                # statement does. A clash (a duplicate dedupe key, or another process
                # appending) raises, and the full path below sorts it out.
                self._write()
                try:
                    self._conn.execute(
                        "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
                        (task_id, seq, kind, payload_json, dedupe_key, time.time()),
                    )
                except sqlite3.IntegrityError:
                    pass
                else:
                    self._next_seq[task_id] = seq + 1
                    return seq
            return self._append_checked(task_id, kind, payload_json, dedupe_key)

    def _append_checked(
        self, task_id: str, kind: str, payload_json: str, dedupe_key: str | None
    ) -> int:
        """Append in a transaction that looks for the dedupe key and the last seq first."""
        self._next_seq.pop(task_id, None)
        with self._transaction():
            if dedupe_key is not None:
                found = self._conn.execute(
                    "SELECT seq FROM log WHERE task_id = ? AND dedupe_key = ?",
                    (task_id, dedupe_key),
                ).fetchone()
                if found is not None:
                    return int(found[0])
            (seq,) = self._conn.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM log WHERE task_id = ?", (task_id,)
            ).fetchone()
            self._conn.execute(
                "INSERT INTO log VALUES (?, ?, ?, ?, ?, ?)",
                (task_id, seq, kind, payload_json, dedupe_key, time.time()),
            )
        if len(self._next_seq) >= _SEQ_CACHE:
            del self._next_seq[next(iter(self._next_seq))]
        self._next_seq[task_id] = int(seq) + 1
        return int(seq)

    def read_log(self, task_id: str, *, after_seq: int = 0) -> list[LogEntry]:
        with self._guard("read_log", task_id), self._lock:
            rows = self._conn.execute(
                "SELECT seq, kind, payload_json, dedupe_key, at FROM log"
                " WHERE task_id = ? AND seq > ? ORDER BY seq",
                (task_id, after_seq),
            ).fetchall()
        return [LogEntry(*row) for row in rows]

    def delete_task(self, task_id: str) -> None:
        with self._guard("delete_task", task_id), self._lock, self._transaction():
            self._next_seq.pop(task_id, None)
            self._conn.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
            self._conn.execute("DELETE FROM log WHERE task_id = ?", (task_id,))

    def _close(self) -> None:
        with self._lock:
            self._conn.close()


def open_state_store(
    url: str | None = None,
    *,
    state_dir: str | os.PathLike[str] | None = None,
    supported_schema_version: int = SCHEMA_VERSION,
    **options: Any,
) -> StateStore:
    """Open the state store a URL names: the one entry point for configuration.

    Args:
        url: None for `state.db` under `state_dir`; `sqlite:///abs/path.db` or a plain
            path for SQLite; `redis://host:port/db` (or `rediss://`, `unix://`) for Redis.
        state_dir: Directory for the default SQLite file; default `default_state_dir()`.
        supported_schema_version: See `StateStore`.
        **options: Passed to the backend's constructor (for example `namespace`).

    Raises:
        InvalidSpecError: The URL names no known backend.
        StateStoreError: The backend could not be opened.
    """
    options["supported_schema_version"] = supported_schema_version
    if url is None:
        base = Path(state_dir).expanduser() if state_dir is not None else default_state_dir()
        return SQLiteStateStore(base / "state.db", **options)
    parts = urlsplit(url)
    scheme = parts.scheme.lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        from swarm_ray.runtime._store_redis import RedisStateStore

        return RedisStateStore(url, **options)
    if scheme == "" or (scheme == "sqlite" and not parts.netloc and parts.path):
        path = Path(url).expanduser() if scheme == "" else Path(unquote(parts.path))
        return SQLiteStateStore(path, **options)
    raise InvalidSpecError(
        f"`url` {url!r} names no state store; use `sqlite:///abs/path.db`, a path,"
        " or `redis://host:port/db`",
        url=url,
    )
