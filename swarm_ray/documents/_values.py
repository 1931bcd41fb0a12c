"""Values as datasheets write them in a cell or a phrase: signs, ranges, limits, footnotes.

`read_values("-40°C to +85°C")` gives two values, -40 °C as the `min` and 85 °C as the
`max`; so do `-5 to +70 °C`, `0~70℃`, `4.0V to 5.5V` and `3.6-5 V` (a unit written once
applies to both ends). `±10 %` is a range too, but after a value a tolerance of it:
`5 V ± 10%` is 5 V typical, from 4.5 V to 5.5 V; and written typical, a size either
way: `±2 mV typical` is 2 mV typical. `up to 120 FPS`, `< 50 µA` and
`max. 85` are maxima, `at least 2`, `> 1 Gb/s` and `30+ FPS` minima, `typ. 3.3 V` a typical value.
`120/240/480 FPS` states three values in one unit; `1. 7 V`, a decimal a text layer
split after its point, is 1.7 V. A number with no unit of its own is
returned bare (`unit` `None`) for the caller to place: a table's unit column, a label's
`(V)`. Footnote references are not numbers: `85 (1)`, `85[2]`, `85¹`, `85*` read `85`.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._mentions import SPACED_THOUSANDS, parse_number, read_unit
from swarm_ray.documents._units import Unit, convert, lookup_unit

__all__ = ["STAT_AFTER", "Value", "read_values", "states_values", "strip_footnotes"]

_FOOTNOTES = re.compile(
    r"\s?[(\[]\s?(?:\d{1,2}|[a-h]|[ivx]{1,3})\s?[)\]](?!\s*[A-Za-z°µΩ%])"
    r"|[¹²³⁴⁵⁶⁷⁸⁹⁰†‡§¶]+|(?<=\d)\*+|\bNotes?\s?\d+\b"
)
_NUMBER = re.compile(
    r"(?P<sign>(?<![\w.,/)+\-\u2212\u2013])[-\u2212\u2013+]|±\s?)?"
    r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+(?![\d,])(?:\.\d+)?"
    rf"|{SPACED_THOUSANDS}(?:\.\d+)?"
    # `1. 7V`: a text layer that split a decimal after its point (before a unit only)
    r"|\d{1,3}\. \d{1,3}(?=\s?(?:[A-ZµμΩ°%]|[munpkMG][A-Z]|[munpµ]?s\b|[kMG]?Hz))"
    r"|\d*\.\d+|\d+(?:,\d+)?)"
    r"(?P<plus>\+(?![\d]))?"
)
_RANGE_SEP = re.compile(r"\s*(?:to|~|\u223c|…|\.\.\.?|-|\u2212|\u2013|—|and)\s*", re.I)
_OFFSET = re.compile(r"[A-Za-z][+\-\u2212\u2013]$")
_LIST_SEP = re.compile(r"\s*/\s*")
_MAX_WORDS = re.compile(
    r"(?:\bmax(?:imum)?\.?|\bup\s+to|<|≤|=<|\bless\s+than|\bbelow|\bunder|\bat\s+most|\bwithin)"
    r"\s*:?\s*$",
    re.I,
)
_MIN_WORDS = re.compile(
    r"(?:\bmin(?:imum)?\.?|\bat\s+least|>|≥|=>|\bgreater\s+than|\bmore\s+than|\babove|\bover"
    r"|\bfrom)\s*:?\s*$",
    re.I,
)
_TYP_WORDS = re.compile(r"(?:\btyp(?:ical(?:ly)?)?\.?|\bnom(?:inal)?\.?)\s*:?\s*$", re.I)
STAT_AFTER = re.compile(
    r"[ \t]*\(?[ \t]*(?:(?P<typ>typ(?:ical)?|nom(?:inal)?)|(?P<max>max(?:imum)?)"
    r"|(?P<min>min(?:imum)?))\b\.?\)?(?![ \t]*[-+±\u2212]?\d)",
    re.I,
)
"""`3 µA typical`, `5 mV max.`, `2 mA (min)`: the statistic written after a value's unit
(not `typ 3 µA, max 5 µA`, where the word heads the next value)."""


@dataclass(frozen=True)
class Value:
    """One number a text states, with its unit if written next to it."""

    value: float
    unit: Unit | None
    """`None` for a bare number."""
    text: str
    """The number (and unit) as written."""
    start: int
    end: int
    statistic: Statistic | None = None
    """From a range's end, a limit word (`up to`, `<`), or `typ.` before the number."""
    condition: bool = False
    """Written after `@` or `=`: a test condition (`45 mA @ 5 V`), not the value."""
    adjective: bool = False
    """Hyphenated before a word (`16-bit bus`, `15.4-inch screen`): describes a thing."""


