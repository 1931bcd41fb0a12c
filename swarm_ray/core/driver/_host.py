"""The driver as its mixins see it: what of `TaskDriver` they may use, declared once.

`TaskDriver` is its matching and sequencing (`_driver`) and mixins, one idea each (see
its docstring). A mixin's methods use the driver's state and its steps: feed the
scheduler, carry intents out, take a result in, keep to the budget, fail the task. They
assign none of the driver's fields: the driver sets its own scheduler (`_begin`) and
keeps its own set of watched children (`tests/test_sched_policies.py` checks this).
`DriverHost` declares what they use for the type checker alone, so every mixin is
checked against the driver it is mixed into without importing it (that import would
close a circle). At run time it is an empty class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from swarm_ray.core.driver._commands import Step
from swarm_ray.core.durability._journal import Blobs
from swarm_ray.core.durability._ledger import Ledger
from swarm_ray.core.guards._access import AccessPolicy
from swarm_ray.core.guards._gate import Gate
from swarm_ray.core.model._errors import SwarmError
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import Intent, SchedulerEvent
from swarm_ray.core.model._subtask import SubTaskResult
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__: list[str] = []


class DriverHost:
    """What of `TaskDriver` its mixins use (the driver defines each)."""

    if TYPE_CHECKING:
        scheduler: Scheduler | None
        registry: Registry
        _ledger: Ledger
        _gate: Gate
        _router: TemplateRouter
        _access: AccessPolicy | None
        _results: Blobs
        _clock: Callable[[], float]

        @property
        def record(self) -> TaskRecord: ...

        @property
        def task_id(self) -> str: ...

        @property
        def state(self) -> TaskState: ...

        def _begin(self, plan: Plan) -> list[Intent]: ...

        def _feed(self, event: SchedulerEvent) -> list[Intent]: ...

        def _carry(self, intents: Sequence[Intent], out: Step) -> None: ...

        def _fail(self, error: SwarmError, out: Step) -> None: ...

        def _arrived(self, result: SubTaskResult, out: Step) -> None: ...

        def _keep_to_budget(self, out: Step) -> None: ...
