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
from swarm_ray.documents._values import read_values

__all__ = [
    "DocumentCandidates",
    "FieldCandidate",
    "document_candidates",
    "part_name",
    "slots",
]

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
    entity: str | None = None
    """The part its row or column names (`LDM-1310`), as written, where the file is a
    family's (its tables name two parts or more, none of them the file's), or the file's
    own part; `None` elsewhere. The choice is one per entity, field and statistic
    (`_scorer.choose_scored`)."""


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
    names = {part_name(link.entity) for found in tables.links.values() for link in found}
    names |= {part_name(label) for label, part in parts.items() if part}
    named = sorted(name for name in names if name)
    # Two parts or more, none the file's: a family's datasheet. One name alone is more
    # often a package's or a document's number than a part of the file's.
    own = file_part(document.file_name, named) if named else None
    by_part = len(named) > 1 and own is None
    for spec in fields:
        links = tables.links.get(spec.key, [])
        chosen = {
            (c.page, c.row, c.value, c.unit): c.statistic for c in tables.chosen.get(spec.key, [])
        }
        found: _Found = {}
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
                _add(found, by_part=by_part, candidate=
                    FieldCandidate(
                        key=spec.key, slot=slot, stated=link.statistic, value=link.value,
                        unit=link.unit, scaled=scaled, value_text=link.value_text,
                        page=link.page, order=link.page * 10_000 + at, line=link.quote,
                        above=lines[at - 1] if at > 0 else "", label=link.named or link.label,
                        header="", part=_part(document.file_name, link.entity),
                        title=title, section=_section(lines, at), condition=bool(link.condition),
                        tier=link.tier, link_score=score,
                        chosen=picked != "none" and (slot is None or picked in (slot, None)),
                        quantity=False, pages=count, entity=part_name(link.entity),
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
            entity = part_name(quantity.label) if part else None
            if part == 0 and quantity.header:
                part, entity = _column_part(document.file_name, quantity.header)
            if part == -1 and quantity.page in own_pages:
                continue
            for slot in _slots_for(quantity.statistic, wanted):
                _add(
                    found,
                    by_part=by_part,
                    candidate=FieldCandidate(
                        key=spec.key, slot=slot, stated=quantity.statistic,
                        value=quantity.value, unit=unit, scaled=scaled,
                        value_text=quantity.text, page=quantity.page,
                        order=quantity.page * 10_000 + quantity.line, line=line,
                        above=lines[quantity.line - 1] if quantity.line > 0 else "",
                        label=quantity.label, header=quantity.header, part=part, title=title,
                        section=_section(lines, quantity.line), condition=quantity.condition,
                        tier=-1, link_score=0.0, chosen=False, quantity=True, pages=count,
                        entity=entity,
                    ),
                )  # fmt: skip
        every = [c for same in found.values() for c in same.values()]
        kept = every if by_part else [_own(c, own) for c in every]
        per_field[spec.key] = tuple(sorted(kept, key=lambda c: c.order))
        read[spec.key] = tuple(values)
    return DocumentCandidates(
        source=document.file_name,
        per_field=per_field,
        read=read,
        linked={k: tuple(v) for k, v in tables.links.items()},
        rule_chosen={k: tuple(v) for k, v in tables.chosen.items()},
    )


_Found = dict[tuple[int, float | str, Statistic | None], dict[str | None, FieldCandidate]]
"""Candidates by page, value and slot, then by the part they name (`None`: none)."""


def _add(found: _Found, candidate: FieldCandidate, by_part: bool) -> None:
    """Add a candidate; the same value on the same page is one, with both descriptions.

    `by_part` (a file named after none of the parts its tables name: a family's
    datasheet): one per part its row or column names, as three parts' columns stating one
    `-10 to 60` are three parts' values; a value no part names then joins each part's
    candidate of that value (a line read as a quantity, and the link that found its
    column). Otherwise (the file is about one part) one candidate per value, as before.
    One dict lookup per candidate, and a scan of the few parts stating the same value.
    """
    value = candidate.scaled if candidate.scaled is not None else candidate.value
    same = found.setdefault((candidate.page, value, candidate.slot), {})
    if not by_part or candidate.entity is None:
        if not same:
            same[None] = candidate
            return
        for entity, old in same.items():
            same[entity] = _merged(old, candidate)
        return
    plain = same.pop(None, None)
    if plain is None:
        plain = next(
            (replace(c, entity=None) for c in same.values() if c.quantity and c.tier < 0), None
        )
    before = same.get(candidate.entity)
    merged = candidate if before is None else _merged(before, candidate)
    if plain is not None:
        merged = _merged(merged, plain)
    same[candidate.entity] = replace(merged, entity=candidate.entity)


def _merged(old: FieldCandidate, candidate: FieldCandidate) -> FieldCandidate:
    linked, other = (candidate, old) if candidate.tier >= 0 else (old, candidate)
    if linked.tier < 0:
        if candidate.header and not old.header:
            return candidate  # a table's cell says more than its line: header, part
        return old
    if other.tier >= 0 and other.link_score >= linked.link_score:
        linked = other
    return replace(
        linked,
        chosen=old.chosen or candidate.chosen,
        quantity=old.quantity or candidate.quantity,
        condition=old.condition and candidate.condition,
        header=linked.header or other.header,
        part=linked.part or other.part,
        entity=linked.entity or other.entity,
    )


def _part(source: str, named: str | None) -> int:
    """Whether a row's or column's part is the file's own (1), another (-1), or none (0)."""
    if not named or PART_NUMBER.match(named.strip()) is None:
        return 0
    return 1 if file_part(source, [named.strip()]) is not None else -1


_NOT_PART = re.compile(
    r"(?:fig|v\d|vdd|vcc|vss|vee|vref|gnd)|.*\+|.*\d\.\d|[\d.]*E[-+]?\d|[0-9A-F]+h$",
    re.IGNORECASE,
)
"""Row and column names shaped like part numbers that name no part: a figure, a version,
a rail's expression (`VDD+0.3`, `0.3VCC`), a decimal or E-notation number, a hex code
(`0Bh`, an instruction's)."""
_PART_LEAST = 5
"""Characters a part number has at least (`LM358`, `BC547`): shorter names are a bus
(`I2C`), a setting (`ODS0`) or a pin."""


def _own(candidate: FieldCandidate, own: str | None) -> FieldCandidate:
    """A candidate of a file about one part (`own`): `entity` is that part's name, or `None`."""
    return candidate if candidate.entity == own else replace(candidate, entity=None)


def part_name(named: str | None) -> str | None:
    """The part a row's or column's name is (`LDM-1310`, `UF4005-4007`), or `None`.

    A part number has letters and digits (`_grid.PART_NUMBER`); a quantity written tight
    (`100V`, `2.7-5.5V`, `1MHz`) is none, nor is a figure's or a rail's name.
    """
    name = (named or "").strip().rstrip(".")
    if name.isdigit():
        return name if len(name) >= 3 else None  # a column of `4001 ... 4007`, `1N` above
    if len(name) < _PART_LEAST or PART_NUMBER.match(name) is None or _NOT_PART.match(name):
        return None
    values = read_values(name)
    tight = values and values[0].start == 0 and values[-1].unit is not None
    return None if tight and values[-1].end >= len(name) else name


def _column_part(source: str, header: str) -> tuple[int, str | None]:
    """A column's part, from the part numbers its header names (`2N3904 | MMBT3904`).

    Whether it is the file's own (1), another (-1) or none (0), and the part itself.
    """
    found = [(_part(source, word), word) for word in header.split()]
    for wanted in (1, -1):
        for part, word in found:
            if part == wanted:
                return part, part_name(word)
    return 0, None


def _slots_for(
    stated: Statistic | None, wanted: tuple[Statistic | None, ...]
) -> tuple[Statistic | None, ...]:
    """The slots a value may fill: its own statistic where declared, else every slot."""
    if wanted == (None,):
        return (None,)
    if stated in wanted:
        return (stated,)
    return wanted