_LONG = 2000
"""A text this long is read once for every reader that asks (`_read_long`, `_strip_long`):
each field's readers ask for the same line's values, and a tenant's line may be very long.
Shorter texts are kept by the thousand (`_read_short`): a datasheet's cells and lines are
read again by every field's reader and every table pass (zener_diodes' five files ask
7,022 times for 1,229 texts)."""


def strip_footnotes(text: str) -> str:
    """Remove footnote references (`(1)`, `[2]`, `¹`, `85*`, `Note 3`) from a cell.

    A long cell is stripped once for all who ask (each label of each field in it does).
    """
    return _strip_long(text) if len(text) >= _LONG else _FOOTNOTES.sub("", text)


@functools.lru_cache(maxsize=8)
def _strip_long(text: str) -> str:
    return _FOOTNOTES.sub("", text)


@dataclass
class _Number:
    value: float
    start: int
    end: int
    unit: Unit | None
    unit_end: int
    plus: bool
    fixed: Statistic | None = None
    """Set for the three values of `centre ± tolerance`: never grouped again."""


_PIXELS = re.compile(r"(?<![\w.])(\d+)\s*[x\u00d7]\s*(\d+)\s*(?=(?:pixels?|px)\b)", re.IGNORECASE)


_WORDS = re.compile(
    r"(?<![\w.])(\d+)\s?([KkM])?\s*[x\u00d7]\s*(\d+)(?=[-\u2011\s]?[A-Za-z])[-\u2011]?"
)
"""A memory's organisation, words by width: `128 x 8-bit`, `32K x 8 bits`."""

_ORGANISED = re.compile(
    r"(?:\borgani[sz](?:ed|ation)\b[\s:]*(?:as\s+)?|\(\s*)"
    r"(?P<words>\d{1,3}(?:,\d{3})+|\d{2,7})\s?(?P<k>[KkM])?\s*[x\u00d7]\s*"
    r"(?P<width>1|4|8|9|16|32)\b(?![ \t]*(?:[A-Za-zµ°%]|[-\u2011]\w))",
    re.IGNORECASE,
)
"""A memory's organisation written bare, words by width: `Internally organized 32,768 x
8`, `256K (32,768 x 8)`: that many bits. Bare `N x 8` elsewhere (`2 x 8` pins) is no size."""
_LEAST_WORDS = 64
"""Words a memory's organisation counts at least: fewer are a package's rows, not memory."""

_STANDARDS = (
    (re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?)(G?)BASE-?[A-Z0-9]+\b"), None),
    (re.compile(r"(?<![\w.-])(?:(\d+(?:\.\d+)?)[ -]?)?(G)igabit\s+Ethernet\b", re.I), None),
    (re.compile(r"\bFast\s+Ethernet\b", re.I), 100.0),
)
"""Standards whose names carry a data rate: IEEE 802.3's `25GBASE-SR` (25 Gb/s),
`1000BASE-T` (1000 Mb/s), `10 Gigabit Ethernet`, `Fast Ethernet` (100 Mb/s)."""
_WORD_COUNT = {"K": 1024.0, "k": 1024.0, "M": 1024.0 * 1024.0}
"""What a count of memory words multiplies by: `4K x 8` is 4,096 words of 8 bits."""


class _Spans:
    """Spans of a text, asked whether a position lies in one in logarithmic time.

    A cell of thousands of standards' names is then read in time linear in its length.
    """

    def __init__(self, spans: Iterable[tuple[int, int]]) -> None:
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._starts = [a for a, _ in merged]
        self._ends = [b for _, b in merged]

    def __contains__(self, position: int) -> bool:
        i = bisect.bisect_right(self._starts, position) - 1
        return i >= 0 and position < self._ends[i]


