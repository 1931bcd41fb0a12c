"""PDF parsing with pypdfium2: text per page, metadata and warnings.

`parse_pdf` either returns a `ParsedDocument` or raises `DocumentParseError`, a
`SwarmUserError` naming the file and a `ParseFailureReason`. It never lets a pypdfium2
exception escape: a caller parsing a hundred brochures needs to know which file failed
and why (`encrypted`, `malformed`, ...), and a Ray worker must re-raise something that
pickles. Problems that still leave usable text (a page without text, an unparsable date,
a missing end-of-file marker that PDFium repaired) are warnings on the document.

Every pypdfium2 object is closed in `finally` blocks: PDFium holds the file and native
memory until then, and a long-lived worker parses thousands of files. PDFium is not
thread-safe, so a process-wide lock lets one thread at a time into it: threads serialise,
and parallel parsing wants processes (Ray workers). Native code can still crash on a
hostile file; the process boundary of a Ray worker is what contains that.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from enum import StrEnum
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium  # type: ignore[import-untyped]  # ships no py.typed
import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import InvalidInputError, ResourceLimitError, is_uri
from swarm_ray.documents._layout import LOOKALIKES, TextBox, page_boxes

__all__ = [
    "DocumentMetadata",
    "DocumentParseError",
    "PageText",
    "ParseFailureReason",
    "ParseWarning",
    "ParsedDocument",
    "parse_pdf",
]

_PDFIUM_LOCK = threading.Lock()
"""PDFium is not thread-safe, not even across documents: one call at a time per process."""
_HEADER_WINDOW = 1024
"""PDF readers accept the `%PDF-` header anywhere in the first kilobyte."""
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_PDF_DATE = re.compile(
    r"^(?:D:)?(\d{4})(\d{2})?(\d{2})?(\d{2})?(\d{2})?(\d{2})?"
    r"(?:([Zz+\-])(?:(\d{2})'?(\d{2})?'?)?)?"
)


class ParseFailureReason(StrEnum):
    """Why a file could not be parsed at all."""

    NOT_FOUND = "not_found"
    UNREADABLE = "unreadable"
    EMPTY = "empty"
    NOT_A_PDF = "not_a_pdf"
    ENCRYPTED = "encrypted"
    UNSUPPORTED_SECURITY = "unsupported_security"
    TRUNCATED = "truncated"
    MALFORMED = "malformed"
    UNKNOWN = "unknown"


class DocumentParseError(InvalidInputError):
    """A file that yields no document; details `path` and `reason` say which and why.

    Args:
        message: What went wrong, naming the file.
        path: The file as given to `parse_pdf`.
        reason: A `ParseFailureReason` value.
        **details: Further context (PDFium's error code).
    """

    def __init__(self, message: str, *, path: str, reason: str, **details: Any) -> None:
        super().__init__(message, path=path, reason=reason, **details)


class PageText(BaseModel):
    """The text of one page."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    number: int = Field(ge=1)
    """1-based page number, as people cite pages."""
    text: str
    """Extracted text, lines separated by `\\n`, in PDFium's reading order."""
    boxes: tuple[TextBox, ...] = ()
    """The same text in boxes with positions (cells, lines), footnote marks left out;
    empty for pages made without a PDF (tests) or with no text."""


class ParseWarning(BaseModel):
    """Something odd that still left a usable document."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str
    """Machine-readable: `no_text`, `page_error`, `bad_date`, `missing_eof`, `truncated_pages`,
    `encrypted` (opened without a password, but encrypted)."""
    message: str
    page: int | None = None
    """The page concerned, when there is one."""


class DocumentMetadata(BaseModel):
    """The document information dictionary, with dates parsed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    page_count: int
    title: str | None = None
    author: str | None = None
    subject: str | None = None
    keywords: str | None = None
    creator: str | None = None
    producer: str | None = None
    creation_date: datetime | None = None
    modification_date: datetime | None = None
    raw: dict[str, str] = {}
    """Every non-empty entry as PDFium returned it."""


class ParsedDocument(BaseModel):
    """A parsed PDF: pages of text, metadata and warnings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    """First 16 hex digits of the file's SHA-256: stable across paths and runs."""
    path: str
    file_name: str
    size_bytes: int
    metadata: DocumentMetadata
    pages: tuple[PageText, ...]
    warnings: tuple[ParseWarning, ...] = ()
    focus_pages: tuple[int, ...] = ()
    """When parsed for given fields: page 1 and the pages that name one of them (only these
    have boxes, are read for facts and indexed). Empty: every page is."""

    @property
    def text(self) -> str:
        """All pages' text, separated by form feeds."""
        return "\f".join(page.text for page in self.pages)


def _fail(path: str, reason: ParseFailureReason, why: str, **details: Any) -> DocumentParseError:
    return DocumentParseError(
        f"cannot parse `{path}`: {why} (reason {reason.value!r})",
        path=path,
        reason=reason.value,
        **details,
    )


def _parse_pdf_date(raw: str) -> datetime | None:
    match = _PDF_DATE.match(raw.strip())
    if match is None:
        return None
    year, month, day, hour, minute, second, sign, tz_h, tz_m = match.groups()
    tz = UTC
    if sign in ("+", "-"):
        offset = timedelta(hours=int(tz_h or 0), minutes=int(tz_m or 0))
        tz = timezone(offset if sign == "+" else -offset)
    try:
        return datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            tzinfo=tz,
        )
    except ValueError:
        return None


