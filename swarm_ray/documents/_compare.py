"""Comparison of normalised facts: an entity x field table, with conflicts flagged.

A cell holds every value the sources give for one entity, field, qualifier and unit.
Values within a relative tolerance are one value (a range of 310 miles is 498.9 km, and
another brochure's 499 km agrees with it); values beyond it, stated by different
documents or pages, are a *conflict*: both are kept with their quotes and sources and the
cell is marked for review, because a rule engine cannot know which brochure is right.

The qualifier is part of the cell's key, so a WLTP range and an EPA range of the same car
never meet, and neither do prices in two currencies (the unit is part of the key too).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.documents._entity import entity_key
from swarm_ray.documents._facts import ExtractionMethod, NormalisedFact, Statistic

__all__ = [
    "CellStatus",
    "Comparison",
    "ComparisonCell",
    "FactSource",
    "ValueGroup",
    "compare_facts",
]


class CellStatus(StrEnum):
    """What a reviewer needs to know about a cell at a glance."""

    SINGLE = "single"
    """One source (document and page) states the value."""
    AGREED = "agreed"
    """Several sources state values within the tolerance."""
    CONFLICT = "conflict"
    """Different documents or pages state different values: review."""
    AMBIGUOUS = "ambiguous"
    """One page states different values (often an extraction slip): review."""
    LIST = "list"
    """A list field (features): values accumulate, they cannot contradict."""


class FactSource(BaseModel):
    """Where one value came from: enough to open the document at the right place."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str
    source: str
    page: int
    quote: str
    value_text: str
    """The value as written, before normalisation."""
    confidence: float


class ValueGroup(BaseModel):
    """Values that agree within the tolerance, and who stated them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: float | str
    """The value of the most confident source, in the cell's unit."""
    sources: tuple[FactSource, ...]


class ComparisonCell(BaseModel):
    """All values for one entity, field, statistic, qualifier and unit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entity: str
    field: str
    statistic: Statistic | None = None
    """`min`, `typ` or `max` where the field declares statistics; a range is two cells."""
    qualifier: str | None
    unit: str
    status: CellStatus
    values: tuple[ValueGroup, ...]
    """Value groups, ascending for numbers, alphabetical for terms."""
    needs_review: bool
    """True when the sources disagree (status `conflict` or `ambiguous`)."""


class Comparison(BaseModel):
    """The comparison table and its conflicts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entities: tuple[str, ...]
    fields: tuple[str, ...]
    cells: tuple[ComparisonCell, ...]
    conflicts: tuple[ComparisonCell, ...]
    """The cells with status `conflict`, for a review queue."""
    rel_tolerance: float = Field(ge=0.0)

    def cell(
        self,
        entity: str,
        field: str,
        qualifier: str | None = None,
        statistic: Statistic | None = None,
    ) -> list[ComparisonCell]:
        """Return the cells of one entity and field (one per unit, usually one)."""
        key = entity_key(entity)
        return [
            c
            for c in self.cells
            if entity_key(c.entity) == key
            and c.field == field
            and c.qualifier == qualifier
            and c.statistic == statistic
        ]


def _source(fact: NormalisedFact) -> FactSource:
    f = fact.fact
    return FactSource(
        document_id=f.document_id,
        source=f.source,
        page=f.page,
        quote=f.quote,
        value_text=f.value_text,
        confidence=f.confidence,
    )


def _clusters(facts: list[NormalisedFact], tolerance: float) -> list[list[NormalisedFact]]:
    """Group numeric facts whose values lie within `tolerance` of the group's smallest."""
    ordered = sorted(facts, key=lambda f: float(f.value))
    groups: list[list[NormalisedFact]] = []
    for fact in ordered:
        value = float(fact.value)
        if groups:
            low = float(groups[-1][0].value)
            if abs(value - low) <= tolerance * max(abs(value), abs(low)) + 1e-9:
                groups[-1].append(fact)
                continue
        groups.append([fact])
    return groups


def _group(facts: list[NormalisedFact]) -> ValueGroup:
    best = max(facts, key=lambda f: f.fact.confidence)
    sources = sorted(
        (_source(f) for f in facts), key=lambda s: (s.source, s.page, s.document_id, s.quote)
    )
    return ValueGroup(value=_as_precise_as_written(best), sources=tuple(sources))


_DIGITS = re.compile(r"\d[\d,]*(?:\.\d+)?|\.\d+")


