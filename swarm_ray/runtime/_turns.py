"""Store commits batched by event-loop turn: many writes, one commit, nothing acted on early.

Every write the drivers make in one turn of the orchestrator's event loop (many results
arrive together) goes into one store transaction instead of one commit each. `gate_for`
returns a future that resolves True once that transaction is committed; attempts are
dispatched only then, and callers are answered only then (`committed`), so nothing acts
on a write that could still be lost. A commit that fails resolves the gate False and
names every task that wrote in the turn to `on_failed`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from swarm_ray.core.durability._journal import StateStore
from swarm_ray.core.model._errors import StateStoreError

__all__: list[str] = []

COMMIT_GAP_S = 0.005
"""Least time between two store commits while writes keep coming (see `Turns.gate_for`)."""


class Turns:
    """The open store batch of this event-loop turn, if any (single-threaded: the loop)."""

    def __init__(
        self, store: StateStore, on_failed: Callable[[set[str], StateStoreError], None]
    ) -> None:
        self._store = store
        self._on_failed = on_failed
        self._turn: tuple[Any, asyncio.Future[bool], set[str]] | None = None
        self._last_commit = 0.0
        """Event-loop time of the last store commit."""

    def gate_for(self, task_id: str) -> asyncio.Future[bool]:
        """This turn's batch (opened if none is), with `task_id` among its writers.

        At most one commit per `COMMIT_GAP_S`: under a stream of results a turn stays
        open a few milliseconds and takes in the next turns' writes too; otherwise it
        commits as soon as the turn ends.
        """
        if self._turn is None:
            batch = self._store.batch()
            batch.__enter__()
            loop = asyncio.get_running_loop()
            self._turn = (batch, loop.create_future(), set())
            wait = self._last_commit + COMMIT_GAP_S - loop.time()
            if wait > 0:
                loop.call_later(wait, self._close)
            else:
                loop.call_soon(self._close)
        self._turn[2].add(task_id)
        return self._turn[1]

    async def committed(self) -> None:
        """Wait until this turn's writes are committed (before answering a caller)."""
        if self._turn is not None:
            await asyncio.shield(self._turn[1])

    def _close(self) -> None:
        if self._turn is None:
            return
        batch, gate, touched = self._turn
        self._turn = None
        self._last_commit = asyncio.get_running_loop().time()
        try:
            batch.__exit__(None, None, None)
        except StateStoreError as exc:
            gate.set_result(False)
            self._on_failed(touched, exc)
            return
        gate.set_result(True)
