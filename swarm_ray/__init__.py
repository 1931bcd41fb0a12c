"""swarm-ray: a Ray-native agent swarm under one deterministic, auditable orchestrator.

The public API, re-exported from the layers: `swarm_ray.core` (the pure part: plans,
the scheduler, the task driver, specs, errors) and `swarm_ray.runtime` (the Ray edge:
the orchestrator actor, executors, stores, the client). Everything else stays importable
from its own module.
"""

from swarm_ray.core.guards._access import FetchURL, Label, Pattern, ReadPath, WritePath
from swarm_ray.core.model._capability import (
    BreakerPolicy,
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
    AskedHumanError,
    BudgetExceededError,
    CircuitOpenError,
    DuplicateCapabilityError,
    ErrorCode,
    HumanTimeoutError,
    InputNotAllowedError,
    InvalidInputError,
    InvalidOutputError,
    InvalidPlanError,
    InvalidSpecError,
    InvalidStateTransitionError,
    LimitExceededError,
    NoTemplateMatchedError,
    OrchestratorUnavailableError,
    RecordUnreadableError,
    ResourceLimitError,
    SanitizationError,
    StateStoreError,
    SubTaskTimeoutError,
    SwarmError,
    SwarmRuntimeError,
    SwarmUserError,
    TaskConflictError,
    TaskNotFoundError,
    UnknownCapabilityError,
    WatermarkRejectedError,
)
from swarm_ray.core.model._fsm import TaskState
from swarm_ray.core.model._human import HumanAsk
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.model._subtask import SubTaskResult, TokenUsage
from swarm_ray.core.model._task import Budget, TaskEvent, TaskRequest
from swarm_ray.core.model._template import (
    DynamicRule,
    FanOut,
    FeedbackLoop,
    Stage,
    TaskTemplate,
    load_template,
    template_json_schema,
)
from swarm_ray.core.planning._catalog import Catalog
from swarm_ray.core.views._trace import short_id
from swarm_ray.core.views._views import TaskStatus
from swarm_ray.runtime._aclient import AsyncSwarmClient
from swarm_ray.runtime._adapter import HttpAdapter
from swarm_ray.runtime._agent import AgentReply, ask_human
from swarm_ray.runtime._children import ChildOutcome, run_child
from swarm_ray.runtime._client import SwarmClient, TaskHandle, connect
from swarm_ray.runtime._rollout import rollouts

__version__ = "0.1.0"

__all__ = [
    "AgentExecutionError",
    "AgentReply",
    "AgentUnavailableError",
    "AnswerRefusedError",
    "AskedHumanError",
    "AsyncSwarmClient",
    "BreakerPolicy",
    "Budget",
    "BudgetExceededError",
    "CapabilitySpec",
    "Catalog",
    "ChildOutcome",
    "CircuitOpenError",
    "DuplicateCapabilityError",
    "DynamicRule",
    "ErrorCode",
    "ExecutorKind",
    "FanOut",
    "FeedbackLoop",
    "FetchURL",
    "HttpAdapter",
    "HumanAsk",
    "HumanTimeoutError",
    "InputNotAllowedError",
    "InvalidInputError",
    "InvalidOutputError",
    "InvalidPlanError",
    "InvalidSpecError",
    "InvalidStateTransitionError",
    "Label",
    "LimitExceededError",
    "NoTemplateMatchedError",
    "OrchestratorUnavailableError",
    "Pattern",
    "ReadPath",
    "RecordUnreadableError",
    "ResourceLimitError",
    "Resources",
    "RetryPolicy",
    "SanitizationError",
    "Stage",
    "StateStoreError",
    "SubTaskResult",
    "SubTaskTimeoutError",
    "SwarmClient",
    "SwarmError",
    "SwarmRuntimeError",
    "SwarmUserError",
    "TaskConflictError",
    "TaskEvent",
    "TaskHandle",
    "TaskNotFoundError",
    "TaskRecord",
    "TaskRequest",
    "TaskState",
    "TaskStatus",
    "TaskTemplate",
    "TokenUsage",
    "UnknownCapabilityError",
    "WatermarkRejectedError",
    "WritePath",
    "__version__",
    "ask_human",
    "capability_maker",
    "connect",
    "load_template",
    "rollouts",
    "run_child",
    "short_id",
    "template_json_schema",
]
