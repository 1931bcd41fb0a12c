"""A disk quota per principal: its uploads and its tasks' own folders, counted together.

Uploads have their own quota at the gateway (`upload_quota_bytes`, counted as bytes are
written, see `_uploads.Uploads.hold`). What a tenant's tasks write (`<state>/tasks/<task
id>/`: reports, charts, an index, thumbnails) is on the same disk, so a new task of an
untrusted principal is refused (`LimitExceededError`, `disk_quota_bytes`, HTTP 422)
while its uploads and its tasks' folders hold `SWARM_RAY_DISK_QUOTA_BYTES` or more
(default `DISK_QUOTA_BYTES`; 0: no quota). A running task is not stopped: what one task
may write is bounded by its stages' own limits (the parse text cap, the segment count),
and a principal runs at most `max_open_tasks` at once.

Counting walks the principal's task folders (at most `MAX_ENTRIES` entries; a walk cut
short counts what it saw), in the intake's worker thread, never on the orchestrator's
loop; a count is reused for `FRESH_S` seconds.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from swarm_ray.core.durability._journal import StateStore
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import LimitExceededError
from swarm_ray.runtime._uploads import Uploads

__all__: list[str] = []

DISK_QUOTA_BYTES = 10 * 1024**3
"""Bytes a principal's uploads and task folders may hold before its next task is refused."""
MAX_ENTRIES = 200_000
"""Files and folders one count walks at most."""
FRESH_S = 10.0
"""How long a count is reused."""


def folder_bytes(path: Path, budget: list[int]) -> int:
    """Bytes of the files under `path` (symlinks not followed); `budget[0]` entries at most."""
    total = 0
    stack = [path]
    while stack and budget[0] > 0:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    budget[0] -= 1
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:  # gone, or not a folder: nothing to count
            continue
    return total


@dataclass
class DiskQuota:
    """The disk quota of untrusted principals (see the module docstring)."""

    quota_bytes: int | None = DISK_QUOTA_BYTES
    clock: Callable[[], float] = time.monotonic
    _counted: dict[str, tuple[float, int]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_env(cls) -> DiskQuota:
        """`SWARM_RAY_DISK_QUOTA_BYTES` (0: none), else `DISK_QUOTA_BYTES`."""
        value = int(os.environ.get("SWARM_RAY_DISK_QUOTA_BYTES", DISK_QUOTA_BYTES))
        return cls(quota_bytes=value if value > 0 else None)

    def used(
        self, principal: Principal, *, store: StateStore, uploads: Uploads, tasks_dir: Path
    ) -> int:
        """Bytes of `principal`'s uploads (in progress too) and its tasks' folders."""
        with self._lock:
            kept = self._counted.get(principal.id)
        if kept is not None and self.clock() - kept[0] < FRESH_S:
            return kept[1]
        budget = [MAX_ENTRIES]
        total = uploads.usage(principal)[0]
        for task_id in store.list_tasks(owner=principal.id):
            total += folder_bytes(tasks_dir / task_id, budget)
        with self._lock:
            self._counted[principal.id] = (self.clock(), total)
        return total

    def check(
        self, principal: Principal, *, store: StateStore, uploads: Uploads, tasks_dir: Path
    ) -> None:
        """Refuse a new task of `principal` once it holds its quota (trusted: never)."""
        if self.quota_bytes is None or principal.trusted:
            return
        used = self.used(principal, store=store, uploads=uploads, tasks_dir=tasks_dir)
        if used >= self.quota_bytes:
            raise LimitExceededError(
                f"this caller's uploads and task folders hold {used} bytes, the "
                f"`disk_quota_bytes` quota ({self.quota_bytes}); delete uploads "
                "(`DELETE /v1/files/{id}`) before starting another task",
                limit="disk_quota_bytes",
                value=used,
                maximum=self.quota_bytes,
            )
