"""A task's end as its record keeps it: the output, or the error it ended with.

A completed task's output is made of the scheduler's final results: the aggregate stage's
output (its latest round, after any feedback loop) when the template names one and it
gave one, else every final sub-task's output by id. A small output stays in the record;
a large one goes to the result store and the record keeps its reference (`output_ref`),
which `read_output` follows back. A task the scheduler failed ends `failed`, or
`cancelled` when the failure is a cancel.

Pure: no Ray; the result store is reached through its interface (`Blobs`).
"""

from __future__ import annotations

import json
from typing import Any

from swarm_ray.core.durability._journal import Blobs, should_offload
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._signals import FailTask
from swarm_ray.core.model._subtask import SubTaskError
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__: list[str] = []


def task_output(scheduler: Scheduler, plan: Plan) -> dict[str, Any]:
    """The output of a task whose every sub-task settled."""
    finals = scheduler.final_results()
    aggregate = plan.template.aggregate
    if aggregate is not None:
        current = scheduler.current(aggregate)
        if current in finals and finals[current].output is not None:
            return finals[current].output  # type: ignore[return-value]
    return {"results": {k: v.output for k, v in finals.items()}}


def kept_output(task_id: str, output: dict[str, Any], results: Blobs) -> dict[str, Any]:
    """The record's update that keeps `output`: itself when small, else its reference."""
    text = json.dumps(output, default=str)
    if should_offload(text):
        return {"output_ref": results.put_bytes(f"{task_id}/output.json", text.encode())}
    return {"output": output}


def read_output(record: TaskRecord, results: Blobs) -> dict[str, Any] | None:
    """A task's output, read back from the result store when it was large."""
    if record.output is not None or record.output_ref is None:
        return record.output
    output: dict[str, Any] = results.get_json(record.output_ref)
    return output


def failure(outcome: FailTask) -> tuple[TaskState, SubTaskError]:
    """The state a task the scheduler failed ends in (`cancelled` for a cancel), and why."""
    to = TaskState.CANCELLED if outcome.code is ErrorCode.CANCELLED else TaskState.FAILED
    return to, SubTaskError(code=outcome.code, message=outcome.reason)
