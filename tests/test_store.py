"""Contract tests of the state store, run against a real SQLite file and a real redis-server."""

from __future__ import annotations

import json
import os
import pickle
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import swarm_ray
from swarm_ray import InvalidSpecError, StateStoreError
from swarm_ray.core.durability._journal import LogEntry, StateStore
from swarm_ray.core.model._record import SCHEMA_VERSION
from swarm_ray.runtime._store import (
    _LAYOUT_STEPS,
    STORE_LAYOUT_VERSION,
    SQLiteStateStore,
    open_state_store,
)
from swarm_ray.runtime._store_redis import RedisStateStore
from tests.conftest_redis import free_port, running_redis_server

STATE_DIR_ENV = "SWARM_RAY_STATE_DIR"

MakeStore = Callable[..., StateStore]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with running_redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A factory of stores that share one backend location, closed after the test."""
    opened: list[StateStore] = []
    if request.param == "sqlite":
        path = tmp_path / "nested" / "state.db"

        def new(**options: Any) -> StateStore:
            return SQLiteStateStore(path, **options)
    else:
        url = request.getfixturevalue("redis_url")
        namespace = f"test-{uuid.uuid4().hex}"

        def new(**options: Any) -> StateStore:
            return RedisStateStore(url, namespace=namespace, **options)

    def make(**options: Any) -> StateStore:
        store = new(**options)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def store(make_store: MakeStore) -> StateStore:
    return make_store()


def test_put_then_get_returns_the_snapshot(store: StateStore) -> None:
    record = json.dumps({"state": "routing", "note": "naïve ✓"})
    before = time.time()
    store.put_task("t1", record, is_open=True, schema_version=1)
    got = store.get_task("t1")
    assert got is not None
    assert (got.task_id, got.record_json, got.is_open, got.schema_version) == (
        "t1",
        record,
        True,
        1,
    )
    assert before <= got.updated_at <= time.time()
    assert store.get_task("nope") is None


def test_put_replaces_the_snapshot_and_keeps_insertion_order(store: StateStore) -> None:
    for task_id in ("a", "b", "c"):
        store.put_task(task_id, "{}", is_open=True, schema_version=1)
    store.put_task("a", '{"v": 2}', is_open=False, schema_version=1)
    got = store.get_task("a")
    assert got is not None
    assert (got.record_json, got.is_open) == ('{"v": 2}', False)
    assert store.list_tasks() == ["a", "b", "c"]
    assert store.list_tasks(open_only=True) == ["b", "c"]
    store.put_task("a", "{}", is_open=True, schema_version=1)
    assert store.list_tasks(open_only=True) == ["a", "b", "c"]
    assert store.list_tasks(newest=2) == ["b", "c"]
    assert store.list_tasks(newest=5) == ["a", "b", "c"]
    assert store.list_tasks(newest=0) == []
    store.put_task("c", "{}", is_open=False, schema_version=1)
    assert store.list_tasks(open_only=True, newest=1) == ["b"]


def test_append_numbers_entries_per_task_from_one(store: StateStore) -> None:
    assert [store.append("a", "transition", f'{{"n": {n}}}') for n in range(3)] == [1, 2, 3]
    assert store.append("b", "result", "{}") == 1
    assert store.append("a", "result", "{}") == 4
    log = store.read_log("a")
    assert [entry.seq for entry in log] == [1, 2, 3, 4]
    assert [entry.kind for entry in log] == ["transition"] * 3 + ["result"]
    assert log[1].payload_json == '{"n": 1}'
    assert log[0].dedupe_key is None
    assert all(isinstance(entry, LogEntry) and entry.at > 0 for entry in log)


def test_append_with_a_known_dedupe_key_writes_nothing(store: StateStore) -> None:
    store.append("t", "transition", "{}")
    assert store.append("t", "result", '{"first": true}', dedupe_key="s1") == 2
    assert store.append("t", "result", '{"again": true}', dedupe_key="s1") == 2
    assert store.append("t", "result", "{}", dedupe_key="s2") == 3
    assert store.append("other", "result", "{}", dedupe_key="s1") == 1
    log = store.read_log("t")
    assert [(entry.seq, entry.dedupe_key) for entry in log] == [(1, None), (2, "s1"), (3, "s2")]
    assert log[1].payload_json == '{"first": true}'


def test_read_log_after_seq_returns_only_later_entries(store: StateStore) -> None:
    for n in range(5):
        store.append("t", "tick", str(n))
    assert [entry.seq for entry in store.read_log("t", after_seq=2)] == [3, 4, 5]
    assert store.read_log("t", after_seq=5) == []
    assert len(store.read_log("t", after_seq=-3)) == 5
    assert store.read_log("unknown") == []


def test_delete_task_removes_record_and_log(store: StateStore) -> None:
    for task_id in ("a", "b"):
        store.put_task(task_id, "{}", is_open=True, schema_version=1)
        store.append(task_id, "tick", "{}", dedupe_key="k")
    store.delete_task("a")
    store.delete_task("never-existed")
    assert store.get_task("a") is None
    assert store.read_log("a") == []
    assert store.list_tasks() == ["b"]
    assert store.list_tasks(open_only=True) == ["b"]
    assert store.append("a", "tick", "{}", dedupe_key="k") == 1
    assert len(store.read_log("b")) == 1


def test_newer_schema_version_is_refused_by_name(make_store: MakeStore) -> None:
    store = make_store(supported_schema_version=1)
    store.put_task("t-new", "{}", is_open=True, schema_version=2)
    with pytest.raises(StateStoreError) as info:
        store.get_task("t-new")
    message = str(info.value)
    assert "'t-new'" in message and "`schema_version` 2" in message and "supported 1" in message
    assert store.list_tasks(open_only=True) == ["t-new"]
    newer = make_store(supported_schema_version=2)
    got = newer.get_task("t-new")
    assert got is not None and got.schema_version == 2


def test_a_task_in_todays_version_is_loaded_as_it_is(store: StateStore) -> None:
    store.put_task("t", '{"x": 1}', is_open=True, schema_version=SCHEMA_VERSION)
    store.append("t", "event", "{}")
    loaded = store.load_task("t")
    assert loaded is not None and loaded.record_json == '{"x": 1}'
    assert (loaded.snapshot_version, loaded.log_version) == (SCHEMA_VERSION, SCHEMA_VERSION)
    assert [e.kind for e in loaded.log] == ["event"]
    assert store.load_task("nothing") is None


def test_a_log_goes_on_in_todays_version_after_its_mark(store: StateStore) -> None:
    store.put_task("t", '{"schema_version": 1}', is_open=True, schema_version=1)
    store.append("t", "plan", json.dumps({"kind": "start", "at": 1.0}))
    loaded = store.load_task("t")
    assert loaded is not None and loaded.log_version == 1
    assert json.loads(loaded.record_json) == {"schema_version": 2}
    store.mark_version("t", loaded.log_version)
    store.mark_version("t", loaded.log_version)  # once a version
    store.append("t", "plan", json.dumps({"kind": "today's own"}))
    store.put_task("t", '{"schema_version": 2}', is_open=True, schema_version=2)
    again = store.load_task("t")
    assert again is not None and (again.snapshot_version, again.log_version) == (2, 2)
    # The entry before the mark is migrated; the one after it, in today's version, is
    # read as it was written.
    assert [(e.kind, e.payload_json) for e in again.log] == [
        ("sched", json.dumps({"kind": "start", "at": 1.0})),
        ("plan", json.dumps({"kind": "today's own"})),
    ]
    assert [e.kind for e in store.read_log("t")] == ["plan", "version", "plan"]  # as stored


def test_a_record_newer_than_the_code_is_refused_by_name(make_store: MakeStore) -> None:
    store = make_store()
    newer = SCHEMA_VERSION + 1
    store.put_task("snap", "{}", is_open=True, schema_version=newer)
    with pytest.raises(StateStoreError, match=f"`schema_version` {newer}, newer than") as info:
        store.load_task("snap")
    assert info.value.details["task_id"] == "snap"
    # An orchestrator of the newer version marked the log, then stopped before its
    # snapshot was written: what it appended is refused as well.
    store.put_task("log", "{}", is_open=True, schema_version=SCHEMA_VERSION)
    mark = {"from": SCHEMA_VERSION, "to": newer}
    store.append("log", "version", json.dumps(mark))
    with pytest.raises(StateStoreError, match=f"`schema_version` {newer}, newer than"):
        store.load_task("log")


def test_a_version_no_migration_reads_is_refused_by_name(make_store: MakeStore) -> None:
    store = make_store(supported_schema_version=SCHEMA_VERSION + 1)
    store.put_task("t", "{}", is_open=True, schema_version=SCHEMA_VERSION)
    with pytest.raises(StateStoreError, match="cannot migrate to"):
        store.load_task("t")


def test_a_second_store_on_the_same_location_sees_all_writes(make_store: MakeStore) -> None:
    first = make_store()
    first.put_task("t", '{"x": 1}', is_open=True, schema_version=1)
    first.append("t", "tick", "{}", dedupe_key="d")
    first.close()
    second = make_store()
    got = second.get_task("t")
    assert got is not None and got.record_json == '{"x": 1}'
    assert second.append("t", "tick", "{}", dedupe_key="d") == 1
    assert second.append("t", "tick", "{}") == 2


def test_two_writers_interleaving_on_one_task_keep_seqs_gapless(make_store: MakeStore) -> None:
    # Each store remembers the next seq of the tasks it wrote; the other's appends must
    # not make it reuse or skip one.
    first, second = make_store(), make_store()
    got = [first.append("t", "a", "1"), first.append("t", "a", "2")]
    got += [second.append("t", "b", "3"), first.append("t", "a", "4")]
    got += [second.append("t", "b", "5"), first.append("t", "a", "6", dedupe_key="k")]
    assert got == [1, 2, 3, 4, 5, 6]
    assert second.append("t", "b", "again", dedupe_key="k") == 6
    assert first.append("t", "a", "7") == 7
    assert [e.payload_json for e in second.read_log("t")] == [str(n) for n in range(1, 8)]


def test_a_batch_commits_its_writes_together_and_even_when_it_raises(
    make_store: MakeStore,
) -> None:
    store, reader = make_store(), make_store()
    with store.batch():
        store.put_task("t", "1", is_open=True, schema_version=1)
        assert store.append("t", "a", "x") == 1
        assert store.append("t", "a", "y", dedupe_key="d") == 2
        assert store.append("t", "a", "again", dedupe_key="d") == 2
        with store.batch():  # nested: the outer one commits
            assert store.append("t", "a", "z") == 3
    assert [e.seq for e in reader.read_log("t")] == [1, 2, 3]
    with pytest.raises(RuntimeError), store.batch():
        store.append("t", "a", "w")
        raise RuntimeError("the unit of work fails after writing")
    assert [e.payload_json for e in reader.read_log("t")] == ["x", "y", "z", "w"]
    assert store.append("t", "a", "v") == 5


def test_concurrent_appends_get_unique_gapless_seqs(store: StateStore) -> None:
    threads, per_thread = 8, 50
    seqs: list[list[int]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads)

    def work(index: int) -> None:
        start.wait()
        for n in range(per_thread):
            seqs[index].append(store.append("t", "tick", json.dumps([index, n])))

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    returned = sorted(seq for per in seqs for seq in per)
    assert returned == list(range(1, threads * per_thread + 1))
    log = store.read_log("t")
    assert [entry.seq for entry in log] == returned
    # Each thread's own entries keep its order.
    for index in range(threads):
        mine = [
            json.loads(e.payload_json)[1] for e in log if json.loads(e.payload_json)[0] == index
        ]
        assert mine == list(range(per_thread))


def test_concurrent_appends_with_one_dedupe_key_record_once(store: StateStore) -> None:
    threads = 8
    start = threading.Barrier(threads)
    results: list[int] = []

    def work() -> None:
        start.wait()
        results.append(store.append("t", "result", "{}", dedupe_key="sub-1"))

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert results == [1] * threads
    assert len(store.read_log("t")) == 1


def test_a_closed_store_raises_and_close_is_idempotent(make_store: MakeStore) -> None:
    with make_store() as store:
        store.put_task("t", "{}", is_open=True, schema_version=1)
    store.close()
    with pytest.raises(StateStoreError, match=r"closed; cannot `append` for task 't'") as info:
        store.append("t", "tick", "{}")
    assert info.value.backend == store.backend
    assert info.value.operation == "append"
    assert pickle.loads(pickle.dumps(info.value)) == info.value


def test_sqlite_uses_wal_and_records_its_layout_version(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "state.db"
    with SQLiteStateStore(path) as store:
        store.put_task("t", "{}", is_open=True, schema_version=1)
        probe = sqlite3.connect(path)
        try:
            assert probe.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            layout = [(str(STORE_LAYOUT_VERSION),)]
            assert probe.execute("SELECT value FROM meta").fetchall() == layout
        finally:
            probe.close()


_LAYOUT_1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL UNIQUE, record_json TEXT NOT NULL, is_open INTEGER NOT NULL,
    schema_version INTEGER NOT NULL, updated_at REAL NOT NULL);
CREATE INDEX tasks_open ON tasks (is_open, id);
CREATE TABLE log (task_id TEXT NOT NULL, seq INTEGER NOT NULL,
    kind TEXT NOT NULL, payload_json TEXT NOT NULL, dedupe_key TEXT, at REAL NOT NULL,
    PRIMARY KEY (task_id, seq));
CREATE UNIQUE INDEX log_dedupe ON log (task_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
INSERT INTO meta VALUES ('layout_version', '1');
INSERT INTO tasks (task_id, record_json, is_open, schema_version, updated_at)
    VALUES ('before-owners', '{}', 1, 1, 1.0);
INSERT INTO log VALUES ('before-owners', 1, 'tick', '{}', NULL, 1.0);
"""
"""A state file as swarm-ray wrote it before tasks had owners (layout 1, written by hand)."""


