"""The pure part of swarm-ray: what decides, with no Ray and no I/O library.

Its sub-packages, from the lowest up (each imports only from those below it):

- `core.model`: requests, sub-tasks, templates, plans, capability specs and the
  registry, the task state machine, signals, the stored record, the error tree;
- `core.guards`: access, request limits, the sanitizer, schema bounds, principals,
  watermarks and the task's gate;
- `core.planning`: the template router, the planning API, catalogs;
- `core.scheduling`: the scheduler, one owner of the DAG's state, and its pure policies;
- `core.durability`: the journal's contract, the task log, the ledger, recovery;
- `core.driver`: the task driver (`TaskDriver`), the one owner of a task's decisions;
- `core.views`: a task as callers see it, a watermark traced back.

It runs in any Python process and is tested without Ray; `swarm_ray.runtime` carries its
decisions out. Public names are re-exported from `swarm_ray`. This module is the face the
workloads (`documents`, `video`, `llm`, `gateway`) import: what a stage may emit, the
planning API the LLM planner uses, report views, and the guards a workload applies. They
import no private module of `core`; `swarm_ray.runtime` may.
"""

from swarm_ray.core.guards._access import (
    Access,
    Bounded,
    Label,
    Pattern,
    ReadPath,
    WritePath,
    is_uri,
)
from swarm_ray.core.guards._limits import RequestLimits
from swarm_ray.core.guards._principal import PRINCIPAL_ID, Principal
from swarm_ray.core.guards._schema_bounds import (
    SchemaBoundsError,
    TenantSchema,
    check_schema,
    schema_validator,
)
from swarm_ray.core.model._capability import (
    CapabilitySpec,
    ExecutorKind,
    Resources,
    RetryPolicy,
    capability_maker,
)
from swarm_ray.core.model._errors import (
    AgentExecutionError,
    AgentUnavailableError,
    AnswerRefusedError,
    BudgetExceededError,
    ErrorCode,
    InvalidInputError,
    InvalidOutputError,
    InvalidSpecError,
    LimitExceededError,
    OrchestratorUnavailableError,
    ResourceLimitError,
    StateStoreError,
    SubTaskTimeoutError,
    SwarmError,
    SwarmRuntimeError,
    SwarmUserError,
    TaskConflictError,
    TaskNotFoundError,
    UnknownCapabilityError,
)
from swarm_ray.core.model._plan import Plan
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._registry import Registry, field_errors
from swarm_ray.core.model._signals import SubTaskDone, SubTaskFailed
from swarm_ray.core.model._subtask import (
    CallRecord,
    SubTask,
    SubTaskError,
    SubTaskResult,
    TokenUsage,
)
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.model._template import FanOut, TaskTemplate
from swarm_ray.core.model._traceparent import parse_traceparent
from swarm_ray.core.planning._catalog import Catalog, load_entrypoint
from swarm_ray.core.planning._planning import (
    CapabilityLine,
    DraftStage,
    PlanDraft,
    fallback_plan,
    plan_from_draft,
)
from swarm_ray.core.planning._routing import TemplateRouter
from swarm_ray.core.views._trace import short_id
from swarm_ray.core.views._views import TaskStatus, UsageView

__all__ = [
    "PRINCIPAL_ID",
    "Access",
    "AgentExecutionError",
    "AgentUnavailableError",
    "AnswerRefusedError",
    "Bounded",
    "BudgetExceededError",
    "CallRecord",
    "CapabilityLine",
    "CapabilitySpec",
    "Catalog",
    "DraftStage",
    "ErrorCode",
    "ExecutorKind",
    "FanOut",
    "InvalidInputError",
    "InvalidOutputError",
    "InvalidSpecError",
    "Label",
    "LimitExceededError",
    "OrchestratorUnavailableError",
    "Pattern",
    "Plan",
    "PlanDraft",
    "Principal",
    "ReadPath",
    "Registry",
    "RequestLimits",
    "ResourceLimitError",
    "Resources",
    "RetryPolicy",
    "SchemaBoundsError",
    "StateStoreError",
    "SubTask",
    "SubTaskDone",
    "SubTaskError",
    "SubTaskFailed",
    "SubTaskResult",
    "SubTaskTimeoutError",
    "SwarmError",
    "SwarmRuntimeError",
    "SwarmUserError",
    "TaskConflictError",
    "TaskNotFoundError",
    "TaskRecord",
    "TaskRequest",
    "TaskStatus",
    "TaskTemplate",
    "TemplateRouter",
    "TenantSchema",
    "TokenUsage",
    "UnknownCapabilityError",
    "UsageView",
    "WritePath",
    "capability_maker",
    "check_schema",
    "fallback_plan",
    "field_errors",
    "is_uri",
    "load_entrypoint",
    "parse_traceparent",
    "plan_from_draft",
    "schema_validator",
    "short_id",
]
