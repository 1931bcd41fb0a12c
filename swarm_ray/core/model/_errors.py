"""The one exception tree of swarm-ray.

Every error swarm-ray raises derives from `SwarmError`. User errors say the caller
must change something (a spec, an input, a plan); run-time errors say something went
wrong while running and a retry, a fallback or an operator may help::

    SwarmError
    ├── SwarmUserError                  the caller's input is wrong; retrying will not help
    │   ├── InvalidSpecError            a capability spec, template or config is malformed
    │   │   └── DuplicateCapabilityError
    │   ├── InvalidInputError           an input does not match a capability's input model
    │   ├── UnknownCapabilityError      a capability id that is not registered
    │   ├── InvalidPlanError            unknown capability, cycle, missing dependency, depth
    │   ├── NoTemplateMatchedError      intent routing found no template for a request
    │   ├── TaskNotFoundError           a task id the orchestrator does not know (or not yours)
    │   ├── TaskConflictError           a task id reused for a different request
    │   ├── InputNotAllowedError        an untrusted caller named a server path or URL
    │   ├── LimitExceededError          a request over a size, count or depth limit
    │   └── AnswerRefusedError          an answer to a sub-task not waiting, or not yours
    └── SwarmRuntimeError               something failed while running
        ├── SubTaskTimeoutError         a sub-task ran past its deadline
        ├── AgentUnavailableError       no agent could take the sub-task (died, unhealthy)
        ├── AgentExecutionError         the agent ran and raised
        ├── InvalidOutputError          an agent's output failed its output model
        ├── SanitizationError           an agent's output failed the sanitizer
        ├── ResourceLimitError          an attempt passed its memory, CPU or process limit
        ├── WatermarkRejectedError      forged, altered, replayed, expired or unknown result
        ├── CircuitOpenError            the capability's circuit breaker is open
        ├── HumanTimeoutError           nobody answered a waiting sub-task by its deadline
        ├── AskedHumanError             not a failure: the attempt paused to ask a person
        ├── InvalidStateTransitionError an illegal move of the task state machine
        ├── OrchestratorUnavailableError the orchestrator did not answer (in time)
        └── StateStoreError             the state or result store failed
            └── RecordUnreadableError   a stored task record that cannot be loaded

Every class keeps its constructor's keyword details as attributes and survives a pickle
round trip, because Ray re-raises a remote error as the original class only when it
pickles. Each class carries the `ErrorCode` that a `SubTaskResult` reports for it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

__all__ = [
    "AgentExecutionError",
    "AgentUnavailableError",
    "AnswerRefusedError",
    "AskedHumanError",
    "BudgetExceededError",
    "CircuitOpenError",
    "DuplicateCapabilityError",
    "ErrorCode",
    "HumanTimeoutError",
    "InputNotAllowedError",
    "InvalidInputError",
    "InvalidOutputError",
    "InvalidPlanError",
    "InvalidSpecError",
    "InvalidStateTransitionError",
    "LimitExceededError",
    "NoTemplateMatchedError",
    "OrchestratorUnavailableError",
    "RecordUnreadableError",
    "ResourceLimitError",
    "SanitizationError",
    "StateStoreError",
    "SubTaskTimeoutError",
    "SwarmError",
    "SwarmRuntimeError",
    "SwarmUserError",
    "TaskConflictError",
    "TaskNotFoundError",
    "UnknownCapabilityError",
    "WatermarkRejectedError",
]


class ErrorCode(StrEnum):
    """Structured error codes carried by failed sub-task results."""

    INVALID_SPEC = "invalid_spec"
    INVALID_INPUT = "invalid_input"
    UNKNOWN_CAPABILITY = "unknown_capability"
    INVALID_PLAN = "invalid_plan"
    NO_TEMPLATE = "no_template"
    TASK_NOT_FOUND = "task_not_found"
    TASK_CONFLICT = "task_conflict"
    INPUT_NOT_ALLOWED = "input_not_allowed"
    LIMIT_EXCEEDED = "limit_exceeded"
    BUDGET_EXCEEDED = "budget_exceeded"
    RECORD_UNREADABLE = "record_unreadable"
    TIMEOUT = "timeout"
    AGENT_UNAVAILABLE = "agent_unavailable"
    AGENT_ERROR = "agent_error"
    INVALID_OUTPUT = "invalid_output"
    SANITIZATION_FAILED = "sanitization_failed"
    RESOURCE_LIMIT = "resource_limit"
    WATERMARK_REJECTED = "watermark_rejected"
    CIRCUIT_OPEN = "circuit_open"
    INVALID_TRANSITION = "invalid_transition"
    STATE_STORE = "state_store"
    ORCHESTRATOR_UNAVAILABLE = "orchestrator_unavailable"
    ANSWER_REFUSED = "answer_refused"
    HUMAN_TIMEOUT = "human_timeout"
    ASKED_HUMAN = "asked_human"
    NEEDS_REVIEW = "needs_review"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    UNKNOWN = "unknown"


class SwarmError(Exception):
    """Root of every swarm-ray error.

    Args:
        message: What went wrong, naming the thing in backticks and the value with `!r`.
        **details: Structured context (ids, field names); kept as attributes.
    """

    code: ErrorCode = ErrorCode.UNKNOWN

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = dict(details)

    def __getattr__(self, name: str) -> Any:
        details = self.__dict__.get("details")
        if details is not None and name in details:
            return details[name]
        raise AttributeError(name)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.message, self.details))

    def __eq__(self, other: object) -> bool:
        return (
            type(self) is type(other)
            and isinstance(other, SwarmError)
            and (self.message, self.details) == (other.message, other.details)
        )

    def __hash__(self) -> int:
        return hash((type(self), self.message))


def _rebuild(cls: type[SwarmError], message: str, details: dict[str, Any]) -> SwarmError:
    return cls(message, **details)


class SwarmUserError(SwarmError):
    """The caller's input is wrong; retrying the same call will not help."""


