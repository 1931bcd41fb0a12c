"""Coalescing of concurrent calls into batched ones (opportunistic: no timer, no wait).

A call that finds fewer than `max_inflight` batches in flight starts one at the next turn
of the event loop, with every call queued by then; calls that arrive while the batches
are busy wait for the next. At light load every call goes alone and waits for nothing;
under load, many requests share one actor call and one state-store commit, which is what
lets a replica keep up with many concurrent clients.

A batch is one call, so whatever can fail one call must be checked per item before the
item joins it (`checked_apart`): else one caller's bad request fails every caller of
its batch.
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Generic, TypeVar

__all__ = ["Coalescer", "checked_apart"]

T = TypeVar("T")
R = TypeVar("R")


class Coalescer(Generic[T, R]):
    """Send items through `send(batch) -> results` (one result per item, in order).

    A result that is an exception is raised to that item's caller alone; when `send`
    itself raises, every caller of the batch gets the error.
    """

    def __init__(
        self,
        send: Callable[[list[T]], Awaitable[list[R | BaseException]]],
        *,
        max_size: int = 64,
        max_inflight: int = 2,
    ) -> None:
        if max_size < 1 or max_inflight < 1:
            raise ValueError(
                f"`max_size` and `max_inflight` must be at least 1, got {max_size}, {max_inflight}"
            )
        self._send = send
        self._max_size = max_size
        self._max_inflight = max_inflight
        self._queue: list[tuple[T, asyncio.Future[R]]] = []
        self._inflight = 0
        self._scheduled = False
        self.batches = 0
        """Batches sent so far (for tests and benchmarks)."""

    async def __call__(self, item: T) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        self._schedule()
        return await future

    def _schedule(self) -> None:
        if self._queue and not self._scheduled and self._inflight < self._max_inflight:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._start)

    def _start(self) -> None:
        self._scheduled = False
        if not self._queue or self._inflight >= self._max_inflight:
            return
        batch, self._queue = self._queue[: self._max_size], self._queue[self._max_size :]
        self._inflight += 1
        self.batches += 1
        asyncio.get_running_loop().create_task(self._run(batch))
        self._schedule()

    async def _run(self, batch: list[tuple[T, asyncio.Future[R]]]) -> None:
        try:
            results = await self._send([item for item, _ in batch])
            if len(results) != len(batch):
                raise RuntimeError(f"a batch of {len(batch)} got {len(results)} results back")
        except BaseException as exc:  # every caller of the batch hears of it
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
        else:
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():  # the caller gave up (cancelled)
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
        finally:
            self._inflight -= 1
            self._schedule()


def checked_apart(
    send: Callable[[list[T]], Awaitable[list[R | BaseException]]],
    check: Callable[[T], BaseException | None],
) -> Callable[[list[T]], Awaitable[list[R | BaseException]]]:
    """`send` for the items `check` passes; an item it fails gets its error alone.

    `check(item)` returns None for an item that may be sent, else the error its caller
    gets. A batch whose every item fails sends nothing.
    """

    async def checked(batch: list[T]) -> list[R | BaseException]:
        problems = [check(item) for item in batch]
        passed = [item for item, problem in zip(batch, problems, strict=True) if problem is None]
        sent = await send(passed) if passed else []
        if len(sent) != len(passed):
            raise RuntimeError(f"a batch of {len(passed)} got {len(sent)} results back")
        answers: Iterator[R | BaseException] = iter(sent)
        return [next(answers) if problem is None else problem for problem in problems]

    return checked
