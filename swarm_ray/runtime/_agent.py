"""Running one sub-task attempt: the one contract every executor shares.

`run_subtask()` imports the capability's entrypoint, validates the input, calls the
function on a fresh input model (nothing carried from the previous sub-task), validates
the output, passes it through the sanitizer (`_sanitize`) and wraps it all in a
`SubTaskResult` that echoes the watermark. Exceptions become structured errors here, in
one place, whichever executor ran the attempt.

An entrypoint returns its output model, or an `AgentReply` when it also reports a
confidence, token usage or warnings. While it runs, `current_subtask()` is the attempt it
serves (an agent asking for child sub-tasks names its parent by it). An agent that needs a
person's decision calls `ask_human()`: the attempt ends there, the sub-task waits for its
task's owner, and a later attempt gets the answer and the state it saved in
`current_subtask().resume`.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import BaseModel

from swarm_ray.core.guards._sanitize import sanitize_output
from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.core.model._errors import (
    AskedHumanError,
    ErrorCode,
    InvalidSpecError,
    SanitizationError,
    StateStoreError,
    SwarmError,
)
from swarm_ray.core.model._human import HumanAsk
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._subtask import (
    MAX_CALL_RECORDS,
    CallRecord,
    SubTask,
    SubTaskError,
    SubTaskResult,
    Timings,
    TokenUsage,
    effects_keys,
)
from swarm_ray.core.planning._catalog import load_entrypoint

__all__ = ["AgentReply", "ask_human"]

MAX_SAVED_STATE = 512 * 1024
"""Bytes of JSON an agent may save to go on from after a person answers (`ask_human`)."""

_CURRENT: contextvars.ContextVar[SubTask | None] = contextvars.ContextVar(
    "swarm_ray_subtask", default=None
)


_CALLS: contextvars.ContextVar[list[CallRecord] | None] = contextvars.ContextVar(
    "swarm_ray_calls", default=None
)


def current_subtask() -> SubTask | None:
    """The sub-task attempt the calling code runs for (None outside a capability)."""
    return _CURRENT.get()


def record_call(call: CallRecord) -> None:
    """Note a model or tool call on the attempt being served (its trace shows it).

    Engines loaded by `swarm_ray.llm` and the tool agent's tools record their calls
    themselves. Outside an attempt, and past `MAX_CALL_RECORDS` calls, nothing is kept.
    """
    calls = _CALLS.get()
    if calls is not None and len(calls) < MAX_CALL_RECORDS:
        calls.append(call)


@dataclass(frozen=True)
class AgentReply:
    """An output with the extras an agent may report about it."""

    output: BaseModel
    """The output model instance."""
    confidence: float = 1.0
    """How sure the agent is, 0..1."""
    usage: TokenUsage = field(default_factory=TokenUsage)
    """LLM tokens spent."""
    warnings: tuple[str, ...] = ()
    """Degradations to show in the report."""


def ask_human(
    prompt: str,
    *,
    schema: dict[str, Any] | None = None,
    timeout_s: float | None = 3600.0,
    default: dict[str, Any] | None = None,
    state: Any = None,
    usage: TokenUsage | None = None,
) -> NoReturn:
    """Pause this attempt to ask the task's owner a question; never returns.

    The sub-task waits (`waiting_for_human`) while the rest of the task goes on, durably:
    an orchestrator restarted meanwhile still waits, and spends nothing on it. Once the
    owner answers (validated against `schema`), or at `timeout_s` with `default`, the
    sub-task runs again and `current_subtask().resume` is `{"answer": ..., "state": ...}`,
    `state` being what is passed here (JSON data, at most `MAX_SAVED_STATE` bytes). With
    no default, an unanswered question fails the sub-task with `human_timeout`. Asking
    spends no retry; a sub-task asks at most 8 times.

    Args:
        prompt: The question, as the person reads it.
        schema: JSON Schema of the answer, a JSON object (default: any object).
        timeout_s: How long to wait (None: until answered).
        default: The answer at the deadline.
        state: What the agent needs to go on from where it stopped.
        usage: The tokens this attempt spent before asking (they are accounted).

    Raises:
        AskedHumanError: always (the runtime turns it into the wait).
        InvalidSpecError: a question that is not a valid `HumanAsk`, or state that is not
            JSON data or too large.
    """
    try:
        ask = HumanAsk.model_validate(
            {
                "prompt": prompt,
                "schema": schema or {"type": "object"},
                "timeout_s": timeout_s,
                "default": default,
            }
        )
        saved = json.dumps(state)
    except (ValueError, TypeError) as exc:  # a pydantic ValidationError included
        message = f"`ask_human` was called with a question it cannot ask: {exc}"
        raise InvalidSpecError(message) from None
    if len(saved) > MAX_SAVED_STATE:
        raise InvalidSpecError(
            f"`ask_human` state is {len(saved)} bytes of JSON; at most {MAX_SAVED_STATE}"
        )
    raise AskedHumanError(
        f"paused to ask a person: {prompt[:200]}",
        ask=ask.model_dump(mode="json", by_alias=True),
        state=json.loads(saved),
        usage=(usage or TokenUsage()).model_dump(),
    )


def error_result(
    subtask: SubTask, code: ErrorCode, message: str, agent: str | None = None
) -> SubTaskResult:
    """A failed result for `subtask`, made by the runtime rather than the agent.

    It lives beside `run_subtask()` because results are made here; the executors and the
    rlimit child process both use it.
    """
    return SubTaskResult(
        task_id=subtask.task_id,
        subtask_id=subtask.subtask_id,
        capability_id=subtask.capability_id,
        attempt=subtask.attempt,
        error=SubTaskError(code=code, message=message),
        watermark=subtask.watermark,
        agent=agent,
        timings=Timings(queued_at=subtask.queued_at, finished_at=time.time()),
    )


def _agent_name() -> str:
    return f"{os.uname().nodename}:{os.getpid()}"


@functools.cache
def _node_id() -> str | None:
    """The Ray node this process runs on (cached: a process never moves)."""
    try:
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:  # outside a Ray worker: no node to name
        return None


def run_subtask(
    spec: CapabilitySpec, subtask: SubTask, *, agent: str | None = None
) -> SubTaskResult:
    """Run one attempt of `subtask` with `spec`'s entrypoint; never raises.

    An attempt with side effects (`subtask.record_effects`) is marked started before it
    runs and its result recorded after, in the result store; when the mark cannot be
    written it does not run at all.
    """
    if subtask.record_effects is None:
        return _run(spec, subtask, agent)
    from swarm_ray.runtime._results import ResultStore

    store = ResultStore(subtask.record_effects)
    started, recorded = effects_keys(subtask.task_id, subtask.subtask_id, subtask.attempt)
    try:
        store.put_bytes(started, b"")
    except StateStoreError as exc:
        return error_result(
            subtask, ErrorCode.STATE_STORE, f"not run: its start could not be recorded: {exc}"
        )
    result = _run(spec, subtask, agent)
    with contextlib.suppress(StateStoreError):  # the orchestrator may still hear it
        store.put_json(recorded, result.model_dump(mode="json"))
    return result


def _run(spec: CapabilitySpec, subtask: SubTask, agent: str | None) -> SubTaskResult:
    started = time.time()
    registry = Registry([spec])
    calls: list[CallRecord] = []
    base = {
        "task_id": subtask.task_id,
        "subtask_id": subtask.subtask_id,
        "capability_id": spec.id,
        "attempt": subtask.attempt,
        "watermark": subtask.watermark,
        "agent": agent or _agent_name(),
        "node_id": _node_id(),
    }
    try:
        if spec.entrypoint is None:
            raise InvalidSpecError(f"capability `{spec.id}` has no entrypoint to run")
        function = load_entrypoint(spec.entrypoint)
        model = registry.validate_input(spec.id, subtask.input)
        token, calls_token = _CURRENT.set(subtask), _CALLS.set(calls)
        try:
            reply = function(model)
        finally:
            _CURRENT.reset(token)
            _CALLS.reset(calls_token)
        if not isinstance(reply, AgentReply):
            reply = AgentReply(output=reply)
        output = registry.validate_output(spec.id, reply.output)
        data = output.model_dump(mode="json")
        if spec.sanitize and (findings := sanitize_output(data, spec.output_model)):
            raise SanitizationError(
                f"output of `{spec.id}` refused by the sanitizer: {'; '.join(findings[:5])}",
                findings=findings,
            )
    except AskedHumanError as exc:  # a pause, not a failure: what it spent still counts
        spent = TokenUsage.model_validate(exc.details.pop("usage", None) or {})
        return SubTaskResult(
            **base,
            error=SubTaskError.from_exception(exc),
            calls=tuple(calls),
            usage=spent,
            timings=Timings(
                queued_at=subtask.queued_at, started_at=started, finished_at=time.time()
            ),
        )
    except SwarmError as exc:
        error = SubTaskError.from_exception(exc)
    except Exception as exc:  # an agent's bug must not take the executor down
        error = SubTaskError.from_exception(exc)
    else:
        return SubTaskResult(
            **base,
            output=data,
            calls=tuple(calls),
            confidence=reply.confidence,
            usage=reply.usage,
            warnings=reply.warnings,
            timings=Timings(
                queued_at=subtask.queued_at, started_at=started, finished_at=time.time()
            ),
        )
    return SubTaskResult(
        **base,
        error=error,
        calls=tuple(calls),
        timings=Timings(queued_at=subtask.queued_at, started_at=started, finished_at=time.time()),
    )
