"""Task watermarks: HMAC-SHA256 tokens that tie a result to the sub-task that asked for it.

A token is `base64url(claims JSON) "." base64url(HMAC-SHA256(key, claims part))`. The
claims stay readable (task, parent task, sub-task, capability, input digest, time in ms)
so a fact in a report can be traced back without the key; only `verify()` needs the key.

The key comes from configuration (`swarm_ray.runtime._config.watermark_key`):
`SWARM_RAY_WATERMARK_KEY` (the secret itself), `SWARM_RAY_WATERMARK_KEY_FILE` (a file
holding it), or a key file generated once under the state directory. `WatermarkKey`
never prints its secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from swarm_ray.core.model._errors import InvalidSpecError, WatermarkRejectedError

__all__: list[str] = []

_VERSION = 1


class WatermarkKey:
    """An HMAC key that keeps its secret out of reprs, logs and tracebacks."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise InvalidSpecError("a watermark key needs at least 16 bytes")
        self._secret = secret

    def __repr__(self) -> str:
        return "WatermarkKey(<hidden>)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (WatermarkKey, (self._secret,))

    def sign(self, message: bytes) -> bytes:
        """HMAC-SHA256 of `message`."""
        return hmac.new(self._secret, message, hashlib.sha256).digest()

    @classmethod
    def generate(cls) -> WatermarkKey:
        """A fresh random 32-byte key."""
        return cls(secrets.token_bytes(32))


class WatermarkClaims(BaseModel):
    """What a watermark says about the payload it marks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: int = _VERSION
    """Token format version."""
    task_id: str
    """The task."""
    parent_task_id: str | None = None
    """The task's parent, for nested swarms."""
    subtask_id: str
    """The sub-task."""
    capability_id: str
    """The capability asked to run it."""
    input_digest: str
    """SHA-256 hex digest of the canonical JSON of the input."""
    issued_ms: int
    """When it was issued, in milliseconds since the epoch."""


def canonical_digest(payload: Any) -> str:
    """SHA-256 hex digest of `payload` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def issue_watermark(
    key: WatermarkKey,
    *,
    task_id: str,
    subtask_id: str,
    capability_id: str,
    input: Any,
    issued_ms: int,
    parent_task_id: str | None = None,
) -> str:
    """Issue a token for one dispatched payload."""
    claims = WatermarkClaims(
        task_id=task_id,
        parent_task_id=parent_task_id,
        subtask_id=subtask_id,
        capability_id=capability_id,
        input_digest=canonical_digest(input),
        issued_ms=issued_ms,
    )
    body = _b64(claims.model_dump_json().encode())
    return f"{body}.{_b64(key.sign(body.encode()))}"


def read_claims(token: str) -> WatermarkClaims:
    """Read a token's claims without checking its signature (for tracing, not trust)."""
    try:
        body, _sig = token.strip().split(".")
        return WatermarkClaims.model_validate_json(_unb64(body))
    except (ValueError, binascii.Error, ValidationError):
        raise WatermarkRejectedError(
            f"watermark {token[:24]!r}... is not a swarm-ray token", reason="malformed"
        ) from None


def verify_watermark(
    key: WatermarkKey,
    token: str,
    *,
    now_ms: int,
    subtask_id: str | None = None,
    task_id: str | None = None,
    capability_id: str | None = None,
    input: Any = None,
    check_input: bool = False,
    max_age_s: float | None = None,
) -> WatermarkClaims:
    """Check a token and return its claims, or raise `WatermarkRejectedError`.

    Refuses a malformed token, a forged signature, a token for another task, sub-task or
    capability, an input whose digest differs (when `check_input`), and a token older
    than `max_age_s`. The error's `reason` detail says which.
    """
    claims = read_claims(token)
    body, sig = token.strip().split(".")
    try:
        given = _unb64(sig)
    except (ValueError, binascii.Error):
        given = b""
    if not hmac.compare_digest(given, key.sign(body.encode())):
        raise WatermarkRejectedError(
            f"watermark for sub-task `{claims.subtask_id}` has a forged signature",
            reason="forged",
            subtask_id=claims.subtask_id,
        )
    expected = {"task": task_id, "sub-task": subtask_id, "capability": capability_id}
    actual = {
        "task": claims.task_id,
        "sub-task": claims.subtask_id,
        "capability": claims.capability_id,
    }
    for what, want in expected.items():
        if want is not None and actual[what] != want:
            raise WatermarkRejectedError(
                f"watermark is for {what} `{actual[what]}`, not `{want}`",
                reason="mismatch",
                subtask_id=claims.subtask_id,
            )
    if check_input and canonical_digest(input) != claims.input_digest:
        raise WatermarkRejectedError(
            f"input of sub-task `{claims.subtask_id}` was altered after the watermark was issued",
            reason="altered",
            subtask_id=claims.subtask_id,
        )
    if max_age_s is not None and now_ms - claims.issued_ms > max_age_s * 1000:
        age = (now_ms - claims.issued_ms) / 1000
        raise WatermarkRejectedError(
            f"watermark of sub-task `{claims.subtask_id}` is {age:.1f} s old, "
            f"over the limit of {max_age_s} s",
            reason="expired",
            subtask_id=claims.subtask_id,
        )
    return claims