class InvalidSpecError(SwarmUserError):
    """A capability spec, task template or configuration value is malformed."""

    code = ErrorCode.INVALID_SPEC


class DuplicateCapabilityError(InvalidSpecError):
    """A capability id was registered twice."""


class InvalidInputError(SwarmUserError):
    """An input does not validate against a capability's input model.

    Details: `capability_id` and `errors`, a list of `{"field", "problem", "value"}`.
    """

    code = ErrorCode.INVALID_INPUT


class UnknownCapabilityError(SwarmUserError):
    """A capability id that is not in the registry."""

    code = ErrorCode.UNKNOWN_CAPABILITY


class InvalidPlanError(SwarmUserError):
    """A plan or template that cannot run: unknown capability, cycle, missing dependency."""

    code = ErrorCode.INVALID_PLAN


class NoTemplateMatchedError(SwarmUserError):
    """Intent routing found no template for a request."""

    code = ErrorCode.NO_TEMPLATE


class TaskNotFoundError(SwarmUserError):
    """A task id the orchestrator does not know."""

    code = ErrorCode.TASK_NOT_FOUND


class TaskConflictError(SwarmUserError):
    """A caller-chosen task id already names a different request of the same caller."""

    code = ErrorCode.TASK_CONFLICT


class InputNotAllowedError(SwarmUserError):
    """An untrusted caller named a server path, a URI or a URL it may not use.

    Details: `field` (where the value was), `reason`.
    """

    code = ErrorCode.INPUT_NOT_ALLOWED


class LimitExceededError(SwarmUserError):
    """A request over one of the gateway's limits (size, count, depth, open tasks).

    Details: `limit` (its name), `value`, `maximum`.
    """

    code = ErrorCode.LIMIT_EXCEEDED


class BudgetExceededError(LimitExceededError):
    """A task spent more tokens or money than its request's `budget`; it was stopped.

    Details: `limit` (`budget.max_tokens` or `budget.max_cost`), `value`, `maximum`.
    """

    code = ErrorCode.BUDGET_EXCEEDED


class AnswerRefusedError(SwarmUserError):
    """An answer for a sub-task that is not waiting for one, or from someone not its owner.

    Details: `task_id`, `subtask_id` and `reason` (`not_waiting`, `not_owner`).
    """

    code = ErrorCode.ANSWER_REFUSED