def _metadata(
    raw: dict[str, str], page_count: int, warnings: list[ParseWarning]
) -> DocumentMetadata:
    raw = {k: _clean(str(v)).strip() for k, v in raw.items() if str(v).strip()}
    dates: dict[str, datetime | None] = {}
    for key in ("CreationDate", "ModDate"):
        value = raw.get(key)
        dates[key] = _parse_pdf_date(value) if value else None
        if value and dates[key] is None:
            warnings.append(ParseWarning(code="bad_date", message=f"`{key}`={value!r} unparsable"))
    return DocumentMetadata(
        page_count=page_count,
        title=raw.get("Title"),
        author=raw.get("Author"),
        subject=raw.get("Subject"),
        keywords=raw.get("Keywords"),
        creator=raw.get("Creator"),
        producer=raw.get("Producer"),
        creation_date=dates["CreationDate"],
        modification_date=dates["ModDate"],
        raw=raw,
    )


def _clean(text: str) -> str:
    # Lone surrogates (broken font encodings) would make the model fail to serialise.
    text = text.encode("utf-8", "replace").decode("utf-8")
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(LOOKALIKES)
    return _CONTROL.sub("", text)


def _unrotated_size(page: Any) -> tuple[float, float]:
    """A page's width and height in points before its `/Rotate`.

    PDFium reports the page's size turned, and its character boxes unturned.
    """
    width, height = float(page.get_width()), float(page.get_height())
    return (height, width) if page.get_rotation() in (90, 270) else (width, height)


def _page_text(
    pdf: Any,
    index: int,
    warnings: list[ParseWarning],
    focus: Callable[[str], bool] | None,
    room: _TextRoom,
) -> tuple[str, tuple[TextBox, ...]]:
    page = textpage = None
    try:
        page = pdf[index]
        textpage = page.get_textpage()
        room.take(int(textpage.count_chars()), index)  # before the text is copied out
        text = _clean(str(textpage.get_text_range()))
        wanted = text.strip() and (focus is None or index == 0 or focus(text))
        boxes = page_boxes(textpage, *_unrotated_size(page)) if wanted else []
        return text, tuple(boxes)
    except pdfium.PdfiumError as error:
        warnings.append(ParseWarning(code="page_error", message=str(error), page=index + 1))
        return "", ()
    finally:
        if textpage is not None:
            textpage.close()
        if page is not None:
            page.close()


