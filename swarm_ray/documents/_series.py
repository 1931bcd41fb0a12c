"""Columns of a series table: which part each value of a row stands under.

A datasheet covering a series prints the parts' names over the value columns (`4001 |
4002 | ... | 4007` or `Symbols 5400 5401 ... 5406 | 5407 5408 Units`, a common prefix
such as `1N` or `UF` often on the line above) and states a rating per part below. The
text layer may run several names into one cell, so each name is placed by the share of
its cell its characters take. A value spanning several columns (`1.0` centred under
`5400` to `5404`, `1.7` under `5405` to `5408`) belongs to the names nearest to it: a
part's value is the row's value nearest to its name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from swarm_ray.documents._grid import Grid, role
from swarm_ray.documents._layout import Row, TextBox

__all__ = ["SeriesName", "parts_of", "series_names"]

_LOOKBACK = 20
"""Rows above a value row searched for the names of the series (a table's height)."""
_MIN_NAMES = 3
"""A row of fewer names is no series header (a table's two columns of anything)."""
_NAME = re.compile(r"(?=[^\s]*\d)[A-Za-z0-9\-/.]{2,16}")
_PREFIX = re.compile(r"[A-Za-z]{1,4}")


@dataclass(frozen=True)
class SeriesName:
    """A part's name over a column, and where the column's centre stands."""

    name: str
    x0: float
    x1: float

    @property
    def centre(self) -> float:
        return (self.x0 + self.x1) / 2


def _tokens(row: Row) -> list[tuple[str, float, float]]:
    """Each word of a row with its share of its cell's box."""
    out: list[tuple[str, float, float]] = []
    for cell in row.cells:
        width = (cell.x1 - cell.x0) / max(len(cell.text), 1)
        for word in re.finditer(r"\S+", cell.text):
            out.append((word.group(), cell.x0 + width * word.start(), cell.x0 + width * word.end()))
    return out


def _names(row: Row) -> list[SeriesName] | None:
    """The row's part names, if it is a row of names (and of column titles) only."""
    names: list[SeriesName] = []
    for text, x0, x1 in _tokens(row):
        if _NAME.fullmatch(text):
            names.append(SeriesName(text, x0, x1))
        elif role(text) is None:
            return None  # a row of labels and values, not of names
    return names if len({n.name for n in names}) >= _MIN_NAMES else None


def _prefixed(names: list[SeriesName], above: Row) -> list[SeriesName]:
    """`1N` printed over each of `5400 ... 5408`: the names are `1N5400 ... 1N5408`."""
    tokens = _tokens(above)
    if not tokens or not all(_PREFIX.fullmatch(t) for t, _, _ in tokens):
        return names
    out: list[SeriesName] = []
    for name in names:
        over = [t for t, x0, x1 in tokens if min(x1, name.x1) > max(x0, name.x0)]
        out.append(SeriesName(over[0] + name.name, name.x0, name.x1) if len(over) == 1 else name)
    return out


def series_names(page: Grid, index: int, cells: Sequence[TextBox]) -> list[SeriesName] | None:
    """The names of the series the value `cells` of row `index` stand under.

    The nearest row of names above, when every value stands within the names' width (a
    value may span several columns): a row of an ordering table (type, package, ordering
    code) stands beside the value columns, not over them.
    """
    for back in range(index - 1, max(-1, index - _LOOKBACK), -1):
        names = _names(page.rows[back])
        if names is None:
            continue
        left, right = min(n.x0 for n in names), max(n.x1 for n in names)
        if not all(left <= (c.x0 + c.x1) / 2 <= right for c in cells):
            return None
        for above in page.rows[max(0, back - 2) : back][::-1]:
            prefixed = _prefixed(names, above)
            if prefixed is not names:
                return prefixed  # the prefix line, perhaps over the table's column titles
        return names
    return None


def parts_of(names: Sequence[SeriesName], cells: Sequence[TextBox], part: str) -> list[str]:
    """The part each value cell stands for, given the part the file is about.

    The cell nearest to `part`'s column is that part's; every other cell stands for the
    other name nearest to it.
    """

    def centre(cell: TextBox) -> float:
        return (cell.x0 + cell.x1) / 2

    (own,) = [n for n in names if n.name == part][:1] or [names[0]]
    mine = min(range(len(cells)), key=lambda i: abs(centre(cells[i]) - own.centre))
    others = [n for n in names if n.name != part] or [own]
    out: list[str] = []
    for i, cell in enumerate(cells):
        at = centre(cell)
        out.append(part if i == mine else min(others, key=lambda n: abs(n.centre - at)).name)
    return out
