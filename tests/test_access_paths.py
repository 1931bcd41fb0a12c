"""Check what is opened, open what was checked: the path a reader opens is the one approved.

A property test over the encodings that once made the check and the open disagree
(percent-escapes that pyarrow's `from_uri` decodes after the check, double encoding,
unicode dots, doubled slashes, backslashes, symlinks): whatever an untrusted caller
names, either the access policy refuses it, or the value dispatched is its canonical
form and the file the document reader opens for it is that same file, under a root.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path
from urllib.parse import unquote

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from swarm_ray import InputNotAllowedError, TaskRequest
from swarm_ray.core.guards._access import AccessPolicy
from swarm_ray.core.guards._limits import RequestLimits
from swarm_ray.core.guards._principal import Principal
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.documents._parse import locate
from swarm_ray.documents._stage_inputs import ParseIn
from swarm_ray.runtime._intake import Layout, take_in
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._store import SQLiteStateStore
from swarm_ray.runtime._uploads import Uploads

_BASE = Path(os.environ.get("TMPDIR", "/tmp")) / f"swarm-access-{os.getpid()}"
_ROOT = _BASE / "uploads" / "alice"
"""The caller's uploads; `secret.pdf` lies beside `uploads`, outside every root."""


def _layout() -> Path:
    (_ROOT / "file-1").mkdir(parents=True, exist_ok=True)
    (_ROOT / "file-1" / "a.pdf").write_bytes(b"%PDF-1.4 mine")
    (_BASE / "secret.pdf").write_bytes(b"%PDF-1.4 SECRET")
    for link, target in [("out.pdf", _BASE / "secret.pdf"), ("in", _ROOT / "file-1")]:
        if not (_ROOT / link).is_symlink():
            (_ROOT / link).symlink_to(target)
    return _ROOT


_layout()
POLICY = AccessPolicy(read_roots=(str(_ROOT), "s3://bucket/shared/"))
_SEGMENTS = [
    "..", ".", "%2e%2e", "%2e", "%2E%2E", "%252e%252e", "..%2f", "%2e%2e%2f", "\u2024\u2024",
    "\uff0e\uff0e", "..\\", "\\..", "file-1", "a.pdf", "in", "out.pdf", "secret.pdf",
    "uploads", "alice", "", "%00", "a%2fb", "~",
]  # fmt: skip
_SEPARATORS = ["/", "//", "\\", "%2f", "%2F", "%252f", "/./"]
_PREFIXES = [str(_ROOT), f"file://{_ROOT}", f"file://{_ROOT}/", "s3://bucket/shared", "", "/"]


@st.composite
def _names(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(_SEGMENTS), min_size=1, max_size=8))
    value = draw(st.sampled_from(_PREFIXES))
    for part in parts:
        value += draw(st.sampled_from(_SEPARATORS)) + part
    return value


def _opened(dispatched: str) -> str:
    """The file the document reader opens for a dispatched value."""
    filesystem, inner = locate(dispatched)
    assert filesystem is None, dispatched  # URIs are checked textually below
    return os.path.realpath(inner)


@settings(max_examples=400, deadline=None)
@given(_names())
@example(f"file://{_ROOT}/file-1/%2e%2e/%2e%2e/%2e%2e/secret.pdf")
@example(f"file://{_ROOT}/%2e%2e/%2e%2e/secret.pdf")
@example(f"{_ROOT}/out.pdf")
@example(f"{_ROOT}/in/a.pdf")
@example(f"{_ROOT}//file-1/a.pdf")
@example("s3://bucket/shared/%2e%2e/secret.pdf")
@example("s3://bucket/shared/a%252e.pdf")
def test_the_path_opened_is_the_path_approved(name: str) -> None:
    try:
        dispatched = POLICY.check(ParseIn, {"path": name})["path"]
    except InputNotAllowedError:
        return  # refused: nothing is opened
    if "://" in dispatched:
        assert dispatched.startswith("s3://bucket/shared/")
        path = dispatched.split("://", 1)[1]
        assert unquote(path) == path  # pyarrow decodes nothing it was not shown
        # The root itself may keep its slash (`s3://bucket/shared/`): it opens the same.
        assert posixpath.normpath(path) == path.rstrip("/") and "\\" not in path
        return
    opened = _opened(dispatched)
    assert opened == dispatched
    assert Path(opened).is_relative_to(_ROOT.resolve())
    assert b"SECRET" not in Path(opened).read_bytes() if Path(opened).is_file() else True


