"""The ledger of open tasks (`_ledger`) in Redis: for shards whose store is Redis.

A cluster's shards keep their tasks in Redis so that a shard restarted on another node
finds them; their shared count of each owner's open tasks lives in the same server,
beside the shards' own key namespaces (`swarm-ray:seats`). Taking a seat is one Lua
script: count the owner's seats, refuse past the limit, or take one, atomically.

Each owner's spend per day (`_spend`) lives there too: a hash of one line per task
(`swarm-ray:spend:{owner}:{day}:lines`) and a hash of their sums (`...:sums`), which one
Lua script keeps in step as a line is set, so reading a day's spend is one `HGETALL`
however many tasks it had. They expire a few days after their day's last line.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from swarm_ray.core.model._errors import StateStoreError
from swarm_ray.core.model._subtask import TokenUsage

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


_FIELDS = ("prompt_tokens", "completion_tokens", "calls", "seconds", "cost")

# KEYS: the task's day key. ARGV: task id, day, line (tab-separated fields), seconds to
# keep, the owner's key prefix, then the fields' names. The task's old line comes off the
# sums of the day it was on (a task open past midnight moves to the new day).
_POST = """
local function take(day)
  local lines = ARGV[5] .. day .. ':lines'
  local old = redis.call('HGET', lines, ARGV[1])
  if not old then return end
  local i = 6
  for part in string.gmatch(old, '[^\t]+') do
    redis.call('HINCRBYFLOAT', ARGV[5] .. day .. ':sums', ARGV[i], -tonumber(part))
    i = i + 1
  end
  redis.call('HDEL', lines, ARGV[1])
end
take(redis.call('GET', KEYS[1]) or ARGV[2])
local lines = ARGV[5] .. ARGV[2] .. ':lines'
local sums = ARGV[5] .. ARGV[2] .. ':sums'
local i = 6
for part in string.gmatch(ARGV[3], '[^\t]+') do
  redis.call('HINCRBYFLOAT', sums, ARGV[i], tonumber(part))
  i = i + 1
end
redis.call('HSET', lines, ARGV[1], ARGV[3])
redis.call('EXPIRE', lines, ARGV[4])
redis.call('EXPIRE', sums, ARGV[4])
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[4])
return 1
"""
_KEEP_S = 3 * 86_400
"""How long a day's spend is kept after its last line (a day's budget reads only its own)."""


class RedisOpenTaskLedger:
    """`OpenTaskLedger` with its seats in Redis (see the module docstring)."""

    def __init__(self, url: str, shard: int, *, namespace: str = "swarm-ray") -> None:
        self.shard = shard
        self._seats = f"{namespace}:seats"
        self._owner_prefix = f"{namespace}:seats:owner:"
        self._spend_prefix = f"{namespace}:spend:"
        try:
            self._client: redis.Redis[str] = redis.Redis.from_url(
                url, decode_responses=True, socket_timeout=5.0, socket_connect_timeout=5.0
            )
            self._take = self._client.register_script(_TAKE)
            self._post = self._client.register_script(_POST)
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

    def post_spend(self, owner: str, day: str, task_id: str, usage: TokenUsage) -> None:
        """As `OpenTaskLedger.post_spend`."""
        line = "\t".join(repr(float(getattr(usage, f))) for f in _FIELDS)
        try:
            self._post(
                keys=[f"{self._spend_prefix}task:{task_id}"],
                args=[task_id, day, line, _KEEP_S, f"{self._spend_prefix}{owner}:", *_FIELDS],
            )
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of spend failed: {exc}") from exc

    def spent(self, owner: str, day: str) -> TokenUsage:
        """As `OpenTaskLedger.spent`."""
        try:
            sums = self._client.hgetall(f"{self._spend_prefix}{owner}:{day}:sums")
        except (redis.RedisError, OSError) as exc:
            raise StateStoreError(f"the ledger of spend failed: {exc}") from exc
        number = {f: max(float(sums.get(f, 0.0)), 0.0) for f in _FIELDS}
        return TokenUsage(
            prompt_tokens=round(number["prompt_tokens"]),
            completion_tokens=round(number["completion_tokens"]),
            calls=round(number["calls"]),
            seconds=number["seconds"],
            cost=number["cost"],
        )

    def _owner(self, owner: str) -> str:
        return f"{self._owner_prefix}{owner}"
