"""Rule-based fact extraction from a parsed document, driven by field declarations.

A field declared by name, unit and labels is read from the document's rows and tables
(`_table`). Fields declared with regexes (the brochure dimensions) use three rules, one
per mode (see `_dimensions`), suited to marketing prose:

- **synonym**: every number followed by a known unit is a *mention*. A mention fills the
  field of its unit's kind whose synonym is nearest, looking left (to the previous
  sentence end or the previous mention) and right (to the next punctuation or mention).
  Labels in spec tables sit left of their value, prose puts them on either side. A right
  context does not run onto the next line when that line starts the next mention's label,
  which is how a table row's label is kept from sticking to the row above.
- **pattern**: a field's regex captures the value (and maybe the unit) itself.
- **vocabulary**: each term a document mentions becomes one fact.

Mentions themselves are found by `_mentions`. Confidence reflects the rule: a strong
synonym next to the value beats a weak or distant one, a value that shares the label of
the value before it (`614 km (CLTC) or 572 km (NEDC)`) scores lower, and a missing
qualifier where the field expects one lowers it further.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from swarm_ray.documents._cells import SENTENCE_END, sentence_bounds
from swarm_ray.documents._dimensions import Dimension, FieldSpec
from swarm_ray.documents._entity import EntitySource, detect_entity, document_parts
from swarm_ray.documents._facts import ExtractionMethod, Fact
from swarm_ray.documents._learned import learned_facts
from swarm_ray.documents._links import weak_scale
from swarm_ray.documents._mentions import Mention, find_mentions, parse_number
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._scorer import Scorer
from swarm_ray.documents._table import extract_table_facts
from swarm_ray.documents._units import COUNT, MONEY, lookup_currency, lookup_unit

__all__ = ["ExtractionResult", "extract_facts"]

_COORDINATION = re.compile(r"\s*(?:,|/|&|,?\s*(?:or|and))\s*(?:up to\s*)?(?=\d)")
_TAIL = re.compile(r"^\s*\([^()\n]{0,40}\)")
# A full stop ends a sentence before a capital, not inside `excl. mirrors` or `Max. power`.
_RIGHT_STOP = re.compile(r"[.!?](?=\s+[A-Z0-9\n(]|\s*$)|[;,](?=\s)|•|\n\s*\n")
_WINDOW = 100
"""Characters of context on each side of a mention, at most."""
_NEWLINE_PENALTY = 40
"""Extra distance for a label on another line: in a table it belongs to another row."""
_NEAR = 30
"""A label further than this from its value costs confidence."""
_STRONG, _WEAK = 0.92, 0.7
"""Base confidence of a strong and of a weak synonym."""


@functools.cache
def _word(pattern: str) -> re.Pattern[str]:
    """Compile a YAML regex case-insensitively, matched as whole words.

    Any letter bounds a word, not just ASCII ones: `ACC` must not match French `accès`.
    """
    return re.compile(r"(?<![^\W\d_])(?:" + pattern + r")(?![^\W\d_])", re.IGNORECASE)


class ExtractionResult(BaseModel):
    """The facts one document states, and how its entity was found."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    source: str
    entity: str
    entity_source: EntitySource
    facts: tuple[Fact, ...]
    warnings: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    """Part numbers the document's title block names, when it covers several."""


@dataclass(frozen=True)
class _Hit:
    """A synonym or qualifier found near a mention."""

    start: int
    end: int
    distance: int


def _distance(text: str, a: int, b: int) -> int:
    return (b - a) + (_NEWLINE_PENALTY if "\n" in text[a:b] else 0)


def _nearest(
    patterns: Sequence[str], flat: str, text: str, mention: Mention, left: int, right: int
) -> _Hit | None:
    """Find the occurrence of any pattern nearest to the mention within [left, right).

    Ties go to the longer match: `charging power` is more specific than `power`.
    """
    hits: list[_Hit] = []
    for pattern in patterns:
        regex = _word(pattern)
        hits.extend(
            _Hit(m.start(), m.end(), _distance(text, m.end(), mention.start))
            for m in regex.finditer(flat, left, mention.start)
        )
        hits.extend(
            _Hit(m.start(), m.end(), _distance(text, mention.end, m.start()))
            for m in regex.finditer(flat, mention.end, right)
        )
    return min(hits, key=lambda h: (h.distance, h.start - h.end), default=None)


def _right_end(text: str, mention: Mention, next_start: int) -> int:
    cap = min(next_start, mention.end + _WINDOW, len(text))
    stop = _RIGHT_STOP.search(text, mention.end, cap)
    if stop is not None:
        return stop.start()
    newline = text.find("\n", mention.end, cap)
    return newline if newline != -1 else cap


def _left_start(text: str, mention: Mention, floor: int) -> int:
    start = max(floor, mention.start - _WINDOW)
    for stop in SENTENCE_END.finditer(text, start, mention.start):
        start = stop.end()
    return start


