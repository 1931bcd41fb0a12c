"""Who is calling and how errors answer: the replica's keys, the key checks, error mapping.

The gateway's routes depend on `Caller` (the principal of a good key, else 401) and
translate swarm-ray errors to HTTP in one place (`http_error`).
"""

import logging
import os
import pickle
import secrets
from collections.abc import Awaitable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from swarm_ray.core import (
    AnswerRefusedError,
    BudgetExceededError,
    InvalidInputError,
    OrchestratorUnavailableError,
    Principal,
    SwarmError,
    SwarmUserError,
    TaskConflictError,
    TaskNotFoundError,
    UnknownCapabilityError,
)
from swarm_ray.gateway._auth import ApiKeys
from swarm_ray.gateway._limits import GatewayLimits
from swarm_ray.gateway._sockets import SocketLimits

__all__ = [
    "AUTH",
    "Caller",
    "Keys",
    "bearer",
    "check_key",
    "http_error",
    "metrics_public",
    "orchestrator_answer",
    "principal_id",
    "principal_of",
    "sees_swarm",
    "serialisable",
]

_log = logging.getLogger(__name__)

T = TypeVar("T")

bearer = HTTPBearer(auto_error=False, description="An API key from the gateway's keys.")


class Keys:
    """The replica's API keys and limits (one gateway per replica process)."""

    current: ApiKeys | None = None
    limits: GatewayLimits = GatewayLimits()
    sockets: SocketLimits = SocketLimits()


def _bearer_key(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def principal_of(header: str) -> Principal | None:
    keys = Keys.current
    return None if keys is None else keys.principal(_bearer_key(header))


def principal_id(header: str) -> str | None:
    """The id of the principal whose key an `Authorization` header holds, else None."""
    principal = principal_of(header)
    return None if principal is None else principal.id


def serialisable(item: Any) -> HTTPException | None:
    """None when `item` pickles (as Ray will send it), else its caller's 422.

    Checked for each request of a coalesced batch on its own, so one that cannot be sent
    (nested past what pickling allows) fails alone instead of failing the whole batch.
    """
    try:
        pickle.dumps(item, protocol=5)
    except (RecursionError, pickle.PicklingError, TypeError, ValueError, AttributeError) as exc:
        problem = f"the request cannot be sent to the orchestrator ({type(exc).__name__})"
        return HTTPException(
            422,
            detail={
                "detail": [{"loc": ["body"], "msg": problem, "type": "unserialisable"}],
                "code": "invalid_input",
            },
        )
    return None


async def _require_key(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """The caller's principal; 401 unless its key is good."""
    return check_key(credentials)


def _principal(credentials: HTTPAuthorizationCredentials | None) -> Principal | None:
    keys = Keys.current
    return None if credentials is None or keys is None else keys.principal(credentials.credentials)


def check_key(credentials: HTTPAuthorizationCredentials | None) -> Principal:
    principal = _principal(credentials)
    if principal is None:
        raise HTTPException(
            401,
            detail={"detail": "missing or invalid API key", "code": "unauthorized"},
            headers={"WWW-Authenticate": "Bearer"},
        )
    return principal


def metrics_public() -> bool:
    """Whether `/metrics` and the detailed `/health` answer without an admin key."""
    return os.environ.get("SWARM_RAY_METRICS_PUBLIC", "") == "1"


def sees_swarm(credentials: HTTPAuthorizationCredentials | None) -> bool:
    """Whether the caller is shown swarm-wide detail (`/metrics`, the detailed `/health`).

    Swarm-wide counts and endpoint names are the operator's: an admin key sees them,
    and anyone does with `SWARM_RAY_METRICS_PUBLIC=1` (a scraper on a private network).
    """
    if metrics_public():
        return True
    caller = _principal(credentials)
    return caller is not None and caller.admin


AUTH = [Depends(_require_key)]
Caller = Annotated[Principal, Depends(_require_key)]
"""The principal of the request's API key (401 without one)."""


def http_error(exc: SwarmError) -> HTTPException:
    """Translate a swarm-ray error into the HTTP error that fits (in one place)."""
    code = str(exc.code)
    if isinstance(exc, TaskNotFoundError | UnknownCapabilityError):
        return HTTPException(404, detail={"detail": exc.message, "code": code})
    if isinstance(exc, TaskConflictError):
        return HTTPException(409, detail={"detail": exc.message, "code": code})
    if isinstance(exc, AnswerRefusedError):  # not the owner's to give, or not waited for
        status = 403 if exc.details.get("reason") == "not_owner" else 409
        body = {"detail": exc.message, "code": code, "reason": exc.details.get("reason")}
        return HTTPException(status, detail=body)
    if isinstance(exc, BudgetExceededError):  # the principal's daily budget is spent
        body = {"detail": exc.message, "code": code, "limit": exc.details.get("limit")}
        return HTTPException(429, detail=body)
    if isinstance(exc, InvalidInputError) and "capability_id" not in exc.details:
        fields = [  # an answer to a person's question (`core.model._human`)
            {
                "loc": ["body", "answer", *str(err.get("field", "")).split(".")],
                "msg": str(err.get("problem")),
                "type": code,
            }
            for err in exc.details.get("errors", [])
        ] or [{"loc": ["body"], "msg": exc.message, "type": code}]
        return HTTPException(422, detail={"detail": fields, "code": code})
    if isinstance(exc, InvalidInputError):
        fields = [
            {
                "loc": ["body", "input", *str(err.get("field", "")).split(".")],
                "msg": f"{err.get('problem')} (capability `{exc.details.get('capability_id')}`)",
                "type": code,
            }
            for err in exc.details.get("errors", [])
        ] or [{"loc": ["body"], "msg": exc.message, "type": code}]
        return HTTPException(422, detail={"detail": fields, "code": code})
    if isinstance(exc, SwarmUserError):
        return HTTPException(
            422,
            detail={"detail": [{"loc": ["body"], "msg": exc.message, "type": code}], "code": code},
        )
    body = {"detail": exc.message, "code": code}
    if "error_id" in exc.details:  # a bug met on this request alone: the log has it
        body["error_id"] = str(exc.details["error_id"])
    return HTTPException(500, detail=body)


async def orchestrator_answer(call: Awaitable[T]) -> T:
    """Await a call of the async client, its errors as HTTP errors (in one place).

    Swarm-ray errors answer as `http_error` says. An orchestrator that does not answer
    in time (or is restarting: `OrchestratorUnavailableError`) is a 503 with a fixed
    message and an error id: Ray's own message names actors, nodes and addresses, which
    are the operator's, so only the log has it.
    """
    try:
        return await call
    except OrchestratorUnavailableError as exc:
        raise unavailable(
            "the orchestrator did not answer", "orchestrator_unavailable", exc.__cause__ or exc
        ) from None
    except SwarmError as exc:
        raise http_error(exc) from None


def unavailable(what: str, code: str, exc: BaseException) -> HTTPException:
    """A 503 saying `what` with an error id, the exception's text in the log only.

    That text names server paths, actors and addresses: the operator's, not the caller's.
    """
    error_id = f"err-{secrets.token_hex(6)}"
    _log.warning("%s (error id %s): %s: %s", what, error_id, type(exc).__name__, exc)
    body = {"detail": f"{what} (error id `{error_id}`); try again", "code": code}
    # A restarting orchestrator (shard) answers again in a few seconds.
    return HTTPException(503, detail={**body, "error_id": error_id}, headers={"Retry-After": "2"})
