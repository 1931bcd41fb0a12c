"""The open tasks of each owner in one place, so the open-task limit holds across shards.

One orchestrator counts its owner's open tasks in its own memory (`_owners`). Shards
cannot: two of them admitting the same principal's 100th task at once would both see
99. So sharded orchestrators take a seat for each new task of an owner in one SQLite
file that every shard opens (`owners.db` in the state directory; shards live on the
head node, one filesystem), in one `BEGIN IMMEDIATE` transaction: count the owner's
seats, refuse past the limit, or take one. A task gives its seat back when it ends.

A shard that restarts rewrites its own seats from the tasks it reloads (`reseat`), so a
seat a crash left behind (a task ended, its seat not given back) does not last.

Each owner's spend per day (`_spend`) is kept in the same place, one line per task set
as its results arrive, so a daily budget holds across shards too.

Shards whose store is Redis keep their seats and spend there instead (`_ledger_redis`),
so that shards on several nodes share them (`open_ledger` chooses).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from swarm_ray.core.model._errors import StateStoreError
from swarm_ray.core.model._subtask import TokenUsage

__all__: list[str] = []

_SCHEMA = """
CREATE TABLE IF NOT EXISTS seats (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    shard INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS seats_owner ON seats (owner);
CREATE TABLE IF NOT EXISTS spend (
    task_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    day TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    calls INTEGER NOT NULL,
    seconds REAL NOT NULL,
    cost REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS spend_owner_day ON spend (owner, day);
"""
_KEEP_DAYS = 2
"""Days of spend kept before the current one (a day's budget reads only its own)."""


class Ledger(Protocol):
    """What `_owners` asks of a ledger of open tasks, in SQLite or Redis."""

    def take(self, owner: str, task_id: str, limit: int) -> int | None: ...
    def give_back(self, task_id: str) -> None: ...
    def reseat(self, open_tasks: Iterable[tuple[str, str]]) -> None: ...
    def held(self, owner: str) -> int: ...
    def post_spend(self, owner: str, day: str, task_id: str, usage: TokenUsage) -> None: ...
    def spent(self, owner: str, day: str) -> TokenUsage: ...


def open_ledger(state_url: str | None, state_dir: Path, shard: int) -> Ledger:
    """The ledger every shard of a swarm shares: in its Redis, else in `owners.db`."""
    scheme = urlsplit(state_url).scheme.lower() if state_url and "://" in state_url else ""
    if state_url is not None and scheme in ("redis", "rediss", "unix"):
        from swarm_ray.runtime._ledger_redis import RedisOpenTaskLedger

        return RedisOpenTaskLedger(state_url, shard)
    return OpenTaskLedger(state_dir / "owners.db", shard)


class OpenTaskLedger:
    """Seats of open tasks by owner, shared by every shard (see the module docstring)."""

    def __init__(self, path: Path, shard: int) -> None:
        self.path = path
        self.shard = shard
        self._lock = threading.Lock()
        self._swept = ""
        try:
            self._conn = sqlite3.connect(
                path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise StateStoreError(
                f"the ledger of open tasks `{path}` cannot be opened: {exc}"
            ) from exc

    def take(self, owner: str, task_id: str, limit: int) -> int | None:
        """Take a seat for `task_id`: None once it has one, else the owner's open count.

        A task that already holds a seat keeps it (None).
        """
        with self._lock, self._transaction():
            if self._conn.execute("SELECT 1 FROM seats WHERE task_id = ?", (task_id,)).fetchone():
                return None
            (held,) = self._conn.execute(
                "SELECT COUNT(*) FROM seats WHERE owner = ?", (owner,)
            ).fetchone()
            if held >= limit:
                return int(held)
            self._conn.execute(
                "INSERT INTO seats (task_id, owner, shard) VALUES (?, ?, ?)",
                (task_id, owner, self.shard),
            )
            return None

    def give_back(self, task_id: str) -> None:
        """Give an ended (or never created) task's seat back; none held is fine."""
        with self._lock, self._transaction():
            self._conn.execute("DELETE FROM seats WHERE task_id = ?", (task_id,))

    def reseat(self, open_tasks: Iterable[tuple[str, str]]) -> None:
        """This shard's seats become exactly `open_tasks` (owner, task id): on recovery."""
        rows = [(task_id, owner, self.shard) for owner, task_id in open_tasks]
        with self._lock, self._transaction():
            self._conn.execute("DELETE FROM seats WHERE shard = ?", (self.shard,))
            self._conn.executemany("INSERT OR REPLACE INTO seats VALUES (?, ?, ?)", rows)

    def held(self, owner: str) -> int:
        """How many seats `owner` holds across every shard."""
        with self._lock:
            (held,) = self._conn.execute(
                "SELECT COUNT(*) FROM seats WHERE owner = ?", (owner,)
            ).fetchone()
        return int(held)

    def post_spend(self, owner: str, day: str, task_id: str, usage: TokenUsage) -> None:
        """Set `task_id`'s line of spend, on `day` (`_spend.SpendBook`)."""
        row = (task_id, owner, day, usage.prompt_tokens, usage.completion_tokens,
               usage.calls, usage.seconds, usage.cost)  # fmt: skip
        with self._lock, self._transaction():
            self._conn.execute("INSERT OR REPLACE INTO spend VALUES (?, ?, ?, ?, ?, ?, ?, ?)", row)
            if day != self._swept:  # once a day: lines of days no budget reads again
                self._conn.execute("DELETE FROM spend WHERE day < ?", (_days_before(day),))
                self._swept = day

    def spent(self, owner: str, day: str) -> TokenUsage:
        """The sum of `owner`'s lines on `day`, over every shard."""
        with self._lock:
            try:
                prompt, completion, calls, seconds, cost = self._conn.execute(
                    "SELECT COALESCE(SUM(prompt_tokens), 0), COALESCE(SUM(completion_tokens), 0),"
                    " COALESCE(SUM(calls), 0), COALESCE(SUM(seconds), 0), COALESCE(SUM(cost), 0)"
                    " FROM spend WHERE owner = ? AND day = ?",
                    (owner, day),
                ).fetchone()
            except sqlite3.Error as exc:
                raise StateStoreError(f"the ledger `{self.path}` cannot be read: {exc}") from exc
        return TokenUsage(
            prompt_tokens=int(prompt), completion_tokens=int(completion), calls=int(calls),
            seconds=float(seconds), cost=float(cost),
        )  # fmt: skip

    def _transaction(self) -> _Immediate:
        return _Immediate(self._conn, self.path)


class _Immediate:
    """`BEGIN IMMEDIATE` ... `COMMIT` (rolled back on an error), SQLite errors translated."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self._path = path

    def __enter__(self) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StateStoreError(
                f"the ledger of open tasks `{self._path}` is busy: {exc}"
            ) from exc

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        try:
            self._conn.execute("COMMIT" if kind is None else "ROLLBACK")
        except sqlite3.Error as exc:
            if kind is None:
                raise StateStoreError(
                    f"the ledger of open tasks `{self._path}` did not commit: {exc}"
                ) from exc


def _days_before(day: str) -> str:
    """The first day still kept when `day` is today (`_KEEP_DAYS` before it)."""
    from datetime import date, timedelta

    return (date.fromisoformat(day) - timedelta(days=_KEEP_DAYS)).isoformat()
