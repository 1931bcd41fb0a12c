"""A candidate link of a value to a field, its tier, and the score the choice weighs.

The readers (`_table`) grade each link by a tier: the exact label cell, a label with more
words, a phrase, each again in a table of limits and again for a label that says only
part of the name. `scored` turns a tier and its context (a limit's low end, a value in
the declared unit) into what `_choice` compares. Document-wide links, counts said in
words and terms of a known shape, are made here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from swarm_ray.documents._cells import sentence_bounds
from swarm_ray.documents._choice import Scored
from swarm_ray.documents._counts import count_mentions, counted_noun, qualifiers, unit_counts
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._terms import shaped_value, term_mentions
from swarm_ray.documents._units import COUNT, convert

__all__ = [
    "CHART_COST",
    "CONFIDENCE",
    "EXAMPLE_COST",
    "LATER_TERM",
    "PARTIAL",
    "PHRASE_TIERS",
    "Candidate",
    "changed",
    "count_links",
    "repeats_last",
    "scored",
    "term_links",
    "to_scale",
    "weak_scale",
]


CONFIDENCE = {
    0: 0.9, 1: 0.85, 2: 0.7, 3: 0.75, 4: 0.7, 5: 0.66, 6: 0.64, 7: 0.62, 8: 0.62, 9: 0.6,
    10: 0.6,
}  # fmt: skip
"""Per tier: the exact label cell, a label cell with more words, a phrase; then the
first two again in a table of limits (absolute maximum ratings); then the same five for
a label of qualifiers only; last, a first page's sole value of the field's dimension
(`_sole`). All at or over the LLM fallback's threshold: a link the rules
chose among every candidate is not handed to a model to replace (the fallback asks for
what has no candidate, `unplaced_fields`)."""

_SCORE = {
    0: 1.0, 1: 0.9, 2: 0.6, 3: 0.8, 4: 0.72, 5: 0.5, 6: 0.45, 7: 0.35, 8: 0.4, 9: 0.36,
    10: 0.3,
}  # fmt: skip
"""Per tier, what the choice weighs: a limit in its own table still beats a phrase; a
label that says only part of the name (tiers 5 to 9) comes after every full one."""

_LIMIT_TIERS = frozenset({3, 4, 8, 9})
"""Tiers of links found in a table of limits (absolute maximum ratings)."""

_LIMIT_MIN_COST = 0.7
"""What the minimum of a limits range loses: the part survives it, nobody designs for it."""

_PER_MENTION, _COUNTED = 0.03, 10
"""Score a term gains per mention in the document, counting at most `_COUNTED`."""

LATER_TERM = 1e-4
"""What a term loses per term found before it: of `TO-220 & TO-263` (a part's package
and its variant's) the first is the one, not both."""

CHART_COST = 0.4
"""What a link on a page of graphs loses: a table or feature line elsewhere is the spec."""

EXAMPLE_COST = 0.7
"""What a link in a design example loses: one circuit's values, below even a weak link to
the part's own (`Vin 8V to 95V` in the example, `4.5V to 100V Input Range` the part's)."""

PHRASE_TIERS = frozenset({2, 7})
"""Tiers of links made in running text (a feature line), not in a table's row."""
_RAILS = frozenset({"voltage", "current"})
"""Kinds whose operating range does not start below zero (temperatures do)."""

PARTIAL = 5
"""Added to the tier of a link made by part of the name (`Input Range` for `input voltage`)."""

_UNIT_FIT = 0.15
"""What such a weak link gains when its value is written in the declared unit: a user
declares the unit the documents state the field in (`32M-BIT` for a density in `Mbit`,
not a sector's `4KB`)."""


@dataclass(frozen=True)
class Candidate:
    key: str
    tier: int
    value: float | str
    unit: str
    statistic: Statistic | None
    value_text: str
    page: int
    row: int
    quote: str
    entity: str | None = None
    bonus: float = 0.0
    """Added to the tier's score: how often the document names a term (`term_links`)."""
    label: str = ""
    """The label text that named the field, as matched (case folded), where the row says
    nothing else (a repeat of an earlier row, `repeats_last`)."""
    condition: str = ""
    """The condition of the label's variant the value is stated under (`(VO = -12V and
    -15V)` under `Input Voltage`); empty when the label has no variants."""
    named: str = ""
    """The words that named the field, as matched (case folded): empty for counts and terms."""


_REPEAT_ROWS, _REPEAT_COST = 4, 0.05
"""Rows within which a label said again repeats the parameter, and what the repeat loses."""


def repeats_last(found: list[Candidate]) -> list[Candidate]:
    """A row that only repeats an earlier row's label for the same statistic comes after it.

    `VCE(sat) | Collector to emitter saturation voltage | 1.35 V (IC = 50 A)`, then
    `VCE(sat) | 1.6 V (IC = 90 A)`: the same parameter under harder conditions. Both were
    equally good links; the first row, the condition the parameter is specified at, is
    the one. (Rows that name something more, `VUSB` and `VIN`, are two values.)
    """
    first: dict[tuple[str, str, Statistic | None], int] = {}
    named = [c for c in found if c.tier < PARTIAL]
    for c in named:
        for label in {c.label, *c.quote.casefold().split(" | ")}:
            key = (c.key, label, c.statistic)
            first[key] = min(first.get(key, c.row), c.row)
    out: list[Candidate] = []
    for c in found:
        row = first.get((c.key, c.label, c.statistic), c.row) if c.label else c.row
        later = 0 < c.row - row <= _REPEAT_ROWS
        out.append(changed(c, bonus=c.bonus - _REPEAT_COST) if later else c)
    return out


def changed(candidate: Candidate, **changes: object) -> Candidate:
    return replace(candidate, **changes)  # type: ignore[arg-type]


def term_links(
    spec: FieldSpec, shape: str, document: ParsedDocument, read: list[Candidate]
) -> list[Candidate]:
    """A text field of known shape: labelled values of that shape, then the document's terms."""
    out: list[Candidate] = []
    for candidate in read:
        term = shaped_value(shape, str(candidate.value))
        if term is not None:
            out.append(changed(candidate, value=term, value_text=term))
    for rank, mention in enumerate(term_mentions(shape, document)):
        out.append(
            Candidate(
                key=spec.key, tier=PARTIAL, value=mention.term, unit="", statistic=None,
                value_text=mention.term, page=mention.page, row=rank, quote=mention.quote,
                bonus=min(mention.count, _COUNTED) * _PER_MENTION - rank * LATER_TERM,
            )
        )  # fmt: skip
    return out


def count_links(spec: FieldSpec, document: ParsedDocument) -> list[Candidate]:
    """Counts stated in words before the noun a count field names (`count_links`).

    A document that never counts the field's noun may still say how many units the part
    holds (`Quadruple 2-input NAND Schmitt trigger`, `provides six inverting buffers`):
    those are weaker candidates (`unit_counts`). A count in a figure's caption (`Fig. 3
    Logic diagram (one gate)`) describes the drawing, not the part.
    """
    noun = counted_noun(spec.name) if spec.kind == COUNT else None
    if noun is None:
        return []
    per = " per " in spec.name.lower()
    qualified = qualifiers(spec.name)
    out: list[Candidate] = []
    counted = False
    """Whether the field's own noun is counted outside a caption: then that is the one."""
    for weak in (False, True):
        if counted or (weak and per):
            break
        for page in document.pages:
            found = unit_counts(page.text) if weak else count_mentions(noun, page.text)
            for mention in found:
                if mention.hyphenated != per and (qualified is None or weak):
                    continue
                left, right = sentence_bounds(page.text, mention.start, mention.end)
                said = page.text[left:right].lower()
                if not weak and any(
                    not re.search(rf"\b{re.escape(w)}", said) for w in qualified or ()
                ):
                    continue  # `two power sources` are no `interrupt sources`
                quote = " ".join(page.text[left:right].split())[:240]
                line = page.text[page.text.rfind("\n", 0, mention.start) + 1 : mention.start]
                caption = _CAPTION.match(line) is not None
                counted = counted or not caption
                out.append(
                    Candidate(
                        key=spec.key, tier=PARTIAL if weak else 2, value=float(mention.value),
                        unit="", statistic=None,
                        value_text=" ".join(page.text[mention.start : mention.end].split()),
                        page=page.number, row=mention.start, quote=quote,
                        bonus=-CHART_COST if caption else 0.0,
                    )
                )  # fmt: skip
    return out


_CAPTION = re.compile(r"\s*(?:Fig(?:ure)?|Table)\.?\s*\d", re.IGNORECASE)
"""A figure's or table's caption: `Fig.3 Logic diagram (one gate)`."""


_WEAK_SCALE = (0.1, 1e5)
"""Sizes, in the declared unit, that a weak link's value may take: a user declares the unit
the field is stated in, so `16 bytes` of some memory is no density in `Mbit`. A strong
link (the field's own label) keeps the wider plausible range of `_units`."""


def to_scale(candidate: Candidate, unit: str) -> bool:
    """Whether a weak link's value is of a size the declared unit is chosen for."""
    if candidate.tier < PARTIAL or not unit or not candidate.unit:
        return True
    if not isinstance(candidate.value, float):
        return True
    return weak_scale(candidate.value, candidate.unit, unit)


def weak_scale(value: float, written: str, declared: str) -> bool:
    """Whether `value` (in `written`) is of a size a weak label may link.

    Its size in the `declared` unit must lie in `_WEAK_SCALE`; `True` where the two units
    do not convert or nothing is declared.
    """
    if value == 0 or not written or not declared:
        return True
    try:
        size = abs(convert(value, written, declared))
    except ValueError:
        return True
    return _WEAK_SCALE[0] <= size <= _WEAK_SCALE[1]


def _in_unit(candidate: Candidate, unit: str) -> bool:
    """Whether the value is written in `unit` itself (any spelling of it)."""
    if not unit or not candidate.unit or not isinstance(candidate.value, float):
        return False
    try:
        return abs(convert(1.0, candidate.unit, unit) - 1.0) < 1e-9
    except ValueError:
        return False


def scored(candidate: Candidate, kind: str, unit: str = "") -> Scored:
    score = _SCORE[candidate.tier]
    if candidate.tier >= PARTIAL and _in_unit(candidate, unit):
        score += _UNIT_FIT
    if candidate.statistic is Statistic.MIN and (
        candidate.tier in _LIMIT_TIERS
        or (kind in _RAILS and isinstance(candidate.value, float) and candidate.value < 0)
    ):
        # `VCC -0.5 to 4.0 V`: the low end of a limit is no spec; a supply that starts below
        # zero is a limits range even where no title says so.
        score -= _LIMIT_MIN_COST
    return Scored(
        score=score + candidate.bonus,
        statistic=candidate.statistic,
        entity=candidate.entity,
        page=candidate.page,
        row=candidate.row,
        value=candidate.value,
        kind=candidate.tier,
        named=candidate.named if candidate.tier in PHRASE_TIERS else "",
    )
