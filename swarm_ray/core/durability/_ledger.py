"""A task's written side: its record and numbered events, each stored before it is told.

The driver decides; the ledger keeps what it decided. Every transition of the task's
state machine updates the record's snapshot in the state store (`move`), then becomes a
numbered `TaskEvent`, logged and handed to whoever listens (`emit`), so what a caller
saw is never ahead of what a restart reads back (`TaskDriver.load`). When the store is
what failed, a transition is kept in memory only (`persist=False`), so callers still see
why the task stopped.

No Ray; the store is reached through the task's log (`_tasklog.TaskLog`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from swarm_ray.core.durability._tasklog import TaskLog
from swarm_ray.core.model._fsm import TaskState, transition
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._task import TaskEvent

__all__: list[str] = []


class Ledger:
    """One task's record and events (one driver's; not thread-safe)."""

    def __init__(
        self,
        record: TaskRecord,
        log: TaskLog,
        *,
        clock: Callable[[], float],
        progress: Callable[[], float],
        on_transition: Callable[[str, str], object] | None = None,
        on_event: Callable[[TaskEvent], object] | None = None,
    ) -> None:
        self.record = record
        self.log = log
        """The task's snapshot and log in the state store (scheduler events go there too)."""
        self.events: list[TaskEvent] = []
        """Every event of the task, in order (`seq` is its place, from 1)."""
        self._clock = clock
        self._progress = progress
        """The fraction of the plan settled, for a working task's events."""
        self._on_transition = on_transition
        self._on_event = on_event

    @property
    def state(self) -> TaskState:
        """The task's state."""
        return self.record.machine.state

    def update(self, **changes: Any) -> None:
        """Change the record in memory (the next `save` stores it)."""
        self.record = self.record.model_copy(update=changes)

    def save(self) -> None:
        """Write the snapshot (the request and plans go to the log when they change)."""
        self.update(updated_at=self._clock())
        self.log.save(self.record)

    def emit(
        self,
        kind: str,
        status: str,
        *,
        subtask_id: str | None = None,
        agent: str | None = None,
        summary: str = "",
        persist: bool = True,
    ) -> TaskEvent:
        """Append a TaskEvent (persisted unless `persist` is false, numbered); return it."""
        progress = self._progress()
        if self.state is TaskState.COMPLETED:
            progress = 1.0
        event = TaskEvent(
            task_id=self.record.task_id,
            seq=len(self.events) + 1,
            at=self._clock(),
            trace_id=self.record.trace_id,
            kind=kind,
            status=status,
            subtask_id=subtask_id,
            agent=agent,
            progress=progress,
            summary=summary,
        )
        if persist:
            self.log.append_event(event)
        self.events.append(event)
        if self._on_event is not None:
            self._on_event(event)
        return event

    def move(self, to: TaskState, reason: str, *, save: bool = True, persist: bool = True) -> None:
        """Transition the state machine, persist, then announce it.

        `save=False` is for a state left again before control returns to the event loop
        (nothing acts on it): the next save records it in the machine's audit log.
        `persist=False` writes nothing at all (the store itself is failing).
        """
        before = self.state
        machine = transition(
            self.record.machine, to, reason=reason, at=self._clock(), trace_id=self.record.trace_id
        )
        self.update(machine=machine)
        if self._on_transition is not None:
            self._on_transition(str(before), str(to))
        if save and persist:
            self.save()
        self.emit("state", str(to), summary=reason, persist=persist)
