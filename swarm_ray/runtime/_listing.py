"""Task listings (`GET /v1/tasks`) that never reload tasks on the orchestrator's loop.

A listing names up to 1,000 tasks, most of them ended and long out of memory. Reading
one back means loading its record and log and replaying its scheduler: milliseconds
each, seconds for a long listing, and on the orchestrator's event loop every other
caller would wait for them. So:

- a task in memory is shown from its driver, on the loop (it changes there);
- an ended task's brief status never changes again: once read, it is kept (`keep`
  views, least recently used out first) and shown from there;
- the others are read back in a worker thread, one listing's batch at a time
  (`asyncio.Lock`), so concurrent listings cannot take every core, and are not kept
  in memory as drivers (a long listing would push out the tasks clients follow).

A record that cannot be read is left out of the listing; the orchestrator quarantines it
on its loop (`Listing.unreadable`).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Iterable

from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import StateStoreError
from swarm_ray.core.views._views import TaskStatus

__all__: list[str] = []

KEEP = 4096
"""Brief views of ended tasks kept (a few hundred bytes each)."""

Brief = tuple[str | None, TaskStatus]
"""A task's owner and brief status."""
Loader = Callable[[str], Brief | None]
"""Reads a stored task's brief back (off the loop: no callbacks, not tracked); None
when the store has no such task."""


class Listing:
    """Brief views of tasks for listings (see the module docstring)."""

    def __init__(self, load: Loader, keep: int = KEEP) -> None:
        self._load = load
        self._keep = keep
        self._views: OrderedDict[str, Brief] = OrderedDict()
        self._reading = asyncio.Lock()
        self.unreadable: list[tuple[str, Exception]] = []
        """Tasks whose records failed to load since last looked at (to quarantine)."""

    def forget(self, task_id: str) -> None:
        """Drop a task's kept view (deleted, or back in memory)."""
        self._views.pop(task_id, None)

    async def views(
        self,
        task_ids: Iterable[str],
        who: Principal,
        in_memory: Callable[[str], Brief | None],
    ) -> list[TaskStatus]:
        """Brief views of `task_ids` that `who` may see, in the order given.

        `in_memory(task_id)` gives a task's brief from its driver, on the loop, or None
        for a task out of memory.
        """
        ids = list(task_ids)
        found: dict[str, Brief] = {}
        away: list[str] = []
        for task_id in ids:
            brief = in_memory(task_id)
            if brief is not None:
                found[task_id] = brief
            elif (kept := self._views.get(task_id)) is not None:
                self._views.move_to_end(task_id)
                found[task_id] = kept
            else:
                away.append(task_id)
        if away:
            async with self._reading:  # one batch of reads at a time, in a thread
                read = await asyncio.to_thread(self._read, away)
            for task_id, (owner, view) in read.items():
                found[task_id] = (owner, view)
                if view.ended:
                    self._views[task_id] = (owner, view)
            while len(self._views) > self._keep:
                self._views.popitem(last=False)
        return [
            view
            for task_id in ids
            if (entry := found.get(task_id)) is not None and who.sees(entry[0])
            for view in (entry[1],)
        ]

    def _read(self, task_ids: list[str]) -> dict[str, Brief]:
        """Read each task's brief back (in a worker thread)."""
        read: dict[str, Brief] = {}
        for task_id in task_ids:
            try:
                brief = self._load(task_id)
            except StateStoreError:
                raise
            except (ValueError, RecursionError, KeyError, TypeError) as exc:
                self.unreadable.append((task_id, exc))
                continue
            if brief is not None:
                read[task_id] = brief
        return read