@pytest.mark.parametrize("owners", [False, True], ids=["without-owner-column", "with-it"])
def test_sqlite_brings_a_layout_1_file_up_to_date_when_opened(tmp_path: Path, owners: bool) -> None:
    """Layout 1 files lack the `owner` column, unless an open after owners came added it."""
    path = tmp_path / "state.db"
    probe = sqlite3.connect(path)
    probe.executescript(_LAYOUT_1)
    if owners:
        probe.executescript(
            "ALTER TABLE tasks ADD COLUMN owner TEXT;"
            " CREATE INDEX tasks_owner ON tasks (owner, id);"
        )
    probe.close()
    with SQLiteStateStore(path) as store:
        assert store.list_tasks(owner="alice") == []
        assert [e.kind for e in store.read_log("before-owners")] == ["tick"]
        store.put_task("mine", "{}", is_open=True, schema_version=1, owner="alice")
        assert store.list_tasks(owner="alice") == ["mine"]
        assert store.list_tasks(open_only=True) == ["before-owners", "mine"]
    with SQLiteStateStore(path) as again:  # once is enough: the file says its layout
        assert again.list_tasks(owner="alice") == ["mine"]
    probe = sqlite3.connect(path)
    try:
        assert probe.execute("SELECT value FROM meta").fetchall() == [("2",)]
        indexes = {row[1] for row in probe.execute("PRAGMA index_list(tasks)")}
        assert "tasks_owner" in indexes
    finally:
        probe.close()


