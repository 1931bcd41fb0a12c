"""The grammar a unit is read by: names, products, one division, small integer powers.

A unit arrives from a tenant (a field's declared unit) or from a document's text (a
token after a number), so it is read by a grammar and never evaluated. pint's own
parser evaluates arithmetic (`9**(3*9**7)` computed a number of millions of digits on
the orchestrator's event loop), so no tenant text reaches it: pint's registry only
names the units (`get_name`, a table look-up), and the unit is built from those names.

    unit    := product [ "/" product ]
    product := factor { "*" factor }
    factor  := NAME [ power ]  |  "1"          (`1/s`: a bare one, first, before "/")
    power   := ("**" | "^") ["-"] DIGIT  |  superscript digits (`m²`, `s⁻¹`)

Bounds: at most `MAX_CHARS` characters, `MAX_FACTORS` factors, names of at most
`MAX_NAME` characters and powers within ±`MAX_POWER`. Anything else (parentheses,
numbers, a second division, `**` on a group) is refused with `UnitSyntaxError`,
naming the unit. Reading is one pass over the text: its cost is linear in the length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MAX_CHARS",
    "MAX_FACTORS",
    "MAX_NAME",
    "MAX_POWER",
    "Factor",
    "UnitSyntaxError",
    "parse_factors",
]

MAX_CHARS = 64
"""Characters of a unit as written: `kg*m**2/s**3` is 12; nobody writes 64."""
MAX_FACTORS = 6
"""Named factors of one unit (`force_pound*foot`, `W*hour/kg`)."""
MAX_NAME = 32
"""Characters of one unit's name (`floating_point_operations_per_second` is pint's longest
definition we use, 36, and is written `FLOPS`)."""
MAX_POWER = 4
"""Largest power of a factor (`s**-2`, `m**3`); a unit is not an arithmetic expression."""

_NAME = re.compile(r"(?:[^\W\d_]|[°%‰Ω℃℉])(?:(?![⁰¹²³⁴⁵⁶⁷⁸⁹⁻])\w|[°%‰Ω])*")
_POWER = re.compile(r"(?:\*\*|\^)(?P<sign>-?)(?P<digits>\d{1,2})(?!\d)")
_SUPERSCRIPT = re.compile(r"(?P<sign>⁻?)(?P<digits>[⁰¹²³⁴⁵⁶⁷⁸⁹]{1,2})")
_SUPERSCRIPT_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789")
_SPACE = re.compile(r"\s*")
_ONE_OVER = re.compile(r"1\s*(?=/)")


class UnitSyntaxError(ValueError):
    """A unit outside the grammar (see the module docstring); the message names it."""

    def __init__(self, text: str, why: str) -> None:
        super().__init__(f"unit {text[: MAX_CHARS + 8]!r} {why}")
        self.text = text
        """The unit as read."""
        self.why = why
        """What is wrong, without the unit (`divides twice; ...`)."""

    def __reduce__(self) -> tuple[type[UnitSyntaxError], tuple[str, str]]:
        return type(self), (self.text, self.why)


@dataclass(frozen=True)
class Factor:
    """One named unit and its power in a product (`s`, -1 in `m/s`)."""

    name: str
    power: int


def _refuse(text: str, why: str) -> UnitSyntaxError:
    return UnitSyntaxError(text, why)


def _power(text: str, pos: int) -> tuple[int, int]:
    """The power written at `pos` (1 when none) and where it ends."""
    match = _POWER.match(text, pos) or _SUPERSCRIPT.match(text, pos)
    if match is None:
        return 1, pos
    digits = match["digits"].translate(_SUPERSCRIPT_DIGITS)
    power = int(digits) * (-1 if match["sign"] else 1)
    if not 0 < abs(power) <= MAX_POWER:
        raise _refuse(
            text, f"has the power {power}: powers are 1 to {MAX_POWER} or their negatives"
        )
    return power, match.end()


def parse_factors(text: str) -> tuple[Factor, ...]:
    """The factors of a unit written in the grammar, powers signed by the division.

    Raises:
        UnitSyntaxError: For text outside the grammar or its bounds, naming the text.
    """
    if len(text) > MAX_CHARS:
        raise _refuse(text, f"is {len(text)} characters long; a unit has at most {MAX_CHARS}")
    factors: list[Factor] = []
    sign, pos, end = 1, _SPACE.match(text).end(), len(text)  # type: ignore[union-attr]
    if (one := _ONE_OVER.match(text, pos)) is not None:
        pos = one.end()  # `1/s`: the numerator is a bare one
    else:
        pos = _factor(text, pos, factors, sign)
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if pos == end:
            break
        operator = text[pos]
        if operator == "/":
            if sign < 0:
                raise _refuse(text, "divides twice; write one `/` (`m/s**2`)")
            sign = -1
        elif operator != "*":
            raise _refuse(text, f"has {operator!r} at {pos} where `*`, `/` or the end belongs")
        pos = _factor(text, _SPACE.match(text, pos + 1).end(), factors, sign)  # type: ignore[union-attr]
    if len(factors) > MAX_FACTORS:
        raise _refuse(text, f"has {len(factors)} factors; at most {MAX_FACTORS}")
    return tuple(factors)


def _factor(text: str, pos: int, factors: list[Factor], sign: int) -> int:
    """Read one `NAME[power]` at `pos` into `factors`; where it ends."""
    match = _NAME.match(text, pos)
    if match is None:
        found = repr(text[pos]) if pos < len(text) else "nothing"
        raise _refuse(text, f"has {found} at {pos} where a unit's name belongs")
    if len(match.group()) > MAX_NAME:
        raise _refuse(text, f"names a unit of {len(match.group())} characters; at most {MAX_NAME}")
    power, after = _power(text, match.end())
    factors.append(Factor(match.group(), sign * power))
    if len(factors) > MAX_FACTORS:
        raise _refuse(text, f"has more than {MAX_FACTORS} factors")
    return after
