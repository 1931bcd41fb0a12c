"""A task's durable log: what the driver writes before it acts, and reads back after a crash.

A task is stored as a snapshot (its record without the large parts) plus an append-only
log of entries of three kinds:
- `spec`: the request and plans, each written once, when it is set (they hold every item
  and every sub-task's input and never change, while the snapshot is written at every
  transition); an entry holds the fields that changed, and a plan leaves out its request
  where it is the task's own (a plan of 2,000 items of 2 KB logged them four times: 17 MB
  where 8 MB are the task's). `read_record` joins them back (`joined_spec`);
- `event`: the task's numbered `TaskEvent`s;
- `sched`: every scheduler event, written before the scheduler sees it, so replaying the
  log rebuilds exactly what was done and what was outstanding.

It is read in today's format whatever wrote it (`StateStore.load_task` migrates older
records: `core.durability._journal`); a task read from an older version and written again goes on
after a version mark, and logs its request and plans again (an old snapshot may have
held them, and the new one will not).

Large outputs go to the result store and the log keeps a reference (`offload`). Retries
of a failing write are the store's own (SQLite's busy timeout, Redis's connection retries):
a write that still fails raises `StateStoreError`, and the driver's caller fails the task
by name rather than lose the event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from swarm_ray.core.durability._journal import Blobs, LoadedTask, StateStore, should_offload
from swarm_ray.core.model._record import SCHEMA_VERSION, TaskRecord
from swarm_ray.core.model._signals import (
    ChildAdded,
    HumanAnswered,
    PlanAdopted,
    ReviewRequested,
    SchedulerEvent,
    SpendingStopped,
    SubTaskDone,
    SubTaskFailed,
    SubTaskTimedOut,
)
from swarm_ray.core.model._task import TaskEvent
from swarm_ray.core.scheduling._scheduler import EVENT_ADAPTER

__all__: list[str] = []

SCHED, EVENT, SPEC = "sched", "event", "spec"
_SPEC_FIELDS = ("request", "plan", "planning")
"""Record fields written once to the log rather than in every snapshot."""
_PLANS = ("plan", "planning")
"""The spec fields that are plans, each holding a request (the task's, as a rule)."""


def read_record(store: StateStore, task_id: str) -> TaskRecord | None:
    """A stored task's record (see `record_of`), or None when the store has no such task."""
    loaded = store.load_task(task_id)
    return None if loaded is None else record_of(loaded)


def record_of(loaded: LoadedTask) -> TaskRecord:
    """A loaded task's record: its snapshot joined with its `spec` log entries."""
    data = json.loads(loaded.record_json)
    data.update(joined_spec(e.payload_json for e in loaded.log if e.kind == SPEC))
    return TaskRecord.model_validate(data)


def joined_spec(payloads: Iterable[str]) -> dict[str, Any]:
    """The request and plans that `spec` entries (oldest first) hold, as JSON data.

    Each field is the newest entry's that has it (an older version wrote every field in
    every entry); a plan stored without its request gets the task's back.
    """
    entries = list(payloads)
    found: dict[str, Any] = {}
    for payload in reversed(entries):
        spec = json.loads(payload)
        found.update({k: v for k, v in spec.items() if k not in found})
        if len(found) == len(_SPEC_FIELDS):
            break
    for name in _PLANS:
        plan = found.get(name)
        if isinstance(plan, dict) and "request" not in plan:
            plan["request"] = found.get("request")
    return found


def output_text(event: SchedulerEvent) -> str | None:
    """A succeeded attempt's output as JSON, made once for the log and the summary."""
    if not isinstance(event, SubTaskDone) or event.result.output is None:
        return None
    return json.dumps(event.result.output, default=str)


def dedupe_key(event: SchedulerEvent) -> str | None:
    """The key that keeps `event` from being logged twice, or None if it may repeat.

    A result replayed after a restart, or an answer posted twice, is logged once.
    """
    match event:
        case ChildAdded():
            return f"{event.kind}:{event.spec.id}"
        case SubTaskDone() | SubTaskFailed():
            return f"{event.kind}:{event.result.subtask_id}:{event.result.attempt}"
        case SubTaskTimedOut() | ReviewRequested():
            return f"{event.kind}:{event.subtask_id}:{event.attempt}"
        case HumanAnswered():
            review = "" if event.review_of is None else f":review{event.review_of}"
            asked = "" if event.asked_in is None else f":asked{event.asked_in}"
            return f"{event.kind}:{event.subtask_id}{review}{asked}"
        case SpendingStopped() | PlanAdopted():
            return event.kind  # once a task
        case _:
            return None


def _spec_json(record: TaskRecord, fields: set[str]) -> str:
    """`fields` of the record as a `spec` entry.

    A plan leaves out its request where it equals the task's (`joined_spec` puts it back).
    """
    own: dict[str, Any] = {}
    for name in _PLANS:
        plan = getattr(record, name)
        if name in fields and plan is not None and plan.request == record.request:
            own[name] = {"request"}
    return record.model_dump_json(include=fields, exclude=own or None)


@dataclass
class Replayed:
    """What a task's log holds, in order: its events and its scheduler's events."""

    events: list[TaskEvent] = field(default_factory=list)
    scheduled: list[SchedulerEvent] = field(default_factory=list)


class TaskLog:
    """One task's snapshot and log in a `StateStore`, large outputs in a `Blobs` store."""

    def __init__(self, task_id: str, store: StateStore, results: Blobs) -> None:
        self.task_id = task_id
        self._store = store
        self._results = results
        self._saved_spec: tuple[int, int, int] | None = None
        """Identity of the request and plans last written to the log (see `save`)."""
        self._written_in: int | None = None
        """The older record version the log was read in, until it is marked (`_mark`)."""

    def _mark(self) -> None:
        """Before the first write to a log read from an older version, mark it."""
        if self._written_in is not None:
            self._store.mark_version(self.task_id, self._written_in)
            self._written_in = None

    def save(self, record: TaskRecord) -> None:
        """Write the snapshot; the request and plans only when they changed."""
        self._mark()
        spec = (id(record.request), id(record.plan), id(record.planning))
        if spec != self._saved_spec:
            saved = self._saved_spec or (None, None, None)
            changed = {f for f, a, b in zip(_SPEC_FIELDS, spec, saved, strict=True) if a != b}
            self._store.append(self.task_id, SPEC, _spec_json(record, changed))
            self._saved_spec = spec
        self._store.put_task(
            self.task_id,
            record.model_dump_json(exclude=set(_SPEC_FIELDS)),
            is_open=not record.machine.state.terminal,
            schema_version=SCHEMA_VERSION,
            owner=record.owner,
        )

    def append_event(self, event: TaskEvent) -> None:
        """Log one of the task's numbered events (once, whatever the restarts)."""
        self._mark()
        self._store.append(self.task_id, EVENT, event.model_dump_json(), dedupe_key=f"e{event.seq}")

    def append(self, event: SchedulerEvent, text: str | None) -> None:
        """Log a scheduler event before the scheduler sees it; `text` is `output_text`."""
        self._mark()
        stored = self._offload(event, text)
        self._store.append(
            self.task_id,
            SCHED,
            EVENT_ADAPTER.dump_json(stored).decode(),
            dedupe_key=dedupe_key(event),
        )

    def replay(self, record: TaskRecord, loaded: LoadedTask) -> Replayed:
        """Read the task's log back (`loaded`; `record` is its record), large outputs too.

        A task read from an older version is marked before it is written again, and logs
        its request and plans again.
        """
        if loaded.snapshot_version == SCHEMA_VERSION:
            self._saved_spec = (id(record.request), id(record.plan), id(record.planning))
        if loaded.log_version < SCHEMA_VERSION:
            self._written_in = loaded.log_version
        out = Replayed()
        for entry in loaded.log:
            if entry.kind == EVENT:
                out.events.append(TaskEvent.model_validate_json(entry.payload_json))
            elif entry.kind == SCHED:
                event = EVENT_ADAPTER.validate_json(entry.payload_json)
                out.scheduled.append(self._rehydrate(event))
        return out

    def _offload(self, event: SchedulerEvent, text: str | None) -> SchedulerEvent:
        """`event` as the log keeps it: a large output (`text`) goes to the result store."""
        if not isinstance(event, SubTaskDone) or text is None or not should_offload(text):
            return event
        r = event.result
        ref = self._results.put_bytes(
            f"{self.task_id}/{r.subtask_id}-{r.attempt}.json", text.encode()
        )
        return event.model_copy(
            update={"result": r.model_copy(update={"output": None, "output_ref": ref})}
        )

    def _rehydrate(self, event: SchedulerEvent) -> SchedulerEvent:
        if (
            isinstance(event, SubTaskDone)
            and event.result.output_ref
            and event.result.output is None
        ):
            output = self._results.get_json(event.result.output_ref)
            return event.model_copy(
                update={"result": event.result.model_copy(update={"output": output})}
            )
        return event
