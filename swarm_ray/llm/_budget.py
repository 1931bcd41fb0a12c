"""Cluster-wide budgets: one named actor per endpoint hands out request slots in turn.

A provider limits requests per minute, tokens per minute and requests in flight for a
key, not for a process. So every caller of an endpoint (every `LLMAgent` replica, every
sub-agent, on any node) asks that endpoint's one `EndpointBudget` actor for a slot
before each HTTP request and tells it afterwards what the request cost. A caller that
finds no slot waits for one instead of failing.

- **Fair.** Waiters are served strictly in the order they first asked (a retried request
  keeps its place), so no caller starves however many arrive after it.
- **Smooth.** Requests per minute are spaced evenly (600 a minute is one every 100 ms),
  since providers enforce their minute limits over shorter windows too.
- **Tokens.** A request reserves an estimate (its prompt's length and `max_tokens`),
  corrected to the real count when it ends; the reservations of the last 60 s stay
  under `tokens_per_minute`.
- **429s.** A refused request's `Retry-After` pauses every caller of the endpoint, not
  just the one that was refused.

Leases expire (`ttl_s`), so a caller that dies holding one frees it. The state (queue
length, in flight, tokens, 429s, longest wait) is what `/metrics` shows, and the actor
reports it as Ray custom metrics too (the dashboard's).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import itertools
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from swarm_ray.llm._engine import EndpointLimits

__all__: list[str] = []

BUDGET_PREFIX = "swarm-metrics/llm_budgets:"
"""Names of budget actors start with this (the orchestrator finds them by it)."""
_WINDOW_S = 60.0
_GAUGES = {
    "swarm_llm_budget_queue_length": "Callers waiting for a request slot of an LLM endpoint.",
    "swarm_llm_budget_in_flight": "Requests in flight to an LLM endpoint.",
    "swarm_llm_tokens_used": "Tokens an LLM endpoint's requests used since its budget began.",
    "swarm_llm_rate_limited": "HTTP 429 answers an LLM endpoint gave since its budget began.",
}


@dataclass(order=True)
class _Waiter:
    since: float
    serial: int
    tokens: int = field(compare=False)
    future: asyncio.Future[str] = field(compare=False)


@dataclass
class _Lease:
    tokens: int
    expires: float


class EndpointBudget:
    """The budget actor of one endpoint (async: each waiting caller is a coroutine)."""

    def __init__(self, endpoint: str, limits: EndpointLimits) -> None:
        self.endpoint = endpoint
        self.limits = limits
        self._queue: list[_Waiter] = []
        self._serial = itertools.count()
        self._leases: dict[str, _Lease] = {}
        self._window: deque[tuple[float, str]] = deque()  # (granted at, lease id)
        self._tokens_of: dict[str, int] = {}  # reservations in the window, by lease
        self._next_at = 0.0  # the earliest time the next request may start
        self._paused_until = 0.0
        self._wake: asyncio.Event | None = None
        self._pump: asyncio.Task[None] | None = None
        self._granted = 0
        self._tokens_used = 0
        self._rate_limited = 0
        self._max_wait_s = 0.0
        self._wait_sum_s = 0.0
        self._metrics: dict[str, Any] | None = None

    # ---- callers ---------------------------------------------------------------------

    async def acquire(self, tokens: int, ttl_s: float, since: float | None = None) -> str:
        """Wait for a slot; returns a lease id to hand back to `release`.

        Args:
            tokens: The request's estimated tokens (reserved against the minute's).
            ttl_s: The lease's life; a caller gone longer frees its slot.
            since: When the caller first asked (a retry keeps its place in line).
        """
        loop = asyncio.get_running_loop()
        if self._wake is None:
            self._wake = asyncio.Event()
            self._pump = loop.create_task(self._run())
        cap = self.limits.tokens_per_minute
        waiter = _Waiter(
            since=time.time() if since is None else since,
            serial=next(self._serial),
            tokens=min(max(0, tokens), cap) if cap else max(0, tokens),
            future=loop.create_future(),
        )
        heapq.heappush(self._queue, waiter)
        self._wake.set()
        try:
            lease_id = await waiter.future
        except asyncio.CancelledError:  # the caller gave up: leave the line
            if waiter in self._queue:
                self._queue.remove(waiter)
                heapq.heapify(self._queue)
            raise
        self._leases[lease_id].expires = time.monotonic() + ttl_s
        return lease_id

    def release(
        self,
        lease_id: str,
        tokens: int = 0,
        rate_limited: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        """End a lease: the tokens the request really used, and whether it got a 429."""
        lease = self._leases.pop(lease_id, None)
        if lease_id in self._tokens_of:
            # A refused request still counts against the minute (providers count it).
            self._tokens_of[lease_id] = tokens if tokens else self._tokens_of[lease_id]
        self._tokens_used += tokens
        if rate_limited:
            self._rate_limited += 1
            pause = retry_after_s if retry_after_s is not None else 1.0
            self._paused_until = max(self._paused_until, time.monotonic() + pause)
        if lease is not None and self._wake is not None:
            self._wake.set()
        self._record()

    def state(self) -> dict[str, Any]:
        """Queue length, in flight, tokens, 429s and waits (what `/metrics` shows)."""
        self._expire(time.monotonic())
        return {
            "endpoint": self.endpoint,
            "limits": self.limits.model_dump(),
            "queue_length": len(self._queue),
            "in_flight": len(self._leases),
            "granted": self._granted,
            "tokens_used": self._tokens_used,
            "tokens_in_window": sum(self._tokens_of.values()),
            "rate_limited": self._rate_limited,
            "max_wait_s": round(self._max_wait_s, 4),
            "mean_wait_s": round(self._wait_sum_s / self._granted, 4) if self._granted else 0.0,
        }

    # ---- the pump: grants in order -----------------------------------------------------

    def _expire(self, now: float) -> None:
        for lease_id in [k for k, v in self._leases.items() if v.expires < now]:
            del self._leases[lease_id]
        cutoff = now - _WINDOW_S
        while self._window and self._window[0][0] < cutoff:
            _, lease_id = self._window.popleft()
            self._tokens_of.pop(lease_id, None)

    def _delay(self, head: _Waiter, now: float) -> float:
        """Seconds until `head` may start (inf: until a lease ends)."""
        delay = max(0.0, self._paused_until - now, self._next_at - now)
        limits = self.limits
        if limits.max_concurrent is not None and len(self._leases) >= limits.max_concurrent:
            return math.inf
        if limits.tokens_per_minute is not None:
            excess = sum(self._tokens_of.values()) + head.tokens - limits.tokens_per_minute
            if excess > 0:
                freed = 0
                for granted_at, lease_id in self._window:
                    freed += self._tokens_of.get(lease_id, 0)
                    if freed >= excess:
                        delay = max(delay, granted_at + _WINDOW_S - now)
                        break
        return delay

    def _grant(self, head: _Waiter, now: float) -> None:
        heapq.heappop(self._queue)
        lease_id = f"{next(self._serial):x}"
        self._leases[lease_id] = _Lease(tokens=head.tokens, expires=now + 600.0)
        self._window.append((now, lease_id))
        self._tokens_of[lease_id] = head.tokens
        if self.limits.requests_per_minute is not None:
            self._next_at = max(self._next_at, now) + 60.0 / self.limits.requests_per_minute
        waited = max(0.0, time.time() - head.since)
        self._granted += 1
        self._wait_sum_s += waited
        self._max_wait_s = max(self._max_wait_s, waited)
        head.future.set_result(lease_id)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            now = time.monotonic()
            self._expire(now)
            while self._queue and self._queue[0].future.done():  # cancelled callers
                heapq.heappop(self._queue)
            delay = self._delay(self._queue[0], now) if self._queue else math.inf
            if delay <= 0:
                self._grant(self._queue[0], now)
                self._record()
                continue
            self._wake.clear()
            timeout = None if math.isinf(delay) else delay
            if timeout is None and self._leases:  # wake to expire a lease
                timeout = max(0.01, min(v.expires for v in self._leases.values()) - now)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout)

    def _record(self) -> None:
        """Export the state as Ray custom metrics (the dashboard's)."""
        values = {
            "swarm_llm_budget_queue_length": len(self._queue),
            "swarm_llm_budget_in_flight": len(self._leases),
            "swarm_llm_tokens_used": self._tokens_used,
            "swarm_llm_rate_limited": self._rate_limited,
        }
        if self._metrics is None:
            from ray.util import metrics

            self._metrics = {
                name: metrics.Gauge(name, description=_GAUGES[name], tag_keys=("endpoint",))
                for name in values
            }
        for name, value in values.items():
            self._metrics[name].set(value, tags={"endpoint": self.endpoint})


def budget_name(endpoint: str) -> str:
    """The budget actor's name for an endpoint label (readable, and unique by a digest)."""
    digest = hashlib.sha256(endpoint.encode()).hexdigest()[:8]
    return f"{BUDGET_PREFIX}{endpoint[:80]}:{digest}"


class BudgetClient:
    """A caller's side of an endpoint's budget: blocking `acquire` and `release`."""

    def __init__(self, actor: Any, ttl_s: float) -> None:
        self._actor = actor
        self._ttl_s = ttl_s

    def acquire(self, tokens: int, since: float | None = None) -> str:
        """Block until the budget grants a request slot."""
        import ray

        lease: str = ray.get(self._actor.acquire.remote(tokens, self._ttl_s, since))
        return lease

    def release(
        self,
        lease: str,
        tokens: int,
        *,
        rate_limited: bool = False,
        retry_after_s: float | None = None,
    ) -> None:
        """Hand the slot back (no reply awaited)."""
        self._actor.release.remote(lease, tokens, rate_limited, retry_after_s)


def budget_client(endpoint: str, limits: EndpointLimits, timeout_s: float) -> BudgetClient | None:
    """The budget of `endpoint`, its actor created on first use; None outside Ray."""
    import ray

    if not ray.is_initialized():
        return None
    from swarm_ray.agent import NAMESPACE

    actor = (
        ray.remote(EndpointBudget)
        .options(
            name=budget_name(endpoint),
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            num_cpus=0,
            max_concurrency=10_000,
            max_restarts=-1,
        )
        .remote(endpoint, limits)
    )
    return BudgetClient(actor, ttl_s=timeout_s + 30.0)


async def budget_states(timeout_s: float = 2.0) -> list[dict[str, Any]]:
    """The state of every budget actor in the cluster (for `/metrics`); skips silent ones."""
    import ray

    named = await asyncio.to_thread(ray.util.list_named_actors, all_namespaces=True)
    actors = [
        ray.get_actor(entry["name"], namespace=entry["namespace"])
        for entry in named
        if str(entry.get("name", "")).startswith(BUDGET_PREFIX)
    ]

    async def one(actor: Any) -> dict[str, Any] | None:
        try:
            state: dict[str, Any] = await asyncio.wait_for(actor.state.remote(), timeout_s)
        except Exception:  # a budget restarting or gone: left out of this scrape
            return None
        return state

    states = await asyncio.gather(*(one(a) for a in actors))
    return sorted((s for s in states if s is not None), key=lambda s: str(s["endpoint"]))