@dataclass(frozen=True)
class _Choice:
    field: FieldSpec
    name: str
    hit: _Hit
    strong: bool


def _choose(
    candidates: Sequence[tuple[str, FieldSpec]],
    flat: str,
    text: str,
    mention: Mention,
    left: int,
    right: int,
) -> _Choice | None:
    best: _Choice | None = None
    best_key: tuple[int, int, int] | None = None
    for name, field in candidates:
        if any(_word(p).search(flat, left, right) for p in field.exclusions):
            continue
        for strong, patterns in ((True, field.synonyms), (False, field.weak_synonyms)):
            if not strong and not weak_scale(mention.value, mention.unit, field.unit):
                continue  # `8-year warranty` near `charging` is no charge time in minutes
            hit = _nearest(patterns, flat, text, mention, left, right)
            if hit is None:
                continue
            key = (int(strong), -hit.distance, hit.end - hit.start)
            if best_key is None or key > best_key:
                best, best_key = _Choice(field, name, hit, strong), key
    return best


def _qualifier(
    field: FieldSpec, flat: str, text: str, mention: Mention, left: int, right: int
) -> str | None:
    best: tuple[int, str] | None = None
    for label, patterns in field.qualifiers.items():
        hit = _nearest(patterns, flat, text, mention, left, right)
        if hit is not None and (best is None or hit.distance < best[0]):
            best = (hit.distance, label)
    return None if best is None else best[1]


def _quote(text: str, start: int, end: int) -> str:
    return " ".join(text[start:end].split())


def _evidence(text: str, core: tuple[int, int], left: int, right: int) -> tuple[int, int]:
    """Widen the label-and-value span to its line(s), within the mention's context.

    A table row then quotes as `Range (WLTP) 520 km`, not with the row above, and a
    sentence keeps the words around the value that a reviewer needs.
    """
    start = max(min(left, core[0]), text.rfind("\n", 0, core[0]) + 1)
    line_end = text.find("\n", core[1])
    end = min(max(right, core[1]), line_end if line_end != -1 else len(text))
    return start, max(end, core[1])


def _synonym_facts(
    text: str, page: int, fields: Sequence[tuple[str, FieldSpec]], base: dict[str, str]
) -> list[Fact]:
    flat = text.replace("\n", " ")  # same length: synonyms may wrap across lines
    by_kind: dict[str, list[tuple[str, FieldSpec]]] = {}
    for name, field in fields:
        if field.synonyms:
            by_kind.setdefault(field.kind, []).append((name, field))
    mentions = find_mentions(text)
    facts: list[Fact] = []
    floor = 0
    last: tuple[Mention, _Choice] | None = None
    for index, mention in enumerate(mentions):
        next_start = mentions[index + 1].start if index + 1 < len(mentions) else len(text)
        left = _left_start(text, mention, floor)
        tail = _TAIL.match(text[mention.end : next_start + 200])
        tail_end = mention.end + (tail.end() if tail else 0)
        # A bracket right after the value is its own, even across a line break: `(WLTP)`.
        right = max(_right_end(text, mention, next_start), tail_end)
        gap_start, floor = floor, tail_end
        choice = _choose(by_kind.get(mention.kind, ()), flat, text, mention, left, right)
        coordinated = False
        if choice is None and last is not None and last[0].kind == mention.kind:
            # `up to 614 km (CLTC) or 572 km (NEDC)`: the second value shares the label.
            coordinated = bool(_COORDINATION.match(text, gap_start, mention.start + 1))
            choice = last[1] if coordinated else None
        if choice is None:
            last = None
            continue
        last = (mention, choice)
        if choice.hit.start >= mention.end:
            floor = max(floor, choice.hit.end)  # a label right of a value is used up
        qualifier = _qualifier(choice.field, flat, text, mention, left, right)
        confidence = _STRONG if choice.strong else _WEAK
        if choice.hit.distance > _NEAR or coordinated:
            confidence -= 0.15
        if choice.field.qualifiers and qualifier is None:
            confidence -= 0.1
        core = (
            (mention.start, tail_end)
            if coordinated
            else (min(mention.start, choice.hit.start), max(tail_end, choice.hit.end))
        )
        start, end = _evidence(text, core, left, right)
        facts.append(
            Fact(
                field=choice.name,
                kind=mention.kind,
                value=mention.value,
                unit=mention.unit,
                field_unit=choice.field.unit,
                qualifier=qualifier,
                value_text=mention.value_text,
                page=page,
                quote=_quote(text, start, end),
                confidence=round(confidence, 3),
                method=ExtractionMethod.SYNONYM,
                **base,
            )
        )
    return facts


