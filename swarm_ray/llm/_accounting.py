"""Token and model-time accounting: one call's usage, rolled up per agent, sub-task and task.

Every attempt's `SubTaskResult` carries the `TokenUsage` its agent reported (tokens,
model calls, model seconds). The task record keeps every result in its scheduler log,
so the roll-up is computed from the record alone and a replayed task adds up the same.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from swarm_ray.core import SubTaskDone, SubTaskFailed, SubTaskResult, TaskRecord, TokenUsage

__all__ = ["UsageReport", "usage_report"]


class UsageReport(BaseModel):
    """Usage of a task, and of each of its sub-tasks and agents."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: TokenUsage
    """Every attempt of the task, failed ones included."""
    subtasks: dict[str, TokenUsage]
    """By sub-task id (all attempts of it)."""
    agents: dict[str, TokenUsage]
    """By the agent (actor or replica) that ran the attempts."""

    @classmethod
    def of(cls, results: Iterable[SubTaskResult]) -> UsageReport:
        """Add up the usage of `results`."""
        task = TokenUsage()
        subtasks: dict[str, TokenUsage] = {}
        agents: dict[str, TokenUsage] = {}
        for result in results:
            task = task + result.usage
            subtasks[result.subtask_id] = subtasks.get(result.subtask_id, TokenUsage()) + (
                result.usage
            )
            agent = result.agent or "?"
            agents[agent] = agents.get(agent, TokenUsage()) + result.usage
        return cls(task=task, subtasks=subtasks, agents=agents)


def usage_report(record: TaskRecord) -> UsageReport:
    """The usage roll-up of a task from its record's scheduler log."""
    return UsageReport.of(
        event.result for event in record.log if isinstance(event, SubTaskDone | SubTaskFailed)
    )
