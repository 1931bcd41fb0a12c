"""What a task's owner is held to, and given back when the task ends (its one idea).

An HTTP caller's tasks belong to its principal (`TaskRecord.owner`; trusted callers' tasks
have none). Per owner the orchestrator keeps:

- the **open-task limit** (`RequestLimits.max_open_tasks`) and the **daily budget**
  (`_spend`), checked before a new task is created (`admit`) and, for the budget, as
  results arrive (`allowance`, the driver's hook) and when a task ends (`count`);
- the owner's **uploads**: every upload an open task names is kept from the expiry sweep
  (`in_use`), and a task that asked (`free_uploads`) deletes those it named when it ends
  (`free`).

Sharded orchestrators count open tasks, and each owner's spend, in one place every shard
shares (`_ledger`), so the limit and the daily budget hold across shards; one
orchestrator counts its own drivers.
"""

from __future__ import annotations

import logging

from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.guards._limits import RequestLimits
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.model._errors import BudgetExceededError, StateStoreError
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.runtime._intake import named_uploads
from swarm_ray.runtime._ledger import Ledger
from swarm_ray.runtime._spend import DailySpend
from swarm_ray.runtime._tasks import TaskTable
from swarm_ray.runtime._uploads import Uploads

__all__: list[str] = []

_log = logging.getLogger(__name__)


class Owners:
    """Per-owner limits, spend and uploads over the orchestrator's table of drivers."""

    def __init__(
        self,
        drivers: TaskTable,
        limits: RequestLimits,
        spend: DailySpend,
        uploads: Uploads,
        ledger: Ledger | None = None,
    ) -> None:
        self._drivers = drivers
        self._limits = limits
        self._spend = spend
        self._uploads = uploads
        self._ledger = ledger

    def admit(self, owner: str | None, task_id: str) -> None:
        """Raise the user error of an owner who may not open another task now.

        With a ledger the new task takes its seat there (give it back with `release`
        if the task is not created after all).
        """
        if owner is None:
            return
        if self._ledger is None:
            self._limits.check_open(self._drivers.open_of(owner))
        if self._spend.limit_of(owner) is not None:  # else no usage to sum
            over = self._spend.over(owner, self._drivers.open_usage(owner), new=True)
            if over is not None:
                raise over
        if self._ledger is not None:
            held = self._ledger.take(owner, task_id, self._limits.max_open_tasks)
            if held is not None:
                self._limits.check_open(held)

    def release(self, owner: str | None, task_id: str) -> None:
        """Give an ended (or not created) task's seat back in the ledger, if any."""
        if self._ledger is None or owner is None:
            return
        try:
            self._ledger.give_back(task_id)
        except StateStoreError as exc:  # the shard's next restart reseats it
            _log.warning("task %s: its open-task seat was not freed: %s", task_id, exc)

    def reseat(self) -> None:
        """Rewrite this shard's seats in the ledger from its open tasks (on recovery)."""
        if self._ledger is not None:
            self._ledger.reseat(
                (d.record.owner, d.task_id)
                for d in self._drivers
                if d.record.owner is not None and not d.state.terminal
            )

    def watch(self, driver: TaskDriver) -> None:
        """Hold a task to its owner's daily budget as its results arrive (if one is set)."""
        owner = driver.record.owner
        if owner is not None and self._spend.limit_of(owner) is not None:
            driver.allowance = self.allowance  # (an ended task checks no allowance)

    def allowance(self, driver: TaskDriver) -> BudgetExceededError | None:
        """`TaskDriver.allowance`: past its owner's daily budget, the task stops."""
        owner = driver.record.owner
        if owner is None:
            return None
        try:
            self._spend.running(owner, driver.task_id, driver.usage())  # shards: shared book
            return self._spend.over(owner, self._drivers.open_usage(owner))
        except StateStoreError as exc:  # the shared book is away: the next result checks
            _log.warning("task %s: daily spend not checked: %s", driver.task_id, exc)
            return None

    def count(self, driver: TaskDriver) -> None:
        """Put an ended task's spend on its owner's tally for today (see `_spend`)."""
        try:
            self._spend.ended(driver.record.owner, driver.task_id, driver.usage())
        except StateStoreError as exc:  # the task's own end is stored; the tally waits
            _log.warning("task %s: its spend was not counted: %s", driver.task_id, exc)

    def in_use(self) -> set[tuple[str, str]]:
        """(principal tag, file id) of every upload an open task names: never swept."""
        return {
            (Principal(id=d.record.owner).tag, file_id)
            for d in self._drivers
            if d.record.owner is not None and not d.state.terminal
            for file_id in named_uploads(d.record.request)
        }

    def free(self, record: TaskRecord) -> None:
        """Delete the owner's uploads an ended task names, when its request asks to."""
        if not record.request.free_uploads or record.owner is None:
            return
        owner = Principal(id=record.owner)
        for file_id in named_uploads(record.request):
            try:
                self._uploads.delete(owner, file_id)  # False once already gone
            except StateStoreError as exc:
                _log.warning("task %s: upload %s not freed: %s", record.task_id, file_id, exc)
