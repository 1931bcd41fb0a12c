"""Which product a document is about, read from the document itself.

In order of trust:

1. the **title metadata**, when it looks like a product name: decoration (`— Technical
   Specifications`, `Datasheet`, `Rev 2`) is stripped, and titles a PDF tool or template
   left (`DATASHEET 5.0`, `Application`, `PDF with Fullscreen Cover and Content`) are not
   names;
2. the **title block** of page 1: its largest text, where it names something (`OpenMV N6`,
   `AD8221`) rather than the document (`Datasheet`, `Features`);
3. the **most prominent part number** (`SFP-10G-LR`, `STM32H743`): the one in the largest
   type on page 1, else the one the document repeats most;
4. the first line of page 1 when short (a brochure's `Meet the Auron Nova GT`);
5. the **file name**.

A datasheet covering several part numbers (`LM317, LM317A`, an ordering table) says so:
`document_parts` lists the part numbers its title block names, for the report to show.
"""

from __future__ import annotations

import re
from collections import Counter
from enum import StrEnum
from pathlib import PurePath

from swarm_ray.documents._layout import TextBox
from swarm_ray.documents._parse import ParsedDocument

__all__ = ["EntitySource", "detect_entity", "document_parts", "entity_key"]

_PLACEHOLDER_TITLES = {"", "untitled", "(untitled)", "(unspecified)", "unknown", "anonymous"}
_FILE_LIKE = re.compile(r"\.(?:pdf|docx?|odt|pages|indd|rtf|txt|ai|eps)$", re.IGNORECASE)
_SEPARATOR = re.compile(r"\s+[—\u2013|:-]\s+|\s*[|:]\s+|\s+[—\u2013]")
_LEADING = re.compile(
    r"^(?:(?:introducing|meet|discover|presenting|say hello to|the|new|all-new|all new)\s+)+",
    re.IGNORECASE,
)
_TRAILING = re.compile(
    r"(?:[\s,]+(?:technical (?:specifications?|data)|specifications?|spec(?:ification)? sheet"
    r"|specs|brochure|data ?sheet|product (?:brief|guide|sheet|specification)|price list"
    r"|overview|user'?s? (?:guide|manual)|manual|preliminary|rev(?:ision)?\.? ?[\w.]+|v\d[\w.]*)"
    r")+\s*$",
    re.IGNORECASE,
)
_MARKS = re.compile(r"[®™©℠]")
_DOCUMENT_WORDS = frozenset(
    [
        "pdf",
        "template",
        "fullscreen",
        "cover",
        "content",
        "contents",
        "document",
        "untitled",
        "microsoft",
        "word",
        "presentation",
        "slide",
        "layout",
        "draft",
        "copy",
        "final",
        "application",
        "applications",
        "brochure",
        "datasheet",
        "data",
        "sheet",
        "specification",
        "specifications",
        "manual",
        "guide",
        "catalog",
        "catalogue",
        "information",
        "overview",
        "features",
        "description",
        "introduction",
        "table",
        "page",
        "confidential",
        "preliminary",
        "product",
        "products",
        "ordering",
        "revision",
        "history",
        "notice",
    ]
)
"""Words that name a document or a part of one, not a product."""
_PART_NUMBER = re.compile(
    r"(?<![\w-])(?=[A-Z0-9-]*\d)(?=[A-Z0-9-]*[A-Z][A-Z0-9-]*)[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)*"
    r"(?![\w-])"
)
_MAX_HEADER = 80
"""A first line longer than this is prose, not a header."""
_MAX_NAME_WORDS = 8
_TITLE_BLOCK = 0.45
"""Share of page 1, from the top, where the title block is looked for."""


class EntitySource(StrEnum):
    """Where the entity name came from; a reviewer trusts `given` over `file_name`."""

    GIVEN = "given"
    TITLE = "title"
    TITLE_BLOCK = "title_block"
    PART_NUMBER = "part_number"
    HEADER = "header"
    FILE_NAME = "file_name"


_LONGEST_TITLE = 200
"""A title longer than this names no product (`_looks_like_name`), so its trailing words
are not read: `_TRAILING` is tried from each word, to the end."""


