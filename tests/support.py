"""Small capabilities and templates shared by the core tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from swarm_ray import BreakerPolicy, CapabilitySpec, RetryPolicy, SubTaskResult, TaskTemplate
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._signals import RunIntent, SubTaskDone, SubTaskFailed
from swarm_ray.core.model._subtask import SubTaskError


class TextIn(BaseModel):
    text: str
    feedback: str | None = None


class TextOut(BaseModel):
    text: str


class ManyIn(BaseModel):
    parts: list[Any]


class JudgeOut(BaseModel):
    passed: bool
    feedback: str = ""


def spec(cid: str, **kw: Any) -> CapabilitySpec:
    kw.setdefault("input_model", TextIn)
    kw.setdefault("output_model", TextOut)
    kw.setdefault("retry", RetryPolicy(max_attempts=3, backoff_s=0.5, multiplier=2.0))
    kw.setdefault("breaker", BreakerPolicy(failure_threshold=100, cooldown_s=10))
    return CapabilitySpec(id=cid, description=f"test capability {cid}", **kw)


def registry(*extra: CapabilitySpec) -> Registry:
    base = [
        spec("doc.parse.text"),
        spec("doc.extract.text"),
        spec("doc.extract.backup"),
        spec("doc.merge.all", input_model=ManyIn),
        spec("doc.judge.text", output_model=JudgeOut),
        spec("doc.review.safety"),
    ]
    names = {s.id for s in extra}
    return Registry([*(s for s in base if s.id not in names), *extra])


PIPELINE_YAML = """
name: pipeline
keywords: [compare, brochures]
aggregate: merge
stages:
  - name: parse
    capability: doc.parse.text
    fan_out: per_item
    input: {text: $item}
  - name: extract
    capability: doc.extract.text
    fan_out: per_item
    for_each: $params.dimensions
    depends_on: [parse]
    input: {text: $from.parse.text}
  - name: merge
    capability: doc.merge.all
    depends_on: [extract]
    partial_ok: true
    input: {parts: $from.extract.text}
"""


def pipeline() -> TaskTemplate:
    return TaskTemplate.from_yaml(PIPELINE_YAML)


def done(intent: RunIntent, text: str | None = None, *, at: float = 1.0, **kw: Any) -> SubTaskDone:
    output: dict[str, Any] = kw.pop(
        "output", {"text": text if text is not None else intent.subtask_id}
    )
    return SubTaskDone(
        at=at,
        result=SubTaskResult(
            task_id="t1",
            subtask_id=intent.subtask_id,
            capability_id=intent.capability_id,
            attempt=intent.attempt,
            output=output,
            **kw,
        ),
    )


def failed(
    intent: RunIntent, code: ErrorCode = ErrorCode.AGENT_ERROR, *, at: float = 1.0
) -> SubTaskFailed:
    return SubTaskFailed(
        at=at,
        result=SubTaskResult(
            task_id="t1",
            subtask_id=intent.subtask_id,
            capability_id=intent.capability_id,
            attempt=intent.attempt,
            error=SubTaskError(code=code, message=f"{intent.subtask_id} broke"),
        ),
    )


def wait_until(
    predicate: Callable[[], Any], timeout_s: float = 60.0, what: str = "condition"
) -> Any:
    """Poll `predicate` until it returns something truthy (and return that), or fail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def delete_serve_apps(*names: str) -> None:
    """Delete Serve applications together: each stops its replicas at once, and the wait
    is for the slowest, not the sum (about 3 s an app one by one)."""
    from ray import serve

    for name in names:
        serve.delete(name, _blocking=False)
    for name in names:
        serve.delete(name)  # an app already gone answers at once


OWN_CLUSTER = pytest.mark.skipif(
    os.environ.get("SWARM_RAY_CLUSTER_TESTS") != "1",
    reason="clusters of their own: SWARM_RAY_CLUSTER_TESTS=1 (`.ci/run` runs them alone)",
)
"""Tests that start clusters of their own (`ray start`, `Cluster`, a `connect()` that
starts one) and run whole jobs on them: beside the suite's session cluster on 2 cores
they ran for minutes and missed their deadlines, or kept it idle while they ran, so
`.ci/run` runs them alone after the suite."""
