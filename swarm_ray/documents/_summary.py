"""The answer a report gives first: per field, who states it, its range, and disputes.

One `FieldSummary` per column of the comparison (field, statistic, qualifier, unit):

- numbers: the lowest and highest value and the entities stating them, and the spread
  between them. No declaration says whether higher or lower is better (a `max` supply
  current is better low, a `max` clock better high), so no value is called the best: the
  reader sees both ends and who holds them;
- terms (text fields, feature lists): each value with the number of entities stating it;
- both: the entities whose sources disagree (`conflict`: different documents or pages;
  `ambiguous`: one page), whose details the report's conflicts section quotes.

Pure: it reads a `Comparison`'s cells and writes nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from swarm_ray.documents._compare import CellStatus, ComparisonCell
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._format import dimension_of, escape, label, number

__all__ = ["FieldSummary", "summarise", "summary_lines"]

_TERMS_SHOWN = 4
"""Values a text field's summary row names; the tables below it give every one."""


class FieldSummary(BaseModel):
    """One column of the comparison, across its entities."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    statistic: Statistic | None
    qualifier: str | None
    unit: str
    entities: int
    """Entities that state a value."""
    lowest: float | None = None
    """The lowest value any source states; None for a text field."""
    lowest_by: tuple[str, ...] = ()
    """The entities stating `lowest`, alphabetical."""
    highest: float | None = None
    highest_by: tuple[str, ...] = ()
    terms: tuple[tuple[str, int], ...] = ()
    """Text fields: each value and how many entities state it, the most stated first."""
    conflicts: tuple[str, ...] = ()
    """Entities whose documents or pages state different values."""
    ambiguous: tuple[str, ...] = ()
    """Entities with one page stating different values (often an extraction slip)."""

    @property
    def spread(self) -> float | None:
        """Highest minus lowest, in the field's unit; None for a text field."""
        if self.lowest is None or self.highest is None:
            return None
        return self.highest - self.lowest

    @property
    def disputed(self) -> frozenset[str]:
        """Entities whose value is under review."""
        return frozenset(self.conflicts) | frozenset(self.ambiguous)


def _numbers(cell: ComparisonCell) -> list[float]:
    return [float(g.value) for g in cell.values if not isinstance(g.value, str)]


def _summary(
    key: tuple[str, Statistic | None, str | None, str], cells: Sequence[ComparisonCell]
) -> FieldSummary:
    field, statistic, qualifier, unit = key
    entities = {c.entity for c in cells}
    conflicts = tuple(sorted(c.entity for c in cells if c.status is CellStatus.CONFLICT))
    ambiguous = tuple(sorted(c.entity for c in cells if c.status is CellStatus.AMBIGUOUS))
    base = FieldSummary(
        field=field,
        statistic=statistic,
        qualifier=qualifier,
        unit=unit,
        entities=len(entities),
        conflicts=conflicts,
        ambiguous=ambiguous,
    )
    numbers = {c.entity: _numbers(c) for c in cells}
    text = any(c.status is CellStatus.LIST for c in cells) or any(
        len(values) < len(c.values) for c, values in zip(cells, numbers.values(), strict=True)
    )
    if text or not any(numbers.values()):
        stated: Counter[str] = Counter()
        for cell in cells:
            stated.update({str(g.value) for g in cell.values})
        terms = tuple(sorted(stated.items(), key=lambda item: (-item[1], item[0].lower())))
        return base.model_copy(update={"terms": terms})
    low = min(v for values in numbers.values() for v in values)
    high = max(v for values in numbers.values() for v in values)
    return base.model_copy(
        update={
            "lowest": low,
            "lowest_by": tuple(sorted(e for e, values in numbers.items() if low in values)),
            "highest": high,
            "highest_by": tuple(sorted(e for e, values in numbers.items() if high in values)),
        }
    )


def summarise(
    columns: Iterable[
        tuple[tuple[str, Statistic | None, str | None, str], Sequence[ComparisonCell]]
    ],
) -> list[FieldSummary]:
    """One summary per column, in the order given.

    Args:
        columns: (field, statistic, qualifier, unit) and the cells of that column, one
            per entity. Every value a cell holds counts: a disputed cell's values all
            reach the ends, and the entity is named among the disputed.
    """
    return [_summary(key, cells) for key, cells in columns if cells]


