"""PDF parsing: text per page, metadata, warnings, and one structured error for bad files."""

from __future__ import annotations

import pickle
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from reportlab.lib.pdfencrypt import StandardEncryption
from reportlab.pdfgen.canvas import Canvas

from swarm_ray.core.model._errors import ErrorCode, InvalidInputError, SwarmUserError
from swarm_ray.documents import DocumentParseError, ParseFailureReason, parse_pdf
from swarm_ray.documents._parse import _clean


def _pdf(path: Path, *pages: str, date: str = "D:20240315120000+01'00'", **kw: object) -> Path:
    canvas = Canvas(str(path), invariant=1, **kw)
    canvas.setTitle("Voltara Aero — Spec")
    canvas.setAuthor("Voltara Marketing")
    canvas.setDateFormatter(lambda *_: date)
    for text in pages:
        if text:
            canvas.drawString(72, 720, text)
        else:
            canvas.rect(72, 72, 200, 200, fill=1)  # a drawing, no text
        canvas.showPage()
    canvas.save()
    return path


def test_text_per_page_metadata_and_warnings(tmp_path: Path) -> None:
    path = _pdf(tmp_path / "a.pdf", "Range 520 km", "", "Torque 420 N·m")
    doc = parse_pdf(path)
    assert [p.number for p in doc.pages] == [1, 2, 3]
    assert [p.text for p in doc.pages] == ["Range 520 km", "", "Torque 420 N·m"]
    meta = doc.metadata
    assert (meta.page_count, meta.title, meta.author) == (
        3,
        "Voltara Aero — Spec",
        "Voltara Marketing",
    )
    assert meta.creation_date == datetime(2024, 3, 15, 11, 0, tzinfo=UTC)
    assert meta.modification_date == meta.creation_date
    assert [(w.code, w.page) for w in doc.warnings] == [("no_text", 2)]
    assert doc.file_name == "a.pdf" and doc.path == str(path)
    assert len(doc.document_id) == 16
    assert parse_pdf(path).document_id == doc.document_id
    assert type(doc).model_validate_json(doc.model_dump_json()) == doc


def test_unparsable_dates_and_page_limit_are_warnings(tmp_path: Path) -> None:
    doc = parse_pdf(_pdf(tmp_path / "a.pdf", "one", "two", date="garbage"), max_pages=1)
    assert doc.metadata.creation_date is None
    assert [p.text for p in doc.pages] == ["one"]
    assert doc.metadata.page_count == 2
    codes = [w.code for w in doc.warnings]
    assert codes == ["bad_date", "bad_date", "truncated_pages"]


def test_owner_password_only_opens_with_a_warning(tmp_path: Path) -> None:
    encrypt = StandardEncryption("", ownerPassword="owner", canPrint=0)
    doc = parse_pdf(_pdf(tmp_path / "p.pdf", "Protected", encrypt=encrypt))
    assert doc.pages[0].text == "Protected"
    assert [w.code for w in doc.warnings] == ["encrypted"]


def _bad_files(tmp_path: Path) -> tuple[dict[ParseFailureReason, Path], Path]:
    good = _pdf(tmp_path / "good.pdf", "Range 520 km" * 20).read_bytes()
    files = {
        ParseFailureReason.ENCRYPTED: _pdf(tmp_path / "enc.pdf", "secret", encrypt="user-pw"),
        ParseFailureReason.EMPTY: tmp_path / "empty.pdf",
        ParseFailureReason.NOT_A_PDF: tmp_path / "notes.pdf",
        ParseFailureReason.TRUNCATED: tmp_path / "cut.pdf",
        ParseFailureReason.MALFORMED: tmp_path / "bad.pdf",
        ParseFailureReason.NOT_FOUND: tmp_path / "missing.pdf",
        ParseFailureReason.UNREADABLE: tmp_path / "folder.pdf",
    }
    nul = tmp_path / "nul\x00.pdf"  # cannot exist: the OS refuses the name
    files[ParseFailureReason.EMPTY].write_bytes(b"")
    files[ParseFailureReason.NOT_A_PDF].write_bytes(b"PK\x03\x04 this is a zip, not a pdf")
    files[ParseFailureReason.TRUNCATED].write_bytes(good[: len(good) // 2])
    files[ParseFailureReason.MALFORMED].write_bytes(
        b"%PDF-1.7\n" + b"garbage " * 100 + b"\n%%EOF\n"
    )
    files[ParseFailureReason.UNREADABLE].mkdir()
    return files, nul


def test_bad_files_raise_one_structured_error(tmp_path: Path) -> None:
    files, nul = _bad_files(tmp_path)
    for reason, path in files.items():
        with pytest.raises(DocumentParseError) as caught:
            parse_pdf(path)
        error = caught.value
        assert (error.reason, error.path) == (reason.value, str(path)), error.message
        assert f"`{path}`" in error.message and repr(reason.value) in error.message
        assert isinstance(error, SwarmUserError) and error.code is ErrorCode.INVALID_INPUT
        assert pickle.loads(pickle.dumps(error)) == error  # how Ray ships remote errors
    with pytest.raises(DocumentParseError, match="unreadable"):
        parse_pdf(nul)


def test_a_bad_page_limit_is_the_callers_mistake(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="`max_pages`=0"):
        parse_pdf(_pdf(tmp_path / "a.pdf", "one"), max_pages=0)


def test_threads_may_share_the_parser(tmp_path: Path) -> None:
    paths = [_pdf(tmp_path / f"{i}.pdf", f"Range {500 + i} km", "x") for i in range(16)]
    alone = [parse_pdf(p) for p in paths]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(parse_pdf, paths * 4))
    assert together == alone * 4


def test_a_uri_reads_like_a_path(tmp_path: Path) -> None:
    from swarm_ray.documents import generate_brochures

    sample = generate_brochures(tmp_path, n=1, seed=5)
    local = Path(sample.pdf_paths[0])
    by_path = parse_pdf(local)
    by_uri = parse_pdf(local.as_uri())
    assert by_uri.pages == by_path.pages and by_uri.file_name == local.name
    with pytest.raises(DocumentParseError) as info:
        parse_pdf((tmp_path / "missing.pdf").as_uri())
    assert info.value.reason == "not_found"


def test_letterlike_unit_signs_read_as_their_letters() -> None:
    assert _clean("RDS(on) = 8.0m\u2126") == "RDS(on) = 8.0m\u03a9"
    assert _clean("300 \u212a") == "300 K"
