"""The unit identifies the field: a first page's only value of a field's dimension.

A datasheet's title and feature list often state a value with no label at all: `a 1 Mbit
serial memory`, `(single-mode, 1550 nm, 40 km)`, `Fully Static Operation: 0 Hz to 24
MHz`, `Operating Range: 4.0V to 5.5V`. No reader links these (there is no label to
match), yet where the first page states exactly one value, or one range, of a declared
field's dimension, and no other declared field of that dimension is still unplaced, the
unit says which field it is.

These links are the weakest there are (`SOLE_TIER`): a field any label links never takes
one, their value must be of a size the declared unit is chosen for (`_links.weak_scale`:
`375 Hz` is no CPU clock in MHz), and the learned choice sees them as one more candidate
with its own tier.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._entity import prominent_part
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._links import Candidate, weak_scale
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._quantities import (
    DocumentQuantities,
    Quantity,
    in_unit,
    of_field,
    read_quantities,
)
from swarm_ray.documents._symbols import implied_statistics
from swarm_ray.documents._units import COUNT, TEXT
from swarm_ray.documents._values import read_values

__all__ = ["SOLE_TIER", "part_number_links", "sole_links"]

SOLE_TIER = 10
"""The link tier of a first page's sole value of a field's dimension (`_links.CONFIDENCE`)."""


def _distinct(quantities: Sequence[Quantity], spec: FieldSpec) -> dict[float, list[Quantity]]:
    """The quantities by their value in the field's declared unit."""
    out: dict[float, list[Quantity]] = {}
    for quantity in quantities:
        unit = quantity.unit.text if quantity.unit is not None else spec.unit
        scaled = in_unit(quantity.value, unit, spec.unit)
        if scaled is not None:
            out.setdefault(round(scaled, 9), []).append(quantity)
    return out


def _sole(quantities: Sequence[Quantity], spec: FieldSpec) -> list[Quantity] | None:
    """The one value, or the asked ends of the one range, `quantities` state; else `None`.

    A range is a field's value only where the field asks for its ends (`min`, `max`): an
    adjustable output has no one voltage.
    """
    values = _distinct(quantities, spec)
    asked = tuple(spec.statistics or implied_statistics(spec))
    if len(values) == 1:
        only = next(iter(values.values()))[0]
        return [only] if only.statistic is None or only.statistic in asked else None
    if len(values) == 2:
        low, high = (values[v][0] for v in sorted(values))
        ends = {low.statistic, high.statistic}
        same_line = (low.page, low.line) == (high.page, high.line)
        if ends == {Statistic.MIN, Statistic.MAX} and same_line:
            return [q for q in (low, high) if q.statistic in asked] or None
    return None


def _untaken(quantities: Sequence[Quantity], spec: FieldSpec, taken: set[float]) -> list[Quantity]:
    """The quantities whose value no other field of the same dimension was given."""
    return [q for v, qs in _distinct(quantities, spec).items() if v not in taken for q in qs]


def sole_links(
    document: ParsedDocument,
    fields: Sequence[FieldSpec],
    linked: dict[str, list[Candidate]],
    chosen: dict[str, list[Candidate]],
    quantities: DocumentQuantities | None = None,
) -> dict[str, list[Candidate]]:
    """Links for the numeric fields no label links at all, where the unit says which field.

    A field some label links is left to the choice among those links, even where it keeps
    none (a row of variants, a condition): the unit speaks only where no label does. A
    value already chosen for another field is no one else's; a value written as a test
    condition (`@ 5 V`) describes another; and a field whose dimension another unplaced
    field shares gets nothing (the unit cannot say which of the two it is).
    """
    empty = [s for s in fields if not linked.get(s.key) and s.kind not in (TEXT, COUNT)]
    if not empty or not document.pages:
        return {}
    if quantities is not None:
        quantities = quantities.of_pages([document.pages[0].number])
    else:
        quantities = read_quantities(document.model_copy(update={"pages": document.pages[:1]}))
    lines = quantities.pages[0].lines
    out: dict[str, list[Candidate]] = {}
    for spec in empty:
        if any(o.kind == spec.kind for o in empty if o.key != spec.key):
            continue
        taken = {
            round(v, 9)
            for other in fields
            if other.kind == spec.kind and other.key != spec.key
            for c in chosen.get(other.key, [])
            if isinstance(c.value, float) and (v := in_unit(c.value, c.unit, spec.unit)) is not None
        }
        # Written with its unit in the title or a feature bullet: a table's row says what
        # it states (a change, a differential, a condition) in words no unit outweighs.
        pool = [
            q
            for q in of_field(quantities, spec)
            if not q.condition
            and not q.row
            and _headline(lines, q.line)
            and weak_scale(q.value, _unit(q, spec), spec.unit)
        ]
        # The title names the part's headline figure first: `Serial EEPROM 256K (32,768 x
        # 8)` over a bullet's `64-byte Page Write Mode`, where the title states one.
        titled = [q for q in pool if q.line < _title_end(lines)]
        sole = _sole(_untaken(titled, spec, taken), spec) or _sole(
            _untaken(pool, spec, taken), spec
        )
        if sole is None:
            continue
        out[spec.key] = [
            Candidate(
                key=spec.key, tier=SOLE_TIER, value=q.value, unit=_unit(q, spec),
                statistic=q.statistic, value_text=q.text, page=q.page, row=q.line,
                quote=" ".join(lines[q.line].split())[:240],
            )
            for q in sole
        ]  # fmt: skip
    return out


