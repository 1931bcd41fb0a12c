import os
import stat

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swarm_ray import WatermarkRejectedError
from swarm_ray.core.guards._watermark import (
    WatermarkKey,
    canonical_digest,
    issue_watermark,
    read_claims,
    verify_watermark,
)
from swarm_ray.runtime._config import watermark_key

KEY = WatermarkKey(b"k" * 32)
INPUT = {"path": "brochure-01.pdf", "pages": [1, 2]}


def token(**kw: object) -> str:
    args: dict = {
        "task_id": "t1",
        "subtask_id": "parse[0]",
        "capability_id": "document.parsing.pdf",
        "input": INPUT,
        "issued_ms": 1_000_000,
        "parent_task_id": "p0",
    }
    args.update(kw)
    return issue_watermark(KEY, **args)


def test_round_trip_and_readable_claims() -> None:
    tok = token()
    claims = verify_watermark(
        KEY,
        tok,
        now_ms=1_000_500,
        subtask_id="parse[0]",
        task_id="t1",
        capability_id="document.parsing.pdf",
        input=INPUT,
        check_input=True,
        max_age_s=60,
    )
    assert claims == read_claims(tok)
    assert (claims.task_id, claims.parent_task_id, claims.subtask_id) == ("t1", "p0", "parse[0]")
    assert claims.input_digest == canonical_digest(INPUT)
    assert claims.issued_ms == 1_000_000


def test_digest_is_canonical() -> None:
    assert canonical_digest({"a": 1, "b": [1, 2]}) == canonical_digest({"b": [1, 2], "a": 1})
    assert canonical_digest({"a": 1}) != canonical_digest({"a": 2})


def reason(fn) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(WatermarkRejectedError) as info:
        fn()
    return str(info.value.reason)


def test_forged_signature() -> None:
    other = WatermarkKey(b"o" * 32)
    forged = issue_watermark(
        other,
        task_id="t1",
        subtask_id="parse[0]",
        capability_id="document.parsing.pdf",
        input=INPUT,
        issued_ms=1,
    )
    assert reason(lambda: verify_watermark(KEY, forged, now_ms=2)) == "forged"


def test_altered_input() -> None:
    altered = {**INPUT, "path": "other.pdf"}
    assert (
        reason(lambda: verify_watermark(KEY, token(), now_ms=1, input=altered, check_input=True))
        == "altered"
    )


def test_token_for_another_subtask_task_or_capability() -> None:
    for kw in ({"subtask_id": "parse[1]"}, {"task_id": "t2"}, {"capability_id": "x.y.z"}):
        assert reason(lambda kw=kw: verify_watermark(KEY, token(), now_ms=1, **kw)) == "mismatch"


def test_expired() -> None:
    assert (
        reason(lambda: verify_watermark(KEY, token(), now_ms=1_000_000 + 61_000, max_age_s=60))
        == "expired"
    )


def test_malformed() -> None:
    for bad in ("", "abc", "a.b.c", "!!!.???"):
        assert reason(lambda bad=bad: verify_watermark(KEY, bad, now_ms=1)) == "malformed"


@given(st.data())
def test_any_single_character_change_is_rejected(data: st.DataObject) -> None:
    tok = token()
    i = data.draw(st.integers(0, len(tok) - 1))
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
    ch = data.draw(st.sampled_from(alphabet).filter(lambda c: c != tok[i]))
    tampered = tok[:i] + ch + tok[i + 1 :]
    try:
        claims = verify_watermark(
            KEY, tampered, now_ms=1_000_001, subtask_id="parse[0]", input=INPUT, check_input=True
        )
    except WatermarkRejectedError:
        return
    # base64 has slack bits in the last character: a change there may decode to the same
    # bytes, in which case the token still says exactly what the original said.
    assert claims == read_claims(tok)


@given(
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4),
)
def test_any_other_input_is_detected(a: dict, b: dict) -> None:
    tok = token(input=a)
    if canonical_digest(a) == canonical_digest(b):
        verify_watermark(KEY, tok, now_ms=1, input=b, check_input=True)
    else:
        with pytest.raises(WatermarkRejectedError):
            verify_watermark(KEY, tok, now_ms=1, input=b, check_input=True)


def test_key_never_prints_its_secret() -> None:
    key = WatermarkKey(b"supersecretsupersecret")
    assert "supersecret" not in repr(key) and "supersecret" not in str(key)


def test_key_from_env_file_and_generated(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("SWARM_RAY_WATERMARK_KEY", raising=False)
    monkeypatch.delenv("SWARM_RAY_WATERMARK_KEY_FILE", raising=False)
    generated = watermark_key(tmp_path)
    path = tmp_path / "watermark.key"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = watermark_key(tmp_path)
    assert generated.sign(b"m") == again.sign(b"m")

    keyfile = tmp_path / "k.txt"
    keyfile.write_text("from-a-file-0123456789\n")
    monkeypatch.setenv("SWARM_RAY_WATERMARK_KEY_FILE", str(keyfile))
    assert watermark_key(tmp_path).sign(b"m") == WatermarkKey(b"from-a-file-0123456789").sign(b"m")

    monkeypatch.setenv("SWARM_RAY_WATERMARK_KEY", "from-the-environment-0123")
    assert watermark_key(tmp_path).sign(b"m") == WatermarkKey(b"from-the-environment-0123").sign(
        b"m"
    )


def test_short_key_refused() -> None:
    from swarm_ray import InvalidSpecError

    with pytest.raises(InvalidSpecError):
        WatermarkKey(b"short")
