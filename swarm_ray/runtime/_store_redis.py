"""The Redis backend of the state store, for clusters (see `swarm_ray.runtime._store`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from swarm_ray.core.durability._journal import LogEntry, StateStore, StoredTask
from swarm_ray.core.model._errors import StateStoreError
from swarm_ray.core.model._record import SCHEMA_VERSION
from swarm_ray.runtime._migrations import MIGRATIONS

__all__: list[str] = []

# The dedupe check, the push and the key's record in one atomic step, so two threads (or
# an old and a new orchestrator) never record a result twice. The list index is the seq.
# KEYS: log list, dedupe hash. ARGV: entry JSON, has-dedupe flag, dedupe key.
_REDIS_APPEND = """
if ARGV[2] == '1' then
    local found = redis.call('HGET', KEYS[2], ARGV[3])
    if found then return tonumber(found) end
end
local seq = redis.call('RPUSH', KEYS[1], ARGV[1])
if ARGV[2] == '1' then redis.call('HSET', KEYS[2], ARGV[3], seq) end
return seq
"""

# An atomic upsert that keeps a task's place in insertion order across updates.
# KEYS: task key, all-tasks zset, open-tasks zset, order counter, owner's zset (or "").
# ARGV: task id, snapshot JSON, is-open flag.
_REDIS_PUT = """
local order = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not order then
    order = redis.call('INCR', KEYS[4])
    redis.call('ZADD', KEYS[2], order, ARGV[1])
    if KEYS[5] ~= '' then redis.call('ZADD', KEYS[5], order, ARGV[1]) end
end
redis.call('SET', KEYS[1], ARGV[2])
if ARGV[3] == '1' then redis.call('ZADD', KEYS[3], order, ARGV[1])
else redis.call('ZREM', KEYS[3], ARGV[1]) end
return 1
"""


def redacted(url: str) -> str:
    """`url` without its password: the location messages name."""
    parts = urlsplit(url)
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def namespaces_with_tasks(url: str, namespaces: Sequence[str]) -> list[str]:
    """Those of `namespaces` whose store holds a task, in one round trip to `url`.

    Raises:
        StateStoreError: Redis cannot be reached (its URL named without the password).
    """
    try:
        with redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5) as client:
            pipe = client.pipeline(transaction=False)
            for namespace in namespaces:
                pipe.exists(f"{namespace}:tasks")  # `RedisStateStore._key("tasks")`
            held = pipe.execute()
    except (redis.RedisError, OSError) as exc:
        raise StateStoreError(
            f"cannot read the Redis store at {redacted(url)}: {type(exc).__name__}: {exc}"
        ) from None
    return [n for n, count in zip(namespaces, held, strict=True) if count]


class RedisStateStore(StateStore):
    """State in Redis, for clusters where the orchestrator may restart on another node.

    Durability is what the server is configured for (AOF with `appendfsync everysec` is
    the usual choice). A task is one JSON string, its log a list whose index is the sequence
    number; two sorted sets keep insertion order for all and for open tasks. Writes that
    touch several keys run as Lua scripts or MULTI blocks, so they are atomic.

    A command is retried `retries` times after a connection error, so an append that
    reached the server just before the connection broke may be written twice unless it
    carries a `dedupe_key`: results should always carry one.

    Args:
        url: A `redis://`, `rediss://` or `unix://` URL.
        namespace: Prefix of every key, so several deployments can share one server.
        supported_schema_version: See `StateStore`.
        socket_timeout_s: Timeout for connecting and for each command.
        retries: Retries of a command after a connection error.
    """

    backend = "redis"
    _backend_errors = (redis.RedisError, OSError)

    def __init__(
        self,
        url: str,
        *,
        namespace: str = "swarm-ray",
        supported_schema_version: int = SCHEMA_VERSION,
        socket_timeout_s: float = 5.0,
        retries: int = 2,
    ) -> None:
        super().__init__(
            redacted(url), supported_schema_version=supported_schema_version, migrations=MIGRATIONS
        )
        self._ns = namespace
        with self._guard("open"):
            self._client: redis.Redis[str] = redis.Redis.from_url(
                url,
                decode_responses=True,
                socket_timeout=socket_timeout_s,
                socket_connect_timeout=socket_timeout_s,
                retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries),
            )
            try:
                self._client.ping()
                self._append_script = self._client.register_script(_REDIS_APPEND)
                self._put_script = self._client.register_script(_REDIS_PUT)
            except BaseException:
                self._client.close()
                raise

    def _key(self, *parts: str) -> str:
        return ":".join((self._ns, *parts))

    def put_task(
        self,
        task_id: str,
        record_json: str,
        *,
        is_open: bool,
        schema_version: int,
        owner: str | None = None,
    ) -> None:
        keys = [self._key(*part) for part in (("task", task_id), ("tasks",), ("open",), ("order",))]
        keys.append("" if owner is None else self._key("owned", owner))
        snapshot = json.dumps([record_json, is_open, schema_version, time.time()])
        with self._guard("put_task", task_id):
            self._put_script(keys=keys, args=[task_id, snapshot, "1" if is_open else "0"])

    def quarantine(self, task_id: str) -> None:
        with self._guard("quarantine", task_id):
            self._client.zrem(self._key("open"), task_id)

    def _get_task(self, task_id: str) -> StoredTask | None:
        with self._guard("get_task", task_id):
            snapshot = self._client.get(self._key("task", task_id))
        return None if snapshot is None else StoredTask(task_id, *json.loads(snapshot))

    def list_tasks(
        self, *, open_only: bool = False, newest: int | None = None, owner: str | None = None
    ) -> list[str]:
        if newest is not None and newest <= 0:
            return []
        start = 0 if newest is None else -newest  # ZRANGE counts from the end for negatives
        with self._guard("list_tasks"):
            if owner is None:
                key = self._key("open" if open_only else "tasks")
                return list(self._client.zrange(key, start, -1))
            owned = list(self._client.zrange(self._key("owned", owner), 0, -1))
            if open_only:
                opened = set(self._client.zrange(self._key("open"), 0, -1))
                owned = [t for t in owned if t in opened]
            return owned if newest is None else owned[-newest:]

    def append(
        self, task_id: str, kind: str, payload_json: str, *, dedupe_key: str | None = None
    ) -> int:
        entry = json.dumps([kind, payload_json, dedupe_key, time.time()])
        keys = [self._key("log", task_id), self._key("dedupe", task_id)]
        args = [entry, "0" if dedupe_key is None else "1", dedupe_key or ""]
        with self._guard("append", task_id):
            return int(self._append_script(keys=keys, args=args))

    def read_log(self, task_id: str, *, after_seq: int = 0) -> list[LogEntry]:
        start = max(after_seq, 0)  # a negative LRANGE start would count from the end
        with self._guard("read_log", task_id):
            raw = self._client.lrange(self._key("log", task_id), start, -1)
        return [LogEntry(seq, *json.loads(item)) for seq, item in enumerate(raw, start + 1)]

    def delete_task(self, task_id: str) -> None:
        with self._guard("delete_task", task_id):
            pipe = self._client.pipeline(transaction=True)
            pipe.delete(*(self._key(part, task_id) for part in ("task", "log", "dedupe")))
            pipe.zrem(self._key("tasks"), task_id)
            for owned in self._client.scan_iter(self._key("owned", "*")):
                pipe.zrem(owned, task_id)
            pipe.zrem(self._key("open"), task_id)
            pipe.execute()

    def _close(self) -> None:
        self._client.close()
