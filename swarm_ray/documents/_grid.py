"""A page as a grid: rows of cells, each table's header, and what each column holds.

`page_rows` reads a page's boxes (`_layout`) as rows; `header_of` finds the header row a
table row sits under (a row naming `Min`/`Typ`/`Max`, `Unit`, `Value`, or several part
numbers), `column_of` the header cell above a cell (by horizontal overlap), and `role`
what a header cell's column holds: a statistic, units, values, conditions, symbols or
labels. A table titled as limits (`Absolute Maximum Ratings`) is told apart from one of
operating conditions, and rows repeated on several pages (running headers and footers)
are found so that they are not read as content.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._layout import Row, TextBox, rows
from swarm_ray.documents._parse import PageText, ParsedDocument
from swarm_ray.documents._units import Unit, lookup_unit
from swarm_ray.documents._values import read_values, strip_footnotes

__all__ = [
    "PART_NUMBER",
    "STAT_ROLES",
    "Grid",
    "beside_ticks",
    "bracket_unit",
    "column_of",
    "header_of",
    "in_example_table",
    "in_limits_table",
    "is_axis_title",
    "is_chart_page",
    "is_dash",
    "is_diagram_page",
    "over_temperature",
    "page_rows",
    "part_over",
    "parts_above",
    "role",
    "row_unit",
    "running_key",
    "running_rows",
]

_ROLES: dict[str, tuple[str, ...]] = {
    "min": ("min", "minimum", "min."),
    "typ": ("typ", "typical", "typ.", "nom", "nominal", "nom."),
    "max": ("max", "maximum", "max."),
    "unit": ("unit", "units", "unit(s)", "units of measure"),
    "value": ("value", "values", "rating", "ratings", "spec", "specs", "specification",
              "specifications", "data", "limit", "limits", "details", "detail"),
    "conditions": ("conditions", "condition", "test conditions", "test condition", "notes",
                   "note", "comments", "comment", "remarks", "remark", "footnote"),
    "symbol": ("symbol", "symbols", "sym", "sym.", "pin", "pins", "ref", "ref."),
    "label": ("parameter", "parameters", "characteristic", "characteristics", "description",
              "item", "items", "feature", "features", "property", "properties", "name",
              "dimension", "dimensions", "specification item", "field", "component"),
}  # fmt: skip
_ROLE_OF = {word: role for role, words in _ROLES.items() for word in words}
STAT_ROLES = {"min": Statistic.MIN, "typ": Statistic.TYP, "max": Statistic.MAX}
PART_NUMBER = re.compile(r"^(?=[^ ]*\d)(?=[^ ]*[A-Z])[A-Z0-9][A-Za-z0-9\-_/.+#]{2,24}$")
_DASH = "\\-\u2010-\u2015\u2212\u23af\u2500\u2501\ufe58\ufe63\uff0d/\ue000-\uf8ff"
"""Hyphens, figure, en and em dashes, bars, minus and box-drawing lines: an empty cell.
So is a cell of private-use glyphs only (a symbol font's dash the text layer cannot name)."""
_DASHES = re.compile(rf"^[\s{_DASH}]*(?:n/?a|tbd)?[\s{_DASH}]*$", re.IGNORECASE)
_BRACKET_UNIT = re.compile(r"[(\[]\s*(?:in\s+)?([^()\[\]]{1,14}?)\s*[)\]]")
_HEADER_LOOKBACK = 30
"""Rows above a row searched for its table's header."""
_LIMITS_TABLE = re.compile(
    r"absolute\s+maxim|maximum\s+ratings|stress\s+ratings|limiting\s+values|abs\.?\s*max",
    re.IGNORECASE,
)
"""Titles of tables of limits the part survives, not the conditions it works in."""
_TITLE_WORDS = 8
"""A title is short: a sentence that mentions absolute maximum ratings titles nothing."""
_TITLE_LOOKBACK = 10
"""Rows above a table's header searched for its title (a paragraph may stand between)."""


@dataclass
class Grid:
    """One page's rows with their headers, computed once for every field."""

    number: int
    rows: list[Row]
    headers: dict[int, Row | None] = field(default_factory=dict)
    limits: dict[int, bool] = field(default_factory=dict)
    """Header row index -> whether its table lists limits (absolute maximum ratings)."""
    parts: dict[int, Row | None] = field(default_factory=dict)
    """Header row (by id) -> the row above it naming its columns' parts (`parts_above`)."""
    positions: dict[int, int] = field(default_factory=dict)
    """Row (by id) -> its index in `rows`, filled on first use (`position`)."""
    examples: dict[int, bool] = field(default_factory=dict)
    """Row index -> whether it sits under a design example's title (`in_example_table`)."""


def position(page: Grid, row: Row) -> int | None:
    """Where `row` stands in `page.rows` (found by identity, in constant time).

    Searched for in the list at each candidate, a header cost a pass over the page, and a
    page of thousands of rows under repeated headers the square of that.
    """
    if not page.positions:
        page.positions.update((id(r), i) for i, r in enumerate(page.rows))
    return page.positions.get(id(row))


def page_rows(page: PageText) -> list[Row]:
    """The page's rows: from its boxes, or from its text lines when it has none.

    Without boxes (a document built in memory) a line's cells are the runs of text between
    tabs or two spaces, placed by character offset.
    """
    if page.boxes:
        return [_split_headings(row) for row in _without_vertical_text(rows(page.boxes))]
    out: list[Row] = []
    for number, line in enumerate(page.text.splitlines()):
        cells: list[TextBox] = []
        for match in re.finditer(r"[^\t]+?(?=\t| {2,}|$)", line):
            text = match.group(0).strip()
            if text:
                x0 = 6.0 * match.start()
                cells.append(
                    TextBox(x0=x0, top=12.0 * number, x1=x0 + 6.0 * len(text),
                            bottom=12.0 * number + 10, size=10.0, text=text)
                )  # fmt: skip
        if cells:
            out.append(Row(top=12.0 * number, bottom=12.0 * number + 10, cells=tuple(cells)))
    return out


_VERTICAL_ROWS = 5
"""Rows holding one letter at the same place, at least, that make a line of vertical text."""


def _sideways(cell: TextBox) -> bool:
    """One letter whose box is wider than high: a glyph turned on its side."""
    return len(cell.text.strip()) == 1 and cell.x1 - cell.x0 > cell.bottom - cell.top


def _without_vertical_text(found: list[Row]) -> list[Row]:
    """The rows without the letters of a vertical line of text (a side title or footer).

    Printed sideways in a margin, `LM78XX` reads as one letter per row, each in a box of
    the same place and width (the font's height, wider than the letter is high): an `8`
    beside a table row is no value of it.
    """
    letters: dict[tuple[int, int], int] = {}
    for row in found:
        for cell in row.cells:
            if _sideways(cell):
                key = (round(cell.x0), round(cell.x1))
                letters[key] = letters.get(key, 0) + 1
    columns = {key for key, count in letters.items() if count >= _VERTICAL_ROWS}
    if not columns:
        return found
    out: list[Row] = []
    for row in found:
        cells = tuple(
            c for c in row.cells if not (_sideways(c) and (round(c.x0), round(c.x1)) in columns)
        )
        if cells:
            out.append(row if len(cells) == len(row.cells) else replace(row, cells=cells))
    return out


def _split_headings(row: Row) -> Row:
    """A header cell PDFium ran together (`Min. Typ. Max. Units`) as one cell per word.

    Each word gets the share of the box its characters take, which is where it is printed
    in a fixed-pitch approximation: near enough to place the values under it.
    """
    cells: list[TextBox] = []
    changed = False
    for cell in row.cells:
        words = list(re.finditer(r"\S+", cell.text))
        if len(words) < 2 or any(role(w.group()) not in _SPLIT_ROLES for w in words):
            cells.append(cell)
            continue
        changed = True
        width = (cell.x1 - cell.x0) / max(len(cell.text), 1)
        for word in words:
            cells.append(
                cell.model_copy(
                    update={
                        "x0": cell.x0 + width * word.start(),
                        "x1": cell.x0 + width * word.end(),
                        "text": word.group(),
                    }
                )
            )
    return Row(top=row.top, bottom=row.bottom, cells=tuple(cells)) if changed else row


_SPLIT_ROLES = frozenset({"min", "typ", "max", "unit"})


@functools.lru_cache(maxsize=8192)
def role(text: str) -> str | None:
    """What a cell's words are in a table (`min`, `max`, `unit`, a value's label), if any."""
    clean = " ".join(strip_footnotes(text).lower().split()).strip(" :")
    clean = re.sub(r"\s*[(\[][^()\[\]]*[)\]]$", "", clean)  # `Max (°C)`
    return _ROLE_OF.get(clean)


def _is_header(row: Row) -> bool:
    roles = [role(c.text) for c in row.cells]
    named = [r for r in roles if r is not None]
    stats = [r for r in named if r in STAT_ROLES]
    if stats and len(named) >= 2:
        return True
    if len(named) >= 2 and any(r in ("value", "unit") for r in named):
        return True
    parts = [c for c in row.cells[1:] if PART_NUMBER.match(c.text.strip())]
    return len(parts) >= 2 and not any(read_values(c.text) for c in row.cells[:1])


def header_of(page: Grid, index: int) -> Row | None:
    """The header of the table row `index` belongs to: the nearest header row above."""
    if index in page.headers:
        return page.headers[index]
    found: Row | None = None
    row = page.rows[index]
    past_heading = False
    for back in range(index - 1, max(-1, index - _HEADER_LOOKBACK), -1):
        above = page.rows[back]
        if _is_header(above):
            if not past_heading or _under_statistics(row, above):
                found = above
            break
        if len(above.cells) == 1 and above.cells[0].size > 1.25 * row.cells[0].size:
            # A heading: the table above is another one, unless it is a section heading
            # of the same table (`On Characteristics`), told by the row's numbers standing
            # under the header's `Min / Typ / Max` columns.
            past_heading = True
    page.headers[index] = found
    return found


_BARE_NUMBER = re.compile(r"^[-+\u2212\u2013]?\d+(?:[.,]\d+)?$")


def _under_statistics(row: Row, header: Row) -> bool:
    """Whether every bare number or dash of `row` stands under a statistic column."""
    stats = [c for c in header.cells if role(c.text) in STAT_ROLES]
    cells = [c for c in row.cells if _BARE_NUMBER.match(c.text.strip()) or is_dash(c.text)]
    return (
        bool(stats)
        and bool(cells)
        and all(any(min(s.x1, c.x1) - max(s.x0, c.x0) > 0 for s in stats) for c in cells)
    )


def in_limits_table(page: Grid, index: int) -> bool:
    """Whether row `index` sits in a table titled as limits (`Absolute Maximum Ratings`)."""
    header = header_of(page, index)
    start = None if header is None else position(page, header)
    if header is None or start is None:
        return False
    if start not in page.limits:
        page.limits[start] = _titled_limits(page.rows[max(0, start - _TITLE_LOOKBACK) : start])
        page.limits[start] |= bool(_LIMITS_TABLE.search(header.cells[0].text))
    return page.limits[start]


_FULL_RANGE = re.compile(
    r"\bT[AJ]\s*=\s*T\s*(?:low|min|L)\b.{0,12}?\bT\s*(?:high|max|H)\b|"
    r"\bover\s+(?:the\s+)?(?:full|entire|operating|specified)?\s*(?:ambient\s+)?"
    r"(?:operating\s+)?temperature\s+range|"
    r"\bT[AJ]\s*=\s*[-\u2212\u2013]\s*\d+\s*°?\s*C?\s*to\s*\+?\d+",
    re.IGNORECASE,
)
"""A table's condition that its values hold over the whole temperature range (`TA = Tlow
to Thigh`), where another table of the same parameters gives them at 25 °C."""
_CONDITION_LOOKBACK = 3
"""Rows above a table's header that state the conditions of the whole table."""


def over_temperature(page: Grid, index: int) -> bool:
    """Whether row `index` sits in a table whose values hold over the whole temperature range.

    `ELECTRICAL CHARACTERISTICS (... TA = Tlow to Thigh)`: a datasheet states its
    parameters at 25 °C and again, looser, over temperature; the first are the part's.
    """
    header = header_of(page, index)
    start = None if header is None else position(page, header)
    if start is None:
        return False
    above = page.rows[max(0, start - _CONDITION_LOOKBACK) : start]
    return any(_FULL_RANGE.search(" ".join(c.text for c in row.cells)) for row in above)


_EXAMPLE = re.compile(
    r"\b(?:design|application)\s+examples?\b|\bexamples?\b.*\b(?:design|application|circuit)|"
    r"\btypical\s+application",
    re.IGNORECASE,
)
"""Titles of tables that give one circuit's values (a design example), not the part's."""
_EXAMPLE_LOOKBACK = 8


def in_example_table(page: Grid, index: int) -> bool:
    """Whether row `index` sits under a short title naming a design or application example.

    `Table 1: Design Example` over `Vin | 8V to 95V`: one circuit's input, not the part's
    input range. Asked for each candidate of a row, it is read once a row.
    """
    if index not in page.examples:
        page.examples[index] = any(
            len(title.split()) <= _TITLE_WORDS and _EXAMPLE.search(title)
            for title in (
                " ".join(c.text for c in row.cells)
                for row in page.rows[max(0, index - _EXAMPLE_LOOKBACK) : index]
            )
        )
    return page.examples[index]


def _titled_limits(above: list[Row]) -> bool:
    """Whether the nearest title above a table names limits.

    The title is the nearest short row: paragraphs between it and the table (which may
    well mention absolute maximum ratings) and stray letters (vertical text) are passed.
    """
    for row in reversed(above):
        title = " ".join(c.text for c in row.cells)
        if len(title.strip()) <= 2 or len(title.split()) > _TITLE_WORDS:
            continue
        return bool(_LIMITS_TABLE.search(title))
    return False


_TICK = re.compile(r"[-\u2212\u2013+]?\d+(?:[.,]\d+)?")
_AXIS_TITLE = re.compile(r"[A-Za-z].*[\[(]\s*[A-Za-zµμΩ°/%]{1,6}\s*[\])]\s*$")
_CHART_ROWS = 3
"""Rows of axis ticks and axis titles a page of graphs has at least, each."""


_NAMES_PARTS = re.compile(
    r"(?:part|device|type|order(?:ing)?|model|product)(?:\s*(?:number|no\.?|code|#))?\s*:?$",
    re.IGNORECASE,
)
"""The first cell of a row naming parts: `Part Number`, `Device`, `Ordering code`."""
_PARTS_LOOKBACK = 8
"""Rows above a table's header that a row naming its parts may stand in."""


def parts_above(page: Grid, header: Row) -> Row | None:
    """A row naming the parts a table's columns are for, above its header.

    `Part Number | LM7912C | LM7915C | Units` over `Symbol | Parameter | Min | Typ | Max`:
    each part's `Min / Typ / Max` stand under its name. Another header ends the search;
    the row's first cell says it names parts (`Part Number`, `Device`), a later one names
    a part, and it holds no values.
    """
    if id(header) not in page.parts:
        page.parts[id(header)] = _parts_above(page, header)
    return page.parts[id(header)]


def _parts_above(page: Grid, header: Row) -> Row | None:
    index = position(page, header)
    if index is None:
        return None
    for back in range(index - 1, max(-1, index - _PARTS_LOOKBACK), -1):
        row = page.rows[back]
        parts = [c for c in row.cells[1:] if PART_NUMBER.match(c.text.strip())]
        named = _NAMES_PARTS.match(row.cells[0].text.strip()) is not None
        if named and parts and not any(read_values(c.text) for c in row.cells):
            return row
        if _is_header(row):
            return None
    return None


def part_over(parts: Row, cell: TextBox) -> str | None:
    """The part whose name stands nearest above `cell` (centre to centre)."""
    named = [c for c in parts.cells if PART_NUMBER.match(c.text.strip())]
    if not named:
        return None
    centre = (cell.x0 + cell.x1) / 2
    nearest = min(named, key=lambda c: abs((c.x0 + c.x1) / 2 - centre))
    return nearest.text.strip()


def beside_ticks(row: Row, cell: int) -> bool:
    """Whether a cell stands alone beside axis ticks (`1.5 | Iout=1mA`): a graph's legend."""
    others = [c.text.strip() for i, c in enumerate(row.cells) if i != cell]
    return bool(others) and all(_TICK.fullmatch(t) for t in others)


def is_chart_page(rows: list[Row]) -> bool:
    """Whether a page holds graphs: rows of bare tick numbers and titles ending in a unit.

    A typical-characteristics page reads as rows like `0 | 10 | 20 | 30` and `VDS,
    Drain-Source Voltage [V]`; a table has units and labels in its rows of numbers.
    """
    ticks = titles = 0
    for row in rows:
        texts = [c.text.strip() for c in row.cells]
        if all(_TICK.fullmatch(t) for t in texts):
            ticks += 1
        elif any(_AXIS_TITLE.match(t) for t in texts):
            titles += 1
        if ticks >= _CHART_ROWS and titles >= _CHART_ROWS:
            return True
    return False


_DIAGRAM_ROWS, _DIAGRAM_CELLS = 25, 60
"""A block diagram fills a page: at least this many rows and cells."""
_DIAGRAM_SHORT, _DIAGRAM_SPREAD = 0.85, 0.5
"""Shares of a diagram's cells of three words or fewer, and of its rows of several cells."""


def is_diagram_page(rows: list[Row]) -> bool:
    """Whether a page is a block diagram: a field of short labels, and no table header.

    A block diagram reads as many rows of scattered two-word boxes (`SRAM 1.25 KB | APB2 |
    APB1 | as AF`): the sizes it shows are of blocks inside the part, not the part's own
    specification. A table has its header (`Min`, `Unit`), a feature list its sentences.
    """
    cells = [c for row in rows for c in row.cells]
    if len(rows) < _DIAGRAM_ROWS or len(cells) < _DIAGRAM_CELLS:
        return False
    short = sum(1 for c in cells if len(c.text.split()) <= 3)
    spread = sum(1 for row in rows if len(row.cells) >= 2)
    if short < _DIAGRAM_SHORT * len(cells) or spread < _DIAGRAM_SPREAD * len(rows):
        return False
    return not any(_is_header(row) for row in rows)


_UNIT_ALONE = re.compile(r"[\[(]\s*[A-Za-zµμΩ°/%]{1,6}\s*[\])]")
_BRACKETED_UNIT = re.compile(r"[\[(]\s*[A-Za-zµμΩ°/%]{1,6}\s*[\])]\s*")


def _comma_title(text: str) -> bool:
    """`Current, Power (mA)`: words with a comma, no digit, then a bracketed unit.

    The unit's bracket is the last one opened; the words before it are checked whole
    (one pattern of two runs of non-digits around a comma cost the square of a long
    cell of commas).
    """
    start = max(text.rfind("["), text.rfind("("))
    if start < 0 or _BRACKETED_UNIT.fullmatch(text, start) is None:
        return False
    head = text[:start]
    return "," in head and not any(ch.isdigit() for ch in head)


def is_axis_title(row: Row) -> bool:
    """Whether a row is a graph's axis title, which no table row writes like it.

    A unit in brackets stands alone (`VDS | (V)`) or closes a `symbol, name [unit]` cell
    (`Collector Current, IC [A]`).
    """
    return any(
        _UNIT_ALONE.fullmatch(c.text.strip()) or _comma_title(c.text.strip()) for c in row.cells
    )


def column_of(header: Row, cell: TextBox) -> TextBox | None:
    """The header cell above `cell`: the most overlapping one, else the nearest centre.

    Columns side by side are found by bisection (`Row.columns`), overlapping ones by
    looking at each: looked for in every header cell, each cell of a row of a table
    hundreds of columns wide cost a pass over them all.
    """
    centre = (cell.x0 + cell.x1) / 2
    overlapping: Sequence[int] = range(len(header.cells))
    near: Sequence[int] = overlapping
    if header.columns is not None:
        lefts, rights, centres = header.columns
        first = bisect.bisect_right(rights, cell.x0)
        overlapping = range(first, bisect.bisect_left(lefts, cell.x1))
        right = bisect.bisect_left(centres, centre)
        near = [i for i in (right - 1, right) if 0 <= i < len(centres)]
    best: tuple[float, TextBox] | None = None
    for index in overlapping:
        head = header.cells[index]
        overlap = min(head.x1, cell.x1) - max(head.x0, cell.x0)
        if best is None or overlap > best[0]:
            best = (overlap, head)
    if best is not None and best[0] > 0:
        return best[1]
    if not near:
        return None

    def away(index: int) -> float:
        head = header.cells[index]
        return abs((head.x0 + head.x1) / 2 - centre)

    at = min(near, key=lambda i: (away(i), i))
    while at > 0 and away(at - 1) == away(at):
        at -= 1  # the first of equally near ones (one centre, or a rounding apart)
    nearest = header.cells[at]
    width = max(nearest.x1 - nearest.x0, cell.x1 - cell.x0)
    return nearest if away(at) <= width else None


def bracket_unit(text: str) -> Unit | None:
    for match in _BRACKET_UNIT.finditer(text):
        unit = lookup_unit(match.group(1))
        if unit is not None:
            return unit
    return None


def row_unit(row: Row, header: Row | None, label: int) -> Unit | None:
    """The unit for bare numbers in a row: its unit column, last cell, or label's `(V)`."""
    if header is not None:
        for cell in row.cells[label + 1 :]:
            column = column_of(header, cell)
            if column is not None and role(column.text) == "unit":
                return lookup_unit(strip_footnotes(cell.text))
    if len(row.cells) > label + 1:
        last = lookup_unit(strip_footnotes(row.cells[-1].text))
        if last is not None and not read_values(row.cells[-1].text):
            return last
    return bracket_unit(row.cells[label].text)


def is_dash(text: str) -> bool:
    return bool(_DASHES.match(strip_footnotes(text)))


def running_key(row: Row) -> str:
    return re.sub(r"\d+", "#", " ".join(c.text for c in row.cells)).casefold()


def running_rows(document: ParsedDocument) -> set[str]:
    """Rows repeated on several pages (headers, footers, page numbers aside): not content."""
    if len(document.pages) < 3:
        return set()
    seen: dict[str, set[int]] = {}
    for page in document.pages:
        if not page.boxes:
            continue
        candidates = rows(page.boxes)
        for row in candidates[:3] + candidates[-3:]:
            seen.setdefault(running_key(row), set()).add(page.number)
    return {key for key, pages in seen.items() if len(pages) >= 2}
