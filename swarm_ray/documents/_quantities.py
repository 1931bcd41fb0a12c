"""Quantities: every number a document writes with a unit, line by line, page by page.

The first stage of the learned extraction. It reads, it does not choose: each line of
each page's text gives the values `_values.read_values` finds there (signs, ranges as
their two ends, `up to` and `<` as maxima, `typ.`, footnote marks dropped), with the
unit written next to them. Which field a quantity may be is the next stage's question
(`_candidates`), asked with the field's declared dimension (`fits`).

A document is read once for all its fields: `read_quantities` is the costly part, the
per-field filter `of_field` is cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

from swarm_ray.documents._cells import fits
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._grid import page_rows
from swarm_ray.documents._layout import Row, TextBox
from swarm_ray.documents._parse import PageText, ParsedDocument
from swarm_ray.documents._units import COUNT, TEXT, Unit, convert, lookup_unit
from swarm_ray.documents._values import Value, read_values, states_values, strip_footnotes

__all__ = [
    "DocumentQuantities",
    "PageLines",
    "Quantity",
    "focus_of",
    "in_unit",
    "of_field",
    "read_quantities",
    "series_page",
]

_LONG_LINE = 400
"""Characters of a line read at most: past that it is a block of running text."""


@dataclass(frozen=True)
class Quantity:
    """One number, where a page writes it, with what may say its unit."""

    page: int
    """1-based page number."""
    line: int
    """Index of the line on its page (for a table cell: of the line holding its text)."""
    value: float
    unit: Unit | None
    """As written next to the number; `None` for a bare one (see `after`, `header`)."""
    statistic: Statistic | None
    """What the writing says of it: a range's end, `up to`, `typ.`."""
    condition: bool
    """Written after `@` or `=`: a test condition (`45 mA @ 5 V`)."""
    text: str
    """The number (and unit) as written."""
    start: int
    """Offset in the line or cell."""
    raw: Value
    """What `read_values` returned, for `fits`."""
    after: str = ""
    """The word after a bare number, which may be a unit only the field's kind reads."""
    header: str = ""
    """A table cell's column: the words above it, up to the table's header."""
    row: str = ""
    """A table cell's row, its cells joined by ` | `; empty for a line's number."""
    label: str = ""
    """A table cell's row label (its first cell)."""


@dataclass(frozen=True)
class PageLines:
    """A page's lines, as the quantities' offsets refer to them."""

    number: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class DocumentQuantities:
    """Every quantity of one document, and the lines they stand on."""

    pages: tuple[PageLines, ...]
    quantities: tuple[Quantity, ...]

    def of_pages(self, numbers: Collection[int]) -> DocumentQuantities:
        """The same reading of the pages numbered `numbers` alone.

        Each page is read on its own, so this is what `read_quantities` gives for those
        pages.
        """
        wanted = set(numbers)
        return DocumentQuantities(
            tuple(p for p in self.pages if p.number in wanted),
            tuple(q for q in self.quantities if q.page in wanted),
        )


_AFTER = re.compile(r"\s?(?P<w>[^\s\d,;:()\[\]=]{1,12})")
_BARE = re.compile(r"^\s*[-+\u2212\u2013]?\d+(?:[.,]\d+)?\s*$")
_HEADER_ROWS = 5
"""Rows of words above a table's cell read as its column header, at most."""
_LOOKBACK = 40
"""Rows above a table's cell searched for its header."""


def read_quantities(document: ParsedDocument) -> DocumentQuantities:
    """Every number of `document`: each line's, and each laid-out table cell's."""
    pages: list[PageLines] = []
    found: list[Quantity] = []
    for page in document.pages:
        lines = tuple(page.text.split("\n"))
        pages.append(PageLines(page.number, lines))
        for index, line in enumerate(lines):
            text = strip_footnotes(line[:_LONG_LINE])
            if not states_values(text):
                continue
            for value in read_values(text):
                after = _AFTER.match(text, value.end) if value.unit is None else None
                found.append(
                    Quantity(
                        page=page.number, line=index, value=value.value, unit=value.unit,
                        statistic=value.statistic, condition=value.condition,
                        text=value.text, start=value.start, raw=value,
                        after=after["w"] if after else "",
                    )
                )  # fmt: skip
        if page.boxes:
            found.extend(_cells(page, lines))
    return DocumentQuantities(tuple(pages), tuple(found))


