"""Scoring extraction against a generated sample's ground truth.

Used by the tests (with thresholds), the main job (printed after a run) and the
benchmark, so all three count a hit the same way: same file, field, qualifier and
canonical unit, and a value within 0.5 % (text values must be equal).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from swarm_ray.documents._compare import Comparison
from swarm_ray.documents._sample import GroundTruth

__all__ = [
    "ExtractionScore",
    "FactKey",
    "facts_by_file",
    "in_dimensions",
    "same_value",
    "score_extraction",
]

MATCH_TOLERANCE = 0.005
"""Relative difference under which two numbers are the same value."""

FactKey = tuple[str, str | None, float | str, str]
"""(field, qualifier, value in canonical unit, canonical unit)."""


class ExtractionScore(BaseModel):
    """Precision and recall of extracted facts against the ground truth."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    precision: float
    """Share of extracted facts that the brochure really states."""
    recall: float
    """Share of stated facts that were extracted."""
    per_field: dict[str, float]
    """Recall per field."""
    extracted: int
    """Facts extracted."""
    expected: int
    """Facts stated in the ground truth."""


def same_value(a: float | str, b: float | str) -> bool:
    """Equal text, or numbers within `MATCH_TOLERANCE` of each other."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return abs(a - b) <= MATCH_TOLERANCE * max(abs(a), abs(b))


def _matches(a: FactKey, b: FactKey) -> bool:
    return a[0] == b[0] and a[1] == b[1] and a[3] == b[3] and same_value(a[2], b[2])


def facts_by_file(comparison: Comparison) -> dict[str, list[FactKey]]:
    """The facts a comparison holds, per source file (from each value's sources)."""
    found: dict[str, set[FactKey]] = defaultdict(set)
    for cell in comparison.cells:
        for group in cell.values:
            for source in group.sources:
                found[source.source].add((cell.field, cell.qualifier, group.value, cell.unit))
    return {k: sorted(v, key=repr) for k, v in found.items()}


def in_dimensions(field: str, dimensions: Sequence[str] | None) -> bool:
    """Whether `field` (`battery.capacity`) belongs to one of `dimensions` (all when None)."""
    return dimensions is None or field.split(".", 1)[0] in dimensions


def score_extraction(
    truth: GroundTruth,
    found: Mapping[str, Sequence[FactKey]],
    dimensions: Sequence[str] | None = None,
) -> ExtractionScore:
    """Score facts found per file (file name -> fact keys) against the ground truth.

    With `dimensions`, only the ground truth of those dimensions is expected.
    """
    hits = misses = 0
    found_per_field: Counter[str] = Counter()
    total_per_field: Counter[str] = Counter()
    for doc in truth.documents:
        expected: list[FactKey] = [
            (f.field, f.qualifier, f.value, f.unit)
            for f in doc.facts
            if in_dimensions(f.field, dimensions)
        ]
        got = found.get(doc.file, ())
        for g in got:
            if any(_matches(g, t) for t in expected):
                hits += 1
            else:
                misses += 1
        for t in expected:
            total_per_field[t[0]] += 1
            if any(_matches(g, t) for g in got):
                found_per_field[t[0]] += 1
    expected_total = sum(total_per_field.values())
    return ExtractionScore(
        precision=hits / max(1, hits + misses),
        recall=sum(found_per_field.values()) / max(1, expected_total),
        per_field={f: found_per_field[f] / n for f, n in total_per_field.items()},
        extracted=hits + misses,
        expected=expected_total,
    )
