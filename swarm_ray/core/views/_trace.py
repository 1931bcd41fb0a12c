"""Trace a watermark back to the sub-task, agent and time that produced it.

`find_tokens` picks swarm-ray watermarks out of any pasted text (a report line, a
Parquet cell, a log): full tokens, and the short ids reports print
(`wm:TASK:SIGNATURE10`, see `short_id`). The scan is linear in the text: a pasted
passage is split into runs of token characters once, and each run is read on its own,
so no input can make it backtrack. `trace_tokens` checks each token against the key and,
for a task the caller may see, against the task's record.

A token is readable without the key, so its claims are always shown; `valid` says
whether its signature holds. What the record adds (status, agent, timings, digests)
comes only for tasks the caller owns (or, for admins, any task); the sub-task's input
only when asked for, and only to the task's owner or a trusted caller.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from swarm_ray.core.driver._driver import TaskDriver
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.guards._watermark import (
    WatermarkKey,
    canonical_digest,
    read_claims,
    verify_watermark,
)
from swarm_ray.core.model._errors import SwarmError, WatermarkRejectedError
from swarm_ray.core.scheduling._scheduler import Scheduler

__all__ = ["short_id"]

MAX_TOKENS = 100
"""Most tokens one passage is traced for."""
SHORT_SIGNATURE = 10
"""Characters of the signature a short id keeps (60 bits)."""

_RUN = re.compile(r"[A-Za-z0-9_.:\-]+")
_SIG = re.compile(r"^[A-Za-z0-9_\-]{43}$")
_BODY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_SHORT = re.compile(rf"^wm:([A-Za-z0-9_\-]{{1,96}}):([A-Za-z0-9_\-]{{{SHORT_SIGNATURE}}})$")


def short_id(token: str) -> str:
    """A report-sized id for a token: `wm:` task id `:` the signature's first characters.

    Unique within its task; `POST /v1/debug/watermark/extract` takes it like the token.
    """
    claims = read_claims(token)
    return f"wm:{claims.task_id}:{token.rsplit('.', 1)[1][:SHORT_SIGNATURE]}"


def _tokens_in_run(run: str) -> list[str]:
    """Full tokens (`eyJ...BODY.SIGNATURE43`) and short ids in one run of token characters."""
    if run.startswith("wm:"):
        return [run] if _SHORT.match(run) else []
    found: list[str] = []
    parts = run.split(".")
    for i in range(len(parts) - 1):
        body, sig = parts[i], parts[i + 1]
        start = body.find("eyJ")
        if (
            start >= 0
            and len(body) - start >= 23
            and _SIG.match(sig)
            and ":" not in body
            and set(body[start:]) <= _BODY_CHARS
        ):
            found.append(f"{body[start:]}.{sig}")
    return found


def find_tokens(text: str, limit: int = MAX_TOKENS) -> list[str]:
    """Every distinct watermark-shaped token in `text`, in order, at most `limit`."""
    found: dict[str, None] = {}
    for match in _RUN.finditer(text):
        for token in _tokens_in_run(match.group()):
            found[token] = None
            if len(found) >= limit:
                return list(found)
    return list(found)


def _expand_short(token: str, scheduler: Scheduler | None) -> str | None:
    match = _SHORT.match(token)
    if match is None or scheduler is None:
        return None
    prefix = match.group(2)
    for spec in scheduler.specs():
        result = scheduler.result(spec.id)
        if result is not None and result.watermark.rsplit(".", 1)[-1].startswith(prefix):
            return result.watermark
    return None


def trace_tokens(
    key: WatermarkKey,
    tokens: list[str],
    driver_of: Callable[[str], TaskDriver | None],
    principal: Principal,
    *,
    include_input: bool = False,
) -> list[dict[str, Any]]:
    """Trace each token (see the module docstring); `driver_of(task_id)` -> driver or None.

    `driver_of` returns None for a task `principal` may not see, which then looks exactly
    like a task that does not exist.
    """
    traced = []
    for given in tokens[:MAX_TOKENS]:
        token = given
        driver = None
        if (short := _SHORT.match(given)) is not None:
            driver = driver_of(short.group(1))
            expanded = _expand_short(given, driver.scheduler if driver else None)
            if expanded is None:
                traced.append({"token": given, "valid": False, "reason": "unknown"})
                continue
            token = expanded
        traced.append(_trace(key, token, given, driver_of, principal, include_input))
    return traced


def _trace(
    key: WatermarkKey,
    token: str,
    given: str,
    driver_of: Callable[[str], TaskDriver | None],
    principal: Principal,
    include_input: bool,
) -> dict[str, Any]:
    try:
        claims = read_claims(token)
    except WatermarkRejectedError as exc:
        return {"token": given, "valid": False, "reason": "malformed", "message": exc.message}
    found: dict[str, Any] = {
        "token": given,
        "task_id": claims.task_id,
        "parent_task_id": claims.parent_task_id,
        "subtask_id": claims.subtask_id,
        "capability_id": claims.capability_id,
        "issued_at": claims.issued_ms / 1000,
        "input_digest": claims.input_digest,
    }
    if given != token:
        found["full_token"] = token
    try:
        verify_watermark(key, token, now_ms=int(time.time() * 1000))
    except WatermarkRejectedError as exc:
        return {
            **found,
            "valid": False,
            "reason": exc.details.get("reason"),
            "message": exc.message,
        }
    found["valid"] = True
    driver = driver_of(claims.task_id)
    scheduler = driver.scheduler if driver is not None else None
    if (
        driver is None
        or scheduler is None
        or claims.subtask_id not in {s.id for s in scheduler.specs()}
    ):
        return {**found, "known": False}
    found["known"] = True
    found["status"] = str(scheduler.status(claims.subtask_id))
    result = scheduler.result(claims.subtask_id)
    if result is not None:
        found.update(
            agent=result.agent,
            attempt=result.attempt,
            accepted_result=result.watermark == token,
            finished_at=result.timings.finished_at,
            duration_s=result.timings.duration_s,
            confidence=result.confidence,
            output_ref=result.output_ref,
        )
    owner = driver.record.owner
    if include_input and (principal.trusted or (owner is not None and owner == principal.id)):
        try:
            current = scheduler.resolved_input(claims.subtask_id)
        except (SwarmError, KeyError):
            current = None
        matches = current is not None and canonical_digest(current) == claims.input_digest
        found["input"] = current if matches else None
        found["input_verified"] = matches
    return found