_PART_FIELD = re.compile(
    r"(?:part|model|type|ordering|order|product)(?:[\s_-]*(?:number|no\.?|#|code|name))?",
    re.IGNORECASE,
)
"""A text field whose value is the part itself: `part number`, `model`, `ordering code`."""


def part_number_links(
    document: ParsedDocument, fields: Sequence[FieldSpec], linked: dict[str, list[Candidate]]
) -> dict[str, list[Candidate]]:
    """A part-number field no label names: the part number the title sets largest.

    A datasheet states its part in its title and rarely labels it (`Part number:` is an
    ordering table's column, if anything). The part is the one `_entity` finds most
    prominent: in the largest type on page 1, else named most often on the first pages.
    """
    wanted = [
        s for s in fields
        if s.kind == TEXT and not linked.get(s.key) and _PART_FIELD.fullmatch(s.name.strip())
    ]  # fmt: skip
    part = prominent_part(document) if wanted and document.pages else None
    if part is None:
        return {}
    found = next(
        ((page, i, line) for page in document.pages[:3]
         for i, line in enumerate(page.text.splitlines()) if part in line),
        (document.pages[0], 0, part),
    )  # fmt: skip
    page, row, line = found
    quote = " ".join(line.split())[:240]
    return {
        s.key: [
            Candidate(
                key=s.key, tier=SOLE_TIER, value=part, unit="", statistic=None,
                value_text=part, page=page.number, row=row, quote=quote,
            )
        ]
        for s in wanted
    }  # fmt: skip


_TITLE_LINES = 4
"""Lines at the top of the first page read as its title."""
_PAGE_LINES = 12
"""Lines a first page has at least where its top lines are a title over a body."""
_BULLET = re.compile(r"^\s*[•\-\u2013\u2022\u25aa\u25cf\u00b7\uf0b7\uf06e\uf0a7*]\s")
"""A feature list's bullet, the symbol fonts' private-use ones included."""


_HEADING = re.compile(r"\s*(?:key\s+)?(?:features?|description|applications?)\s*:?\s*", re.I)
"""A first page's section heading: the title ends above it."""


def _title_end(lines: Sequence[str]) -> int:
    """The line a first page's title ends before: its first bullet or heading.

    At most the fourth line; none on a page too short to have a title over a body.
    """
    if len(lines) <= _PAGE_LINES:
        return 0
    top = range(min(_TITLE_LINES, len(lines)))
    return next(
        (i for i in top if _BULLET.match(lines[i]) or _HEADING.fullmatch(lines[i])),
        _TITLE_LINES,
    )


def _headline(lines: Sequence[str], index: int) -> bool:
    """Whether line `index` is a title line or a feature bullet stating only values.

    A line with a change (`Δ`) or a list of bare numbers (`5, 6, 8, 12, 24 V`: variants)
    is neither.
    """
    line = lines[index] if index < len(lines) else ""
    if "\u0394" in line or "\u2206" in line:
        return False
    if any(v.unit is None and not v.condition for v in read_values(line)):
        return False
    titled = index < _TITLE_LINES and len(lines) > _PAGE_LINES
    return titled or _BULLET.match(line) is not None


def _unit(quantity: Quantity, spec: FieldSpec) -> str:
    return quantity.unit.text if quantity.unit is not None else spec.unit