def _cells(page: PageText, lines: tuple[str, ...]) -> list[Quantity]:
    """Bare numbers of a table's cells, with their column's header words and row label."""
    rows = page_rows(page)
    # Each row's cells that are not bare numbers: only those can start a column's header.
    worded = [[c for c in r.cells if not _BARE.match(strip_footnotes(c.text))] for r in rows]
    out: list[Quantity] = []
    memo: dict[object, _Above] = {}
    placed = _Lines(lines)
    for index, row in enumerate(rows):
        bare = [c for c in row.cells[1:] if _BARE.match(strip_footnotes(c.text))]
        if not bare:
            continue
        joined = " | ".join(c.text for c in row.cells)
        label = _without_marks(row.cells[0].text)
        units = [c for c in row.cells[1:] if _unit_cell(c.text)]
        hung = _hung_from(rows, index) if not units else None
        if hung is not None:
            units = [c for c in hung.cells[1:] if _unit_cell(c.text)]
        at = placed.of(row, label)
        for cell in bare:
            header = _header(rows, index, cell, worded, memo)
            if not header:
                continue
            # A row's unit column (`Total dissipation | 625 | 350 | mW`): the nearest to the right.
            right = [u for u in units if u.x0 >= cell.x1]
            after = min(right, key=lambda u: u.x0).text.strip() if right else ""
            for value in read_values(strip_footnotes(cell.text)):
                out.append(
                    Quantity(
                        page=page.number, line=at, value=value.value, unit=None,
                        statistic=value.statistic, condition=False, text=value.text,
                        start=0, raw=value, after=after, header=header, row=joined,
                        label=label,
                    )
                )  # fmt: skip
    return out


class _Lines:
    """Where a table's rows stand among a page's text lines, in bounded work.

    A row stands on the first line that is its cells side by side, compared without
    spaces (one dict lookup); failing that, on the first line holding its label. The
    label alone is often written higher up the page first (a part number in the title,
    `IC` in a feature bullet), and the line places a cell in its section (`Limiting
    values`, `Features`). Label searches are kept per label, and a page gets at most
    `_SCAN_BUDGET` line comparisons for them: a tenant's page of thousands of rows whose
    labels no line holds would otherwise cost rows times lines. Past it, a row stands on
    line 0, as a label found nowhere always did.
    """

    def __init__(self, lines: tuple[str, ...]) -> None:
        self.lines = lines
        self.whole: dict[str, int] = {}
        for i, line in enumerate(lines):
            self.whole.setdefault("".join(line.split()), i)
        self.labels: dict[str, int] = {}
        self.budget = _SCAN_BUDGET

    def of(self, row: Row, label: str) -> int:
        at = self.whole.get("".join("".join(c.text.split()) for c in row.cells))
        if at is not None:
            return at
        if label not in self.labels:
            found, compared = 0, 0
            for i in range(min(len(self.lines), max(0, self.budget))):
                compared = i + 1
                if label in self.lines[i]:
                    found = i
                    break
            self.budget -= compared
            self.labels[label] = found
        return self.labels[label]


_SCAN_BUDGET = 200_000
"""Line comparisons a page's label searches may make (`_Lines`)."""


def _hung_from(rows: list[Row], index: int) -> Row | None:
    """The row whose merged label and unit cells a sub-row of values hangs from, if any.

    A parameter measured under several conditions often has its label and unit drawn
    once, centred over the sub-rows that hold the values: a row of its own with a label, a
    unit and no number, touching a sub-row above and below that has a condition and
    values but no label (`25°C | 6`, `Bias current | mA`, `125°C | 5.5`). A sub-row whose
    first cell starts right of that row's label, with no unit of its own, takes its unit,
    so its values are read in their dimension. Its own first cell stays its label: taking
    the merged label too (often the first of its lines only) moved the learned choice on
    other families' sub-rows and gained nothing (`bench/datasheets.py --lofo`).
    """
    row = rows[index]
    height = row.bottom - row.top
    for near in (index + 1, index - 1):
        if not 0 <= near < len(rows):
            continue
        other = rows[near]
        if other.cells[0].x1 >= row.cells[0].x0:
            continue  # the sub-row has a label of its own, or the other row has none
        if any(_BARE.match(strip_footnotes(c.text)) for c in other.cells):
            continue  # a row of values itself
        if not any(_unit_cell(c.text) for c in other.cells[1:]):
            continue
        if max(other.top - row.bottom, row.top - other.bottom) <= 0.5 * height:
            return other
    return None


