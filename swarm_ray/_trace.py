"""Trace a watermark back to the sub-task, agent, input and time that produced it.

`find_tokens` picks swarm-ray watermark tokens out of any pasted text (a report line, a
Parquet cell, a log); `trace_token` checks one against the key and the task's record.
A token is readable without the key, so the claims are always shown; `valid` says
whether its signature holds, and only a valid token is looked up in the records.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

from swarm_ray._errors import SwarmError, WatermarkRejectedError
from swarm_ray._scheduler import Scheduler
from swarm_ray._watermark import WatermarkKey, canonical_digest, read_claims, verify_watermark

__all__: list[str] = []

# base64url of a JSON object starts with `eyJ` (`{"`); an HMAC-SHA256 is 43 characters.
_TOKEN = re.compile(r"eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{43}(?![A-Za-z0-9_-])")


def find_tokens(text: str) -> list[str]:
    """Every distinct watermark-shaped token in `text`, in order of appearance."""
    return list(dict.fromkeys(_TOKEN.findall(text)))


def trace_token(
    key: WatermarkKey,
    token: str,
    scheduler_of: Callable[[str], Scheduler | None],
) -> dict[str, Any]:
    """What produced `token`: claims, validity and, for a known task, agent and input."""
    try:
        claims = read_claims(token)
    except WatermarkRejectedError as exc:
        return {"token": token, "valid": False, "reason": "malformed", "message": exc.message}
    found: dict[str, Any] = {
        "token": token,
        "task_id": claims.task_id,
        "parent_task_id": claims.parent_task_id,
        "subtask_id": claims.subtask_id,
        "capability_id": claims.capability_id,
        "issued_at": claims.issued_ms / 1000,
        "input_digest": claims.input_digest,
    }
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
    scheduler = scheduler_of(claims.task_id)
    if scheduler is None or claims.subtask_id not in {s.id for s in scheduler.specs()}:
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
        )
    try:
        current = scheduler.resolved_input(claims.subtask_id)
    except (SwarmError, KeyError):
        current = None
    matches = current is not None and canonical_digest(current) == claims.input_digest
    found["input"] = current if matches else None
    found["input_verified"] = matches
    return found
