"""Orchestrator shards: how many, what each is called, and which one a task id names.

`SWARM_RAY_ORCHESTRATORS=N` (default 1) runs N detached orchestrator actors. Shard 0 is
today's orchestrator, under today's name, with today's state store and task ids; shard
`k > 0` is the actor `NAME-s{k}`, with a store of its own (`shard_store_url`) and task
ids that end in `--s{k}` (`mark`). So an id names its shard for good (`shard_of`), and N
can change between restarts: a task stays with the shard that made it, and a shard past
the new N that still has stored tasks is started again to answer for them (`retired`)
while new tasks spread over the first N.

A caller that chooses its task id gets the shard a stable hash of that id names
(`chosen_shard`), so sending the same request again reaches the same shard while N is
unchanged; the id handed back names its shard in any case.

Nothing here does I/O but `retired`, which looks for the stores of shards past N.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from swarm_ray.core.model._errors import InvalidSpecError, StateStoreError

__all__: list[str] = []

ENV = "SWARM_RAY_ORCHESTRATORS"
"""How many orchestrator shards take new tasks."""

_MARK = re.compile(r"--s(?P<k>[1-9][0-9]{0,2})$")
MAX_SHARDS = 1000
"""The most shards an id can name (`--s1` to `--s999`)."""


def shards_from_env(value: int | None = None) -> int:
    """`value`, else `SWARM_RAY_ORCHESTRATORS`, else 1. Raises `InvalidSpecError`."""
    raw: object = value if value is not None else os.environ.get(ENV, "1")
    try:
        count = int(str(raw).strip())
    except ValueError:
        raise InvalidSpecError(f"`{ENV}` must be an integer, got {raw!r}") from None
    if not 1 <= count < MAX_SHARDS:
        raise InvalidSpecError(f"`{ENV}` must be between 1 and {MAX_SHARDS - 1}, got {count!r}")
    return count


def shard_name(name: str, shard: int) -> str:
    """The actor name of shard `shard` of the orchestrator called `name`."""
    return name if shard == 0 else f"{name}-s{shard}"


def shard_of(task_id: str) -> int:
    """The shard a task id names: the `k` of an id ending in `--s{k}`, else 0."""
    found = _MARK.search(task_id)
    return 0 if found is None else int(found.group("k"))


def mark(task_id: str, shard: int) -> str:
    """`task_id` naming `shard` (as it is for shard 0, or when it names it already)."""
    if shard == 0 or shard_of(task_id) == shard:
        return task_id
    return f"{task_id}--s{shard}"


def chosen_shard(task_id: str, shards: int) -> int:
    """The shard of a task whose caller chose its id: the one the id names, or a hash's.

    Stable across processes and restarts (not Python's salted `hash`).
    """
    named = shard_of(task_id)
    if named:
        return named
    digest = hashlib.blake2b(task_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def shard_store_url(url: str | None, shard: int) -> tuple[str | None, str | None]:
    """The state store of `shard` as (`url`, SQLite file name or Redis namespace).

    Shard 0 keeps the store it always had: `(url, None)`. Shard `k` keeps its tasks in
    `state-s{k}.db` beside the default `state.db`, in `NAME-s{k}.db` beside a SQLite file
    a URL names, or under the Redis namespace `swarm-ray-s{k}`.
    """
    if shard == 0:
        return url, None
    if url is None:
        return None, f"state-s{shard}.db"
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        return url, f"swarm-ray-s{shard}"
    if scheme == "sqlite":
        head, _, tail = url.rpartition("/")
        path = Path(tail)
        return f"{head}/{path.stem}-s{shard}{path.suffix}", None
    path = Path(url)
    return str(path.with_name(f"{path.stem}-s{shard}{path.suffix}")), None


def retired(state_dir: Path, url: str | None, shards: int) -> list[int]:
    """Shards at or past `shards` whose store holds tasks: they are started again.

    Each store kind is looked for where `shard_store_url` puts it: `state-s{k}.db` under
    `state_dir` (the default store), `NAME-s{k}.db` beside a SQLite file a URL or path
    names, and the Redis namespace `swarm-ray-s{k}` with a task in it (one round trip for
    every shard an id can name). Raises `StateStoreError` when Redis cannot be reached.
    """
    if url is None:
        return _files(state_dir, "state", ".db", shards)
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme in ("redis", "rediss", "unix"):
        return _namespaces(url, shards)
    if scheme not in ("", "sqlite"):
        return []  # no store: opening it says so
    path = Path(unquote(urlsplit(url).path)) if scheme else Path(url).expanduser()
    return _files(path.parent, path.stem, path.suffix, shards)


def _files(folder: Path, stem: str, suffix: str, shards: int) -> list[int]:
    if not folder.is_dir():
        return []
    found: list[int] = []
    for file in folder.glob(f"{stem}-s*{suffix}"):
        digits = file.name.removeprefix(f"{stem}-s").removesuffix(suffix)
        if digits.isdigit() and shards <= int(digits) < MAX_SHARDS:
            found.append(int(digits))
    return sorted(found)


def _namespaces(url: str, shards: int) -> list[int]:
    from swarm_ray.runtime._store_redis import namespaces_with_tasks

    named = {shard_store_url(url, k)[1]: k for k in range(max(shards, 1), MAX_SHARDS)}
    try:
        held = namespaces_with_tasks(url, [n for n in named if n])
    except StateStoreError as exc:
        raise StateStoreError(f"cannot look for shards past {shards}: {exc}") from None
    return [named[n] for n in held]
