"""What an attempt's end leads to, as a pure policy: retry, fallback, keep, or fail for good.

An attempt that fails or passes its deadline is retried with backoff while its
capability's `retry` policy allows it (one refused before dispatch is not: the same input
would fail the same way). Then the sub-task switches to the next fallback it has not
tried; with none left it keeps a low-confidence result an earlier capability gave (with a
warning), or fails for good. A result under its capability's confidence threshold is
kept aside while a fallback runs, and the best one is kept, with a warning, when none is
left (`after_success`).

The errors in `BREAKER_CODES` count towards a capability's circuit breaker
(`core.scheduling._breaker`). Once the task reaches its budget (`SpendingStopped`) every sub-task
that `spends` fails with `budget_error`.

Every function here reads a sub-task's record (`core.scheduling._node`) and the registry and
returns a decision; it changes nothing. `Scheduler` applies the decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass

from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import SpendingStopped
from swarm_ray.core.model._subtask import SubTaskError, SubTaskResult
from swarm_ray.core.scheduling._node import _Node

__all__: list[str] = []

BREAKER_CODES = frozenset(
    {
        ErrorCode.TIMEOUT,
        ErrorCode.AGENT_UNAVAILABLE,
        ErrorCode.AGENT_ERROR,
        ErrorCode.INVALID_OUTPUT,
        ErrorCode.SANITIZATION_FAILED,
    }
)
"""Errors that say something about the capability, so count towards opening its breaker."""


@dataclass(frozen=True, slots=True)
class RetryAfter:
    """Run the same capability again after `delay_s`."""

    delay_s: float


@dataclass(frozen=True, slots=True)
class SwitchTo:
    """Run the sub-task on `fallback` from now on; `low` is what it keeps aside meanwhile."""

    fallback: str
    reason: str
    low: SubTaskResult | None


@dataclass(frozen=True, slots=True)
class Keep:
    """Accept `result`, with `warning` when it is a degraded one."""

    result: SubTaskResult
    warning: str | None
    low: SubTaskResult | None
    """What the sub-task keeps aside from now on."""


@dataclass(frozen=True, slots=True)
class FailForGood:
    """No retry, no fallback, nothing kept: the sub-task fails with its error."""


AfterFailure = RetryAfter | SwitchTo | Keep | FailForGood
AfterSuccess = SwitchTo | Keep


def next_fallback(registry: Registry, capability: str, tried: Sequence[str]) -> str | None:
    """The first fallback down `capability`'s chain not `tried` yet, if any."""
    fallback = registry.get(capability).fallback
    while fallback is not None and fallback in tried:
        fallback = registry.get(fallback).fallback
    return fallback


def after_failure(
    node: _Node, error: SubTaskError, registry: Registry, *, retry: bool = True
) -> AfterFailure:
    """What `node`'s failed attempt leads to (`retry=False`: refused before dispatch)."""
    policy = registry.get(node.capability).retry
    if retry and error.code in policy.retry_on and node.cap_attempts < policy.max_attempts:
        return RetryAfter(policy.delay_s(node.cap_attempts + 1))
    fallback = next_fallback(registry, node.capability, node.tried)
    if fallback is not None:
        reason = f"{error.code} after {node.cap_attempts} attempt(s)"
        return SwitchTo(fallback, reason, node.low)
    if node.low is not None:
        warning = (
            f"sub-task `{node.spec.id}`: fallback failed ({error.code}); kept the "
            f"low-confidence result of `{node.low.capability_id}`"
        )
        return Keep(node.low, warning, None)
    return FailForGood()


def after_success(node: _Node, result: SubTaskResult, registry: Registry) -> AfterSuccess:
    """Keep `result`, or, under its confidence threshold, try a fallback or keep the best."""
    threshold = registry.get(node.capability).confidence_threshold
    if result.confidence >= threshold:
        return Keep(result, None, node.low)
    previous = node.low
    best = result if previous is None or result.confidence > previous.confidence else previous
    fallback = next_fallback(registry, node.capability, node.tried)
    if fallback is not None:
        reason = f"confidence {result.confidence:.2f} under threshold {threshold:.2f}"
        return SwitchTo(fallback, reason, best)
    warning = (
        f"sub-task `{node.spec.id}`: confidence {best.confidence:.2f} of "
        f"`{best.capability_id}` is under its threshold; kept with this warning"
    )
    return Keep(best, warning, None)


def failed_message(node: _Node, error: SubTaskError) -> str:
    """What the task is told of a sub-task that failed for good."""
    return f"sub-task `{node.spec.id}` on `{node.capability}` failed: {error.message}"


def spends(registry: Registry, capability_id: str, spenders: Set[str]) -> bool:
    """Whether attempts of `capability_id` cost (an `llm` tag, or spending seen in the task)."""
    return "llm" in registry.get(capability_id).tags or capability_id in spenders


def budget_error(event: SpendingStopped) -> SubTaskError:
    """The error each spending sub-task fails with once the task reached its budget."""
    return SubTaskError(
        code=ErrorCode.BUDGET_EXCEEDED, message=event.message, details={"limit": event.limit}
    )


def stopped_by_budget(
    running: Iterable[str], nodes: Mapping[str, _Node], registry: Registry, spenders: Set[str]
) -> tuple[str, ...]:
    """The running sub-tasks a reached budget stops: those whose capability spends."""
    return tuple(sid for sid in running if spends(registry, nodes[sid].capability, spenders))
