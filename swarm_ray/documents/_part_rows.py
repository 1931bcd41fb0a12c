"""The file's own part's row of a table of parts, linked by its column headers.

A datasheet for a series prints one row per part (`1N4742A | 12 | 21 | 9 | 700 | ...`)
under column headers that name each field once (`Nominal Zener Voltage VZ @ IZT V`,
`Test Current IZT mA`). No row label names a field there, so the label readers link
nothing; yet the file is about one of the parts, its row is its row, and each header says
what its column is. A cell of that row whose header names a declared field (its name or a
derived form, `_symbols.label_forms`) and whose unit the header or the row gives is linked
at tier 1, as a label cell with more words is. A cell under such a header with no unit at
all (a symbol font's `Ω` lost from the text layer) is read in the declared unit.

The statistic is the header's last word where it is one (`Min`, `Nom`, `Max`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from swarm_ray.documents._choice import file_part
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._grid import PART_NUMBER, STAT_ROLES, role
from swarm_ray.documents._labels import LabelPattern, labels_regex
from swarm_ray.documents._links import Candidate
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._quantities import (
    DocumentQuantities,
    of_field,
    read_quantities,
    series_page,
)
from swarm_ray.documents._symbols import label_forms
from swarm_ray.documents._units import COUNT, TEXT

__all__ = ["PART_ROW_TIER", "own_row_links"]

PART_ROW_TIER = 1
"""The tier of a link from the file's own row of a table of parts."""


_LATER_COLUMN = 0.05
"""What each later column of the same row that a header names loses: the first is the
parameter, the others its corners (`ZZK @ IZK`)."""


def _statistic(header: str) -> Statistic | None:
    words = header.split()
    last = role(words[-1]) if words else None
    return STAT_ROLES.get(last) if last is not None else None


def _naming(names: LabelPattern) -> Callable[[str], bool]:
    return lambda text: names.search(text) is not None


def _sub_rows_page(text: str, source: str) -> bool:
    """Whether a page splits a parameter's row by part, the file's part among them.

    A limiting-values table often writes a parameter once (`VCEO collector-emitter
    voltage open base`) and its value once per part on the rows below (`BC546 - 65 V`,
    `BC547 - 45 V`): a line that starts with the file's own part and states a number.
    """
    for line in text.split("\n"):
        first, _, rest = line.strip().partition(" ")
        numbered = rest and PART_NUMBER.match(first) and any(c.isdigit() for c in rest)
        if numbered and file_part(source, [first]):
            return True
    return False


def _parent_line(lines: Sequence[str], index: int) -> str | None:
    """The line a part's sub-row hangs from: the first above it that is not a sub-row.

    It names the parameter and states no number (`VCEO collector-emitter voltage open
    base`); `None` where the line above is anything else.
    """
    for at in range(index - 1, max(-1, index - 12), -1):
        line = lines[at].strip() if 0 <= at < len(lines) else ""
        first = line.partition(" ")[0]
        if PART_NUMBER.match(first):
            continue  # another part's sub-row of the same parameter
        return line if line and not any(c.isdigit() for c in line) else None
    return None


def own_row_links(
    document: ParsedDocument,
    fields: Sequence[FieldSpec],
    source: str,
    quantities: DocumentQuantities | None = None,
) -> dict[str, list[Candidate]]:
    """Per field key, the links of the file's own row in its tables of parts.

    `quantities`: the document's reading, if already made (else its pages are read).
    """
    focus = set(document.focus_pages)
    pages = tuple(
        p
        for p in document.pages
        if p.boxes
        and (not focus or p.number in focus)
        and (series_page(p.text) or _sub_rows_page(p.text, source))
    )
    numeric = [s for s in fields if s.kind not in (TEXT, COUNT)]
    if not pages or not numeric:
        return {}
    quantities = (
        quantities.of_pages([p.number for p in pages])
        if quantities is not None
        else read_quantities(document.model_copy(update={"pages": pages}))
    )
    own = {
        q.label
        for q in quantities.quantities
        if q.row and PART_NUMBER.match(q.label.strip()) and file_part(source, [q.label.strip()])
    }
    if not own:
        return {}
    lines = {p.number: p.lines for p in quantities.pages}
    out: dict[str, list[Candidate]] = {}
    for spec in numeric:
        names = labels_regex(label_forms(spec))
        for q in of_field(quantities, spec, _naming(names)):
            if q.label not in own:
                continue
            if not (q.header and names.search(q.header)):
                parent = _parent_line(lines.get(q.page, ()), q.line)
                if parent is None or names.search(parent) is None:
                    continue
            assert q.unit is not None  # `of_field` reads one in light of the field
            mine = out.setdefault(spec.key, [])
            # A heading over two columns (`Maximum Zener Impedance` over `ZZT @ IZT` and
            # `ZZK @ IZK`) names the first for the parameter, the next for a corner.
            later = sum(1 for c in mine if (c.page, c.row) == (q.page, q.line))
            mine.append(
                Candidate(
                    key=spec.key, tier=PART_ROW_TIER, value=q.value, unit=q.unit.text,
                    statistic=q.statistic or _statistic(q.header), value_text=q.text,
                    page=q.page, row=q.line, quote=q.row[:240], entity=q.label.strip(),
                    named=q.header.casefold()[:80], bonus=-_LATER_COLUMN * later,
                )
            )  # fmt: skip
    return out
