"""A label's variants: sub-rows under it, each under its own condition, and which is the part's.

`Input Voltage` over `(VO = -5V) | -25V` and `(VO = -12V and -15V) | -35V` states one
rating per variant of the part. The table reader (`_table`) reads every variant, the first
ahead; once every field has its chosen values, a variant whose condition names another
declared field's value for this part (the output voltage's symbol `VO`, at -12 V) is put
first among its label's (`conditioned`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from swarm_ray.documents._cells import range_ends
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._labels import LabelPattern
from swarm_ray.documents._layout import TextBox
from swarm_ray.documents._links import LATER_TERM, Candidate, changed
from swarm_ray.documents._units import convert
from swarm_ray.documents._values import read_values

__all__ = ["conditioned", "names_variant"]


_MATCHED = 10 * LATER_TERM
"""What a variant gains whose condition names the part's own value of another field: more
than the first variant's lead, less than any real difference of evidence."""


def conditioned(
    links: list[Candidate],
    fields: Sequence[FieldSpec],
    regexes: Sequence[LabelPattern],
    spec: FieldSpec,
    chosen: dict[str, list[Candidate]],
) -> list[Candidate]:
    """`links` with the variant whose condition fits this part put first among its label's.

    `fields` are every declared field, each named by its regex in `regexes`; `chosen` the
    values already chosen for them in this document.

    `Input Voltage` over `(VO = -5V) | -25V` and `(VO = -12V and -15V) | -35V`: the first
    variant is every part's by default; where the condition names another declared field
    (`VO`, the output voltage's symbol) and the document's chosen value of that field is
    among the condition's values, or inside its range (`VO = 5 V to 18 V`), that variant is
    this part's.
    """
    out: list[Candidate] = []
    for candidate in links:
        if candidate.condition and _fits_condition(
            candidate.condition, fields, regexes, spec, chosen
        ):
            candidate = changed(candidate, bonus=candidate.bonus + _MATCHED)
        out.append(candidate)
    return out


_SUBSCRIPT = re.compile(r"\b([A-Z])([a-z]{1,3})(?=\s*(?:=|≤|≥|<|>))")
"""`Vo =`: a symbol whose subscript lost its case in the text layer (`VO`)."""


def _fits_condition(
    condition: str,
    fields: Sequence[FieldSpec],
    regexes: Sequence[LabelPattern],
    spec: FieldSpec,
    chosen: dict[str, list[Candidate]],
) -> bool:
    condition = _SUBSCRIPT.sub(lambda m: m[1] + m[2].upper(), condition)
    for other, regex in zip(fields, regexes, strict=True):
        if other.key == spec.key or not other.unit or not regex.search(condition):
            continue
        stated = [v for v in read_values(condition) if v.unit is not None]
        try:
            said = [convert(v.value, v.unit.text, other.unit) for v in stated if v.unit]
            own = [
                convert(c.value, c.unit, other.unit)
                for c in chosen.get(other.key, [])
                if isinstance(c.value, float) and c.unit
            ]
        except ValueError:
            continue
        if not said or not own:
            continue
        if range_ends(stated):
            low, high = sorted(said[:2])
            if any(low <= value <= high for value in own):
                return True
        elif any(abs(value - s) <= 0.01 * abs(s) for value in own for s in said):
            return True
    return False


def names_variant(cell: TextBox, label: TextBox) -> bool:
    """Whether a cell under a label names a further variant of it: indented, or a condition.

    `(Vo = -12V and -15V)` under `Input Voltage`; a cell level with the label and with no
    condition is the next row's own label.
    """
    text = cell.text.strip()
    return cell.x0 > label.x0 + 2 or text.startswith("(") or "=" in text