def _load_error(path: str, error: Any, has_eof: bool) -> DocumentParseError:
    code = getattr(error, "err_code", None)
    reason = {
        pdfium_c.FPDF_ERR_PASSWORD: ParseFailureReason.ENCRYPTED,
        pdfium_c.FPDF_ERR_SECURITY: ParseFailureReason.UNSUPPORTED_SECURITY,
        pdfium_c.FPDF_ERR_FILE: ParseFailureReason.UNREADABLE,
        pdfium_c.FPDF_ERR_SUCCESS: ParseFailureReason.EMPTY,
    }.get(code, ParseFailureReason.MALFORMED)
    if reason is ParseFailureReason.MALFORMED and not has_eof:
        reason = ParseFailureReason.TRUNCATED
    why = {
        ParseFailureReason.ENCRYPTED: "the document needs a password",
        ParseFailureReason.EMPTY: "the document has no pages",
    }.get(reason, str(error))
    return _fail(path, reason, why, pdfium_error_code=code)


MAX_TEXT_CHARS = 4 * 1024 * 1024
"""Most characters of text one document may hold (`SWARM_RAY_DOCUMENT_MAX_TEXT`; 0: no
cap). A few KB of compressed content stream can hold megabytes of text, which every
later stage (extract, embed, index, report) would carry and read: past this, the parse
fails with `resource_limit`, naming the file, and the rest of the batch goes on."""


def max_text_chars() -> int | None:
    """The cap on a document's text in characters (`MAX_TEXT_CHARS`), or None for none."""
    value = int(os.environ.get("SWARM_RAY_DOCUMENT_MAX_TEXT", MAX_TEXT_CHARS))
    return value if value > 0 else None


class _TextRoom:
    """What is left of a document's text cap while its pages are read."""

    def __init__(self, name: str, cap: int | None) -> None:
        self._name, self._cap, self._used = name, cap, 0

    def take(self, chars: int, index: int) -> None:
        """Count one page's characters; raises `ResourceLimitError` past the cap."""
        self._used += chars
        if self._cap is not None and self._used > self._cap:
            raise ResourceLimitError(
                f"document `{self._name}` holds more than {self._cap} characters of text "
                f"(page {index + 1} brings it to {self._used}; `SWARM_RAY_DOCUMENT_MAX_TEXT`)",
                path=self._name,
                limit="max_text_chars",
                value=self._used,
                maximum=self._cap,
            )


def _read(
    name: str,
    data: bytes,
    has_eof: bool,
    max_pages: int | None,
    warnings: list[ParseWarning],
    focus: Callable[[str], bool] | None,
) -> tuple[int, DocumentMetadata, list[PageText]]:
    """Everything that touches PDFium, for one document; the caller holds the lock."""
    pdf = None
    try:
        try:
            # Passing the bytes already read: PDFium then never reopens the file, and the
            # content id hashes exactly what was parsed.
            pdf = pdfium.PdfDocument(data)
        except pdfium.PdfiumError as error:
            raise _load_error(name, error, has_eof) from None
        page_count = len(pdf)
        if pdfium_c.FPDF_GetSecurityHandlerRevision(pdf) != -1:
            warnings.append(
                ParseWarning(
                    code="encrypted",
                    message="encrypted with an empty user password; permissions may restrict use",
                )
            )
        metadata = _metadata(dict(pdf.get_metadata_dict(skip_empty=True)), page_count, warnings)
        limit = page_count if max_pages is None else min(page_count, max_pages)
        pages = []
        room = _TextRoom(name, max_text_chars())
        for index in range(limit):
            text, boxes = _page_text(pdf, index, warnings, focus, room)
            if not text.strip():
                warnings.append(
                    ParseWarning(code="no_text", message="no extractable text", page=index + 1)
                )
            pages.append(PageText(number=index + 1, text=text, boxes=boxes))
        return page_count, metadata, pages
    finally:
        if pdf is not None:
            pdf.close()


