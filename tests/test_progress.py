"""Progress for people: per-stage bars on a terminal, plain lines in logs."""

from __future__ import annotations

import io
import re
from typing import Any

from swarm_ray import TaskEvent
from swarm_ray.runtime._progress import ProgressReport, is_terminal

PLAN = {"parse[0]": "parse", "parse[1]": "parse", **{f"extract[{i}]": "extract" for i in range(4)}}


def _events(with_rule: bool = False) -> list[TaskEvent]:
    seq = iter(range(1, 1000))
    settled = 0
    total = len(PLAN) + with_rule

    def ev(kind: str, status: str, sid: str | None = None, summary: str = "") -> TaskEvent:
        nonlocal settled
        if kind == "subtask" and status == "succeeded":
            settled += 1
        return TaskEvent(
            task_id="t",
            seq=next(seq),
            at=0.0,
            trace_id="x",
            kind=kind,
            status=status,
            subtask_id=sid,
            progress=settled / total,
            summary=summary,
        )

    out = [ev("state", "executing", summary="first sub-tasks dispatched")]
    for sid in PLAN:
        out += [ev("subtask", "running", sid), ev("subtask", "succeeded", sid)]
    out.append(ev("warning", "warning", summary="sub-task `extract[1]`: no unit found"))
    if with_rule:
        out += [ev("subtask", "running", "review[0]"), ev("subtask", "succeeded", "review[0]")]
    out.append(ev("state", "completed", summary="done with 1 warning(s)"))
    return out


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def test_plain_lines_when_not_a_terminal() -> None:
    out = io.StringIO()
    assert not is_terminal(out)
    with ProgressReport(lambda: PLAN, stream=out, clock=Clock()) as report:
        assert not report.interactive
        seen = list(report.follow(_events()))
    assert len(seen) == len(_events())
    text = out.getvalue()
    assert "\x1b[" not in text  # no escape codes in logs
    lines = text.splitlines()
    assert lines[0].startswith("[  0%]") and "executing" in lines[0]
    assert any("warning: sub-task `extract[1]`: no unit found" in line for line in lines)
    assert "parse 2/2  extract 4/4" in lines[-3] and "completed" in lines[-1]
    assert "2.0 s parse 1/2  extract 0/4" in text  # per-stage counts as the task goes
    assert len(lines) <= 12  # a line per tenth of progress at most, not one per event


def test_bars_on_a_terminal() -> None:
    out = io.StringIO()
    with ProgressReport(lambda: PLAN, stream=out, interactive=True) as report:
        for _event in report.follow(_events()):
            pass
    text = out.getvalue()
    assert "\x1b[" in text and "━" in text
    assert re.search(r"parse\s.*2/2", text) and re.search(r"extract\s.*4/4", text)
    assert "warning: sub-task `extract[1]`: no unit found" in text
    assert "completed" in text


def test_sub_tasks_added_while_running_are_counted() -> None:
    plans: list[dict[str, Any]] = [PLAN, {**PLAN, "review[0]": "review"}]
    asked: list[int] = []

    def stages() -> dict[str, Any]:
        asked.append(1)
        return plans[min(len(asked), 2) - 1]

    out = io.StringIO()
    with ProgressReport(stages, stream=out) as report:
        list(report.follow(_events(with_rule=True)))
    assert len(asked) == 2  # asked again when `review[0]` appeared
    assert report.summary() == "parse 2/2  extract 4/4  review 1/1"