def test_every_layout_version_has_its_step() -> None:
    assert sorted(_LAYOUT_STEPS) == list(range(1, STORE_LAYOUT_VERSION))


def test_sqlite_refuses_a_file_from_a_newer_layout(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SQLiteStateStore(path).close()
    probe = sqlite3.connect(path)
    with probe:
        probe.execute("UPDATE meta SET value = '99' WHERE key = 'layout_version'")
    probe.close()
    with pytest.raises(StateStoreError, match=r"`layout_version` 99"):
        SQLiteStateStore(path)


@pytest.mark.parametrize("broken", ["directory", "not-a-database"])
def test_sqlite_on_a_broken_path_raises_state_store_error(tmp_path: Path, broken: str) -> None:
    path = tmp_path / "state.db"
    if broken == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"this is not a database file" * 100)
    with pytest.raises(StateStoreError, match=r"`sqlite` state store .* failed to `open`") as info:
        SQLiteStateStore(path)
    assert info.value.backend == "sqlite"
    assert isinstance(info.value.__cause__, sqlite3.Error)


_CHILD = """
import sys
from swarm_ray.runtime._store import SQLiteStateStore

store = SQLiteStateStore(sys.argv[1])
store.put_task("t", "{}", is_open=True, schema_version=1)
n = 0
while True:
    n = store.append("t", "tick", "{}", dedupe_key=f"k{n}")
    if n % 10 == 0:
        store.put_task("t", str(n), is_open=True, schema_version=1)
    print(n, flush=True)
"""