def locate(name: str) -> tuple[Any, str]:
    """The filesystem (None: the local one) and the path in it that `name` opens.

    pyarrow percent-decodes a URI here, so what an untrusted caller names is checked in
    the canonical form `core.guards._access.canonical` gives (no escapes left to decode).
    """
    if not is_uri(name):
        return None, name
    import pyarrow.fs as pafs  # type: ignore[import-untyped]

    filesystem, inner = pafs.FileSystem.from_uri(name)
    return filesystem, str(inner)


def _read_bytes(name: str) -> bytes:
    """Read a local path, or any URI pyarrow can open (`s3://`, `gs://`, `file://`)."""
    filesystem, inner = locate(name)
    if filesystem is None:
        return Path(inner).read_bytes()
    with filesystem.open_input_file(inner) as handle:
        data: bytes = handle.read()
    return data


def parse_pdf(
    path: str | Path,
    *,
    max_pages: int | None = None,
    focus: Callable[[str], bool] | None = None,
) -> ParsedDocument:
    """Parse one PDF into text per page, metadata and warnings.

    Args:
        path: The PDF file: a local path or any URI pyarrow can open (`s3://...`).
        max_pages: Read at most this many pages (a `truncated_pages` warning says so);
            bounds the time one pathological file can take in a shared worker.
        focus: Given a page's text, whether it matters (names a field); only page 1 and
            those pages get boxes, and `focus_pages` lists them. A manual of hundreds of
            pages then costs little more than its text where the fields are not named.

    Returns:
        The parsed document. Pages without extractable text (scans, drawings) are kept,
        empty, with a `no_text` warning, so page numbers stay true to the file.

    Raises:
        DocumentParseError: For any problem with the file, and only for that; its
            `reason` is one of `ParseFailureReason` and its message names the file.
        InvalidInputError: When `max_pages` is below 1 (a caller's mistake, not the file's).
        ResourceLimitError: The text passes `max_text_chars()` (a text bomb).
    """
    name = str(path)
    if max_pages is not None and max_pages < 1:
        raise InvalidInputError(f"`max_pages`={max_pages!r} must be at least 1")
    try:
        data = _read_bytes(name)
    except FileNotFoundError:
        raise _fail(name, ParseFailureReason.NOT_FOUND, "no such file") from None
    except (OSError, ValueError) as error:  # ValueError: a NUL byte in the path
        raise _fail(name, ParseFailureReason.UNREADABLE, str(error)) from None
    if not data:
        raise _fail(name, ParseFailureReason.EMPTY, "the file is empty")
    if b"%PDF-" not in data[:_HEADER_WINDOW]:
        raise _fail(name, ParseFailureReason.NOT_A_PDF, "no `%PDF-` header in the first 1 KiB")
    has_eof = b"%%EOF" in data[-_HEADER_WINDOW:]
    warnings: list[ParseWarning] = []
    try:
        with _PDFIUM_LOCK:
            page_count, metadata, pages = _read(name, data, has_eof, max_pages, warnings, focus)
    except (DocumentParseError, ResourceLimitError):
        raise
    except Exception as error:
        # The contract: no raw PDFium (or ctypes) error escapes, whatever the file holds.
        raise _fail(name, ParseFailureReason.UNKNOWN, f"{type(error).__name__}: {error}") from None
    limit = len(pages)
    if limit < page_count:
        warnings.append(
            ParseWarning(
                code="truncated_pages",
                message=f"read {limit} of {page_count} pages (`max_pages`={max_pages!r})",
            )
        )
    if not has_eof:
        warnings.append(
            ParseWarning(code="missing_eof", message="no `%%EOF` marker; the file may be cut off")
        )
    return ParsedDocument(
        document_id=hashlib.sha256(data).hexdigest()[:16],
        path=name,
        file_name=name.rstrip("/").rsplit("/", 1)[-1],
        size_bytes=len(data),
        metadata=metadata,
        pages=tuple(pages),
        warnings=tuple(warnings),
        focus_pages=()
        if focus is None
        else tuple(p.number for p in pages if p.number == 1 or p.boxes),
    )
