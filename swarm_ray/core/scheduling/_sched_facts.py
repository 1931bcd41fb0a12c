"""What the scheduler tells of its task, read only: asking changes nothing it decides.

Of one sub-task: its status, whether it settled, its spec, its accepted result, the
error it failed with for good, its latest round (`current`) and its input as a dispatch
would send it now (`resolved_input`, for tracing). Of the task: the attempts out
(`outstanding`, what a recovered driver sends again), whether a planner still drafts its
plan, the final results and the progress, what was spent (`usage`, `compute_seconds`),
and `snapshot`, all that decides future intents as plain data, for replay checks. The
driver, `core.driver._outcome`, the views and the trace read them, as they read what waits for a
person (`waiting`, `wait_of`, `next_deadline`, `answer`). `SchedulerFacts` is mixed into
`Scheduler`; it reads the scheduler's state and writes none of it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from swarm_ray.core.model._human import HumanWait
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import (
    Dispatch,
    DraftSettled,
    FailTask,
    Fallback,
    FinishTask,
    Intent,
    ResultRejected,
    Retry,
    SchedulerEvent,
    SubTaskDone,
    SubTaskFailed,
)
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult, SubTaskSpec, TokenUsage
from swarm_ray.core.scheduling._breakers import Breakers
from swarm_ray.core.scheduling._dag import Dag
from swarm_ray.core.scheduling._inputs import resolve
from swarm_ray.core.scheduling._node import SETTLED, SubTaskStatus, latest
from swarm_ray.core.scheduling._wait_table import WaitTable
from swarm_ray.core.scheduling._waits import next_deadline

__all__: list[str] = []


class SchedulerFacts:
    """The scheduler's read-only queries about its task and sub-tasks."""

    if TYPE_CHECKING:  # what of the scheduler they read
        plan: Plan
        warnings: list[str]
        drafted: DraftSettled | None
        outcome: FinishTask | FailTask | None
        _registry: Registry
        _results: dict[str, SubTaskResult]
        _running: dict[str, Dispatch | Retry | Fallback]
        _breakers: Breakers
        _waits: WaitTable
        _received: list[SubTaskResult]
        _dag: Dag
        _draft: str | None

    def waiting(self) -> list[HumanWait]:
        """Sub-tasks waiting for a person, in the order they began to wait."""
        return list(self._waits.waits.values())

    def wait_of(self, subtask_id: str) -> HumanWait | None:
        """What `subtask_id` waits for, if it waits for a person."""
        return self._waits.waits.get(subtask_id)

    def next_deadline(self) -> float | None:
        """The earliest deadline of a waiting sub-task (when to wake), if any."""
        return next_deadline(self._waits.waits)

    def answer(self, subtask_id: str) -> dict[str, Any] | None:
        """The answer a sub-task ran with (given, or its default), if it asked a person."""
        node = self._dag.nodes.get(subtask_id)
        return None if node is None else node.answer

    @property
    def drafting(self) -> bool:
        """True while the task's plan is being drafted (until `PlanAdopted`)."""
        return self.plan.draft_subtask is not None

    def outstanding(self) -> list[Dispatch | Retry | Fallback]:
        """Attempts dispatched and not yet answered (what a recovered driver re-sends)."""
        return [intent.model_copy(update={"delay_s": 0.0}) for intent in self._running.values()]

    def status(self, subtask_id: str) -> SubTaskStatus:
        """A sub-task's status."""
        return self._dag.nodes[subtask_id].status

    def settled(self, subtask_id: str) -> bool:
        """True when the sub-task will not run again (succeeded, failed, skipped, cancelled)."""
        node = self._dag.nodes.get(subtask_id)
        return node is not None and node.status in SETTLED

    def specs(self) -> list[SubTaskSpec]:
        """Every sub-task, the dynamically added ones included, in the order added."""
        return [node.spec for node in self._dag.nodes.values()]

    def result(self, subtask_id: str) -> SubTaskResult | None:
        """The accepted result of a sub-task, if it succeeded."""
        return self._results.get(subtask_id)

    def resolved_input(self, subtask_id: str) -> dict[str, Any]:
        """The sub-task's input as it resolves now (what a dispatch would send).

        For tracing: inputs that read `$warnings` or `$costs` can differ from what an
        earlier attempt was sent, which the caller tells by the watermark's input digest.
        """
        node = self._dag.nodes[subtask_id]
        data = resolve(node.spec, self._dag.nodes, self._results, self.warnings)
        model = self._registry.validate_input(node.capability, data)
        return model.model_dump(mode="json")

    def error(self, subtask_id: str) -> SubTaskError | None:
        """The final error of a sub-task that failed for good."""
        node = self._dag.nodes.get(subtask_id)
        return None if node is None else node.error

    def current(self, subtask_id: str) -> str:
        """The latest round of a sub-task (follows feedback-loop revisions)."""
        return latest(self._dag.nodes, subtask_id)

    def final_results(self) -> dict[str, SubTaskResult]:
        """Accepted results of the plan's sub-tasks not superseded by a later round.

        A planner's draft is not one of them: the plan made of it superseded it.
        """
        nodes, draft = self._dag.nodes, self._draft
        return {
            k: v for k, v in self._results.items() if nodes[k].replaced_by is None and k != draft
        }

    def progress(self) -> float:
        """Fraction of the plan's sub-tasks settled (0 while a planner drafts the plan)."""
        if self.plan.draft_subtask is not None:
            return 0.0
        drafted = self._draft is not None  # settled, and not one of the plan's
        return (self._dag.settled - drafted) / max(1, len(self._dag.nodes) - drafted)

    def usage(self) -> TokenUsage:
        """Tokens spent by every attempt received so far, failed ones included."""
        total = TokenUsage()
        for result in self._received:
            total = total + result.usage
        return total

    def compute_seconds(self) -> float:
        """Agent run time of every attempt received so far."""
        return sum(r.timings.duration_s for r in self._received)

    def _reject(self, subtask_id: str, attempt: int) -> ResultRejected | None:
        """Why a result of `subtask_id`'s `attempt` may not be taken, if it may not."""
        node = self._dag.nodes.get(subtask_id)
        if node is None:
            return ResultRejected(subtask_id=subtask_id, attempt=attempt, reason="unknown sub-task")
        if node.status is not SubTaskStatus.RUNNING:
            reason = f"sub-task is {node.status}, not running"
            return ResultRejected(subtask_id=subtask_id, attempt=attempt, reason=reason)
        if node.attempt != attempt:
            reason = f"stale attempt {attempt}, expecting {node.attempt}"
            return ResultRejected(subtask_id=subtask_id, attempt=attempt, reason=reason)
        return None

    def _late(self, event: SchedulerEvent) -> list[Intent]:
        """What an event that came after the task's end is told: a result is refused."""
        if isinstance(event, SubTaskDone | SubTaskFailed):
            r = event.result
            return [ResultRejected(subtask_id=r.subtask_id, attempt=r.attempt, reason="task ended")]
        return []

    def snapshot(self) -> dict[str, Any]:
        """Everything that decides future intents, as plain data (for replay checks)."""
        nodes = self._dag.nodes.items()
        return {
            "specs": [n.spec.model_dump() for n in self._dag.nodes.values()],
            "status": {k: str(n.status) for k, n in nodes},
            "capability": {k: n.capability for k, n in nodes},
            "attempt": {k: n.attempt for k, n in nodes},
            "results": sorted(self._results),
            "alias": {k: n.replaced_by for k, n in nodes if n.replaced_by is not None},
            "held": list(self._breakers.held),
            "waits": [w.model_dump() for w in self._waits.waits.values()],
            "answers": {k: n.answer for k, n in nodes if n.answer is not None},
            "asked": {
                k: [n.asked[0].model_dump(), n.asked[1]] for k, n in nodes if n.asked is not None
            },
            "resume": {k: n.resume for k, n in nodes if n.resume is not None},
            "breakers": {k: vars(b).copy() for k, b in self._breakers.breakers.items()},
            "warnings": list(self.warnings),
            "template": self.plan.template.name,
            "drafted": None if self.drafted is None else self.drafted.model_dump(),
            "outcome": None if self.outcome is None else self.outcome.model_dump(),
        }
