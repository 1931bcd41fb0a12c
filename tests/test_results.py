"""Tests of the result store against the real local filesystem."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import pytest

from swarm_ray import InvalidSpecError, StateStoreError
from swarm_ray.core.durability._journal import OFFLOAD_LIMIT_BYTES, should_offload
from swarm_ray.runtime._results import ResultStore


def files_under(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*") if path.is_file())


def test_bytes_and_json_round_trip(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    ref = store.put_bytes("t1/s1.bin", b"\x00\xffdata")
    assert ref == f"{tmp_path.as_uri()}/t1/s1.bin"
    assert store.get_bytes(ref) == b"\x00\xffdata"
    value = {"facts": [1.5, None, "naïve ✓"], "ok": True}
    json_ref = store.put_json("t1/s2.json", value)
    assert store.get_json(json_ref) == value
    assert (tmp_path / "t1" / "s2.json").read_text(encoding="utf-8").startswith('{"facts"')
    assert store.exists(ref) and store.exists(json_ref)


def test_put_replaces_and_keeps_extensions_uncompressed(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    ref = store.put_bytes("out.gz", b"first")
    assert store.put_bytes("out.gz", b"second") == ref
    assert store.get_bytes(ref) == b"second"
    assert (tmp_path / "out.gz").read_bytes() == b"second"


def test_writes_leave_no_temporary_file(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    for n in range(5):
        store.put_bytes(f"t/{n}.bin", bytes(n))
    store.put_json("t/x.json", [1])
    assert files_under(tmp_path) == [f"t/{n}.bin" for n in range(5)] + ["t/x.json"]


def test_a_failed_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    (tmp_path / "t" / "taken").mkdir(parents=True)  # the target name is a directory
    with pytest.raises(StateStoreError, match=r"failed to `write`") as info:
        store.put_bytes("t/taken", b"x")
    assert "t/taken" in str(info.value)
    assert files_under(tmp_path) == []


def test_a_reader_never_sees_a_partial_write(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    size = 2 * 1024 * 1024
    payloads = (b"a" * size, b"b" * size)
    ref = store.put_bytes("big.bin", payloads[0])
    done = threading.Event()

    def overwrite() -> None:
        for n in range(40):
            store.put_bytes("big.bin", payloads[n % 2])
        done.set()

    writer = threading.Thread(target=overwrite)
    writer.start()
    reads = 0
    while writer.is_alive() or reads < 10:
        assert store.get_bytes(ref) in payloads
        reads += 1
    writer.join()
    assert done.is_set()  # the writer finished rather than died


@pytest.mark.parametrize(
    "key", ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/", "a\\b", "a\nb", ".."]
)
def test_bad_keys_are_refused_by_name(tmp_path: Path, key: str) -> None:
    store = ResultStore(str(tmp_path / "root"))
    with pytest.raises(ValueError, match=r"`key`") as info:
        store.put_bytes(key, b"x")
    assert repr(key) in str(info.value)
    with pytest.raises(ValueError, match=r"`key`"):
        store.put_json(key, {})
    assert not (tmp_path / "root").exists() or files_under(tmp_path) == []


def test_missing_and_foreign_refs_raise_state_store_error(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path / "root"))
    missing = f"{store.root_uri}/t/none.json"
    with pytest.raises(StateStoreError, match="no such result") as info:
        store.get_bytes(missing)
    assert repr(missing) in str(info.value)
    assert info.value.ref == missing
    assert not store.exists(missing)
    for foreign in [f"{tmp_path.as_uri()}/other/x", "s3://bucket/x", f"{store.root_uri}/../x"]:
        with pytest.raises(StateStoreError, match="not under this store's root"):
            store.get_bytes(foreign)


def test_corrupt_json_raises_state_store_error(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    ref = store.put_bytes("bad.json", b"{not json")
    with pytest.raises(StateStoreError, match=r"is not valid JSON"):
        store.get_json(ref)


def test_delete_removes_and_is_idempotent(tmp_path: Path) -> None:
    store = ResultStore(str(tmp_path))
    ref = store.put_json("t/s.json", {"x": 1})
    store.delete(ref)
    assert not store.exists(ref)
    store.delete(ref)
    with pytest.raises(StateStoreError):
        store.get_json(ref)


def test_a_file_uri_root_and_a_path_root_share_refs(tmp_path: Path) -> None:
    root = tmp_path / "with space"
    by_uri = ResultStore(root.as_uri())
    by_path = ResultStore(str(root))
    assert by_uri.root_uri == by_path.root_uri == root.as_uri()
    ref = by_uri.put_json("t/%41 é.json", {"a": 1})
    assert by_path.get_json(ref) == {"a": 1}
    assert (root / "t" / "%41 é.json").is_file()
    clone = pickle.loads(pickle.dumps(by_uri))
    assert clone.get_json(ref) == {"a": 1}


def test_default_root_is_results_under_the_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWARM_RAY_STATE_DIR", str(tmp_path))
    store = ResultStore()
    ref = store.put_bytes("k", b"v")
    assert (tmp_path / "results" / "k").read_bytes() == b"v"
    assert ref == f"{(tmp_path / 'results').as_uri()}/k"


def test_an_unparseable_root_uri_is_a_spec_error() -> None:
    with pytest.raises(InvalidSpecError, match=r"`root_uri` 'nosuchscheme://x/y'"):
        ResultStore("nosuchscheme://x/y")


def test_should_offload_counts_utf8_bytes() -> None:
    assert not should_offload("x" * OFFLOAD_LIMIT_BYTES)
    assert should_offload("x" * (OFFLOAD_LIMIT_BYTES + 1))
    assert should_offload("é" * (OFFLOAD_LIMIT_BYTES // 2 + 1))  # 2 bytes a character
    assert not should_offload("é" * 10, limit_bytes=20)
    assert should_offload("é" * 11, limit_bytes=20)