def _at_most(names: tuple[str, ...], shown: int = 2) -> str:
    more = f", +{len(names) - shown}" if len(names) > shown else ""
    return ", ".join(escape(n) for n in names[:shown]) + more


def _end(value: float | None, by: tuple[str, ...], disputed: frozenset[str]) -> str:
    if value is None:
        return ""
    flag = " ⚠" if disputed & set(by) else ""
    return f"{number(value)} ({_at_most(by)}){flag}"


def _disagree(summary: FieldSummary) -> str:
    parts = []
    if summary.conflicts:
        parts.append(f"{len(summary.conflicts)} conflict: {_at_most(summary.conflicts, 3)}")
    if summary.ambiguous:
        parts.append(f"{len(summary.ambiguous)} one page: {_at_most(summary.ambiguous, 3)}")
    return "; ".join(parts)


def _summary_label(summary: FieldSummary) -> str:
    return escape(label(summary.field, summary.statistic, summary.qualifier, summary.unit))


def _grouped(summaries: list[FieldSummary], named: bool) -> list[tuple[str, FieldSummary]]:
    """Each summary with a first cell: its dimension on the dimension's first row."""
    rows, last = [], None
    for s in summaries:
        dimension = dimension_of(s.field)
        first = f"| {escape(dimension) if dimension != last else ''} " if named else ""
        rows.append((first, s))
        last = dimension
    return rows


def _header(named: bool, columns: str, aligns: str) -> list[str]:
    return [
        ("| Dimension " if named else "") + columns,
        ("| --- " if named else "") + aligns,
    ]


def _number_rows(summaries: list[FieldSummary], entities: int, named: bool) -> list[str]:
    lines = _header(
        named,
        "| Field | Stated by | Lowest (who) | Highest (who) | Spread | Disagree |",
        "| --- | ---: | --- | --- | ---: | --- |",
    )
    for first, s in _grouped(summaries, named):
        disputed, one = s.disputed, s.lowest == s.highest
        high = "same" if one else _end(s.highest, s.highest_by, disputed)
        spread = "" if one or s.spread is None else number(s.spread)
        lines.append(
            f"{first}| {_summary_label(s)} | {s.entities}/{entities} "
            f"| {_end(s.lowest, s.lowest_by, disputed)} | {high} | {spread} | {_disagree(s)} |"
        )
    return lines


def _term_rows(summaries: list[FieldSummary], entities: int, named: bool) -> list[str]:
    lines = _header(
        named,
        "| Field | Stated by | Values (entities stating each) | Disagree |",
        "| --- | ---: | --- | --- |",
    )
    for first, s in _grouped(summaries, named):
        shown = ", ".join(f"{escape(term)} ({n})" for term, n in s.terms[:_TERMS_SHOWN])
        more = f", +{len(s.terms) - _TERMS_SHOWN} more" if len(s.terms) > _TERMS_SHOWN else ""
        lines.append(
            f"{first}| {_summary_label(s)} | {s.entities}/{entities} | {shown}{more} "
            f"| {_disagree(s)} |"
        )
    return lines


def summary_lines(summaries: list[FieldSummary], entities: int, unstated: list[str]) -> list[str]:
    """The first screen: a row per field, numbers and text apart, then what is missing."""
    numbers = [s for s in summaries if s.lowest is not None]
    terms = [s for s in summaries if s.lowest is None]
    named = len({dimension_of(s.field) for s in summaries}) > 1
    lines: list[str] = []
    if numbers:
        lines += _number_rows(numbers, entities, named)
        lines += [
            "",
            "No declaration says whether higher or lower is better, so each field shows both "
            "ends and who states them; ⚠: that value is disputed. Disagree: entities whose "
            "documents state different values (quoted under Conflicts), or one page that does.",
            "",
        ]
    if terms:
        lines += [*_term_rows(terms, entities, named), ""]
    if unstated:
        lines.append("No document states " + ", ".join(f"`{f}`" for f in unstated) + ".")
    if not summaries and not unstated:
        lines.append("No facts: nothing to compare.")
    return lines
