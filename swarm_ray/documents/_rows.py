"""Reading a label's values across a table's rows: right of it, under it, in its sub-rows.

The table reader (`_table`) finds a cell naming a field; `RowReader` reads where its values
stand in the grid (`_grid`): in the label's row under the columns' statistics and units
(`_right`), below the label as a spec box's value or a product table's column (`_below`),
in indented sub-rows of parts or conditions (`_sub_rows`), or in the row above when the
label is centred on its two rows (`_first_variant`). `_values` turns the values read
into candidate links (`_links`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from swarm_ray.documents._cells import (
    Hit,
    fits,
    lost_micro,
    prose,
)
from swarm_ray.documents._choice import file_part
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._grid import (
    PART_NUMBER,
    STAT_ROLES,
    Grid,
    bracket_unit,
    column_of,
    header_of,
    is_dash,
    part_over,
    parts_above,
    role,
    row_unit,
)
from swarm_ray.documents._labels import LabelPattern
from swarm_ray.documents._layout import Row, TextBox
from swarm_ray.documents._links import LATER_TERM, Candidate, changed
from swarm_ray.documents._series import parts_of, series_names
from swarm_ray.documents._units import COUNT, Unit, lookup_unit
from swarm_ray.documents._values import Value, read_values, strip_footnotes
from swarm_ray.documents._variants import names_variant

__all__ = ["BRACKETED_CONDITION", "RowReader"]

BRACKETED_CONDITION = re.compile(r"\((?=[^()]*(?:[=≤≥<>]|\bnote\b))[^()]*\)", re.IGNORECASE)
"""`(RS ≤ 10 k, VCM = 0)`, `(Note 7)`: a label's test conditions or note, not its value."""
_ROWS_BELOW = 30
"""Rows under a column's label read for values (a product table's rows)."""
_SYMBOL_OR_UNIT = re.compile(r"[A-Za-z][A-Za-z0-9()/,]{0,9}|[µμΩ°%][A-Za-z/]{0,4}")
"""A cell beside a label that is its symbol (`VF`, `IF(AV)`) or unit (`mV`, `°C`)."""


