"""What each principal spends per day, and the operator's daily budgets on it.

The operator sets budgets per principal and UTC day in the orchestrator's environment,
`SWARM_RAY_DAILY_BUDGETS`: JSON (inline, or the path of a JSON or YAML file) mapping a
principal id, or `*` for each principal not named, to a `Budget`:

    {"alice": {"max_cost": 5.0}, "*": {"max_cost": 0.5, "max_tokens": 200000}}

A principal's spend today is what its tasks that ended today spent, plus what its open
tasks have spent so far. Tasks of trusted callers (no owner) are not counted. Past the
budget, the principal's new tasks are refused and its running ones fail with
`budget_exceeded` (limit `daily.max_cost` or `daily.max_tokens`), their running
sub-tasks stopped, as for a task's own `budget`.

Durable: each ended task's spend is appended to a log of its own in the state store
(`~spend/{principal}/{day}`, deduplicated by task id, so a task is counted once however
often its end is replayed), which a restarted orchestrator reads back on first use.

Orchestrator shards (`_shards`) each drive part of a principal's tasks, so they keep the
tally in one book every shard shares instead (a `SpendBook`: the open-task ledger's
`owners.db`, or its Redis). Each task has one line in it, set (not added to) as the
task's results arrive and when it ends: an open task's spend so far, then its final
spend on the day it ended. A principal's spend today is the sum of its lines of today
over every shard; a budget holds across shards as on one orchestrator, up to each open
task's latest result.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError

from swarm_ray.core.durability._journal import StateStore
from swarm_ray.core.model._errors import BudgetExceededError, InvalidSpecError
from swarm_ray.core.model._subtask import TokenUsage
from swarm_ray.core.model._task import Budget

__all__: list[str] = []

ENV = "SWARM_RAY_DAILY_BUDGETS"
_LIMITS: TypeAdapter[dict[str, Budget]] = TypeAdapter(dict[str, Budget])


def day_of(at: float) -> str:
    """The UTC day `at` falls on (`2026-12-03`)."""
    return time.strftime("%Y-%m-%d", time.gmtime(at))


def parse_daily_budgets(text: str) -> dict[str, Budget]:
    """The budgets in `text`: JSON, or the path of a JSON or YAML file.

    Raises:
        InvalidSpecError: neither, or not a mapping of principal ids to budgets.
    """
    raw: Any
    stripped = text.strip()
    try:
        if stripped.startswith("{"):
            raw = json.loads(stripped)
        else:
            import yaml

            raw = yaml.safe_load(Path(stripped).expanduser().read_text(encoding="utf-8"))
        return _LIMITS.validate_python(raw or {})
    except (OSError, ValueError, ValidationError) as exc:  # JSON and YAML errors included
        raise InvalidSpecError(
            f"`{ENV}` must map principal ids (or `*`) to budgets like "
            f'{{"max_cost": 5.0}}, as JSON or a JSON/YAML file: {exc}'
        ) from None


class SpendBook(Protocol):
    """One line per task of each principal's spend per day, shared by every shard."""

    def post_spend(self, owner: str, day: str, task_id: str, usage: TokenUsage) -> None:
        """Set `task_id`'s line to `usage`, counted on `day` (moved there if it was not)."""
        ...

    def spent(self, owner: str, day: str) -> TokenUsage:
        """The sum of `owner`'s lines on `day`."""
        ...


class DailySpend:
    """Each principal's spend per UTC day, and its daily budget (see the module docstring)."""

    def __init__(
        self,
        limits: dict[str, Budget],
        store: StateStore,
        clock: Callable[[], float] = time.time,
        book: SpendBook | None = None,
    ) -> None:
        self.limits = limits
        self._store = store
        self._clock = clock
        self._book_shared = book
        """Shards: the book every shard shares (then the store keeps no spend)."""
        self._ended: dict[tuple[str, str], dict[str, TokenUsage]] = {}
        """(principal, day) -> task id -> what that ended task spent (as stored)."""

    @classmethod
    def from_env(cls, store: StateStore, book: SpendBook | None = None) -> DailySpend:
        """Budgets from `SWARM_RAY_DAILY_BUDGETS` (none when unset); `book` for shards."""
        text = os.environ.get(ENV, "")
        return cls(parse_daily_budgets(text) if text.strip() else {}, store, book=book)

    def limit_of(self, owner: str | None) -> Budget | None:
        """The daily budget of `owner` (its own, else `*`); None for trusted callers."""
        if owner is None:
            return None
        return self.limits.get(owner) or self.limits.get("*")

    def _book(self, owner: str, day: str) -> dict[str, TokenUsage]:
        key = (owner, day)
        if key not in self._ended:
            entries = self._store.read_log(_log_id(owner, day))
            book: dict[str, TokenUsage] = {}
            for entry in entries:
                data = json.loads(entry.payload_json)
                book[str(data["task_id"])] = TokenUsage.model_validate(data["usage"])
            self._ended[key] = book
            for old in [k for k in self._ended if k[1] < day]:  # earlier days are done
                del self._ended[old]
        return self._ended[key]

    def ended(self, owner: str | None, task_id: str, usage: TokenUsage) -> None:
        """Count what an ended task of `owner` spent, on today's tally (once per task).

        Only while budgets are set: without any, nothing is written.
        """
        if owner is None or not self.limits:
            return
        day = day_of(self._clock())
        if self._book_shared is not None:
            self._book_shared.post_spend(owner, day, task_id, usage)
            return
        book = self._book(owner, day)
        if task_id in book:
            return
        payload = json.dumps({"task_id": task_id, "usage": usage.model_dump(mode="json")})
        self._store.append(_log_id(owner, day), "spend", payload, dedupe_key=task_id)
        book[task_id] = usage

    def running(self, owner: str | None, task_id: str, usage: TokenUsage) -> None:
        """Shards: set an open task's line in the shared book to what it spent so far.

        One orchestrator sums its open tasks itself (`open_usage`), so this does nothing.
        """
        if self._book_shared is not None and owner is not None and self.limit_of(owner):
            self._book_shared.post_spend(owner, day_of(self._clock()), task_id, usage)

    def today(self, owner: str, open_usage: Iterable[TokenUsage] = ()) -> TokenUsage:
        """What `owner` spent today: its ended tasks', plus `open_usage` (its open ones).

        With a shared book, every shard's tasks' lines (`open_usage` is in them).
        """
        if self._book_shared is not None:
            return self._book_shared.spent(owner, day_of(self._clock()))
        total = TokenUsage()
        for usage in (*self._book(owner, day_of(self._clock())).values(), *open_usage):
            total = total + usage
        return total

    def over(
        self, owner: str | None, open_usage: Iterable[TokenUsage] = (), *, new: bool = False
    ) -> BudgetExceededError | None:
        """The error for `owner` when it spent past its daily budget today, else None.

        With `new` (a task about to start), spending the whole budget is enough: the
        task could only fail at its first result.
        """
        budget = self.limit_of(owner)
        if budget is None or owner is None:
            return None
        used = self.today(owner, open_usage)
        over = budget.breach(used.total_tokens, used.cost, "daily", new=new)
        if over is None:
            return None
        limit, value, maximum, unit = over
        return BudgetExceededError(
            f"principal `{owner}` spent {value:g} {unit} today (UTC), over its `{limit}` of "
            f"{maximum:g} set by the operator; its tasks are stopped until tomorrow",
            limit=limit,
            value=value,
            maximum=maximum,
        )


def _log_id(owner: str, day: str) -> str:
    return f"~spend/{owner}/{day}"
