"""The orchestrator's table of tasks: drivers in memory, who follows them, what is in flight.

Pure bookkeeping on the orchestrator's event loop (no Ray, no store writes):
- `TaskTable`: the driver of every task in memory, its owner's open tasks, and the
  events and futures that wake callers waiting for a task to end or change. Ended tasks
  past `keep_finished` are forgotten, oldest first (reloaded from the store when asked
  for again), so memory stays bounded however many tasks a long-lived orchestrator sees.
- `InFlight`: the asyncio tasks running attempts, by task and sub-task, so a `Halt`
  cancels exactly the runs holding the halted sub-tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import OrderedDict, defaultdict
from collections.abc import Coroutine, Iterator
from typing import Any

from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.model._subtask import TokenUsage

__all__: list[str] = []


class TaskTable:
    """Drivers by task id, and the waiters on each task."""

    def __init__(self, keep_finished: int) -> None:
        self._drivers: dict[str, TaskDriver] = {}
        self._open_by_owner: dict[str, set[str]] = defaultdict(set)
        """Per owner, ids of its tasks that were open when tracked (see `open_of`)."""
        self._finished: dict[str, asyncio.Event] = {}
        self._changed: dict[str, asyncio.Future[None]] = {}
        """Per followed task, a future resolved at its next change (then replaced)."""
        self._done: OrderedDict[str, None] = OrderedDict()
        self._keep_finished = max(1, keep_finished)

    def __len__(self) -> int:
        return len(self._drivers)

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._drivers

    def __iter__(self) -> Iterator[TaskDriver]:
        return iter(list(self._drivers.values()))

    def get(self, task_id: str) -> TaskDriver | None:
        """The task's driver, if it is in memory."""
        return self._drivers.get(task_id)

    def track(self, driver: TaskDriver) -> None:
        """Keep `driver` (an open task counts toward its owner's open tasks)."""
        self._drivers[driver.task_id] = driver
        self._finished.setdefault(driver.task_id, asyncio.Event())
        if driver.record.owner is not None and not driver.state.terminal:
            self._open_by_owner[driver.record.owner].add(driver.task_id)

    def ended(self, task_id: str) -> None:
        """Wake the task's waiters; forget the oldest ended tasks past the memory bound."""
        self._finished[task_id].set()
        self._done[task_id] = None
        self._done.move_to_end(task_id)
        while len(self._done) > self._keep_finished:
            old, _ = self._done.popitem(last=False)
            self._drivers.pop(old, None)
            self._finished.pop(old, None)
            self._changed.pop(old, None)

    def open_of(self, owner: str) -> int:
        """Open tasks of `owner`: its tracked ones, less those ended since (pruned here).

        Walks the owner's own open tasks (at most the limit), not every task in memory.
        """
        ids = self._open_by_owner[owner]
        ended = [t for t in ids if (d := self._drivers.get(t)) is None or d.state.terminal]
        ids.difference_update(ended)
        return len(ids)

    def open_usage(self, owner: str) -> list[TokenUsage]:
        """What `owner`'s open tasks have spent so far, each."""
        drivers = (self._drivers.get(t) for t in self._open_by_owner.get(owner, ()))
        return [d.usage() for d in drivers if d is not None and not d.state.terminal]

    async def until_ended(self, task_id: str, timeout_s: float | None) -> None:
        """Return once the tracked task ends, or after `timeout_s`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._finished[task_id].wait(), timeout_s)

    async def until_changed(self, task_id: str, timeout_s: float) -> None:
        """Return at the task's next change (`notify`), or after `timeout_s`."""
        changed = self._changed.get(task_id)
        if changed is None or changed.done():
            changed = self._changed[task_id] = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(changed), timeout_s)

    def notify(self, task_id: str) -> None:
        """Wake whoever follows the task (cheap when nobody does: no task is created)."""
        changed = self._changed.pop(task_id, None)
        if changed is not None and not changed.done():
            changed.set_result(None)


class InFlight:
    """The asyncio tasks that run attempts, each holding some sub-tasks of one task."""

    def __init__(self) -> None:
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._members: dict[tuple[str, str], set[str]] = {}
        self._serial = itertools.count()

    def spawn(self, task_id: str, ids: list[str], coro: Coroutine[Any, Any, None]) -> None:
        """Run `coro`, which runs sub-tasks `ids` of `task_id`, until it ends or is halted."""
        key = (task_id, f"{ids[0]}+{len(ids)}:{next(self._serial)}")
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks[key] = task
        self._members[key] = set(ids)

        def forget(_task: asyncio.Task[None]) -> None:
            self._tasks.pop(key, None)
            self._members.pop(key, None)

        task.add_done_callback(forget)

    def halt(self, task_id: str, subtask_ids: set[str]) -> None:
        """Cancel the runs of `task_id` that hold any of `subtask_ids`."""
        for key, members in list(self._members.items()):
            if key[0] == task_id and subtask_ids & members:
                task = self._tasks.pop(key, None)
                if task is not None:
                    task.cancel()