class SwarmRuntimeError(SwarmError):
    """Something failed while running; a retry, fallback or operator may help."""


class SubTaskTimeoutError(SwarmRuntimeError):
    """A sub-task ran past its deadline."""

    code = ErrorCode.TIMEOUT


class AgentUnavailableError(SwarmRuntimeError):
    """No agent could take the sub-task: it died, or is unhealthy or out of dispatch."""

    code = ErrorCode.AGENT_UNAVAILABLE


class AgentExecutionError(SwarmRuntimeError):
    """The agent ran the sub-task and raised."""

    code = ErrorCode.AGENT_ERROR


class InvalidOutputError(SwarmRuntimeError):
    """An agent's output failed validation against the capability's output model."""

    code = ErrorCode.INVALID_OUTPUT


class SanitizationError(SwarmRuntimeError):
    """An agent's output holds a dangerous command, a secret or refused code (`_sanitize`)."""

    code = ErrorCode.SANITIZATION_FAILED


class ResourceLimitError(SwarmRuntimeError):
    """An attempt passed its capability's memory, CPU-time or process limit and was stopped."""

    code = ErrorCode.RESOURCE_LIMIT


class WatermarkRejectedError(SwarmRuntimeError):
    """A result whose watermark is forged, altered, replayed, expired or unknown."""

    code = ErrorCode.WATERMARK_REJECTED


class CircuitOpenError(SwarmRuntimeError):
    """The capability's circuit breaker is open; it takes no sub-tasks until it cools down."""

    code = ErrorCode.CIRCUIT_OPEN


class HumanTimeoutError(SwarmRuntimeError):
    """A sub-task waiting for a person passed its deadline with no answer and no default."""

    code = ErrorCode.HUMAN_TIMEOUT


class AskedHumanError(SwarmRuntimeError):
    """Not a failure: the attempt paused to ask its task's owner a question.

    An agent raises it (through `swarm_ray.agent.ask_human`) with the question and what
    it needs to go on (`state`); the scheduler holds the sub-task as `waiting` and runs it
    again with the answer and that state (`SubTask.resume`). Details: `ask` (a `HumanAsk`
    as data), `state`.
    """

    code = ErrorCode.ASKED_HUMAN


class InvalidStateTransitionError(SwarmRuntimeError):
    """An illegal move of the task state machine."""

    code = ErrorCode.INVALID_TRANSITION


class OrchestratorUnavailableError(SwarmRuntimeError):
    """The orchestrator did not answer a client's call in time, or is gone.

    Raised by the clients (`swarm_ray.runtime._aclient`), chained from Ray's own error,
    whose text names actors, nodes and addresses (the operator's, not an HTTP caller's).
    """

    code = ErrorCode.ORCHESTRATOR_UNAVAILABLE


class StateStoreError(SwarmRuntimeError):
    """The state store or result store failed to read or write."""

    code = ErrorCode.STATE_STORE


class RecordUnreadableError(StateStoreError):
    """A stored task record that cannot be loaded; the task is quarantined, alone."""

    code = ErrorCode.RECORD_UNREADABLE


def error_for_code(code: ErrorCode) -> type[SwarmError]:
    """Return the exception class that reports `code` (the most specific one)."""
    for cls in _ALL_ERRORS:
        if cls.code is code:
            return cls
    return SwarmRuntimeError


_ALL_ERRORS: tuple[type[SwarmError], ...] = (
    InvalidSpecError,
    InvalidInputError,
    UnknownCapabilityError,
    InvalidPlanError,
    NoTemplateMatchedError,
    TaskNotFoundError,
    TaskConflictError,
    InputNotAllowedError,
    LimitExceededError,
    BudgetExceededError,
    AnswerRefusedError,
    SubTaskTimeoutError,
    AgentUnavailableError,
    AgentExecutionError,
    InvalidOutputError,
    SanitizationError,
    ResourceLimitError,
    WatermarkRejectedError,
    CircuitOpenError,
    HumanTimeoutError,
    AskedHumanError,
    InvalidStateTransitionError,
    OrchestratorUnavailableError,
    StateStoreError,
    RecordUnreadableError,
)