def _as_precise_as_written(fact: NormalisedFact) -> float | str:
    """A converted value to the significant digits its source wrote, no more.

    `294 mi` is 473 km, not 473.147: a conversion adds no precision the document did
    not state. Values stated in the field's own unit stay as they are (the facts keep the
    exact conversion; this is the value a comparison shows).
    """
    value = fact.value
    written = _DIGITS.search(fact.fact.value_text)
    if fact.conversion is None or isinstance(value, str) or not value or written is None:
        return value
    digits = written.group().replace(",", "").replace(".", "").lstrip("0")
    figures = max(3, len(digits))  # `1 in` is 25.4 mm: a round number is no estimate
    return float(f"{value:.{figures}g}")


_CellKey = tuple[str, Statistic | None, str | None, str]
"""field, statistic, qualifier, unit."""


def _cell(
    entity: str, key: _CellKey, facts: list[NormalisedFact], tolerance: float
) -> ComparisonCell:
    field, statistic, qualifier, unit = key
    if facts[0].fact.method is ExtractionMethod.VOCABULARY:
        by_term: dict[str, list[NormalisedFact]] = defaultdict(list)
        for fact in facts:
            by_term[str(fact.value)].append(fact)
        groups = [_group(by_term[term]) for term in sorted(by_term)]
        return ComparisonCell(
            entity=entity,
            field=field,
            statistic=statistic,
            qualifier=qualifier,
            unit=unit,
            status=CellStatus.LIST,
            values=tuple(groups),
            needs_review=False,
        )
    if any(isinstance(f.value, str) for f in facts):
        clusters = [
            [f for f in facts if f.value == v] for v in sorted({str(f.value) for f in facts})
        ]
    else:
        clusters = _clusters(facts, tolerance)
    places = {(f.fact.document_id, f.fact.page) for f in facts}
    if len(clusters) == 1:
        status = CellStatus.SINGLE if len(places) == 1 else CellStatus.AGREED
    else:
        status = CellStatus.CONFLICT if len(places) > 1 else CellStatus.AMBIGUOUS
    return ComparisonCell(
        entity=entity,
        field=field,
        statistic=statistic,
        qualifier=qualifier,
        unit=unit,
        status=status,
        values=tuple(_group(c) for c in clusters),
        needs_review=status in (CellStatus.CONFLICT, CellStatus.AMBIGUOUS),
    )


def compare_facts(
    facts: Iterable[NormalisedFact], *, rel_tolerance: float = 0.01, min_confidence: float = 0.0
) -> Comparison:
    """Group facts by entity into a comparison table and flag conflicting sources.

    Args:
        facts: Normalised facts from any number of documents.
        rel_tolerance: Values closer than this fraction of the larger are the same value;
            1 % absorbs rounding in another unit (`201 hp` is 149.9 kW, not 150 kW) while a
            planted 75 vs 77 kWh (2.6 %) stays a conflict.
        min_confidence: Leave out facts below this confidence.

    Returns:
        Cells sorted by entity, field and qualifier; entity spellings that differ only in
        case or spacing are one entity, shown in its most frequent spelling.
    """
    kept = [f for f in facts if f.fact.confidence >= min_confidence]
    spellings: dict[str, Counter[str]] = defaultdict(Counter)
    grouped: dict[tuple[str, _CellKey], list[NormalisedFact]] = defaultdict(list)
    for fact in kept:
        f = fact.fact
        ekey = entity_key(f.entity)
        spellings[ekey][f.entity] += 1
        grouped[(ekey, (f.field, f.statistic, f.qualifier, fact.unit))].append(fact)
    names = {
        k: min(c.items(), key=lambda item: (-item[1], item[0]))[0] for k, c in spellings.items()
    }
    order = {None: 0, Statistic.MIN: 1, Statistic.TYP: 2, Statistic.MAX: 3}

    def sort_key(item: tuple[tuple[str, _CellKey], list[NormalisedFact]]) -> tuple[object, ...]:
        ekey, (field, statistic, qualifier, unit) = item[0]
        return (ekey, field, order[statistic], qualifier or "", unit)

    cells = [
        _cell(names[ekey], key, group, rel_tolerance)
        for (ekey, key), group in sorted(grouped.items(), key=sort_key)
    ]
    return Comparison(
        entities=tuple(sorted(names.values())),
        fields=tuple(sorted({c.field for c in cells})),
        cells=tuple(cells),
        conflicts=tuple(c for c in cells if c.status is CellStatus.CONFLICT),
        rel_tolerance=rel_tolerance,
    )