def test_canonical_forms_are_dispatched_and_escapes_refused() -> None:
    assert POLICY.check(ParseIn, {"path": f"{_ROOT}/in/a.pdf"})["path"] == str(
        (_ROOT / "file-1" / "a.pdf").resolve()
    )
    assert POLICY.check(ParseIn, {"path": f"//{_ROOT}//file-1/./a.pdf"})["path"] == str(
        (_ROOT / "file-1" / "a.pdf").resolve()
    )
    for bad, reason in [
        (f"file://{_ROOT}/file-1/a.pdf", "file_uri"),
        (f"{_ROOT}/%2e%2e/secret.pdf", "escape"),
        (f"{_ROOT}\\..\\secret.pdf", "escape"),
        (f"{_ROOT}/\uff0e\uff0e/secret.pdf", "unicode"),
        (f"{_ROOT}/out.pdf", "read"),
        ("https://127.0.0.1/a.pdf", "scheme"),
        ("s3://bucket/shared/%2e%2e/secret.pdf", "escape"),
        ("s3://bucket/shared//a.pdf", "traversal"),
    ]:
        with pytest.raises(InputNotAllowedError) as caught:
            POLICY.check(ParseIn, {"path": bad})
        assert caught.value.details["reason"] == reason, bad


def test_an_upload_dir_climbed_by_escapes_is_refused_at_intake(tmp_path: Path) -> None:
    """The attack of issue 21: one upload, then `file://<its dir>/%2e%2e/.../secret.pdf`."""
    registry, router = load_catalogs(["swarm_ray.documents:documents_catalog"])
    uploads = Uploads(ResultStore(str(tmp_path / "results")))
    alice = Principal(id="alice")
    writer = uploads.writer(alice, "mine.pdf", max_bytes=10_000)
    writer.write(b"%PDF-1.4\n" + b"x" * 2000)
    info = writer.commit()
    (tmp_path / "secret.pdf").write_bytes(b"%PDF-1.4 SECRET")
    directory = Path(uploads.resolve(alice, info.id, where="items[0]")).parent
    depth = len(directory.relative_to(tmp_path).parts)
    climb = f"file://{directory}/" + "%2e%2e/" * depth + "secret.pdf"
    assert Path(unquote(climb[len("file://") :])).resolve() == (tmp_path / "secret.pdf")
    request = TaskRequest(template="compare_documents", items=(info.id, climb))
    with pytest.raises(InputNotAllowedError, match="file://") as caught:
        take_in(
            request,
            alice,
            registry=registry,
            router=router,
            store=SQLiteStateStore(tmp_path / "state.db"),
            layout=Layout(tmp_path, uploads),
            limits=RequestLimits(),
        )
    assert caught.value.details["reason"] == "file_uri"


def test_regexes_under_dollar_keys_and_misshapen_fields_are_refused() -> None:
    """Every key is walked, `$` ones included; `fields: 7` is the field's error, not a crash."""
    policy = AccessPolicy()
    evil = "(a+)+b"
    for bad in [
        {"fields": [{"name": "f", "vocabulary": {"$x": [evil]}}]},
        {"fields": [{"name": "f", "unit": "km", "qualifiers": {"$y": [evil]}}]},
    ]:
        with pytest.raises(InputNotAllowedError) as caught:
            policy.check(ParseIn, bad)
        assert caught.value.details["reason"] == "pattern"
    with pytest.raises(InputNotAllowedError) as caught:
        policy.check(ParseIn, {"fields": 7})
    assert caught.value.details == {"field": "fields", "reason": "type"}
    # a dispatch-time marker is checked once it resolves, not before
    policy.check(ParseIn, {"fields": {"$from": "plan", "path": "fields", "many": False}})
