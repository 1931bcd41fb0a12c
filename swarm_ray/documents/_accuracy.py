"""How accurate an extraction is: precision and recall of facts against expected ones.

Used by the main job (printed after a run on generated brochures), the tests (with
thresholds) and the benchmarks (`bench/datasheets.py` on real datasheets; they import it
as `swarm_ray.testing.score`), so all of them count a hit the same way: same file, field,
statistic and qualifier, and a value within 0.5 % once converted to the expected value's
unit (text compared without case, spacing or punctuation). A file may be expected to
state several values for one field (two sections of a datasheet that disagree): each is
an expected fact of its own, and a found value is right when it matches any of them.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from swarm_ray.documents._compare import Comparison
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._units import COUNT, convert, lookup_unit
from swarm_ray.testing.sample_documents import GroundTruth  # the sample job's ground truth

__all__ = [
    "ExtractionScore",
    "FactKey",
    "facts_by_file",
    "in_dimensions",
    "same_value",
    "score_extraction",
    "score_facts",
]

MATCH_TOLERANCE = 0.005
"""Relative difference under which two numbers are the same value."""


class FactKey(NamedTuple):
    """What scoring compares of a fact: field, statistic, qualifier, value and its unit."""

    field: str
    statistic: Statistic | None
    qualifier: str | None
    value: float | str
    unit: str


class ExtractionScore(BaseModel):
    """Precision and recall of extracted facts against the expected ones."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    precision: float
    """Share of extracted facts that the document really states."""
    recall: float
    """Share of stated facts that were extracted."""
    per_field: dict[str, float]
    """Recall per field."""
    per_field_precision: dict[str, float] = {}
    """Precision per field (fields nothing was extracted for are left out)."""
    per_field_expected: dict[str, int] = {}
    """Facts expected per field."""
    extracted: int
    """Facts extracted."""
    expected: int
    """Facts expected."""
    misses: tuple[str, ...] = ()
    """`file: field statistic value unit` of each expected fact not found."""
    wrong: tuple[str, ...] = ()
    """The same for each extracted fact that matches none expected."""


def _text(value: str) -> str:
    return " ".join(re.sub(r"[^\w%°]+", " ", value.casefold()).split())


def same_value(a: float | str, b: float | str) -> bool:
    """Equal text (case, spacing and punctuation aside), or numbers within 0.5 %."""
    if isinstance(a, str) or isinstance(b, str):
        return _text(str(a)) == _text(str(b))
    return abs(a - b) <= MATCH_TOLERANCE * max(abs(a), abs(b))


def _matches(found: FactKey, expected: FactKey) -> bool:
    if (found.field, found.statistic, found.qualifier) != (
        expected.field,
        expected.statistic,
        expected.qualifier,
    ):
        return False
    value = found.value
    if (
        not isinstance(value, str)
        and not isinstance(expected.value, str)
        and found.unit != expected.unit
        and not (_counted(found.unit) and _counted(expected.unit))
    ):
        try:
            value = convert(value, found.unit, expected.unit)
        except ValueError:
            return False
    return same_value(value, expected.value)


def _counted(unit: str) -> bool:
    """No unit, or a count's (`count`, `pins`): a number of things either way."""
    found = lookup_unit(unit) if unit else None
    return not unit or (found is not None and found.kind == COUNT)


def _show(file: str, key: FactKey) -> str:
    statistic = f" {key.statistic.value}" if key.statistic else ""
    qualifier = f" ({key.qualifier})" if key.qualifier else ""
    return f"{file}: {key.field}{statistic}{qualifier} {key.value} {key.unit}".rstrip()


def score_facts(
    expected: Mapping[str, Sequence[FactKey]],
    found: Mapping[str, Sequence[FactKey]],
    fields: Sequence[str] | None = None,
) -> ExtractionScore:
    """Score facts found per file against those expected per file.

    Args:
        expected: File name -> the facts it states.
        found: File name -> the facts extracted from it.
        fields: Score only these fields (all expected and found ones when `None`).
    """
    wanted = None if fields is None else set(fields)
    hits_per_field: Counter[str] = Counter()
    found_per_field: Counter[str] = Counter()
    recalled: Counter[str] = Counter()
    total: Counter[str] = Counter()
    misses: list[str] = []
    wrong: list[str] = []
    for file in sorted(set(expected) | set(found)):
        want = [t for t in expected.get(file, ()) if wanted is None or t.field in wanted]
        got = [g for g in found.get(file, ()) if wanted is None or g.field in wanted]
        for g in got:
            found_per_field[g.field] += 1
            if any(_matches(g, t) for t in want):
                hits_per_field[g.field] += 1
            else:
                wrong.append(_show(file, g))
        for t in want:
            total[t.field] += 1
            if any(_matches(g, t) for g in got):
                recalled[t.field] += 1
            else:
                misses.append(_show(file, t))
    extracted = sum(found_per_field.values())
    expected_total = sum(total.values())
    return ExtractionScore(
        precision=sum(hits_per_field.values()) / max(1, extracted),
        recall=sum(recalled.values()) / max(1, expected_total),
        per_field={f: recalled[f] / n for f, n in sorted(total.items())},
        per_field_expected=dict(sorted(total.items())),
        per_field_precision={f: hits_per_field[f] / n for f, n in sorted(found_per_field.items())},
        extracted=extracted,
        expected=expected_total,
        misses=tuple(misses),
        wrong=tuple(wrong),
    )


def facts_by_file(comparison: Comparison) -> dict[str, list[FactKey]]:
    """The facts a comparison holds, per source file (from each value's sources)."""
    found: dict[str, set[FactKey]] = defaultdict(set)
    for cell in comparison.cells:
        for group in cell.values:
            for source in group.sources:
                found[source.source].add(
                    FactKey(cell.field, cell.statistic, cell.qualifier, group.value, cell.unit)
                )
    return {k: sorted(v, key=repr) for k, v in found.items()}


def in_dimensions(field: str, dimensions: Sequence[str] | None) -> bool:
    """Whether `field` (`battery.capacity`) belongs to one of `dimensions` (all when None)."""
    return dimensions is None or field.split(".", 1)[0] in dimensions


def score_extraction(
    truth: GroundTruth,
    found: Mapping[str, Sequence[FactKey]],
    dimensions: Sequence[str] | None = None,
) -> ExtractionScore:
    """Score facts found per file against a generated sample's ground truth.

    With `dimensions`, only the ground truth of those dimensions is expected.
    """
    expected = {
        doc.file: [
            FactKey(f.field, None, f.qualifier, f.value, f.unit)
            for f in doc.facts
            if in_dimensions(f.field, dimensions)
        ]
        for doc in truth.documents
    }
    kept = {
        file: [k for k in keys if in_dimensions(k.field, dimensions)]
        for file, keys in found.items()
        if file in expected
    }
    return score_facts(expected, kept)