_UNIT_CELL = 10
"""Characters a cell holding only a unit has at most (`mW`, `Vdc`, `°C/W`)."""


def _unit_cell(text: str) -> bool:
    """Whether a cell holds a unit and nothing else (a table's unit column)."""
    text = text.strip()
    if not text or len(text) > _UNIT_CELL or any(ch.isdigit() for ch in text):
        return False
    return lookup_unit(text) is not None


_MARKS_BACKWARDS = re.compile(r"\s*(?:(?:\)\d+\s*eton\(|\)\d\(|\)\d|\*)\s*)+", re.IGNORECASE)
"""Footnote marks after a row's label or a header's words (`1N4742A *`, `Zener Voltage (3)`,
`(note 2)`), spelled backwards: matched from the text's end (`_without_marks`)."""


def _without_marks(text: str) -> str:
    """`text` without the footnote marks that end it.

    Read backwards from the end, anchored: searched forwards, a `$`-anchored pattern is
    tried from every position, and a run of asterisks split among its repeats cost time
    doubling with each one (26 asterisks before a letter: 8.9 s).
    """
    found = _MARKS_BACKWARDS.match(text[::-1])
    return text if found is None else text[: len(text) - found.end()]


_TITLE = 60
"""Characters past which a cell over a column is the table's title, not the column's."""


def _over(above: TextBox, cell: TextBox) -> bool:
    """Whether `above` heads `cell`'s column.

    It does when it covers the cell's centre, or half of the narrower of the two (a
    symbol's letter `I` over the left of a wide value).

    A heading spanning two columns (`Zener voltage` over `Vz` and `IZT`) only brushes the
    second's edge, which is not enough to head it.
    """
    overlap = min(above.x1, cell.x1) - max(above.x0, cell.x0)
    if overlap <= 0:
        return False
    centre = (cell.x0 + cell.x1) / 2
    narrower = max(min(cell.x1 - cell.x0, above.x1 - above.x0), 1e-6)
    return above.x0 <= centre <= above.x1 or overlap >= 0.5 * narrower


def _states(cells: list[TextBox]) -> bool:
    """Whether the cells state a value with its unit (not a condition such as `TA = 25`)."""
    return any(
        v.unit is not None and not v.condition
        for c in cells
        if not _BARE.match(strip_footnotes(c.text))
        for v in read_values(strip_footnotes(c.text))
    )


@dataclass
class _Above:
    """What one row holds over one column (`_header`'s reading of it, kept per page)."""

    cells: list[TextBox]
    text: str
    bare: bool
    titled: bool
    states: bool | None = None
    """`_states(cells)`, read the first time it is asked."""


def _above(rows: list[Row], back: int, cell: TextBox, memo: dict[object, _Above]) -> _Above:
    """Row `back`'s cells over `cell`'s column, read once per page and column."""
    key = (back, cell.x0, cell.x1)
    found = memo.get(key)
    if found is None:
        over = [c for c in rows[back].cells if _over(c, cell)]
        kept = [c for c in over if len(c.text) <= _TITLE]
        found = memo[key] = _Above(
            cells=over,
            text=" ".join(dict.fromkeys(_without_marks(c.text) for c in kept)),
            bare=all(_BARE.match(strip_footnotes(c.text)) for c in kept),
            titled=len(kept) < len(over),
        )
    return found


