"""What a label's cell and row say beside the label, for the table reader (`_table`).

A row that names a field may still not state its value: the label may head a condition
(`VO ≤ 5 V`), a change (`ΔIQ`) or a difference (`VI - VO`) of the quantity, repeat the
row above under another condition, or stand in a graph's legend. These tests read one
cell or row; the reader decides what to take from them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._grid import Grid, column_of, header_of, is_dash, role
from swarm_ray.documents._labels import extra_words, label_regex
from swarm_ray.documents._layout import Row
from swarm_ray.documents._units import COUNT, Unit, convert, lookup_unit, plausible
from swarm_ray.documents._values import Value, read_values, strip_footnotes

__all__ = [
    "SENTENCE_END",
    "WORDS_BEFORE",
    "Hit",
    "assigned_again",
    "bare",
    "conditional",
    "fits",
    "footnote_free_span",
    "label_statistic",
    "listed",
    "lost_micro",
    "prose",
    "range_ends",
    "repeated_label",
    "sentence_bounds",
    "unit_apart",
    "unless_stated",
    "unnumbered",
    "without_values",
    "wrapped_title",
]


SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z0-9\n(]|\s*$)|;(?=\s)|•|\n\s*\n")
"""Where a sentence ends: `.`, `!` or `?` before a capital, digit, bracket or the end (not
the point of `0.5` or of `typ.` inside a sentence), `;`, a bullet, or a blank line. The one
definition of a sentence every reader uses (`sentence_bounds`)."""


SENTENCE_REACH = 1000
"""Characters a sentence reaches either side of what it holds, at most: a datasheet's
sentences are shorter, and a tenant's page of one endless sentence is then read in time
linear in its length, however many values it holds (each one's sentence is a window)."""


def sentence_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """The sentence of `text` around `[start, end)`, as `(first, past_last)` offsets.

    It ends after its closing punctuation; a bullet or blank line that ends it is left out.
    It reaches at most `SENTENCE_REACH` characters before `start` and after `end`.
    """
    first = max(0, start - SENTENCE_REACH)
    left = max((m.end() for m in SENTENCE_END.finditer(text, first, start)), default=first)
    last = min(len(text), end + SENTENCE_REACH)
    stop = SENTENCE_END.search(text, end, last)
    if stop is None:
        return left, last
    return left, stop.start() + (1 if stop.group() in ".!?;" else 0)


WORDS_BEFORE = 5
"""Words between such a value and its label, at most: a feature line names the value's
use between the two (`62KB program memory area CodeFlash`)."""


@dataclass(frozen=True)
class Hit:
    """A cell of a row that names a field."""

    cell: int
    span: tuple[int, int]


def fits(field: FieldSpec, unit: Unit | None, value: Value) -> bool:
    """Whether a value can be the field's: its kind, and a plausible size in its unit."""
    if field.kind == COUNT:
        return (unit is None or unit.kind == COUNT) and float(value.value).is_integer()
    if unit is not None and unit.kind != field.kind:
        unit = lookup_unit(unit.text, field.kind) or unit  # `µS` is a time in a time field
    if unit is None or unit.kind != field.kind:
        return False
    try:
        return plausible(convert(value.value, unit.text, field.unit)) if field.unit else True
    except ValueError:
        return False


_UNIT_TOKEN = re.compile(r"(?<![\w/])[A-Za-zµμΩ°%][\w/µμΩ°%]{0,5}(?![\w/])")


def unit_apart(spec: FieldSpec, line: str, near: str) -> bool:
    """A label's line and the next, with bare numbers on one and the field's unit on one.

    The text layer reads a table's unit column apart from its numbers (`Input offset
    voltage ... 0.5 4` over `VIO ... mV`), or the label's row with its unit over sub-rows
    of numbers (`Input Offset Voltage VIO mV` over `TL084C - 5.0 15`): the page still
    states the field.
    """
    if not spec.unit or not re.search(r"\d", near):
        return False
    declared = lookup_unit(spec.unit)
    if declared is None:
        return False
    for token in _UNIT_TOKEN.findall(near):
        unit = lookup_unit(token)
        if unit is not None and unit.kind == declared.kind:
            return True
    return False


def prose(text: str) -> bool:
    """A cell of running text, not of values: only its first value of a kind counts.

    `32 MB flash, 100 MHz 8-bit DDR mode` states one memory size; `8-bit` is a width.
    """
    words = [w for w in re.findall(r"[A-Za-z]{3,}", text) if lookup_unit(w) is None]
    return len(words) > 2


_LIST = re.compile(r"\d\s*,\s*\d+(?:\.\d+)?\s*,")


def listed(text: str, values: Sequence[Value]) -> bool:
    """Whether the first value with a unit ends a list of bare numbers (`5, 6, 8, 24 V`)."""
    united = next((i for i, v in enumerate(values) if v.unit is not None), None)
    if united is None or united < 2:
        return False
    return bool(_LIST.search(text, values[0].start, values[united].start))


_COMPARED = re.compile(r"\s*(?:≤|≥|<|>|=<|>=|<=)\s*[-+\u2212]?\d")
"""`VO ≤ 5 V`: a symbol compared to a value is a test condition, not its statement."""

_SPOKEN = re.compile(r"[A-Za-z][a-z]{4,}|[A-Za-z]{3,}\s+[A-Za-z]{3,}")
"""A label in words (`Lifetime > 50 years`, `Supply current < 5 µA`) states a bound of
its own quantity; a symbol compared to a value (`VO ≤ 5 V`) is another row's condition."""

_DANGLING = re.compile(r"\s*(?:=|≤|≥|<|>)\s*$")

_UNLESS = re.compile(r"\bunless\s+otherwise\b", re.IGNORECASE)

_DELTA = re.compile(r"^\s*[\u0394\u2206]")
"""`ΔIQ`: a change of the quantity (with line, with load), not the quantity."""

_SYMBOL = r"[A-Z][A-Z0-9]{1,3}"

_DIFFERENCE_BEFORE = re.compile(rf"(?<![\w])(?:{_SYMBOL})\s+[-\u2212\u2013]\s+$")

_DIFFERENCE_AFTER = re.compile(rf"^\s+[-\u2212\u2013]\s+(?:{_SYMBOL})(?!\w)")
"""`VI - VO`: the difference of two quantities (an input-output differential)."""


def conditional(spec: FieldSpec, row: Row, hit: Hit, before: str, after: str) -> bool:
    """Whether the label's row states a condition or a change of the field, not its value.

    `VO ≤ 5 V` and `VI =` (its value in the cell after) head a condition of other rows;
    `Input Voltage (unless otherwise specified)` gives the conditions of a table; `ΔIQ`
    is the change of a quiescent current with line or load, `VI - VO` a differential.
    """
    label = row.cells[hit.cell].text[hit.span[0] : hit.span[1]]
    if _COMPARED.match(after) and not _SPOKEN.search(label):
        return True
    if _UNLESS.search(row.cells[hit.cell].text):
        return True
    if _DIFFERENCE_BEFORE.search(before) or _DIFFERENCE_AFTER.match(after):
        return True
    named = spec.name.lower()
    if any(_DELTA.match(c.text) for c in row.cells) and not re.search(r"chang|delta", named):
        return True
    if _DANGLING.fullmatch(after):
        following = next((c for c in row.cells[hit.cell + 1 :] if c.text.strip()), None)
        values = read_values(following.text) if following is not None else []
        return not values or not fits(spec, values[0].unit, values[0])
    return False


def repeated_label(page: Grid, index: int, hit: Hit) -> bool:
    """Whether a row just above names the parameter in the same cells (label and symbol).

    `VIN | Input voltage range | once started ... | 2.0 | 16` over `VIN | Input voltage
    range | for start-up ... | 3.0 | 16`: the later row is the parameter under another
    condition; the first is its headline, so the later one gives way on a tie.
    """
    header = header_of(page, index)

    def label_cells(row: Row) -> list[str]:
        out: list[str] = []
        for cell in row.cells:
            column = column_of(header, cell) if header is not None else None
            if read_values(cell.text) or (column is not None and role(column.text) == "conditions"):
                break
            out.append(cell.text)
        return out

    own = label_cells(page.rows[index])
    if len(own) <= hit.cell:
        return False
    return any(label_cells(page.rows[b]) == own for b in range(index - 1, max(-1, index - 4), -1))


def range_ends(values: Sequence[Value]) -> bool:
    """Whether the first two values are one range's two ends (`2 V to 3.6 V`)."""
    return (
        len(values) >= 2
        and values[0].statistic is Statistic.MIN
        and values[1].statistic is Statistic.MAX
    )


def assigned_again(row: Row, hit: Hit, label: str) -> bool:
    """Whether another cell of the row sets the same label (`IOUT = 0A | IOUT = 1A`)."""
    folded = label.casefold()
    return any(
        i != hit.cell and c.text.strip().casefold().startswith(folded) and "=" in c.text
        for i, c in enumerate(row.cells)
    )


def bare(row: Row, hit: Hit) -> bool:
    """Whether a row says nothing but the label: every other cell a value, unit or dash."""
    cell = strip_footnotes(row.cells[hit.cell].text)
    if extra_words(cell, hit.span):
        return False
    return all(
        not c.text.strip()
        or read_values(c.text)
        or is_dash(c.text)
        or lookup_unit(strip_footnotes(c.text)) is not None
        for i, c in enumerate(row.cells)
        if i != hit.cell
    )


_BULLET = re.compile(r"\s*[•·▪◦●○■□►▸*\-\u2013\u2014]\s")
"""A list item's bullet: the line starts an item, it continues none."""


def wrapped_title(page: Grid, index: int, before: str) -> str | None:
    """The line a one-cell row continues, when it starts with a few words of a title.

    A title or feature line wrapped after its value continues on the next line, which
    then starts with the label or a few words before it: the line above is returned,
    for the value before the label to be read across the break.
    """
    row = page.rows[index]
    if index == 0 or len(row.cells) != 1 or len(page.rows[index - 1].cells) != 1:
        return None
    words = without_values(before)
    if re.search(r"[,;:.()\d]", words) or len(words.split()) > WORDS_BEFORE:
        return None
    if _BULLET.match(before):
        return None  # `• Output current ...` starts an item of its own
    above = page.rows[index - 1].cells[0]
    if above.size < row.cells[0].size * 0.9 or re.search(r"[.;:]\s*$", above.text):
        return None  # a smaller line, or one that ends a sentence, is not the same title
    return strip_footnotes(above.text)


def without_values(text: str) -> str:
    """`text` with its values that say their unit blanked (`3V SERIAL FLASH` -> `SERIAL FLASH`).

    A title lists a part's headline values beside its name; they are not the words of a
    sentence.
    """
    for value in reversed(read_values(text)):
        if value.unit is not None:
            text = f"{text[: value.start]}{' ' * (value.end - value.start)}{text[value.end :]}"
    return text


def lost_micro(spec: FieldSpec, unit: Unit | None) -> Unit | None:
    """`7.0 V/s` for a `V/us` field: the text layer dropped the `µ` glyph (a symbol font).

    A unit that is the field's own with its micro prefix missing is read as the field's:
    a slew rate of 7 V/s or a current of 50 A where `µA` is declared is implausible, and
    PDFs lose `µ` more often than any other character.
    """
    if unit is None or not spec.unit:
        return unit
    declared = spec.unit.replace("µ", "u").replace("μ", "u")
    if "u" not in declared:
        return unit
    stripped = re.sub(r"(?<![A-Za-z])u(?=[A-Za-z])", "", declared)
    if stripped != declared and unit.text.replace(" ", "") == stripped:
        return lookup_unit(spec.unit) or unit
    return unit


_LABEL_LIMIT = re.compile(
    r"\b(?P<word>max(?:imum)?|min(?:imum)?|typ(?:ical)?|nom(?:inal)?)\b\.?", re.I
)


def label_statistic(text: str) -> Statistic | None:
    """`Max frame rate`, `Supply voltage (min)`: the statistic a label cell names."""
    match = _LABEL_LIMIT.search(text)
    if match is None:
        return None
    word = match["word"].lower()[:3]
    return {"max": Statistic.MAX, "min": Statistic.MIN}.get(word, Statistic.TYP)


def footnote_free_span(raw: str, clean: str, span: tuple[int, int]) -> tuple[int, int]:
    """Map a label's span in a cell to the cell without footnote marks."""
    label = raw[span[0] : span[1]]
    position = clean.find(label)
    if position == -1:
        match = label_regex(label).search(clean)
        return match.span() if match else (0, 0)
    return position, position + len(label)


_ENUMERATOR = re.compile(r"^\s*(?:\d{1,2}|[a-z])[.)]\s")
"""A numbered list's item number (`1. `, `2) `, `a) `): no value of the item."""


def unnumbered(text: str) -> str:
    """`text` with a numbered list's item number blanked (positions kept)."""
    return _ENUMERATOR.sub(lambda m: " " * len(m.group()), text)


def unless_stated(spec: FieldSpec, bracket: str) -> str:
    """A label's bracketed test conditions, blanked; a bracket stating the value, kept.

    `(RS ≤ 10 k, VCM = 0)` and `(Note 7)` say under what the value holds; `(CTR: MIN. 50%
    at IF = 5mA, VCE = 5V)` states the value itself, of the field's kind and no condition.
    """
    stated = any(
        not v.condition and v.unit is not None and fits(spec, v.unit, v)
        for v in read_values(bracket)
    )
    return bracket if stated else " " * len(bracket)