def _clean(name: str) -> str:
    name = " ".join(_MARKS.sub("", name).split())
    name = _SEPARATOR.split(name, maxsplit=1)[0]
    if len(name) > _LONGEST_TITLE:
        return name
    name = _LEADING.sub("", name)
    name = _TRAILING.sub("", name)
    return name.strip(" \t-\u2013—|:,.!")


def _looks_like_name(name: str) -> bool:
    """A product name: a few words, one with a letter, not words naming a document."""
    words = re.findall(r"[\w/+.-]+", name)
    if not words or len(words) > _MAX_NAME_WORDS or not re.search(r"[A-Za-z]", name):
        return False
    if not re.search(r"[A-Z0-9]", name):
        return False  # all lower case: a phrase, not a name
    return not any(w.casefold().strip(".") in _DOCUMENT_WORDS for w in words)


def _part_numbers(text: str) -> list[str]:
    return [p for p in _PART_NUMBER.findall(text) if len(p) >= 4 and not p.isdigit()]


def _title_block(boxes: tuple[TextBox, ...]) -> list[TextBox]:
    """Page 1's boxes in its top part, largest type first."""
    if not boxes:
        return []
    bottom = max(b.bottom for b in boxes)
    top = [b for b in boxes if b.top <= _TITLE_BLOCK * bottom]
    return sorted(top, key=lambda b: (-b.size, b.top))


def _block_name(document: ParsedDocument) -> str | None:
    """The largest text of page 1's title block that names something."""
    if not document.pages:
        return None
    block = _title_block(document.pages[0].boxes)
    if not block:
        return None
    largest = block[0].size
    for box in block:
        if box.size < 0.8 * largest:
            break
        name = _clean(box.text)
        if _looks_like_name(name):
            return name
    return None


def prominent_part(document: ParsedDocument) -> str | None:
    """The part number in the largest type on page 1, else the most repeated one."""
    if not document.pages:
        return None
    for box in _title_block(document.pages[0].boxes):
        parts = _part_numbers(box.text)
        if parts:
            return parts[0]
    counts = Counter(p for page in document.pages[:3] for p in _part_numbers(page.text))
    if counts:
        part, count = counts.most_common(1)[0]
        if count >= 2:
            return part
    return None


def document_parts(document: ParsedDocument) -> tuple[str, ...]:
    """Part numbers of one family that page 1's title names, when it names several.

    Only title-sized lines count (not the description under them), and only part numbers
    sharing a prefix (`LM317`, `LM317A`; `LDM-850`, `LDM-1310`): components a
    description mentions are not what the datasheet covers.
    """
    if not document.pages:
        return ()
    block = _title_block(document.pages[0].boxes)
    if not block:
        return ()
    largest = block[0].size
    parts: dict[str, None] = {}  # in order, once each, in time linear in their number
    for box in block:
        if box.size < 0.85 * largest:
            break
        if len(box.text.split()) <= _MAX_NAME_WORDS:
            parts.update(dict.fromkeys(_part_numbers(box.text)))
    prefixes = Counter(p[:3] for p in parts)
    family = [p for p in parts if prefixes[p[:3]] > 1]
    return tuple(family) if len(family) > 1 else ()


def detect_entity(document: ParsedDocument) -> tuple[str, EntitySource]:
    """Return the product name of `document` and where it was found (see module doc)."""
    title = (document.metadata.title or "").strip()
    block = _block_name(document)
    if title.lower() not in _PLACEHOLDER_TITLES and not _FILE_LIKE.search(title):
        name = _clean(title)
        if _looks_like_name(name):
            if (
                block is not None
                and _PART_NUMBER.fullmatch(block)
                and block in name.split()
                and block != name
            ):
                return block, EntitySource.TITLE_BLOCK  # `XT-SFP10G-LR 10G SFP+ Transceiver`
            return name, EntitySource.TITLE
    if block is not None:
        return block, EntitySource.TITLE_BLOCK
    part = prominent_part(document)
    if part is not None:
        return part, EntitySource.PART_NUMBER
    if document.pages:
        for line in document.pages[0].text.splitlines():
            if line.strip():
                name = _clean(line) if len(line) <= _MAX_HEADER else ""
                if name and _looks_like_name(name):
                    return name, EntitySource.HEADER
                break
    return PurePath(document.file_name).stem, EntitySource.FILE_NAME


def entity_key(entity: str) -> str:
    """Return the grouping key of an entity name: case and spacing do not make a product."""
    return " ".join(entity.casefold().split())
