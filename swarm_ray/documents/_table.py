"""Table-aware extraction of fields declared by name, unit and labels.

Datasheets state most values in tables: a row label, perhaps a symbol and test
conditions, then `Min / Typ / Max` columns and a unit column, or a value with its unit.
This extractor reads a page as rows of cells under their headers (`_grid`) and, for
every cell naming a field (`_labels`), takes values from the same row:

- a value cell is placed under its column header by position, so `Min`, `Typ` and `Max`
  columns give the statistic, a `Unit` column gives bare numbers their unit, and columns
  of conditions, symbols or descriptions are skipped; columns headed by part numbers
  give each value its own entity (several products in one table);
- a range (`-40 to +85 °C`, `3.6-5 V`) gives a minimum and a maximum, `up to` a maximum;
- a label with its value in one cell (`Operating temperature: -40 to 85 °C`) or in a
  phrase (`core running at 800 MHz`, `50 µA deep sleep current`) counts too, as weaker
  evidence.

Only values of the field's kind count (its unit's dimensionality), so `45 mA @ 5 V` gives a
current field 45 mA and a voltage field nothing (a value after `@` is a condition). Per
document and field the strongest evidence wins: a cell naming exactly the field beats a
cell with more words (`Back focal length` for `focal length`), which beats a phrase. The
statistics the field declares are kept (`min,max`: the range's ends).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from swarm_ray.documents._choice import Scored, choose, file_part
from swarm_ray.documents._counts import count_mentions, counted_noun, unit_counts
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import ExtractionMethod, Fact, Statistic
from swarm_ray.documents._grid import (
    PART_NUMBER,
    STAT_ROLES,
    Grid,
    beside_ticks,
    bracket_unit,
    column_of,
    header_of,
    in_example_table,
    in_limits_table,
    is_axis_title,
    is_chart_page,
    is_dash,
    page_rows,
    part_over,
    parts_above,
    role,
    row_unit,
    running_key,
    running_rows,
)
from swarm_ray.documents._labels import extra_words, label_regex, labels_regex
from swarm_ray.documents._layout import Row, TextBox
from swarm_ray.documents._parse import PageText, ParsedDocument
from swarm_ray.documents._series import parts_of, series_names
from swarm_ray.documents._symbols import (
    head_word,
    implied_statistics,
    label_forms,
    limit_forms,
    partial_words,
)
from swarm_ray.documents._terms import shaped_value, term_mentions, term_shape
from swarm_ray.documents._units import COUNT, TEXT, Unit, convert, lookup_unit, plausible
from swarm_ray.documents._values import Value, read_values, strip_footnotes

__all__ = ["extract_table_facts", "names_a_field"]

_INLINE_LEAD = re.compile(
    r"^\s*(?:\([^()]{0,16}\))?\s*(?:[:=]|\bis\b|\bof\b|\bat\b)?\s*"
    r"(?:up\s+to|max\.?|min\.?|typ\.?|approx\.?|~|<|>|≤|≥)?\s*",
    re.I,
)
_SENTENCE_END = re.compile(r"[.;!?](?:\s|$)")
_ASSIGNMENT = re.compile(r"[A-Za-z)]\s*(?:=|≤|≥|<|>)\s*[-+\u2212]?\d")
"""`VGS = 10 V`: a symbol given a value, as test conditions list them."""
_PHRASE_AFTER = 60
"""Characters after a label in a phrase where its value may stand."""
_PHRASE_BEFORE = 40
"""Characters between a value and the label after it (`50 µA deep sleep current`,
`2KB volatile data storage area SRAM`, `72 MHz maximum frequency`)."""
_WORDS_BEFORE = 5
"""Words between such a value and its label, at most: a feature line names the value's
use between the two (`62KB program memory area CodeFlash`)."""
_ROWS_BELOW = 30
"""Rows under a column's label read for values (a product table's rows)."""
_CONFIDENCE = {0: 0.9, 1: 0.85, 2: 0.7, 3: 0.75, 4: 0.7, 5: 0.66, 6: 0.64, 7: 0.62, 8: 0.62, 9: 0.6}
"""Per tier: the exact label cell, a label cell with more words, a phrase; then the
first two again in a table of limits (absolute maximum ratings); then the same five for
a label of qualifiers only. All at or over the LLM fallback's threshold: a link the rules
chose among every candidate is not handed to a model to replace (the fallback asks for
what has no candidate, `unplaced_fields`)."""
_SCORE = {0: 1.0, 1: 0.9, 2: 0.6, 3: 0.8, 4: 0.72, 5: 0.5, 6: 0.45, 7: 0.35, 8: 0.4, 9: 0.36}
"""Per tier, what the choice weighs: a limit in its own table still beats a phrase; a
label that says only part of the name (tiers 5 to 9) comes after every full one."""
_LIMIT_TIERS = frozenset({3, 4, 8, 9})
"""Tiers of links found in a table of limits (absolute maximum ratings)."""
_LIMIT_MIN_COST = 0.7
"""What the minimum of a limits range loses: the part survives it, nobody designs for it."""
_PER_MENTION, _COUNTED = 0.03, 10
"""Score a term gains per mention in the document, counting at most `_COUNTED`."""
_LATER_TERM = 1e-4
"""What a term loses per term found before it: of `TO-220 & TO-263` (a part's package
and its variant's) the first is the one, not both."""
_CHART_COST = 0.4
"""What a link on a page of graphs loses: a table or feature line elsewhere is the spec."""
_EXAMPLE_COST = 0.7
"""What a link in a design example loses: one circuit's values, below even a weak link to
the part's own (`Vin 8V to 95V` in the example, `4.5V to 100V Input Range` the part's)."""
_LEADERS = re.compile(r"(?:\s?\.){3,}")
"""Dot leaders between a label and its value (`Slew Rate . . . 13 V/µs`)."""
_LABEL_WORDS = 6
"""A cell of more words is a sentence that happens to end in a label, not a row's label."""
_OTHER_PARAMETER = re.compile(
    r"\b(?:threshold|hysteresis|ripple|regulation|coefficient|drift|noise|rejection|"
    r"protection|lockout|UVLO|OVP|OCP|limit|leakage|dropout|transient|overshoot|accuracy|"
    r"tolerance|derating|differential|swing|step|delta|change|sense|detect(?:ion)?|rms)\b",
    re.IGNORECASE,
)
"""Words beside a label that make it another parameter of the same quantity: `VIN UVLO
threshold` is no input voltage, `Output Voltage Swing` no output voltage."""
_RAILS = frozenset({"voltage", "current"})
"""Kinds whose operating range does not start below zero (temperatures do)."""
_PARTIAL = 5
"""Added to the tier of a link made by part of the name (`Input Range` for `input voltage`)."""
_UNIT_FIT = 0.15
"""What such a weak link gains when its value is written in the declared unit: a user
declares the unit the documents state the field in (`32M-BIT` for a density in `Mbit`,
not a sector's `4KB`)."""


@dataclass(frozen=True)
class _Hit:
    """A cell of a row that names a field."""

    cell: int
    span: tuple[int, int]


@dataclass(frozen=True)
class _Candidate:
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
    """Added to the tier's score: how often the document names a term (`_terms`)."""
    label: str = ""
    """The label text that named the field, as matched (case folded)."""


def _fits(field: FieldSpec, unit: Unit | None, value: Value) -> bool:
    """Whether a value can be the field's: its kind, and a plausible size in its unit."""
    if field.kind == COUNT:
        return (unit is None or unit.kind == COUNT) and float(value.value).is_integer()
    if unit is None or unit.kind != field.kind:
        return False
    try:
        return plausible(convert(value.value, unit.text, field.unit)) if field.unit else True
    except ValueError:
        return False


_UNIT_TOKEN = re.compile(r"(?<![\w/])[A-Za-zµμΩ°%][\w/µμΩ°%]{0,5}(?![\w/])")


def _unit_apart(spec: FieldSpec, line: str, near: str) -> bool:
    """A label's line with bare numbers, and the field's unit alone on the line below.

    The text layer reads a table's unit column apart from its numbers (`Input offset
    voltage ... 0.5 4` over `VIO ... mV`): the page still states the field.
    """
    if not spec.unit or not re.search(r"\d", line):
        return False
    declared = lookup_unit(spec.unit)
    if declared is None:
        return False
    for token in _UNIT_TOKEN.findall(near[len(line) :]):
        unit = lookup_unit(token)
        if unit is not None and unit.kind == declared.kind:
            return True
    return False


def _prose(text: str) -> bool:
    """A cell of running text, not of values: only its first value of a kind counts.

    `32 MB flash, 100 MHz 8-bit DDR mode` states one memory size; `8-bit` is a width.
    """
    words = [w for w in re.findall(r"[A-Za-z]{3,}", text) if lookup_unit(w) is None]
    return len(words) > 2


class _Reader:
    """Candidates of one document for its label fields."""

    def __init__(self, fields: Sequence[FieldSpec], source: str = "") -> None:
        self.fields = fields
        self.source = source
        """The document's file name, which may name its part among a series'."""
        forms = [label_forms(f) for f in fields]
        self.regexes = [labels_regex(f) for f in forms]
        self.all_labels = labels_regex(tuple(label for f in forms for label in f))
        self.partials = [
            (
                labels_regex(words) if (words := partial_words(f)) else None,
                label_regex(head_word(f) or "-"),
                labels_regex(limits) if (limits := limit_forms(f)) else None,
            )
            for f in fields
        ]

    def names_a_field(self, text: str) -> bool:
        """Whether a page's text names any of the fields (else it has nothing to read)."""
        flat = text.replace("\n", " ")
        return self.all_labels.search(flat) is not None or any(
            regex is not None and regex.search(flat)
            for partial, _, limit in self.partials
            for regex in (partial, limit)
        )

    def states_a_field(self, text: str) -> bool:
        """Whether a page may state a field, so is worth laying out.

        A line names a field next to a value of its kind; for a text field, a short line
        or a `Label:` starts with its name. Prose that merely uses a word (`Mount the unit
        on a rigid bracket`) is not laid out.
        """
        checked: set[int] = set()
        for found in self.all_labels.finditer(text):
            start = text.rfind("\n", 0, found.start()) + 1
            if start in checked:
                continue
            checked.add(start)
            end = text.find("\n", found.end())
            line = text[start : end if end != -1 else len(text)]
            after = text.find("\n", end + 1) if end != -1 else -1
            near = text[start : after if after != -1 else len(text)]
            for spec, regex in zip(self.fields, self.regexes, strict=True):
                match = regex.search(line)
                if match is None:
                    continue
                if spec.kind == TEXT:
                    labelled = ":" in line[match.end() : match.end() + 3] or len(line) <= 60
                    if match.start() <= 2 and labelled:
                        return True
                else:
                    fits = any(_fits(spec, v.unit, v) for v in read_values(near))
                    if fits or _unit_apart(spec, line, near):
                        return True
        return False

    def page(self, page: PageText, running: set[str]) -> list[_Candidate]:
        if not self.names_a_field(page.text):
            return []  # no field named on this page: nothing to read (big manuals)
        info = Grid(page.number, page_rows(page))
        found: list[_Candidate] = []
        for index, row in enumerate(info.rows):
            if running_key(row) in running:
                continue
            header = header_of(info, index)
            for spec, regex in zip(self.fields, self.regexes, strict=True):
                for cell_index, cell in enumerate(row.cells):
                    column = column_of(header, cell) if header is not None else None
                    if column is not None and role(column.text) == "conditions":
                        continue  # `VDD = 3.3 V` there is another row's test condition
                    named = False
                    for match in regex.finditer(cell.text):
                        named = True
                        if self._longer_label_elsewhere(spec, cell.text, match.span()):
                            continue
                        hit = _Hit(cell_index, match.span())
                        # A row saying nothing but its label may repeat an earlier one.
                        label = match.group().casefold() if _bare(row, hit) else ""
                        later = -_LATER_TERM if _repeated_label(info, index, hit) else 0.0
                        found.extend(
                            _with(c, label=label, bonus=c.bonus + later)
                            for c in self._read(spec, info, index, hit)
                        )
                    if named or spec.kind == TEXT:
                        continue
                    partial, head, limit = self.partials[self.fields.index(spec)]
                    weak = [] if limit is None else list(limit.finditer(cell.text))
                    if not weak and partial is not None and not head.search(cell.text):
                        weak = list(partial.finditer(cell.text))
                    for match in weak:
                        hit = _Hit(cell_index, match.span())
                        found.extend(
                            _with(c, tier=c.tier + _PARTIAL)
                            for c in self._read(spec, info, index, hit)
                        )
        found = _repeats_last(found)
        if found and is_chart_page(info.rows):
            # Axis titles (`VDS, Drain-Source Voltage [V]`) and annotations (`VCE = 20V`) of
            # typical-characteristics graphs name fields, but state no specification.
            found = [_with(c, bonus=c.bonus - _CHART_COST) for c in found]
        examples = {c.row for c in found if in_example_table(info, c.row)}
        found = [_with(c, bonus=c.bonus - _EXAMPLE_COST) if c.row in examples else c for c in found]
        axes = {i for i, row in enumerate(info.rows) if is_axis_title(row)}
        return [_with(c, bonus=c.bonus - _CHART_COST) if c.row in axes else c for c in found]

    def _longer_label_elsewhere(self, spec: FieldSpec, text: str, span: tuple[int, int]) -> bool:
        """Whether another field's label covers this match and more (`focal length`)."""
        for other, regex in zip(self.fields, self.regexes, strict=True):
            if other is spec:
                continue
            for match in regex.finditer(text):
                if (
                    match.start() <= span[0]
                    and span[1] <= match.end()
                    and match.end() - match.start() > span[1] - span[0]
                ):
                    return True
        return False

    def _read(self, spec: FieldSpec, page: Grid, index: int, hit: _Hit) -> list[_Candidate]:
        row = page.rows[index]
        cell = row.cells[hit.cell]
        text = _LEADERS.sub(lambda m: " " * len(m.group()), strip_footnotes(cell.text))
        start, end = _footnote_free_span(cell.text, text, hit.span)
        after = text[end:]
        if text[:start].count("(") > text[:start].count(")") and re.match(r"\s*=", after):
            return []  # `(VDS = 10 V, ID = 1 mA)`: a bracketed test condition
        if _conditional(spec, row, hit, text[:start], after):
            return []
        lead_end = m.end() if (m := _INLINE_LEAD.match(after)) else 0
        inline_values = read_values(after)
        before_values = [v for v in read_values(text[:start]) if not v.condition]
        quote = " | ".join(c.text for c in row.cells)[:240]
        base = {"key": spec.key, "page": page.number, "row": index, "quote": quote}
        if spec.kind == TEXT:
            return self._text(spec, page, index, hit, after, lead_end, base)
        if _listed(after, inline_values):
            return []  # `Output Voltages: 5, 6, 8, ..., 24 V`: the variants, not one value
        stated_inline = (
            bool(inline_values)
            and not before_values
            and inline_values[0].start <= lead_end
            and (":" in after[:lead_end] or "=" in after[:lead_end] or len(text) < 48)
        )
        if not inline_values and not before_values:
            if wrapped := self._wrapped(spec, page, index, text, (start, end), base):
                return wrapped
            if len(text.split()) > _LABEL_WORDS:
                return []  # `... across the entire IOUT`: a sentence, not a row's label
            extra = extra_words(text, (start, end))
            if _OTHER_PARAMETER.search(" ".join(extra)):
                return []  # `VIN UVLO threshold`: another parameter of the same quantity
            tier = 0 if not extra else 1
            if in_limits_table(page, index):
                tier += 3  # a limit the part survives gives way to what it works in
            variant = self._first_variant(spec, page, index, hit, tier, base)
            found = self._right(spec, page, index, hit, tier, base) or self._below(
                spec, page, index, hit, tier, base
            )
            if variant:  # the label's own row is its second variant: the first wins
                found = [*variant, *(_with(c, bonus=c.bonus - _LATER_TERM) for c in found)]
            limit = _label_statistic(text)
            return [
                c if c.statistic is not None or limit is None else _with(c, statistic=limit)
                for c in found
            ]
        if stated_inline:
            tier = 0 if not extra_words(text[: end + lead_end], (start, end)) else 1
            if len(_ASSIGNMENT.findall(text)) >= 2:
                tier = 2  # `VCE = 400 V, IC = 40 A`: a test condition, or a headline at best
            unit = bracket_unit(text[:end])
            first = inline_values[0]
            if first.condition and re.fullmatch(r"\s*=\s*", after[: first.start]):
                if beside_ticks(row, hit.cell) or _assigned_again(row, hit, text[start:end]):
                    return []  # `1.5 | Iout=1mA`, `IOUT = 0A | IOUT = 1A`: a graph's legend
                # `VDSS = 55V`: the `=` follows the field's own label, so states its value;
                # as a phrase would, since charts and conditions write `VCE = 20V` too.
                ends = 2 if _range_ends(inline_values) else 1  # `VDD = 2 V to 3.6 V`
                inline_values = [
                    *(replace(v, condition=False) for v in inline_values[:ends]),
                    *inline_values[ends:],
                ]
                tier = max(tier, 2)
            return self._values(spec, inline_values, unit, None, tier, base, first_only=False)
        return self._wrapped(spec, page, index, text, (start, end), base) or self._phrase(
            spec, text, (start, end), base
        )

    def _wrapped(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        text: str,
        span: tuple[int, int],
        base: dict[str, object],
    ) -> list[_Candidate]:
        """`3V 32M-BIT` over `SERIAL FLASH MEMORY`: a title wrapped after its value."""
        wrapped = _wrapped_title(page, index, text[: span[0]])
        if wrapped is None:
            return []
        shift = len(wrapped) + 1
        return self._phrase(spec, f"{wrapped} {text}", (span[0] + shift, span[1] + shift), base)

    def _first_variant(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: _Hit,
        tier: int,
        base: dict[str, object],
    ) -> list[_Candidate]:
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
        hit: _Hit,
        tier: int,
        base: dict[str, object],
        *,
        row: Row | None = None,
        unit: Unit | None = None,
    ) -> list[_Candidate]:
        """Values right of the label in its row (`row`, when read as if it stood there)."""
        header = header_of(page, index)
        if row is None:
            row = page.rows[index]
            unit = row_unit(row, header, hit.cell)
        out: list[_Candidate] = []
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
                first_only=_prose(cell.text), entity=entity,
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
                out = [_with(c, entity=parts[id(x)]) for c, x in zip(out, cells, strict=True)]
        return out

    def _below(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: _Hit,
        tier: int,
        base: dict[str, object],
    ) -> list[_Candidate]:
        """The label heads a column: values below it, one row per product or one below.

        A table whose rows are products (`Part number | Data rate | Reach`) gives each
        row's value its part number; a label with its value on the next line (a spec
        box) gives that value, as weaker evidence.
        """
        row = page.rows[index]
        label = row.cells[hit.cell]
        if len(label.text.split()) > 6 or any(read_values(c.text) for c in row.cells):
            return []  # a phrase, or a row of values: not a header
        unit = bracket_unit(label.text)
        out: list[_Candidate] = []
        for below in page.rows[index + 1 : index + 1 + _ROWS_BELOW]:
            cell = next((c for c in below.cells if min(c.x1, label.x1) > max(c.x0, label.x0)), None)
            first = below.cells[0]
            if cell is None or (len(below.cells) == 1 and first.size > 1.2 * label.size):
                break
            part = first.text.strip() if PART_NUMBER.match(first.text.strip()) else None
            if cell is first or len(row.cells) < 2:
                part = None  # a product table's header names more than one column
            if part is None and out:
                break  # past the one value under a label that no product table has
            values = [v for v in read_values(strip_footnotes(cell.text)) if not v.condition]
            if not values and part is None and not out and len(below.cells) > 1:
                # `Supply Voltage` over `AC | 2.0V to 6.0V`: a sub-row names a variant under
                # the label, its value stands right of the label (the first variant's).
                cell = next((c for c in below.cells if c.x0 >= label.x1), cell)
                values = [v for v in read_values(strip_footnotes(cell.text)) if not v.condition]
            if part is None:
                # One value under a label is a spec box's (`Weight` over `310 g`) only when it
                # says its unit: bare numbers under `VDS (V)` are a chart's axis ticks.
                values = [v for v in values if v.unit is not None]
            got = self._values(
                spec, values, unit, None, tier + (0 if part else 1), base,
                first_only=_prose(cell.text), entity=part,
            )  # fmt: skip
            if not got:
                break
            out.extend(got)
            if part is None:
                break
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
    ) -> list[_Candidate]:
        out: list[_Candidate] = []
        plain = [v for v in values if not v.adjective and _fits(spec, v.unit or unit, v)]
        for value in values:
            if value.condition or (value.adjective and plain):
                continue
            own = _lost_micro(spec, value.unit or unit)
            if not _fits(spec, own, value):
                continue
            out.append(
                _Candidate(
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
            if first_only:
                break
        return out

    def _phrase(
        self, spec: FieldSpec, text: str, span: tuple[int, int], base: dict[str, object]
    ) -> list[_Candidate]:
        """A label in running text: the value right before it, or after it in the sentence.

        `32 MB SDRAM`; `running at 800 MHz`.
        """
        before = read_values(text[: span[0]])
        if before:
            last = before[-1]
            gap = text[last.end : span[0]]
            words = re.findall(r"[^\W_]+", gap)
            if (
                len(gap) <= _PHRASE_BEFORE
                and not re.search(r"[,;:.()\d]", gap)
                and len(words) <= _WORDS_BEFORE
                and _fits(spec, last.unit, last)
            ):
                stated = [last]
                if last.statistic is Statistic.MAX and len(before) > 1:
                    low = before[-2]  # `1.7 V to 3.6 V supply`: both ends of the range
                    if low.statistic is Statistic.MIN and low.unit == last.unit:
                        stated.insert(0, low)
                return self._values(spec, stated, last.unit, None, 2, base, first_only=False)
        if spec.kind == COUNT:
            return []  # `GPIO 3` names a pin; a count stands before its noun
        stop = _SENTENCE_END.search(text, span[1])
        window_end = min(len(text), span[1] + _PHRASE_AFTER, stop.start() if stop else len(text))
        after = [v for v in read_values(text[span[1] : window_end]) if _fits(spec, v.unit, v)]
        return self._values(spec, after, None, None, 2, base, first_only=True)

    def _text(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: _Hit,
        after: str,
        lead_end: int,
        base: dict[str, object],
    ) -> list[_Candidate]:
        row = page.rows[index]
        cell_text = strip_footnotes(row.cells[hit.cell].text)
        start, end = hit.span
        value = ""
        if re.search(r"[:=]", after[:lead_end]) and after[lead_end:].strip():
            value = after[lead_end:]
            tier = 0 if not extra_words(cell_text[:end], (start, end)) else 1
        else:
            tier = 0 if not extra_words(cell_text, (start, end)) else 1
            header = header_of(page, index)
            for cell in row.cells[hit.cell + 1 :]:
                column = column_of(header, cell) if header is not None else None
                if column is not None and role(column.text) in ("conditions", "symbol", "unit"):
                    continue
                if not is_dash(cell.text):
                    value = strip_footnotes(cell.text)
                    break
        value = " ".join(value.split()).strip(" .;:")
        if not value or len(value) > 120 or re.match(r"(?:https?://|www\.)|\S+@\S+\.", value):
            return []  # a link or an address is where to read more, not the value
        return [
            _Candidate(
                value=value, unit="", statistic=None, value_text=value, tier=tier,
                **base,  # type: ignore[arg-type]
            )
        ]  # fmt: skip


_LIST = re.compile(r"\d\s*,\s*\d+(?:\.\d+)?\s*,")


def _listed(text: str, values: Sequence[Value]) -> bool:
    """Whether the first value with a unit ends a list of bare numbers (`5, 6, 8, 24 V`)."""
    united = next((i for i, v in enumerate(values) if v.unit is not None), None)
    if united is None or united < 2:
        return False
    return bool(_LIST.search(text, values[0].start, values[united].start))


_COMPARED = re.compile(r"\s*(?:≤|≥|<|>|=<|>=|<=)\s*[-+\u2212]?\d")
"""`VO ≤ 5 V`: a symbol compared to a value is a test condition, not its statement."""
_DANGLING = re.compile(r"\s*(?:=|≤|≥|<|>)\s*$")
_UNLESS = re.compile(r"\bunless\s+otherwise\b", re.IGNORECASE)
_DELTA = re.compile(r"^\s*[\u0394\u2206]")
_SYMBOL = r"[A-Z][A-Z0-9]{1,3}"
_DIFFERENCE_BEFORE = re.compile(rf"(?<![\w])(?:{_SYMBOL})\s+[-\u2212\u2013]\s+$")
_DIFFERENCE_AFTER = re.compile(rf"^\s+[-\u2212\u2013]\s+(?:{_SYMBOL})(?!\w)")
"""`VI - VO`: the difference of two quantities (an input-output differential)."""
"""`ΔIQ`: a change of the quantity (with line, with load), not the quantity."""


def _conditional(spec: FieldSpec, row: Row, hit: _Hit, before: str, after: str) -> bool:
    """Whether the label's row states a condition or a change of the field, not its value.

    `VO ≤ 5 V` and `VI =` (its value in the cell after) head a condition of other rows;
    `Input Voltage (unless otherwise specified)` gives the conditions of a table; `ΔIQ`
    is the change of a quiescent current with line or load, `VI - VO` a differential.
    """
    if _COMPARED.match(after) or _UNLESS.search(row.cells[hit.cell].text):
        return True
    if _DIFFERENCE_BEFORE.search(before) or _DIFFERENCE_AFTER.match(after):
        return True
    named = spec.name.lower()
    if any(_DELTA.match(c.text) for c in row.cells) and not re.search(r"chang|delta", named):
        return True
    if _DANGLING.fullmatch(after):
        following = next((c for c in row.cells[hit.cell + 1 :] if c.text.strip()), None)
        values = read_values(following.text) if following is not None else []
        return not values or not _fits(spec, values[0].unit, values[0])
    return False


_REPEAT_ROWS, _REPEAT_COST = 4, 0.05
"""Rows within which a label said again repeats the parameter, and what the repeat loses."""


def _repeated_label(page: Grid, index: int, hit: _Hit) -> bool:
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


def _range_ends(values: Sequence[Value]) -> bool:
    """Whether the first two values are one range's two ends (`2 V to 3.6 V`)."""
    return (
        len(values) >= 2
        and values[0].statistic is Statistic.MIN
        and values[1].statistic is Statistic.MAX
    )


def _assigned_again(row: Row, hit: _Hit, label: str) -> bool:
    """Whether another cell of the row sets the same label (`IOUT = 0A | IOUT = 1A`)."""
    folded = label.casefold()
    return any(
        i != hit.cell and c.text.strip().casefold().startswith(folded) and "=" in c.text
        for i, c in enumerate(row.cells)
    )


def _bare(row: Row, hit: _Hit) -> bool:
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


def _repeats_last(found: list[_Candidate]) -> list[_Candidate]:
    """A row that only repeats an earlier row's label for the same statistic comes after it.

    `VCE(sat) | Collector to emitter saturation voltage | 1.35 V (IC = 50 A)`, then
    `VCE(sat) | 1.6 V (IC = 90 A)`: the same parameter under harder conditions. Both were
    equally good links; the first row, the condition the parameter is specified at, is
    the one. (Rows that name something more, `VUSB` and `VIN`, are two values.)
    """
    first: dict[tuple[str, str, Statistic | None], int] = {}
    named = [c for c in found if c.tier < _PARTIAL]
    for c in named:
        for label in {c.label, *c.quote.casefold().split(" | ")}:
            key = (c.key, label, c.statistic)
            first[key] = min(first.get(key, c.row), c.row)
    out: list[_Candidate] = []
    for c in found:
        row = first.get((c.key, c.label, c.statistic), c.row) if c.label else c.row
        later = 0 < c.row - row <= _REPEAT_ROWS
        out.append(_with(c, bonus=c.bonus - _REPEAT_COST) if later else c)
    return out


def _wrapped_title(page: Grid, index: int, before: str) -> str | None:
    """The line a one-cell row continues, when it starts with a few words of a title.

    A title or feature line wrapped after its value continues on the next line, which
    then starts with the label or a few words before it: the line above is returned,
    for the value before the label to be read across the break.
    """
    row = page.rows[index]
    if index == 0 or len(row.cells) != 1 or len(page.rows[index - 1].cells) != 1:
        return None
    if re.search(r"[,;:.()\d]", before) or len(before.split()) > _WORDS_BEFORE:
        return None
    above = page.rows[index - 1].cells[0]
    if above.size < row.cells[0].size * 0.9 or re.search(r"[.;:]\s*$", above.text):
        return None  # a smaller line, or one that ends a sentence, is not the same title
    return strip_footnotes(above.text)


def _lost_micro(spec: FieldSpec, unit: Unit | None) -> Unit | None:
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


def _label_statistic(text: str) -> Statistic | None:
    """`Max frame rate`, `Supply voltage (min)`: the statistic a label cell names."""
    match = _LABEL_LIMIT.search(text)
    if match is None:
        return None
    word = match["word"].lower()[:3]
    return {"max": Statistic.MAX, "min": Statistic.MIN}.get(word, Statistic.TYP)


def _with(candidate: _Candidate, **changes: object) -> _Candidate:
    return replace(candidate, **changes)  # type: ignore[arg-type]


def _footnote_free_span(raw: str, clean: str, span: tuple[int, int]) -> tuple[int, int]:
    """Map a label's span in a cell to the cell without footnote marks."""
    label = raw[span[0] : span[1]]
    position = clean.find(label)
    if position == -1:
        match = label_regex(label).search(clean)
        return match.span() if match else (0, 0)
    return position, position + len(label)


def _terms(
    spec: FieldSpec, shape: str, document: ParsedDocument, read: list[_Candidate]
) -> list[_Candidate]:
    """A text field of known shape: labelled values of that shape, then the document's terms."""
    out: list[_Candidate] = []
    for candidate in read:
        term = shaped_value(shape, str(candidate.value))
        if term is not None:
            out.append(_with(candidate, value=term, value_text=term))
    for rank, mention in enumerate(term_mentions(shape, document)):
        out.append(
            _Candidate(
                key=spec.key, tier=_PARTIAL, value=mention.term, unit="", statistic=None,
                value_text=mention.term, page=mention.page, row=rank, quote=mention.quote,
                bonus=min(mention.count, _COUNTED) * _PER_MENTION - rank * _LATER_TERM,
            )
        )  # fmt: skip
    return out


def _counts(spec: FieldSpec, document: ParsedDocument) -> list[_Candidate]:
    """Counts stated in words before the noun a count field names (`_counts`).

    A document that never counts the field's noun may still say how many units the part
    holds (`Quadruple 2-input NAND Schmitt trigger`, `provides six inverting buffers`):
    those are weaker candidates (`unit_counts`). A count in a figure's caption (`Fig. 3
    Logic diagram (one gate)`) describes the drawing, not the part.
    """
    noun = counted_noun(spec.name) if spec.kind == COUNT else None
    if noun is None:
        return []
    per = " per " in spec.name.lower()
    out: list[_Candidate] = []
    counted = False
    """Whether the field's own noun is counted outside a caption: then that is the one."""
    for weak in (False, True):
        if counted or (weak and per):
            break
        for page in document.pages:
            found = unit_counts(page.text) if weak else count_mentions(noun, page.text)
            for mention in found:
                if mention.hyphenated != per:
                    continue
                left, right = _sentence(page.text, mention.start, mention.end)
                quote = " ".join(page.text[left:right].split())[:240]
                line = page.text[page.text.rfind("\n", 0, mention.start) + 1 : mention.start]
                caption = _CAPTION.match(line) is not None
                counted = counted or not caption
                out.append(
                    _Candidate(
                        key=spec.key, tier=_PARTIAL if weak else 2, value=float(mention.value),
                        unit="", statistic=None,
                        value_text=" ".join(page.text[mention.start : mention.end].split()),
                        page=page.number, row=mention.start, quote=quote,
                        bonus=-_CHART_COST if caption else 0.0,
                    )
                )  # fmt: skip
    return out


_CAPTION = re.compile(r"\s*(?:Fig(?:ure)?|Table)\.?\s*\d", re.IGNORECASE)
"""A figure's or table's caption: `Fig.3 Logic diagram (one gate)`."""


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    left = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    stop = _SENTENCE_END.search(text, end)
    return left, stop.start() + 1 if stop else len(text)


_WEAK_SCALE = (0.1, 1e5)
"""Sizes, in the declared unit, that a weak link's value may take: a user declares the unit
the field is stated in, so `16 bytes` of some memory is no density in `Mbit`. A strong
link (the field's own label) keeps the wider plausible range of `_units`."""


def _to_scale(candidate: _Candidate, unit: str) -> bool:
    """Whether a weak link's value is of a size the declared unit is chosen for."""
    if candidate.tier < _PARTIAL or not unit or not candidate.unit:
        return True
    if not isinstance(candidate.value, float) or candidate.value == 0:
        return True
    try:
        size = abs(convert(candidate.value, candidate.unit, unit))
    except ValueError:
        return True
    return _WEAK_SCALE[0] <= size <= _WEAK_SCALE[1]


def _in_unit(candidate: _Candidate, unit: str) -> bool:
    """Whether the value is written in `unit` itself (any spelling of it)."""
    if not unit or not candidate.unit or not isinstance(candidate.value, float):
        return False
    try:
        return abs(convert(1.0, candidate.unit, unit) - 1.0) < 1e-9
    except ValueError:
        return False


def _scored(candidate: _Candidate, kind: str, unit: str = "") -> Scored:
    score = _SCORE[candidate.tier]
    if candidate.tier >= _PARTIAL and _in_unit(candidate, unit):
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
    )


def names_a_field(fields: Sequence[FieldSpec]) -> Callable[[str], bool] | None:
    """A test of a page's text: may it state one of `fields`? `None` without label fields.

    What `parse_pdf(focus=...)` takes, so only pages that matter are laid out and indexed.
    """
    labelled = [f for f in fields if not (f.synonyms or f.patterns or f.vocabulary)]
    return _Reader(labelled).states_a_field if labelled else None


def extract_table_facts(
    document: ParsedDocument, fields: Sequence[FieldSpec], base: dict[str, str]
) -> list[Fact]:
    """Facts for `fields` (declared by labels) from the rows and tables of `document`.

    Args:
        document: A parsed document (boxes used where pages have them).
        fields: Label fields (no synonyms, patterns or vocabulary).
        base: `entity`, `document_id` and `source` for every fact.
    """
    if not fields:
        return []
    reader = _Reader(fields, base["source"])
    running = running_rows(document)
    focus = set(document.focus_pages)
    found: list[_Candidate] = []
    for page in document.pages:
        if not focus or page.number in focus:
            found.extend(reader.page(page, running))
    for spec in fields:
        found.extend(_counts(spec, document))
        if (shape := term_shape(spec)) is not None:
            found = [c for c in found if c.key != spec.key] + _terms(
                spec, shape, document, [c for c in found if c.key == spec.key]
            )
    facts: list[Fact] = []
    for spec in fields:
        seen: set[tuple[object, ...]] = set()
        mine = [c for c in found if c.key == spec.key and _to_scale(c, spec.unit)]
        chosen = choose(
            mine,
            lambda c, kind=spec.kind, unit=spec.unit: _scored(c, kind, unit),  # type: ignore[misc]
            statistics=spec.statistics or implied_statistics(spec),
            file_name=base["source"],
        )
        for candidate in chosen:
            entity = candidate.entity or base["entity"]
            key = (entity, candidate.statistic, candidate.value, candidate.unit, candidate.page)
            if key in seen:
                continue
            seen.add(key)
            facts.append(
                Fact(
                    field=spec.key,
                    kind=spec.kind,
                    value=candidate.value,
                    unit=candidate.unit,
                    field_unit=spec.unit,
                    statistic=candidate.statistic,
                    value_text=candidate.value_text,
                    page=candidate.page,
                    quote=candidate.quote,
                    confidence=_CONFIDENCE[candidate.tier],
                    method=ExtractionMethod.LABEL,
                    entity=entity,
                    document_id=base["document_id"],
                    source=base["source"],
                )
            )
    return facts