def _numbers(text: str) -> list[_Number]:
    found: list[_Number] = []
    for match in _PIXELS.finditer(text):  # `320x320 pixels` is 102,400 pixels
        read = read_unit(text, match.end())
        if read is not None:
            count = float(match.group(1)) * float(match.group(2))
            found.append(_Number(count, match.start(), match.end(), read[0], read[1], False))
    for match in _WORDS.finditer(text):  # `128 x 8-bit RAM` is 1,024 bits, not 8
        read = read_unit(text, match.end())
        if read is not None and read[0].kind == "information":
            words = float(match.group(1)) * _WORD_COUNT.get(match.group(2) or "", 1.0)
            count = words * float(match.group(3))
            found.append(_Number(count, match.start(), match.end(), read[0], read[1], False))
    for match in _ORGANISED.finditer(text):  # `organized 32,768 x 8`: 262,144 bits
        words = parse_number(match["words"]) * _WORD_COUNT.get(match["k"] or "", 1.0)
        bit = lookup_unit("bit")
        if words >= _LEAST_WORDS and bit is not None:
            start = match.start("words")
            found.append(
                _Number(words * float(match["width"]), start, match.end(), bit, match.end(), False)
            )
    named = "BASE" in text or _NAMED_RATE.search(text) is not None
    for regex, fixed_rate in _STANDARDS if named else ():  # `25GBASE-SR`: a standard's rate
        for match in regex.finditer(text):
            giga = bool(match.lastindex and match.group(2))
            rate = fixed_rate if fixed_rate is not None else float(match.group(1) or 1)
            unit = lookup_unit("Gb/s" if giga else "Mb/s")
            if unit is not None:
                found.append(_Number(rate, match.start(), match.end(), unit, match.end(), False))
    taken = _Spans((n.start, n.unit_end) for n in found)
    for match in _NUMBER.finditer(text):
        if match.start() in taken:
            continue
        sign = (match["sign"] or "").strip()
        if _OFFSET.search(text[max(0, match.start() - 2) : match.start()]):
            continue  # `VCC+0.3 V`: an offset from another quantity, not a value
        start = match.start("sign") if sign else match.start("num")
        number = parse_number(sign.replace("±", "") + match["num"])
        end = match.end()
        read = read_unit(text, end)
        unit, unit_end = (read[0], read[1]) if read is not None else (None, end)
        found.append(
            _Number(
                number, start, end, unit, unit_end if unit else match.end(), bool(match["plus"])
            )
        )
        if sign == "±":
            low = found.pop()
            tolerance = abs(number)
            centre = found[-1] if found else None
            spread = None
            if centre is not None and not text[centre.unit_end : start].strip():
                spread = _spread(centre, tolerance, unit)
            if centre is not None and spread is not None:
                # `1310 ± 20 nm`, `5 V ± 10%`: typically the centre, from below to above it
                found.pop()
                for value, statistic in (
                    (centre.value, Statistic.TYP),
                    (centre.value - spread, Statistic.MIN),
                    (centre.value + spread, Statistic.MAX),
                ):
                    found.append(
                        _Number(
                            value,
                            centre.start,
                            end,
                            centre.unit or unit,
                            low.unit_end,
                            False,
                            statistic,
                        )
                    )
                continue
            after = STAT_AFTER.match(text, low.unit_end)
            if after is not None and after["typ"]:
                # `±2 mV typical`: the typical size of an offset either way, not a range
                found.append(
                    _Number(tolerance, start, end, unit, low.unit_end, False, Statistic.TYP)
                )
                continue
            low.value = -tolerance
            found.append(low)
            found.append(_Number(tolerance, start, end, unit, low.unit_end, False))
    found.sort(key=lambda n: n.start)
    return found


def _spread(centre: _Number, tolerance: float, unit: Unit | None) -> float | None:
    """How far `centre ± tolerance` reaches either side, in the centre's unit.

    `1310 ± 20 nm` and `5 V ± 0.5` reach the tolerance; `5 V ± 10%` and `10 MHz ± 20 ppm`
    a share of the centre; `5 V ± 250 mV` the tolerance in volts. `None` where the two
    measure different things (`5 V ± 2 A`): the tolerance then stands alone.
    """
    if centre.fixed is not None:
        return None
    if centre.unit is None or unit is None:
        return tolerance
    if unit.kind == centre.unit.kind:
        if unit.kind == "temperature" and unit.expr != centre.unit.expr:
            return None  # `25 °C ± 5 K`: a difference of temperatures, not one
        try:
            return abs(convert(tolerance, unit.text, centre.unit.text))
        except ValueError:
            return None
    if unit.kind == "ratio":
        try:
            return abs(centre.value) * convert(tolerance, unit.text, "%") / 100.0
        except ValueError:
            return None
    return None


def _limit(text: str, start: int) -> Statistic | None:
    before = text[max(0, start - 16) : start]
    if _MAX_WORDS.search(before):
        return Statistic.MAX
    if _MIN_WORDS.search(before):
        return Statistic.MIN
    if _TYP_WORDS.search(before):
        return Statistic.TYP
    return None


