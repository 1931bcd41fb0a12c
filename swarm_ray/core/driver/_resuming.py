"""After a restart, the driver's side: its task goes on from where its log says it was.

A restarted orchestrator loads each task that had not ended (`TaskDriver.load` replays
its log into a fresh scheduler) and feeds it `Resume`. An ended task is closed; one that
went past its budget just before the restart is stopped; one never planned is planned
again (`Replan`); one whose DAG was stored but never started starts now; one whose end,
or whose planner's draft, is logged goes on from there. Else each attempt that was out
is sent again with a fresh watermark, or, if it may have changed the world, settled as
`_recovery` says (its recorded result taken in, a person asked to review it, or sent
again), and a person's deadline still waited for is armed again.

`Resuming` is mixed into `TaskDriver`.
"""

from __future__ import annotations

from swarm_ray.core.driver._commands import Close, Replan, Step, WakeAt
from swarm_ray.core.driver._host import DriverHost
from swarm_ray.core.durability._recovery import in_doubt, settle_in_doubt
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._signals import ReviewRequested, Start
from swarm_ray.core.model._subtask import SubTaskResult

__all__: list[str] = []


class Resuming(DriverHost):
    """The driver's method that takes its task up again after a restart."""

    def _resume(self, out: Step) -> None:
        """After a restart: plan again if no plan was stored, else re-send what was out.

        A store that commits write by write (Redis) may keep the snapshot that set the
        task's DAG and lose the `Start` written after it: that DAG is started now.
        """
        if self.state.terminal:
            out.commands.append(Close())
            return
        self._keep_to_budget(out)  # it went past its budget just before the restart
        if self.state.terminal:
            return
        if self.scheduler is None:
            out.commands.append(Replan())  # planned as a new request would be
            return
        if not self.scheduler.started:  # its DAG was stored, its `Start` was not
            self._carry(self._feed(Start(at=self._clock())), out)
            if self.state is TaskState.DISPATCHING:
                self._ledger.move(TaskState.EXECUTING, "first sub-tasks dispatched after a restart")
            return
        if self.scheduler.outcome is not None:
            self._carry([self.scheduler.outcome], out)
            return
        if self.scheduler.drafted is not None:  # its draft is logged: the planner is not
            self._carry([self.scheduler.drafted], out)  # asked again, its plan is made
            return
        outstanding = self.scheduler.outstanding()
        for intent in outstanding:
            self._gate.forget(intent.subtask_id)
        self._ledger.emit("state", str(self.state), summary=f"resumed {len(outstanding)} sub-tasks")
        if self.state is TaskState.DISPATCHING:
            self._ledger.move(TaskState.EXECUTING, "resumed after a restart")
        resend, doubtful = in_doubt(outstanding, self.registry)
        self._carry(resend, out)
        for intent in doubtful:  # settled as `_recovery` says, unless the task ended
            if self.state.terminal:
                break
            match settle_in_doubt(intent, self.task_id, self._results, self._clock):
                case SubTaskResult() as result:
                    self._gate.expect(result)
                    self._arrived(result, out)
                case ReviewRequested() as review:
                    self._carry(self._feed(review), out)
                case None:
                    self._carry([intent], out)
        deadline = self.scheduler.next_deadline()  # a person's, still waited for
        if deadline is not None:
            out.commands.append(WakeAt(deadline))
