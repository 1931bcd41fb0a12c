"""Candidates: every value that may be a declared field's, with the context it stands in.

The second stage of the learned extraction. Nothing here is a gate: every quantity whose
dimension fits the field's declared unit (`_quantities.of_field`) is a candidate, with or
without a label near it, and so is every link today's readers make (`_table.table_links`:
a label's row with its statistic columns, unit columns, part columns; counts said in
words; terms of a known shape). A link and a quantity that are the same value on the same
page are one candidate, which then carries both descriptions.

A candidate fills one *slot*: the field, and the statistic the field declares that the
value would be reported under. A value the document states as a `max` fills the `max`
slot; one stated plainly may fill any declared statistic, and says so (`stated` is then
`None`). What the context says is kept as text and flags for the features
(`_features`): the line, the line above, the label words the reader matched, the page's
title, the section it stands in.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from swarm_ray.documents._choice import file_part
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._grid import PART_NUMBER
from swarm_ray.documents._links import Candidate as Link
from swarm_ray.documents._links import scored
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._quantities import DocumentQuantities, in_unit, of_field, read_quantities
from swarm_ray.documents._symbols import implied_statistics
from swarm_ray.documents._table import table_links
from swarm_ray.documents._units import COUNT, TEXT

__all__ = ["DocumentCandidates", "FieldCandidate", "document_candidates", "slots"]

_SECTION = re.compile(
    r"absolute\s+maximum|maximum\s+ratings|recommended\s+operating|operating\s+conditions|"
    r"electrical\s+characteristics|ordering|package\s+information|features|applications?\b|"
    r"typical\s+(?:characteristics|performance|application)|thermal|description|"
    r"timing|switching\s+characteristics|dc\s+characteristics|ac\s+characteristics",
    re.IGNORECASE,
)
"""Headings a datasheet's sections open with; the nearest above a value is its section."""
_SECTION_LOOKBACK = 80
"""Lines above a value searched for its section heading."""


@dataclass(frozen=True)
class FieldCandidate:
    """One value that may fill one slot (field and statistic) of one document."""

    key: str
    """The field's key."""
    slot: Statistic | None
    """The declared statistic it would be reported as; `None` for a field declaring none."""
    stated: Statistic | None
    """The statistic the document states for it (a column, a range's end, `up to`)."""
    value: float | str
    """As written (number or term)."""
    unit: str
    """As written; empty for terms and counts."""
    scaled: float | None
    """The value in the field's declared unit (`None` for terms)."""
    value_text: str
    page: int
    order: int
    """Position in the document (page, then line), for ties and position features."""
    line: str
    """The line (or the table row's cells) the value stands in."""
    above: str
    """The line above it."""
    label: str
    """The label words a reader matched for the field, or a table row's first cell."""
    header: str
    """A table cell's column header words; empty elsewhere."""
    part: int
    """1: its row or column names the file's own part; -1: another part; 0: none named."""
    title: str
    """The first lines of the first page."""
    section: str
    """The heading of the section it stands in (lower case), or empty."""
    condition: bool
    """Written as a test condition (after `@` or `=`)."""
    tier: int
    """The link's tier (`_links`), -1 for a quantity no reader linked."""
    link_score: float
    """What today's choice weighs for the link; 0 for an unlinked quantity."""
    chosen: bool
    """Whether today's rule choice picked this value for this slot."""
    quantity: bool
    """Whether it was read as a quantity of the field's dimension."""
    pages: int
    """Pages in the document."""


@dataclass(frozen=True)
class DocumentCandidates:
    """Every candidate of one document, per field key."""

    source: str
    per_field: dict[str, tuple[FieldCandidate, ...]]
    read: dict[str, tuple[float, ...]]
    """Per field key: every value (in the declared unit) read as a quantity of its kind, and
    every linked value: what a perfect linker could offer (the loss trace's parse stage)."""
    linked: dict[str, tuple[Link, ...]]
    """Per field key: today's links, before the choice (the loss trace's link stage)."""
    rule_chosen: dict[str, tuple[Link, ...]]
    """Per field key: today's choice."""


def slots(spec: FieldSpec) -> tuple[Statistic | None, ...]:
    """The statistics a field is reported under: the declared (or implied) ones, else `None`."""
    declared = spec.statistics or implied_statistics(spec)
    return tuple(declared) if declared else (None,)


def _scaled(value: float | str, unit: str, spec: FieldSpec) -> float | None:
    if isinstance(value, str):
        return None
    if spec.kind == COUNT or not unit:
        return float(value)
    return in_unit(float(value), unit, spec.unit)


def _section(lines: Sequence[str], index: int) -> str:
    for back in range(index, max(-1, index - _SECTION_LOOKBACK), -1):
        found = _SECTION.search(lines[back]) if back < len(lines) else None
        if found is not None and len(lines[back]) < 90:
            return found.group().lower()
    return ""


def _line_of(lines: Sequence[str], link: Link) -> int:
    """The line a link's value stands on: the first with its value text and label."""
    first = link.quote.split(" | ")[0][:30]
    best = -1
    for index, line in enumerate(lines):
        if link.value_text and link.value_text in line:
            if first and first in line:
                return index
            if best < 0:
                best = index
    return max(best, 0)