class RowReader:
    """The readers of a label's values in the rows of its table (mixed into `_Reader`)."""

    fields: Sequence[FieldSpec]
    regexes: list[LabelPattern]
    """What names each of `fields`, in their order."""
    source: str
    """The document's file name: a series table keeps the part the file is named after."""

    def _first_variant(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: Hit,
        tier: int,
        base: dict[str, object],
    ) -> list[Candidate]:
        """A label level with the second of its rows: the first stands above it.

        A table cell spanning two rows of conditions (`VO = 5 V to 18 V | 35` and
        `VO = 24 V | 40` beside `VI | Input Voltage | V`) has its label centred between
        them, so the text layer puts the label on the second row, or between the two. The
        row just under the table's header, with nothing in the label's columns, is then
        the label's first variant, read as if it stood on the label's row; as the earlier
        row it wins a tie with the second. A row above that follows another label is that
        label's continuation, and a unit of another kind there is another parameter's.
        """
        if index < 2:
            return []
        row, above = page.rows[index], page.rows[index - 1]
        header = header_of(page, index)
        wrapped = self._wrapped_label(spec, row, above)
        rest: tuple[TextBox, ...]
        if wrapped is not None:
            cut, rest = wrapped
        else:
            label = row.cells[hit.cell]
            if any(cell.x0 < label.x1 for cell in above.cells):
                return []  # the row above has a label of its own
            if not re.search(r"[A-Za-z]{2}", above.cells[0].text) or any(
                not v.condition for v in read_values(above.cells[0].text)
            ):
                return []  # a variant row leads with its condition (`VO = 5 V to 18 V`)
            if header is None or page.rows[index - 2] is not header:
                return []
            cut, rest = hit.cell + 1, above.cells
        own = row_unit(row, header, hit.cell)
        theirs = next(
            (
                lookup_unit(strip_footnotes(cell.text))
                for cell in above.cells
                if header is not None
                and (column := column_of(header, cell)) is not None
                and role(column.text) == "unit"
            ),
            None,
        )
        if own is not None and theirs is not None and own.kind != theirs.kind:
            return []
        if not any(read_values(strip_footnotes(c.text)) for c in rest):
            return []
        merged = Row(top=row.top, bottom=row.bottom, cells=(*row.cells[:cut], *rest))
        quote = " | ".join(c.text for c in (*above.cells, *row.cells))[:240]
        return self._right(
            spec, page, index, hit, tier, {**base, "row": index - 1, "quote": quote},
            row=merged, unit=own or theirs,
        )  # fmt: skip

    def _wrapped_label(
        self, spec: FieldSpec, row: Row, above: Row
    ) -> tuple[int, tuple[TextBox, ...]] | None:
        """`Collector to Emitter` over `Saturation Voltage`: a label wrapped onto two rows.

        Each of its lines stands level with one row of conditions and values, so the row
        above holds the first: returns how many of `row`'s cells make up its label (with
        the symbol) and the cells of `above` after the label's first line.
        """
        regex = self.regexes[self.fields.index(spec)]
        for i, second in enumerate(row.cells):
            if read_values(second.text):
                break
            for j, first in enumerate(above.cells):
                if abs(first.x0 - second.x0) > 3 or read_values(first.text):
                    continue
                if regex.search(first.text) or regex.search(second.text):
                    continue  # a whole label on either line is two rows, not one wrapped
                joined = f"{first.text} {second.text}"
                if any(m.start() < len(first.text) < m.end() for m in regex.finditer(joined)):
                    return i + 1, above.cells[j + 1 :]
        return None

    def _right(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: Hit,
        tier: int,
        base: dict[str, object],
        *,
        row: Row | None = None,
        unit: Unit | None = None,
    ) -> list[Candidate]:
        """Values right of the label in its row (`row`, when read as if it stood there)."""
        header = header_of(page, index)
        if row is None:
            row = page.rows[index]
            unit = row_unit(row, header, hit.cell)
        out: list[Candidate] = []
        cells: list[TextBox] = []
        skipped_text = 0
        named_parts = parts_above(page, header) if header is not None else None
        for cell in row.cells[hit.cell + 1 :]:
            column = column_of(header, cell) if header is not None else None
            held = role(column.text) if column is not None else None
            if held in ("conditions", "symbol", "label", "unit"):
                continue
            if is_dash(cell.text):
                continue
            values = [v for v in read_values(strip_footnotes(cell.text)) if not v.condition]
            if not values:
                if lookup_unit(strip_footnotes(cell.text)) is not None:
                    continue
                if out or skipped_text >= 1:
                    break  # the next label of a row holding two label-value pairs
                skipped_text += 1
                continue
            entity = None
            if column is not None and held is None and PART_NUMBER.match(column.text.strip()):
                entity = column.text.strip()
            elif named_parts is not None:
                entity = part_over(named_parts, cell)
            column_unit = bracket_unit(column.text) if column is not None else None
            statistic = STAT_ROLES.get(held or "")
            got = self._values(
                spec, values, column_unit or unit, statistic, tier, base,
                first_only=prose(cell.text), entity=entity,
            )  # fmt: skip
            out.extend(got)
            cells.extend(cell for _ in got)
            if not got and out:
                break
        distinct = list({id(c): c for c in cells}.values())
        if len(distinct) >= 2 and all(c.entity is None for c in out):
            names = series_names(page, index, distinct)
            part = file_part(self.source, [n.name for n in names]) if names else None
            if names and part is not None:
                # A series table: each value is its column's part; the file names one.
                own = parts_of(names, distinct, part)
                parts = {id(c): p for c, p in zip(distinct, own, strict=True)}
                out = [changed(c, entity=parts[id(x)]) for c, x in zip(out, cells, strict=True)]
        return out

    def _below(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: Hit,
        tier: int,
        base: dict[str, object],
    ) -> list[Candidate]:
        """The label heads a column: values below it, one row per product or one below.

        A table whose rows are products (`Part number | Data rate | Reach`) gives each
        row's value its part number; a label with its value on the next line (a spec
        box) gives that value, as weaker evidence.
        """
        row = page.rows[index]
        label = row.cells[hit.cell]
        if any(read_values(BRACKETED_CONDITION.sub(" ", c.text)) for c in row.cells):
            return []  # a row of values: not a header
        if sub := self._sub_rows(spec, page, index, hit, tier, base):
            return sub
        if len(label.text.split()) > 6:
            return []  # a phrase: not a header
        unit = bracket_unit(label.text)
        out: list[Candidate] = []
        variants = 0
        for below in page.rows[index + 1 : index + 1 + _ROWS_BELOW]:
            cell = next((c for c in below.cells if min(c.x1, label.x1) > max(c.x0, label.x0)), None)
            first = below.cells[0]
            if cell is None or (len(below.cells) == 1 and first.size > 1.2 * label.size):
                break
            part = first.text.strip() if PART_NUMBER.match(first.text.strip()) else None
            if cell is first or len(row.cells) < 2:
                part = None  # a product table's header names more than one column
            if part is None and out and not variants:
                break  # past the one value under a label that no product table has
            values = [v for v in read_values(strip_footnotes(cell.text)) if not v.condition]
            condition = ""
            if (
                not values
                and part is None
                and len(below.cells) > 1
                and (not out or names_variant(cell, label))
            ):
                # `Supply Voltage` over `AC | 2.0V to 6.0V`: a sub-row names a variant under
                # the label, its value stands right of the label. The first variant comes
                # first; one whose condition names this part's value of another field
                # (`(VO = -12V and -15V) | -35V`) is chosen later (`_variants`).
                condition = strip_footnotes(cell.text).strip()
                cell = next((c for c in below.cells if c.x0 >= label.x1), cell)
                values = [v for v in read_values(strip_footnotes(cell.text)) if not v.condition]
            elif variants:
                break  # the label's variants end
            if part is None:
                # One value under a label is a spec box's (`Weight` over `310 g`) only when it
                # says its unit: bare numbers under `VDS (V)` are a chart's axis ticks.
                values = [v for v in values if v.unit is not None]
            quote = f"{base['quote']} | " + " | ".join(c.text for c in below.cells)
            got = self._values(
                spec, values, unit, None, tier + (0 if part else 1),
                {**base, "quote": quote[:240]} if condition else base,
                first_only=prose(cell.text), entity=part,
            )  # fmt: skip
            if not got:
                break
            if condition:
                later = -LATER_TERM * variants
                got = [changed(c, condition=condition, bonus=c.bonus + later) for c in got]
                variants += 1
            out.extend(got)
            if part is None and not condition:
                break
        return out

    def _sub_rows(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: Hit,
        tier: int,
        base: dict[str, object],
    ) -> list[Candidate]:
        """A label over indented sub-rows, each its parts' or condition's `Min / Typ / Max`.

        `Input Offset Voltage (RS <= 10 k)` over `TL081C, TL082C | - | 5.0 | 15` and
        `TL084C | - | 5.0 | 15`: each sub-row is read as if it stood on the label's row,
        under the table's statistics. A sub-row naming parts gives its values those parts
        (the file's own where it is among them); else its first cell is the variant's
        condition, and the first variant comes first (`_variants` may choose another).
        """
        header = header_of(page, index)
        stats = header is not None and any(role(c.text) in STAT_ROLES for c in header.cells)
        row, label = page.rows[index], page.rows[index].cells[hit.cell]
        if not stats and any(not _SYMBOL_OR_UNIT.fullmatch(c.text.strip()) for c in row.cells[1:]):
            return []  # `Output current | Internally limited`: the label's row says its value
        unit = row_unit(row, header, hit.cell)
        out: list[Candidate] = []
        for k, below in enumerate(page.rows[index + 1 : index + 1 + _ROWS_BELOW]):
            first = below.cells[0]
            parts = [p.strip() for p in first.text.split(",") if PART_NUMBER.match(p.strip())]
            if not names_variant(first, label):
                break
            if not parts and (not stats or first.x1 > label.x1):
                break  # sub-rows of conditions only under a table's statistics
            rest = tuple(c for c in below.cells[1:] if c.x0 >= max(label.x1, first.x1))
            if not rest:
                break
            merged = Row(top=row.top, bottom=row.bottom, cells=(*row.cells[: hit.cell + 1], *rest))
            quote = " | ".join(c.text for c in (*row.cells, *below.cells))[:240]
            got = self._right(
                spec, page, index, hit, tier, {**base, "row": index + 1 + k, "quote": quote},
                row=merged, unit=unit,
            )  # fmt: skip
            if not got:
                break
            entity = (file_part(self.source, parts) or parts[0]) if parts else None
            condition = "" if parts else strip_footnotes(first.text).strip()
            later = -LATER_TERM * k
            out.extend(
                changed(c, entity=c.entity or entity, condition=condition, bonus=c.bonus + later)
                for c in got
            )
        return out

    def _values(
        self,
        spec: FieldSpec,
        values: Sequence[Value],
        unit: Unit | None,
        statistic: Statistic | None,
        tier: int,
        base: dict[str, object],
        *,
        first_only: bool,
        entity: str | None = None,
    ) -> list[Candidate]:
        out: list[Candidate] = []
        plain = [v for v in values if not v.adjective and fits(spec, v.unit or unit, v)]
        stated: set[Statistic | None] = set()
        for value in values:
            if value.condition or (value.adjective and plain):
                continue
            own = lost_micro(spec, value.unit or unit)
            if not fits(spec, own, value):
                continue
            if first_only and (statistic or value.statistic) in stated:
                continue  # prose: the first value of each statistic it states
            stated.add(statistic or value.statistic)
            out.append(
                Candidate(
                    value=value.value,
                    unit="" if own is None or spec.kind == COUNT else own.text,
                    statistic=statistic or value.statistic,
                    value_text=value.text
                    if value.unit or own is None
                    else f"{value.text} {own.text}",
                    tier=tier,
                    entity=entity,
                    **base,  # type: ignore[arg-type]
                )
            )
            if first_only and (statistic or value.statistic) is None:
                break  # a plain value ends the phrase's; `less than 5 µA, 3 µA typical` not
        return out
