"""Progress of a task for people: a bar per stage on a terminal, plain lines elsewhere.

On a terminal (the jobs and `swarm-ray run` started by hand) `rich` draws one bar per
stage with its done / total count, what is running and what failed. Where output is not
a terminal (CI, `ray job submit` logs, a file) it prints a plain line at each state
change and warning, and a line with every stage's counts each time progress moves by a
tenth or `every_s` seconds pass, so logs stay short and readable.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TextIO

from swarm_ray.core.model._task import TaskEvent

__all__: list[str] = []

_SETTLED = frozenset({"succeeded", "failed", "skipped", "cancelled"})
_RANK = {"pending": 0, "running": 1, "held": 1, **dict.fromkeys(_SETTLED, 2)}


def is_terminal(stream: TextIO) -> bool:
    """Whether `stream` is an interactive terminal that can redraw bars."""
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM", "") != "dumb"


class StageCounts:
    """Each sub-task's latest status, counted per stage."""

    def __init__(self) -> None:
        self.stage_of: dict[str, str] = {}
        self.status: dict[str, str] = {}

    def plan(self, stages: Mapping[str, str]) -> None:
        """Learn (sub-task id -> stage) pairs; unknown sub-tasks start pending."""
        for sid, stage in stages.items():
            self.stage_of[sid] = stage
            self.status.setdefault(sid, "pending")

    def update(self, subtask_id: str, status: str) -> bool:
        """Record a status (never moving a sub-task backwards); False if it is unknown."""
        if subtask_id not in self.stage_of:
            return False
        if _RANK.get(status, 0) >= _RANK.get(self.status[subtask_id], 0):
            self.status[subtask_id] = status
        return True

    def by_stage(self) -> dict[str, Counter[str]]:
        """Status counts per stage, stages in plan order."""
        counts: dict[str, Counter[str]] = {}
        for sid, stage in self.stage_of.items():
            counts.setdefault(stage, Counter())[self.status[sid]] += 1
        return counts


def _line(stage: str, counts: Counter[str]) -> str:
    total = sum(counts.values())
    done = sum(counts[s] for s in _SETTLED)
    extra = [f"{counts[s]} {s}" for s in ("running", "failed", "skipped") if counts[s]]
    return f"{stage} {done}/{total}" + (f" ({', '.join(extra)})" if extra else "")


class ProgressReport:
    """Shows a task's progress from its events; use as a context manager around them.

    Args:
        stages: Returns the plan's (sub-task id -> stage); asked again when an event
            names a sub-task it has not seen (rules and feedback rounds add some).
        stream: Where to write (default stdout).
        interactive: Bars (True) or plain lines (False); default: bars on a terminal.
        every_s: Plain mode: longest gap between two lines while the task works.
        clock: For tests.
    """

    def __init__(
        self,
        stages: Callable[[], Mapping[str, str]],
        *,
        stream: TextIO | None = None,
        interactive: bool | None = None,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stages = stages
        self._stream = stream or sys.stdout
        self.interactive = is_terminal(self._stream) if interactive is None else interactive
        self._every_s = every_s
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._next_mark = 0.1
        self.counts = StageCounts()
        self._bars: Any = None
        self._rows: dict[str, Any] = {}

    def __enter__(self) -> ProgressReport:
        self.counts.plan(self._stages())
        if self.interactive:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            console = Console(file=self._stream, force_terminal=True)
            self._bars = Progress(
                TextColumn("[bold]{task.description:<18}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                console=console,
            )
            self._bars.start()
            self._draw()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bars is not None:
            self._draw()
            self._bars.stop()
            self._bars = None

    def say(self, text: str) -> None:
        """Print a line (above the bars on a terminal)."""
        if self._bars is not None:
            self._bars.console.print(text, markup=False, highlight=False)
        else:
            print(text, file=self._stream, flush=True)

    def _draw(self) -> None:
        for stage, counts in self.counts.by_stage().items():
            total = sum(counts.values())
            done = sum(counts[s] for s in _SETTLED)
            notes = [f"{counts[s]} {s}" for s in ("running", "failed", "skipped") if counts[s]]
            if stage not in self._rows:
                self._rows[stage] = self._bars.add_task(stage, total=total, note="")
            self._bars.update(self._rows[stage], total=total, completed=done, note=", ".join(notes))

    def summary(self) -> str:
        """Every stage's counts on one line."""
        return "  ".join(_line(stage, c) for stage, c in self.counts.by_stage().items())

    def show(self, event: TaskEvent) -> None:
        """Take one event into account and show what changed."""
        sid = event.subtask_id if event.kind == "subtask" else None
        if sid and not self.counts.update(sid, event.status):
            self.counts.plan(self._stages())  # added while running (a rule, a feedback round)
            self.counts.update(sid, event.status)
        elapsed = self._clock() - self._started
        stamp = f"[{event.progress:4.0%}] {elapsed:6.1f} s"
        if event.kind == "state":
            self.say(f"{stamp} {event.status}: {event.summary[:80]}")
        elif event.kind == "warning":
            self.say(f"{stamp} warning: {event.summary[:100]}")
        if self._bars is not None:
            self._draw()
        elif event.kind == "subtask" and (
            event.progress >= self._next_mark or self._clock() - self._last_line >= self._every_s
        ):
            self.say(f"{stamp} {self.summary()}")
            self._next_mark = event.progress + 0.1
            self._last_line = self._clock()

    def follow(self, events: Iterable[TaskEvent]) -> Iterator[TaskEvent]:
        """Show each event, then hand it on."""
        for event in events:
            self.show(event)
            yield event


def follow_with_progress(
    task: Any,
    *,
    stream: TextIO | None = None,
    interactive: bool | None = None,
) -> Iterator[TaskEvent]:
    """`task.events()` of a `TaskHandle`, showing per-stage progress while it runs."""

    def stages() -> dict[str, str]:
        return {sid: info.stage for sid, info in task.status().subtasks.items()}

    with ProgressReport(stages, stream=stream, interactive=interactive) as report:
        yield from report.follow(task.events())
        if not report.interactive:
            report.say(f"stages: {report.summary()}")