@pytest.mark.timeout(60)
def test_sqlite_keeps_every_acknowledged_write_through_sigkill(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    repo_root = Path(swarm_ray.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(repo_root)}
    with (tmp_path / "child.err").open("w") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            env=env,
        )
        assert child.stdout is not None
        with child.stdout:
            acknowledged = 0
            while acknowledged < 300:
                line = child.stdout.readline()
                if not line:
                    break
                acknowledged = int(line)
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait() == -signal.SIGKILL
            # Lines still in the pipe were acknowledged too.
            acknowledged = max([acknowledged, *map(int, child.stdout.read().split())])
    assert acknowledged >= 300, (tmp_path / "child.err").read_text()
    with SQLiteStateStore(path) as store:
        seqs = [entry.seq for entry in store.read_log("t")]
        assert seqs[:acknowledged] == list(range(1, acknowledged + 1))
        assert seqs == list(range(1, len(seqs) + 1))
        got = store.get_task("t")
        assert got is not None and int(got.record_json) >= acknowledged // 10 * 10


def test_redis_on_a_closed_port_raises_state_store_error() -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises(StateStoreError, match=r"`redis` state store .* failed to `open`") as info:
        RedisStateStore(url, socket_timeout_s=1.0)
    assert info.value.backend == "redis"