_NAMED_RATE = re.compile(r"ethernet", re.IGNORECASE)
"""Words that state a value with no digit (`Fast Ethernet`): see `_STANDARDS`."""


def states_values(text: str) -> bool:
    """Whether `text` may state a value at all (a cheap test before `read_values`)."""
    return any(ch.isdigit() for ch in text) or _NAMED_RATE.search(text) is not None


def _stated_after(text: str, end: int) -> Statistic | None:
    after = STAT_AFTER.match(text, end)
    if after is None:
        return None
    return Statistic.TYP if after["typ"] else Statistic.MAX if after["max"] else Statistic.MIN


def read_values(text: str) -> list[Value]:
    """Every number `text` states, as `Value`s in text order (see the module docstring)."""
    return list(_read_long(text) if len(text) >= _LONG else _read_short(text))


def _read_all(text: str) -> tuple[Value, ...]:
    return tuple(_read(text))


_read_long = functools.lru_cache(maxsize=8)(_read_all)
_read_short = functools.lru_cache(maxsize=4096)(_read_all)


def _read(text: str) -> list[Value]:
    numbers = _numbers(text)
    values: list[Value] = []
    index = 0
    while index < len(numbers):
        first = numbers[index]
        group = [first]
        kind = "single"
        condition = bool(re.search(r"[@=]\s*$", text[max(0, first.start - 3) : first.start]))
        if first.fixed is not None:
            values.append(_value(text, first, first.unit, first.fixed, condition))
            index += 1
            continue
        if index + 1 < len(numbers) and numbers[index + 1].start == first.start:
            kind, group = "plusminus", [first, numbers[index + 1]]
        else:
            for sep, label, most in ((_RANGE_SEP, "range", 2), (_LIST_SEP, "list", 8)):
                members = [first]
                while len(members) < most and index + len(members) < len(numbers):
                    nxt = numbers[index + len(members)]
                    if sep.fullmatch(text, members[-1].unit_end, nxt.start) is None:
                        break
                    members.append(nxt)
                if len(members) > 1:
                    kind, group = label, members
                    break
        unit = next((n.unit for n in reversed(group) if n.unit is not None), None)
        first_unit = group[0].unit
        if (
            kind == "range"
            and unit is not None
            and first_unit is not None
            and first_unit.kind != unit.kind  # `5 V to 10 mA` is not a range
        ):
            kind, group = "single", [first]
        group_units: list[Unit | None] = [
            (n.unit or unit) if kind != "single" else n.unit for n in group
        ]
        if kind == "range" and len(group) == 2 and _same(group, group_units):
            # `10GBASE-SR and 10GBASE-SW`: two ends of one value are that value, no range
            for number, number_unit in zip(group, group_units, strict=True):
                values.append(_value(text, number, number_unit, None, condition))
        elif kind in ("range", "plusminus") and len(group) == 2:
            low, high = sorted(zip(group, group_units, strict=True), key=lambda p: p[0].value)
            for number, number_unit, end in (
                (low[0], low[1], Statistic.MIN),
                (high[0], high[1], Statistic.MAX),
            ):
                values.append(_value(text, number, number_unit, end, condition))
        else:
            for number, number_unit in zip(group, group_units, strict=True):
                stat: Statistic | None = _limit(text, first.start) if number is first else None
                if number.plus and stat is None:
                    stat = Statistic.MIN
                if stat is None and kind == "single" and number.unit is not None:
                    stat = _stated_after(text, number.unit_end)
                values.append(_value(text, number, number_unit, stat, condition))
        index += len(group)
    return values


def _same(group: list[_Number], units: list[Unit | None]) -> bool:
    """Whether a range's two ends are one value in one unit."""
    first, last = units
    return (
        group[0].value == group[1].value
        and first is not None
        and last is not None
        and first.expr == last.expr
    )


def _value(
    text: str, number: _Number, unit: Unit | None, statistic: Statistic | None, condition: bool
) -> Value:
    end = number.unit_end if number.unit is not None else number.end
    adjective = number.unit is not None and bool(
        re.match(r"\d[-\u2011]\S+\s+[A-Za-z]", text[number.end - 1 : end + 2])
    )
    return Value(
        adjective=adjective,
        value=number.value,
        unit=unit,
        text=text[number.start : end].strip(),
        start=number.start,
        end=end,
        statistic=statistic,
        condition=condition,
    )
