"""Which product a document is about, read from the document itself.

Brochures name their product in the title metadata (`Voltara Aero — Technical
Specifications`) or, when the producer left metadata empty, in a header line on the first
page (`The all-new Voltara Aero`). Both carry decoration around the name that would split
one product into several entities in a comparison, so it is stripped here, in one place.
"""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import PurePath

from swarm_ray.documents._parse import ParsedDocument

__all__ = ["EntitySource", "detect_entity", "entity_key"]

_PLACEHOLDER_TITLES = {"", "untitled", "(untitled)", "(unspecified)", "unknown", "anonymous"}
_FILE_LIKE = re.compile(r"\.(?:pdf|docx?|odt|pages|indd|rtf|txt)$", re.IGNORECASE)
_SEPARATOR = re.compile(r"\s+[—\u2013|:-]\s+|\s*[|:]\s+|\s+[—\u2013]")
_LEADING = re.compile(
    r"^(?:(?:introducing|meet|discover|presenting|say hello to|the|new|all-new|all new)\s+)+",
    re.IGNORECASE,
)
_TRAILING = re.compile(
    r"(?:\s+(?:technical (?:specifications?|data)|specifications?|spec(?:ification)? sheet"
    r"|specs|brochure|data ?sheet|price list|product (?:guide|sheet)|overview))+\s*$",
    re.IGNORECASE,
)
_MAX_HEADER = 80
"""A first line longer than this is prose, not a header."""


class EntitySource(StrEnum):
    """Where the entity name came from; a reviewer trusts `given` over `file_name`."""

    GIVEN = "given"
    TITLE = "title"
    HEADER = "header"
    FILE_NAME = "file_name"


def _clean(name: str) -> str:
    name = " ".join(name.split())
    name = _SEPARATOR.split(name, maxsplit=1)[0]
    name = _LEADING.sub("", name)
    name = _TRAILING.sub("", name)
    return name.strip(" \t-\u2013—|:,.!")


def detect_entity(document: ParsedDocument) -> tuple[str, EntitySource]:
    """Return the product name of `document` and where it was found.

    Tries the title metadata, then the first non-empty line of the first page, then the
    file name, skipping placeholders (`untitled`, a file name as title) on the way.
    """
    title = (document.metadata.title or "").strip()
    if title.lower() not in _PLACEHOLDER_TITLES and not _FILE_LIKE.search(title):
        name = _clean(title)
        if name:
            return name, EntitySource.TITLE
    if document.pages:
        for line in document.pages[0].text.splitlines():
            if line.strip():
                name = _clean(line) if len(line) <= _MAX_HEADER else ""
                if name:
                    return name, EntitySource.HEADER
                break
    return PurePath(document.file_name).stem, EntitySource.FILE_NAME


def entity_key(entity: str) -> str:
    """Return the grouping key of an entity name: case and spacing do not make a product."""
    return " ".join(entity.casefold().split())