def document_candidates(
    document: ParsedDocument,
    fields: Sequence[FieldSpec],
    quantities: DocumentQuantities | None = None,
) -> DocumentCandidates:
    """Every candidate of `document` for `fields` (label fields: no synonyms or patterns)."""
    quantities = quantities if quantities is not None else read_quantities(document)
    tables = table_links(document, fields, document.file_name, quantities)
    title = " ".join(quantities.pages[0].lines[:4]) if quantities.pages else ""
    count = len(quantities.pages)
    per_field: dict[str, tuple[FieldCandidate, ...]] = {}
    read: dict[str, tuple[float, ...]] = {}
    parts = {
        label: _part(document.file_name, label)
        for label in {q.label for q in quantities.quantities if q.row}
    }
    # A table with a row for the file's own part states the other rows' values for
    # other parts: those are other entities' facts, not candidates for this file's.
    own_pages = {q.page for q in quantities.quantities if q.row and parts[q.label] == 1}
    for spec in fields:
        links = tables.links.get(spec.key, [])
        chosen = {
            (c.page, c.row, c.value, c.unit): c.statistic for c in tables.chosen.get(spec.key, [])
        }
        found: dict[tuple[int, float | str, Statistic | None], FieldCandidate] = {}
        values: list[float] = []
        wanted = slots(spec)

        for link in links:
            scaled = _scaled(link.value, link.unit, spec)
            if spec.kind != TEXT and scaled is None:
                continue
            if scaled is not None:
                values.append(scaled)
            lines = quantities.pages[link.page - 1].lines
            at = _line_of(lines, link)
            picked = chosen.get((link.page, link.row, link.value, link.unit), "none")
            score = scored(link, spec.kind, spec.unit).score
            for slot in _slots_for(link.statistic, wanted):
                _add(found,
                    FieldCandidate(
                        key=spec.key, slot=slot, stated=link.statistic, value=link.value,
                        unit=link.unit, scaled=scaled, value_text=link.value_text,
                        page=link.page, order=link.page * 10_000 + at, line=link.quote,
                        above=lines[at - 1] if at > 0 else "", label=link.named or link.label,
                        header="", part=_part(document.file_name, link.entity),
                        title=title, section=_section(lines, at), condition=bool(link.condition),
                        tier=link.tier, link_score=score,
                        chosen=picked != "none" and (slot is None or picked in (slot, None)),
                        quantity=False, pages=count,
                    )
                )  # fmt: skip
        for quantity in of_field(quantities, spec):
            unit = quantity.unit.text if quantity.unit is not None else spec.unit
            scaled = in_unit(quantity.value, unit, spec.unit)
            if scaled is None:
                continue
            values.append(scaled)
            lines = quantities.pages[quantity.page - 1].lines
            line = quantity.row or lines[quantity.line]
            part = parts[quantity.label] if quantity.row else 0
            if part == 0 and quantity.header:
                part = _column_part(document.file_name, quantity.header)
            if part == -1 and quantity.page in own_pages:
                continue
            for slot in _slots_for(quantity.statistic, wanted):
                _add(
                    found,
                    FieldCandidate(
                        key=spec.key, slot=slot, stated=quantity.statistic,
                        value=quantity.value, unit=unit, scaled=scaled,
                        value_text=quantity.text, page=quantity.page,
                        order=quantity.page * 10_000 + quantity.line, line=line,
                        above=lines[quantity.line - 1] if quantity.line > 0 else "",
                        label=quantity.label, header=quantity.header, part=part, title=title,
                        section=_section(lines, quantity.line), condition=quantity.condition,
                        tier=-1, link_score=0.0, chosen=False, quantity=True, pages=count,
                    ),
                )  # fmt: skip
        per_field[spec.key] = tuple(sorted(found.values(), key=lambda c: c.order))
        read[spec.key] = tuple(values)
    return DocumentCandidates(
        source=document.file_name,
        per_field=per_field,
        read=read,
        linked={k: tuple(v) for k, v in tables.links.items()},
        rule_chosen={k: tuple(v) for k, v in tables.chosen.items()},
    )


def _add(
    found: dict[tuple[int, float | str, Statistic | None], FieldCandidate],
    candidate: FieldCandidate,
) -> None:
    """Add a candidate; the same value on the same page is one, with both descriptions."""
    value = candidate.scaled if candidate.scaled is not None else candidate.value
    key = (candidate.page, value, candidate.slot)
    old = found.get(key)
    if old is None:
        found[key] = candidate
        return
    linked, other = (candidate, old) if candidate.tier >= 0 else (old, candidate)
    if linked.tier < 0:
        if candidate.header and not old.header:
            found[key] = candidate  # a table's cell says more than its line: header, part
        return
    if other.tier >= 0 and other.link_score >= linked.link_score:
        linked = other
    found[key] = replace(
        linked,
        chosen=old.chosen or candidate.chosen,
        quantity=old.quantity or candidate.quantity,
        condition=old.condition and candidate.condition,
        header=linked.header or other.header,
        part=linked.part or other.part,
    )


def _part(source: str, named: str | None) -> int:
    """Whether a row's or column's part is the file's own (1), another (-1), or none (0)."""
    if not named or PART_NUMBER.match(named.strip()) is None:
        return 0
    return 1 if file_part(source, [named.strip()]) is not None else -1


def _column_part(source: str, header: str) -> int:
    """A column's part, from the part numbers its header names (`2N3904 | MMBT3904`)."""
    found = [_part(source, word) for word in header.split()]
    return 1 if 1 in found else -1 if -1 in found else 0


def _slots_for(
    stated: Statistic | None, wanted: tuple[Statistic | None, ...]
) -> tuple[Statistic | None, ...]:
    """The slots a value may fill: its own statistic where declared, else every slot."""
    if wanted == (None,):
        return (None,)
    if stated in wanted:
        return (stated,)
    return wanted
