"""The ledger of open tasks (`_ledger`) in Redis: for shards whose store is Redis.

A cluster's shards keep their tasks in Redis so that a shard restarted on another node
finds them; their shared count of each owner's open tasks lives in the same server,
beside the shards' own key namespaces (`swarm-ray:seats`). Taking a seat is one Lua
script: count the owner's seats, refuse past the limit, or take one, atomically.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from swarm_ray.core.model._errors import StateStoreError

__all__: list[str] = []

# KEYS: seats hash (task id -> "shard<TAB>owner"), the owner's set of task ids.
# ARGV: task id, "shard<TAB>owner", limit. -1: the task holds a seat; else the count.
_TAKE = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return -1 end
local held = redis.call('SCARD', KEYS[2])
if held >= tonumber(ARGV[3]) then return held end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[1])
return -1
"""


class RedisOpenTaskLedger:
    """`OpenTaskLedger` with its seats in Redis (see the module docstring)."""

    def __init__(self, url: str, shard: int, *, namespace: str = "swarm-ray") -> None:
        self.shard = shard
        self._seats = f"{namespace}:seats"
        self._owner_prefix = f"{namespace}:seats:owner:"
        try:
            self._client: redis.Redis[str] = redis.Redis.from_url(
                url, decode_responses=True, socket_timeout=5.0, socket_connect_timeout=5.0
            )
            self._take = self._client.register_script(_TAKE)
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of open tasks cannot reach Redis: {exc}") from exc

    def take(self, owner: str, task_id: str, limit: int) -> int | None:
        """As `OpenTaskLedger.take`."""
        value = f"{self.shard}\t{owner}"
        try:
            held = int(
                self._take(keys=[self._seats, self._owner(owner)], args=[task_id, value, limit])
            )
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of open tasks failed: {exc}") from exc
        return None if held < 0 else held

    def give_back(self, task_id: str) -> None:
        """As `OpenTaskLedger.give_back`."""
        try:
            value = self._client.hget(self._seats, task_id)
            if value is not None:
                with self._client.pipeline(transaction=True) as pipe:
                    pipe.srem(self._owner(value.partition("\t")[2]), task_id)
                    pipe.hdel(self._seats, task_id)
                    pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of open tasks failed: {exc}") from exc

    def reseat(self, open_tasks: Iterable[tuple[str, str]]) -> None:
        """As `OpenTaskLedger.reseat`."""
        mine = f"{self.shard}\t"
        try:
            seats = self._client.hgetall(self._seats)
            with self._client.pipeline(transaction=True) as pipe:
                for task_id, value in seats.items():
                    if value.startswith(mine):
                        pipe.srem(self._owner(value.partition("\t")[2]), task_id)
                        pipe.hdel(self._seats, task_id)
                for owner, task_id in open_tasks:
                    pipe.hset(self._seats, task_id, f"{mine}{owner}")
                    pipe.sadd(self._owner(owner), task_id)
                pipe.execute()
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of open tasks failed: {exc}") from exc

    def held(self, owner: str) -> int:
        """How many seats `owner` holds across every shard."""
        try:
            return int(self._client.scard(self._owner(owner)))
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of open tasks failed: {exc}") from exc

    def _owner(self, owner: str) -> str:
        return f"{self._owner_prefix}{owner}"