def _header(
    rows: list[Row],
    index: int,
    cell: TextBox,
    worded: list[list[TextBox]],
    memo: dict[object, _Above],
) -> str:
    """The words above `cell` in its column, nearest last, past rows of numbers.

    `worded` holds each row's cells that are not bare numbers: until the first words are
    found, a row with none over the cell is passed at once (a series table's rows of
    numbers, read for every cell under them). `memo` keeps each row's reading over each
    column for the page's other cells (every cell of a column walks the same rows).
    """
    words: list[str] = []
    for back in range(index - 1, max(-1, index - _LOOKBACK), -1):
        if not words and not any(
            c.x0 < cell.x1 and cell.x0 < c.x1 and _over(c, cell) for c in worded[back]
        ):
            continue  # nothing over the cell, or numbers only: no header yet
        above = _above(rows, back, cell, memo)
        if not above.cells:
            continue
        if words:
            if above.titled:
                break  # a title: no header of this column
            if above.states is None:
                above.states = _states(above.cells)
            if above.states:
                break  # a line of text that states values: no header of this column
        if above.bare:
            if words:
                break  # the table above this one
            continue
        if not above.text.strip():
            continue
        words.insert(0, above.text)
        if len(words) >= _HEADER_ROWS:
            break
    return " ".join(words)


_TOKEN = re.compile(r"[^\s\d,;:()\[\]=@]{1,12}")


def _unit_of(quantity: Quantity, kind: str) -> Unit | None:
    """The quantity's unit read in light of `kind`: as written, the word after, the header."""
    if quantity.unit is not None:
        if quantity.unit.kind == kind:
            return quantity.unit
        return lookup_unit(quantity.unit.text, kind)
    if quantity.after:
        unit = lookup_unit(quantity.after, kind)
        if unit is not None and unit.kind == kind:
            return unit
    for token in reversed(_TOKEN.findall(quantity.header)):
        unit = lookup_unit(token.strip(".-/"), kind)
        if unit is not None and unit.kind == kind:
            return unit
    return None


def of_field(
    quantities: DocumentQuantities,
    spec: FieldSpec,
    names: Callable[[str], bool] | None = None,
) -> list[Quantity]:
    """The quantities whose dimension (and a plausible size) fits the declared field.

    Units are read in light of the field's kind: `µS` is a time in a time field, a bare
    number takes the unit of the word after it or of its column's header. With `names`
    (whether a text names the field), a table's bare cell under a header that names the
    field and gives no unit at all takes the declared unit: a symbol font's `Ω` is often
    lost from the text layer (`Maximum Zener Impedance` over a column of plain numbers).
    """
    if spec.kind in (TEXT, COUNT):
        return []  # terms and counts come from their own readers (`_links`)
    out: list[Quantity] = []
    named: dict[str, bool] = {}  # a table's cells share their column's header
    for quantity in quantities.quantities:
        unit = _unit_of(quantity, spec.kind)
        if unit is None and names is not None and _unitless(quantity):
            header = quantity.header
            if header not in named:
                named[header] = bool(names(header))
            if named[header]:
                unit = lookup_unit(spec.unit, spec.kind)
        if unit is None or not fits(spec, unit, quantity.raw):
            continue
        out.append(quantity if unit is quantity.unit else replace(quantity, unit=unit))
    return out


def _unitless(quantity: Quantity) -> bool:
    """A table cell whose header, word after and number give no unit of any kind."""
    if quantity.unit is not None or not quantity.header or quantity.after:
        return False
    return not any(lookup_unit(t.strip(".-/")) for t in _TOKEN.findall(quantity.header))


_SERIES_ROW = re.compile(
    r"(?<![\w\-])(?=[^\s]*\d)(?=[^\s]*[A-Z])[A-Z0-9][A-Za-z0-9\-/.+#]{3,24}\*?"
    r"(?:[ \t]+[-+\u2212]?\d+(?:[.,]\d+)?(?![\w.])){3,}"
)
"""A row of a series table: a part number, then three numbers or more (`1N4742A 12 21 9`)."""
_SERIES_ROWS = 3


def series_page(text: str) -> bool:
    """Whether a page holds a table of parts (rows of a part number and bare numbers).

    Such a table states its units in its column headers only, so it is laid out (its
    cells placed under their headers) even where no line names a field.
    """
    return len(_SERIES_ROW.findall(text, 0, 200_000)) >= _SERIES_ROWS


def focus_of(names: Callable[[str], bool] | None) -> Callable[[str], bool] | None:
    """The pages to lay out: those that may state a field (`names`), and series tables."""
    if names is None:
        return None
    return lambda text: names(text) or series_page(text)


def in_unit(value: float, unit: str, target: str) -> float | None:
    """`value` in `target`, or `None` where the two do not convert."""
    if not target or not unit or unit == target:
        return value
    try:
        return convert(value, unit, target)
    except ValueError:
        return None
