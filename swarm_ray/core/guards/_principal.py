"""Principals: who asks. Every task belongs to the principal that submitted it.

Two kinds of caller reach the orchestrator:

- **trusted** callers hold the Ray cluster already (the Python client, `ray job submit`
  entry points, the CLI, notebooks): they can run any code there anyway, so they may name
  server paths and URIs and see every task. They are `LOCAL` unless they say otherwise.
- **untrusted** callers come through the HTTP gateway with an API key. Each key belongs
  to a principal; a principal sees only its own tasks and uploads (an `admin` sees every
  task), and nothing it sends may become a server path, a URL the server fetches, a
  module to import or an unbounded loop (see `_access` and `_limits`).
"""

from __future__ import annotations

import hashlib
import re

from pydantic import BaseModel, ConfigDict, Field

__all__: list[str] = []

PRINCIPAL_ID = r"^[A-Za-z0-9_.@\-]{1,64}$"
"""What a principal's name may hold (it appears in task ids' scope and file paths)."""


class Principal(BaseModel):
    """A caller of the orchestrator."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=PRINCIPAL_ID)
    """The principal's name (`alice`, or `key-1a2b3c4d` for an unnamed API key)."""
    admin: bool = False
    """Sees and cancels every principal's tasks."""
    trusted: bool = False
    """May name server paths and URIs (callers that hold the cluster; never HTTP ones)."""

    @property
    def tag(self) -> str:
        """A short, stable, path-safe digest of the id (scopes task ids and uploads)."""
        return hashlib.sha256(self.id.encode()).hexdigest()[:10]

    def sees(self, owner: str | None) -> bool:
        """Whether this principal may read and cancel a task owned by `owner`.

        Tasks with no owner were submitted by trusted callers; only trusted callers and
        admins see them.
        """
        if self.admin or self.trusted:
            return True
        return owner is not None and owner == self.id


LOCAL = Principal(id="local", admin=True, trusted=True)
"""The caller that holds the cluster: the Python client, jobs, the CLI."""

_SCOPED = re.compile(r"^(?P<tag>[0-9a-f]{10})-(?P<rest>.+)$")


def scoped_task_id(principal: Principal, requested: str | None) -> str | None:
    """The task id a request's own `task_id` stands for, scoped to its principal.

    Trusted callers' ids are global, as they always were. An untrusted principal's
    `abc` becomes `TAG-abc` (TAG from its id), so two principals choosing the same id
    get two tasks, and a principal cannot reach another's task by guessing its id.
    An id that already carries the principal's own tag (one the gateway handed back) is
    kept as it is, so resubmitting with the returned id stays idempotent.
    """
    if requested is None or principal.trusted:
        return requested
    found = _SCOPED.match(requested)
    if found is not None and found.group("tag") == principal.tag:
        return requested
    return f"{principal.tag}-{requested}"
