"""One event loop per process, on a thread of its own, for blocking calls of the async client.

`AsyncSwarmClient` is the one way to the orchestrator, and its calls are coroutines.
Code that is not a coroutine runs them here: `SwarmClient` (scripts, notebooks, job
drivers) and an agent's own calls (`run_child`, `task_spend`, the tool box describing
its capabilities), from a pooled agent's worker thread, a Ray Data row or a Serve
replica alike. One loop per process keeps the cost to a thread.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import AsyncGenerator, Coroutine, Iterator
from typing import Any, TypeVar

__all__: list[str] = []  # the runtime's own: nothing of it is public

T = TypeVar("T")


class LoopThread:
    """An event loop on a daemon thread of its own, where blocking calls of the client run.

    The calling thread may run a loop already (a notebook, an async actor, a Serve
    replica), where `asyncio.run` refuses, or none at all (a script): a loop of the
    client's own serves both, and one per process keeps the cost to a thread. Started on
    first use, again in a forked child, stopped at exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _started(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="swarm-ray-client", daemon=True
                )
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def run(self, call: Coroutine[Any, Any, T]) -> T:
        """Run `call` on the loop and block until it returns (or the caller is interrupted)."""
        loop = self._started()
        if threading.current_thread() is self._thread:
            call.close()
            raise RuntimeError("a blocking swarm call on its own loop: await the call there")
        future = asyncio.run_coroutine_threadsafe(call, loop)
        try:
            return future.result()
        finally:
            future.cancel()  # interrupted (Ctrl-C): the call stops as well

    def iterate(self, items: AsyncGenerator[T, None]) -> Iterator[T]:
        """`items` one by one, each fetched on the loop; closed there when left early."""

        async def step() -> list[T]:  # the next item, or none at the end
            try:
                return [await anext(items)]
            except StopAsyncIteration:
                return []

        try:
            while batch := self.run(step()):
                yield batch[0]
        finally:
            self.run(items.aclose())

    def stop(self) -> None:
        """Stop the loop (at exit: no call is waiting then)."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or self._pid != os.getpid():
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = None


LOOP = LoopThread()
"""The process's loop (started on first use, stopped at exit)."""
atexit.register(LOOP.stop)