def _pattern_facts(
    text: str, page: int, fields: Sequence[tuple[str, FieldSpec]], base: dict[str, str]
) -> tuple[list[Fact], list[str]]:
    flat = text.replace("\n", " ")
    facts: list[Fact] = []
    warnings: list[str] = []
    for name, field in fields:
        taken: list[tuple[int, int]] = []
        for pattern in field.patterns:
            for match in re.finditer(pattern, flat, re.IGNORECASE):
                span = match.span("value")
                if any(a < span[1] and span[0] < b for a, b in taken):
                    continue  # two patterns of one field on the same value
                taken.append(span)
                unit_text = match.groupdict().get("unit") or ""
                unit = _pattern_unit(field, unit_text)
                if unit is None:
                    warnings.append(f"`{name}` page {page}: unknown unit {unit_text!r}")
                    continue
                left, right = sentence_bounds(text, match.start(), match.end())
                facts.append(
                    Fact(
                        field=name,
                        kind=field.kind,
                        value=parse_number(match["value"]),
                        unit=unit,
                        field_unit=field.unit,
                        qualifier=_pattern_qualifier(field, flat[left:right]),
                        value_text=" ".join(match.group(0).split()),
                        page=page,
                        quote=_quote(text, left, right),
                        confidence=0.9,
                        method=ExtractionMethod.PATTERN,
                        **base,
                    )
                )
    return facts, warnings


def _pattern_unit(field: FieldSpec, unit_text: str) -> str | None:
    """The unit a pattern captured (the field's own when it captured none), if it fits."""
    if field.kind == MONEY:
        return lookup_currency(unit_text)
    if not unit_text:
        return "" if field.kind == COUNT else field.unit
    unit = lookup_unit(unit_text)
    return unit.text if unit is not None and unit.kind == field.kind else None


def _pattern_qualifier(field: FieldSpec, sentence: str) -> str | None:
    for label, patterns in field.qualifiers.items():
        if any(_word(p).search(sentence) for p in patterns):
            return label
    return None


def _vocabulary_facts(
    document: ParsedDocument, fields: Sequence[tuple[str, FieldSpec]], base: dict[str, str]
) -> list[Fact]:
    facts: list[Fact] = []
    for name, field in fields:
        for term, patterns in field.vocabulary.items():
            for page in document.pages:
                flat = page.text.replace("\n", " ")
                match = next((m for p in patterns if (m := _word(p).search(flat))), None)
                if match is None:
                    continue
                left, right = sentence_bounds(page.text, match.start(), match.end())
                facts.append(
                    Fact(
                        field=name,
                        kind=field.kind,
                        value=term,
                        unit="",
                        value_text=match.group(0),
                        page=page.number,
                        quote=_quote(page.text, left, right),
                        confidence=0.85,
                        method=ExtractionMethod.VOCABULARY,
                        **base,
                    )
                )
                break  # one fact per term and document: a list, not a count
    return facts


def extract_facts(
    document: ParsedDocument,
    dimensions: Sequence[Dimension],
    *,
    entity: str | None = None,
    min_confidence: float = 0.0,
    scorer: Scorer | None = None,
) -> ExtractionResult:
    """Extract the facts `document` states for the fields of `dimensions`.

    Args:
        document: A parsed PDF.
        dimensions: What to look for (see `default_dimensions`).
        entity: The product the document is about; detected from the title or first
            header line when `None`.
        min_confidence: Drop facts below this confidence.
        scorer: A learned scorer (`_scorer.load_scorer`): fields declared by labels are
            then chosen by it among every candidate (`_learned`), not by today's rules.

    Returns:
        Facts in page order per rule; values and units as written (see
        `normalise_facts`).
    """
    if entity is None:
        entity, entity_source = detect_entity(document)
    else:
        entity_source = EntitySource.GIVEN
    base = {"entity": entity, "document_id": document.document_id, "source": document.file_name}
    fields = [(f.key, f) for d in dimensions for f in d.fields]
    facts: list[Fact] = []
    warnings: list[str] = []
    labelled = [f for _, f in fields if not (f.synonyms or f.patterns or f.vocabulary)]
    if scorer is not None and labelled:
        facts.extend(learned_facts(document, labelled, scorer, base))
    else:
        facts.extend(extract_table_facts(document, labelled, base))
    prose = [(n, f) for n, f in fields if f.synonyms or f.patterns]
    for page in document.pages if prose else ():
        facts.extend(_synonym_facts(page.text, page.number, prose, base))
        pattern_facts, pattern_warnings = _pattern_facts(page.text, page.number, prose, base)
        facts.extend(pattern_facts)
        warnings.extend(pattern_warnings)
    facts.extend(_vocabulary_facts(document, [(n, f) for n, f in fields if f.vocabulary], base))
    if not any(page.text.strip() for page in document.pages):
        # A scan: images of pages, no text to read. Said plainly, not left as an empty row.
        warnings.append(f"`{document.file_name}`: no text layer, not OCR'd: nothing extracted")
    kept = tuple(f for f in facts if f.confidence >= min_confidence)
    parts = document_parts(document)
    return ExtractionResult(
        document_id=document.document_id,
        source=document.file_name,
        entity=entity,
        entity_source=entity_source,
        facts=kept,
        warnings=tuple(warnings),
        parts=parts,
    )