@pytest.mark.redis
def test_redis_messages_leave_out_the_password(redis_url: str) -> None:
    with RedisStateStore(redis_url.replace("redis://", "redis://:hunter2@")) as store:
        assert store.location == redis_url
        assert "hunter2" not in repr(store)
    closed = f"redis://user:hunter2@127.0.0.1:{free_port()}/0"
    with pytest.raises(StateStoreError) as info:
        RedisStateStore(closed, socket_timeout_s=1.0)
    assert "hunter2" not in str(info.value)
    assert "redis://127.0.0.1:" in str(info.value)


@pytest.mark.redis
def test_redis_namespaces_are_isolated(redis_url: str) -> None:
    with (
        RedisStateStore(redis_url, namespace="ns-a") as a,
        RedisStateStore(redis_url, namespace="ns-b") as b,
    ):
        a.put_task("t", "{}", is_open=True, schema_version=1)
        a.append("t", "tick", "{}")
        assert b.get_task("t") is None
        assert b.list_tasks() == []
        assert b.append("t", "tick", "{}") == 1
        a.delete_task("t")
        b.delete_task("t")


def test_open_state_store_defaults_to_sqlite_under_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_state_store(state_dir=tmp_path / "given") as store:
        assert isinstance(store, SQLiteStateStore)
    assert (tmp_path / "given" / "state.db").is_file()
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "from-env"))
    with open_state_store() as store:
        assert store.location == str(tmp_path / "from-env" / "state.db")
    assert (tmp_path / "from-env" / "state.db").is_file()


def test_open_state_store_reads_sqlite_urls_and_paths(tmp_path: Path) -> None:
    with open_state_store(f"sqlite://{tmp_path}/url.db") as store:
        assert isinstance(store, SQLiteStateStore)
        assert store.location == str(tmp_path / "url.db")
    with open_state_store(str(tmp_path / "plain.db"), supported_schema_version=3) as store:
        assert isinstance(store, SQLiteStateStore)
        assert store.supported_schema_version == 3
    assert (tmp_path / "url.db").is_file() and (tmp_path / "plain.db").is_file()


@pytest.mark.redis
def test_open_state_store_reads_redis_urls(redis_url: str) -> None:
    with open_state_store(redis_url, namespace=f"test-{uuid.uuid4().hex}") as store:
        assert isinstance(store, RedisStateStore)
        assert store.list_tasks() == []


@pytest.mark.parametrize("url", ["mysql://db/x", "sqlite://host/x.db", "sqlite://"])
def test_open_state_store_refuses_unknown_urls(url: str) -> None:
    with pytest.raises(InvalidSpecError, match="`url`"):
        open_state_store(url)
