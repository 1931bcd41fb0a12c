"""The audit trail: JSON lines per task and per agent under the state directory.

Every task event (state changes, sub-task dispatches and outcomes, warnings, breaker
moves, refused results) is written at INFO to `audit/tasks/{task_id}.jsonl` and, when an
agent or capability is concerned, to `audit/agents/{agent}.jsonl`. Each line carries the
task's trace id, so one `grep TRACE_ID -r audit/` follows a task through every agent.

DEBUG lines (the details of each accepted result: timings, token usage, confidence) are
sampled by trace id: a task's DEBUG lines are all written or none are, so a sampled trace
is complete. `SWARM_RAY_AUDIT_DEBUG_SAMPLE` sets the share of traces (default 0.01; 1 for
all, 0 for none); `SWARM_RAY_AUDIT=0` turns the trail off.

The audit trail is for people and tools reading history; the state store, not this
trail, is what recovery relies on, so lines are queued in memory and written out about
once a second, on a thread, each file opened once for all its lines (`take`, then
`write_out`; `flush` does both): the trail must not slow the dispatch of small sub-tasks,
and opening a new task's file on the event loop was a few percent of its CPU per task.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

__all__: list[str] = []

logger = logging.getLogger(__name__)

Lines = dict[tuple[str, str], list[str]]
"""Queued lines by file: (`tasks` or `agents`, name) -> lines."""
_SAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def sampled(trace_id: str, rate: float) -> bool:
    """Whether DEBUG lines of the trace `trace_id` are kept at sampling `rate`."""
    if rate >= 1.0:
        return True
    if rate <= 0.0:
        return False
    try:
        bucket = int(trace_id[:8], 16) / 0x1_0000_0000
    except ValueError:
        bucket = (hash(trace_id) & 0xFFFF_FFFF) / 0x1_0000_0000
    return bucket < rate


class AuditTrail:
    """Appends audit lines; one instance per orchestrator process."""

    def __init__(self, root: str | os.PathLike[str], *, debug_sample: float = 0.01) -> None:
        if not 0.0 <= debug_sample <= 1.0:
            raise ValueError(f"`debug_sample` must be in [0, 1], got {debug_sample!r}")
        self.root = Path(root)
        self.debug_sample = debug_sample
        self._pending: Lines = {}
        self._made: set[str] = set()
        self.failures = 0
        """Lines or flushes that could not be written (a full disk, a lost mount)."""
        self.last_error: str | None = None
        """The latest of those failures, for `/health` and the orchestrator's log."""

    @classmethod
    def from_env(cls, state_dir: str | os.PathLike[str]) -> AuditTrail | None:
        """The trail under `state_dir/audit`, configured from the environment (or None)."""
        if os.environ.get("SWARM_RAY_AUDIT", "1") in ("0", "false", "off"):
            return None
        rate = float(os.environ.get("SWARM_RAY_AUDIT_DEBUG_SAMPLE", "0.01"))
        return cls(Path(state_dir) / "audit", debug_sample=rate)

    def write(
        self,
        level: str,
        record: dict[str, Any],
        *,
        task_id: str,
        trace_id: str,
        agent: str | None = None,
    ) -> bool:
        """Write one line for the task (and its agent); False when DEBUG is sampled out."""
        if level == "DEBUG" and not sampled(trace_id, self.debug_sample):
            return False
        body = json.dumps(record, default=str, separators=(",", ":"))
        return self._put(level, body, task_id=task_id, trace_id=trace_id, agent=agent)

    def write_json(
        self,
        level: str,
        body: str,
        *,
        task_id: str,
        trace_id: str,
        agent: str | None = None,
    ) -> bool:
        """`write` for a record already serialised as a JSON object.

        A model's `model_dump_json()` is made in Rust; its fields follow the line's own.
        """
        if level == "DEBUG" and not sampled(trace_id, self.debug_sample):
            return False
        return self._put(level, body, task_id=task_id, trace_id=trace_id, agent=agent)

    def _put(
        self, level: str, body: str, *, task_id: str, trace_id: str, agent: str | None
    ) -> bool:
        """Queue the line: the level, trace, task and agent, then `body`'s fields."""
        head = {"level": level, "trace_id": trace_id, "task_id": task_id, "agent": agent}
        line = json.dumps(head, separators=(",", ":"))
        if body != "{}":
            line = f"{line[:-1]},{body[1:]}"
        self._pending.setdefault(("tasks", task_id), []).append(line)
        if agent:
            self._pending.setdefault(("agents", agent), []).append(line)
        return True

    def take(self) -> Lines:
        """The lines queued so far, by file; the queue starts again empty."""
        taken, self._pending = self._pending, {}
        return taken

    def write_out(self, lines: Lines) -> None:
        """Append `lines` (from `take`) to their files; a failure is counted, never raised.

        Safe on a thread of its own while the event loop queues more lines.
        """
        for (kind, name), queued in lines.items():
            path = self.root / kind / f"{_SAFE.sub('_', name)}.jsonl"
            try:
                if kind not in self._made:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    self._made.add(kind)
                with open(path, "a", encoding="utf-8") as handle:
                    handle.write("\n".join(queued) + "\n")
            except OSError as exc:
                self._failed(f"cannot write `{kind}/{name}`", exc)

    def flush(self) -> None:
        """Write every queued line out now."""
        self.write_out(self.take())

    def _failed(self, what: str, exc: OSError) -> None:
        """The trail is for people; a full disk must not stop the tasks it describes."""
        self.failures += 1
        first = self.last_error is None
        self.last_error = f"{what} under `{self.root}`: {exc.strerror or exc}"
        if first:
            logger.error("audit trail failing, tasks go on: %s", self.last_error)

    def close(self) -> None:
        """Write every queued line out (no file stays open between writes)."""
        self.flush()
