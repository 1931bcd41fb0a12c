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

What a label's cell and row say beside the label (a condition, a repeat, a legend) is read
by `_cells`; where its values stand in the rows (right of it, under it, in sub-rows) by
`_rows`; each link is a `_links.Candidate`, graded by tier and scored there for the choice
(`_choice`).
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import islice

from swarm_ray.documents._cells import (
    SENTENCE_END,
    WORDS_BEFORE,
    Hit,
    assigned_again,
    bare,
    conditional,
    fits,
    footnote_free_span,
    label_statistic,
    listed,
    range_ends,
    repeated_label,
    unit_apart,
    unless_stated,
    unnumbered,
    without_values,
    wrapped_title,
)
from swarm_ray.documents._choice import choose
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import ExtractionMethod, Fact, Statistic
from swarm_ray.documents._grid import (
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
    is_diagram_page,
    over_temperature,
    page_rows,
    role,
    running_key,
    running_rows,
)
from swarm_ray.documents._labels import extra_words, label_regex, labels_regex
from swarm_ray.documents._layout import Row
from swarm_ray.documents._links import (
    CHART_COST,
    CONFIDENCE,
    EXAMPLE_COST,
    LATER_TERM,
    PARTIAL,
    Candidate,
    changed,
    count_links,
    repeats_last,
    scored,
    term_links,
    to_scale,
)
from swarm_ray.documents._parse import PageText, ParsedDocument
from swarm_ray.documents._part_rows import own_row_links
from swarm_ray.documents._quantities import DocumentQuantities
from swarm_ray.documents._rows import BRACKETED_CONDITION, RowReader
from swarm_ray.documents._sole import part_number_links, sole_links
from swarm_ray.documents._symbols import (
    head_word,
    implied_statistics,
    label_forms,
    limit_forms,
    partial_words,
)
from swarm_ray.documents._terms import term_shape
from swarm_ray.documents._units import COUNT, TEXT
from swarm_ray.documents._values import STAT_AFTER, read_values, strip_footnotes
from swarm_ray.documents._variants import conditioned

__all__ = ["TableLinks", "chosen_facts", "extract_table_facts", "names_a_field", "table_links"]

_INLINE_LEAD = re.compile(
    r"^\s*(?:\([^()]{0,16}\)|\(\s*[A-Za-z][A-Za-z0-9()]{0,10}(?=\s*:))?\s*"
    r"(?:[:=]|\bis\b|\bof\b|\bat\b)?\s*"
    r"(?:up\s+to|max\.?|min\.?|typ\.?|approx\.?|~|<|>|≤|≥)?\s*",
    re.I,
)
_ASSIGNMENT = re.compile(r"[A-Za-z)]\s*(?:=|≤|≥|<|>)\s*[-+\u2212]?\d")
"""`VGS = 10 V`: a symbol given a value, as test conditions list them."""
_PHRASE_AFTER = 60
"""Characters after a label in a phrase where its value may stand."""
_PHRASE_BEFORE = 40
"""Characters between a value and the label after it (`50 µA deep sleep current`,
`2KB volatile data storage area SRAM`, `72 MHz maximum frequency`)."""
_LEADERS = re.compile(r"(?:\s?\.){3,}")
"""Dot leaders between a label and its value (`Slew Rate . . . 13 V/µs`)."""
_CONTINUES = re.compile(r"\s*(?:and|or|with|of|for|to|in|plus|as)\s", re.ASCII)
"""A line that starts with a lower-case joining word continues the sentence above it."""
_SPAN = re.compile(r"\s*(?:adjust(?:able|ment)\s+)?range\b", re.IGNORECASE)
"""`Output voltage range`: the span the quantity takes, for a field asking one value."""
_TERM = re.compile(r"[A-Za-z0-9][A-Za-z0-9+./-]{0,38}[A-Za-z0-9+]")
"""One word shaped like a term (`SFP+`, `TO-92`, `QSFP28`), at most 40 characters."""
_TERM_BEFORE_TIER = 4
"""The tier of a term before its label: under any label followed by its value (0 to 3)."""
_HITS = 8
"""A field's labels read in one cell, at most: a datasheet's cell names a field once or
twice, and each reading looks at the rest of the cell, so a tenant's cell naming it
thousands of times would cost time quadratic in its length."""
_HOT_COST = 0.05
"""What a value holding over the whole temperature range loses: less than a label's tier,
more than a page, so the same row at 25 °C wins (`over_temperature`)."""
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


class _Reader(RowReader):
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
        self._spans: dict[tuple[int, str], tuple[list[int], list[int]]] = {}
        """(field, cell text) -> where the field's labels start and end in it, on this page."""

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
                    if any(fits(spec, v.unit, v) for v in read_values(near)) or unit_apart(
                        spec, line, near
                    ):
                        return True
        return False

    def page(self, page: PageText, running: set[str], body: float = 0.0) -> list[Candidate]:
        """Every link on `page`, rows in `running` (headers, footers) left out.

        The first page's title is read even so: a running header repeats it. It is told
        from a footer by being set larger than `body`, the document's body text.
        """
        if not self.names_a_field(page.text):
            return []  # no field named on this page: nothing to read (big manuals)
        info = Grid(page.number, page_rows(page))
        self._spans.clear()
        found: list[Candidate] = []
        for index, row in enumerate(info.rows):
            if running_key(row) in running and not (page.number == 1 and _larger(row, body)):
                continue  # a running header repeats the title, which the first page states
            header = header_of(info, index)
            # A cell under a conditions column states another row's test condition
            # (`VDD = 3.3 V`); the row's text tells at once which fields it may name.
            columns = [column_of(header, c) if header is not None else None for c in row.cells]
            conditions = [c is not None and role(c.text) == "conditions" for c in columns]
            joined = "\n".join(c.text for c in row.cells)
            for spec, regex, partials in zip(self.fields, self.regexes, self.partials, strict=True):
                partial, head, limit = partials
                strong = regex.search(joined) is not None
                if not strong and (
                    spec.kind == TEXT
                    or not any(r is not None and r.search(joined) for r in (limit, partial))
                ):
                    continue  # no label of the field, whole or weak, in any cell
                for cell_index, cell in enumerate(row.cells):
                    if conditions[cell_index]:
                        continue
                    named = False
                    for match in islice(regex.finditer(cell.text) if strong else (), _HITS):
                        named = True
                        if self._longer_label_elsewhere(spec, cell.text, match.span()):
                            continue
                        hit, words = Hit(cell_index, match.span()), match.group().casefold()
                        # A row saying nothing but its label may repeat an earlier one.
                        label = words if bare(row, hit) else ""
                        later = -LATER_TERM if repeated_label(info, index, hit) else 0.0
                        found.extend(
                            changed(c, label=label, named=words, bonus=c.bonus + later)
                            for c in self._read(spec, info, index, hit)
                        )
                    if named or spec.kind == TEXT:
                        continue
                    weak = [] if limit is None else list(islice(limit.finditer(cell.text), _HITS))
                    if not weak and partial is not None and not head.search(cell.text):
                        weak = list(islice(partial.finditer(cell.text), _HITS))
                    for match in weak:
                        hit = Hit(cell_index, match.span())
                        found.extend(
                            changed(c, tier=c.tier + PARTIAL, named=match.group().casefold())
                            for c in self._read(spec, info, index, hit)
                        )
        found = repeats_last(found)
        diagram = page.number > 1 and is_diagram_page(info.rows) if found else False
        if found and (diagram or is_chart_page(info.rows)):
            # Axis titles (`VDS, Drain-Source Voltage [V]`) and annotations (`VCE = 20V`) of
            # typical-characteristics graphs name fields, but state no specification; nor
            # does a block diagram's box (`SRAM 1.25 KB`). The first page summarises.
            found = [changed(c, bonus=c.bonus - CHART_COST) for c in found]
        hot = {c.row for c in found if c.row < len(info.rows) and over_temperature(info, c.row)}
        found = [changed(c, bonus=c.bonus - _HOT_COST) if c.row in hot else c for c in found]
        examples = {c.row for c in found if in_example_table(info, c.row)}
        found = [
            changed(c, bonus=c.bonus - EXAMPLE_COST) if c.row in examples else c for c in found
        ]
        axes = {i for i, row in enumerate(info.rows) if is_axis_title(row)}
        return [changed(c, bonus=c.bonus - CHART_COST) if c.row in axes else c for c in found]

    def _longer_label_elsewhere(self, spec: FieldSpec, text: str, span: tuple[int, int]) -> bool:
        """Whether another field's label covers this match and more (`focal length`).

        Each field's labels are found in a cell once (`_label_spans`): found again for each
        label of each field, a cell naming many fields many times cost fields squared
        passes over it (64 fields in 48 KB: 51 s).
        """
        for number, other in enumerate(self.fields):
            if other is spec:
                continue
            starts, ends = self._label_spans(number, text)
            # The matches are ordered and apart: only the last one starting at or before
            # this one can cover it.
            last = bisect.bisect_right(starts, span[0]) - 1
            longer = last >= 0 and ends[last] - starts[last] > span[1] - span[0]
            if longer and span[1] <= ends[last]:
                return True
        return False

    def _label_spans(self, number: int, text: str) -> tuple[list[int], list[int]]:
        key = (number, text)
        if key not in self._spans:
            spans = [m.span() for m in self.regexes[number].finditer(text)]
            self._spans[key] = ([a for a, _ in spans], [b for _, b in spans])
        return self._spans[key]

    def _read(self, spec: FieldSpec, page: Grid, index: int, hit: Hit) -> list[Candidate]:
        row = page.rows[index]
        cell = row.cells[hit.cell]
        text = _LEADERS.sub(lambda m: " " * len(m.group()), strip_footnotes(cell.text))
        start, end = footnote_free_span(cell.text, text, hit.span)
        after = text[end:]
        if text[:start].count("(") > text[:start].count(")") and re.match(r"\s*=", after):
            return []  # `(VDS = 10 V, ID = 1 mA)`: a bracketed test condition
        if conditional(spec, row, hit, text[:start], after):
            return []
        if _SPAN.match(after) and not (spec.statistics or implied_statistics(spec)):
            return []  # `Output voltage range: 1.2 to 37 V` (adjustable): no one value
        lead_end = m.end() if (m := _INLINE_LEAD.match(after)) else 0
        inline_values = read_values(after)
        before_values = [v for v in read_values(unnumbered(text[:start])) if not v.condition]
        quote = " | ".join(c.text for c in row.cells)[:240]
        base = {"key": spec.key, "page": page.number, "row": index, "quote": quote}
        if spec.kind == TEXT:
            return self._text(spec, page, index, hit, after, lead_end, base)
        if listed(after, inline_values):
            return []  # `Output Voltages: 5, 6, 8, ..., 24 V`: the variants, not one value
        stated_inline = (
            bool(inline_values)
            and not before_values
            and inline_values[0].start <= lead_end
            and (":" in after[:lead_end] or "=" in after[:lead_end] or len(text) < 48)
        )
        own = BRACKETED_CONDITION.sub(lambda m: unless_stated(spec, m.group()), text)
        rest = read_values(own[end:])
        # `Standby Current VCC = 1.8V`: assignments after the label, of other symbols
        # (`VDSS = 55V`, the label's own `=`, states the value; `VGS @ 10V` is read as before).
        conditions = (
            all(v.condition for v in rest)
            and "=" in after
            and "@" not in after
            and not re.match(r"\s*[=:]", after)
        )
        if (not rest or conditions) and not before_values:
            # Only the label, perhaps with its test conditions in brackets (`Input Offset
            # Voltage (RS ≤ 10 k, VCM = 0)`) or after it: its values stand right of it or
            # below.
            if wrapped := self._wrapped(spec, page, index, text, (start, end), base):
                return wrapped
            if len(own.split()) > _LABEL_WORDS:
                return []  # `... across the entire IOUT`: a sentence, not a row's label
            extra = extra_words(own, (start, end))
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
                found = [*variant, *(changed(c, bonus=c.bonus - LATER_TERM) for c in found)]
            limit = label_statistic(text)
            return [
                c if c.statistic is not None or limit is None else changed(c, statistic=limit)
                for c in found
            ]
        if stated_inline and _CONTINUES.match(text):
            stated_inline = False  # `and SRAM (4 Kbytes)`: the line above's sentence goes on
        if stated_inline:
            tier = 0 if not extra_words(text[: end + lead_end], (start, end)) else 1
            if len(_ASSIGNMENT.findall(text)) >= 2:
                tier = 2  # `VCE = 400 V, IC = 40 A`: a test condition, or a headline at best
            unit = bracket_unit(text[:end])
            first = inline_values[0]
            if first.condition and re.fullmatch(r"\s*=\s*", after[: first.start]):
                if beside_ticks(row, hit.cell) or assigned_again(row, hit, text[start:end]):
                    return []  # `1.5 | Iout=1mA`, `IOUT = 0A | IOUT = 1A`: a graph's legend
                # `VDSS = 55V`: the `=` follows the field's own label, so states its value;
                # as a phrase would, since charts and conditions write `VCE = 20V` too.
                ends = 2 if range_ends(inline_values) else 1  # `VDD = 2 V to 3.6 V`
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
    ) -> list[Candidate]:
        """`3V 32M-BIT` over `SERIAL FLASH MEMORY`: a title wrapped after its value."""
        wrapped = wrapped_title(page, index, text[: span[0]])
        if wrapped is None:
            return []
        shift = len(wrapped) + 1
        merged, moved = f"{wrapped} {text}", (span[0] + shift, span[1] + shift)
        return self._phrase(spec, merged, moved, {**base, "quote": merged[:240]}, title=True)

    def _phrase(
        self,
        spec: FieldSpec,
        text: str,
        span: tuple[int, int],
        base: dict[str, object],
        *,
        title: bool = False,
    ) -> list[Candidate]:
        """A label in running text: the value right before it, or after it in the sentence.

        `32 MB SDRAM`; `running at 800 MHz`. A title lists a part's headline values, each
        with its unit, before its name (`16-Mbit, 2.5V Minimum SPI Serial Flash Memory`):
        there the value of the field's kind is read past the others.
        """
        before = read_values(text[: span[0]])
        if title:
            before = [v for v in before if fits(spec, v.unit, v)]
        if before:
            last = before[-1]
            gap = text[last.end : span[0]]
            if own_statistic := STAT_AFTER.match(gap):  # `200 ksps max. sampling rate`
                gap = gap[own_statistic.end() :]
            if title:
                gap = without_values(gap).replace(",", " ")
            words = re.findall(r"[^\W_]+", gap)
            if (
                len(gap) <= _PHRASE_BEFORE
                and not re.search(r"[,;:.()\d]", gap)
                and len(words) <= WORDS_BEFORE
                and fits(spec, last.unit, last)
            ):
                stated = [last]
                if last.statistic is Statistic.MAX and len(before) > 1:
                    low = before[-2]  # `1.7 V to 3.6 V supply`: both ends of the range
                    if low.statistic is Statistic.MIN and low.unit == last.unit:
                        stated.insert(0, low)
                return self._values(spec, stated, last.unit, None, 2, base, first_only=False)
        if spec.kind == COUNT:
            return []  # `GPIO 3` names a pin; a count stands before its noun
        stop = SENTENCE_END.search(text, span[1])
        window_end = min(len(text), span[1] + _PHRASE_AFTER, stop.start() if stop else len(text))
        after = [v for v in read_values(text[span[1] : window_end]) if fits(spec, v.unit, v)]
        if range_ends(after):  # `Supply range: 2.7 V to 5.5 V`: one range, both its ends
            return self._values(spec, after[:2], None, None, 2, base, first_only=False)
        return self._values(spec, after, None, None, 2, base, first_only=True)

    def _text(
        self,
        spec: FieldSpec,
        page: Grid,
        index: int,
        hit: Hit,
        after: str,
        lead_end: int,
        base: dict[str, object],
    ) -> list[Candidate]:
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
        term = _term_before(cell_text[:start]) if not value.strip() else None
        if term is not None and term_shape(spec) is None:
            # `SFP+ form factor`; a field of known shape (a package's outline code) has
            # readers of its own that know its terms wherever they stand. A label with its
            # value after it says more (`Lens mount: M12 x 0.5` over `M12 lens mount`).
            value, tier = term, _TERM_BEFORE_TIER
        value = " ".join(value.split()).strip(" .;:")
        if not value or len(value) > 120 or re.match(r"(?:https?://|www\.)|\S+@\S+\.", value):
            return []  # a link or an address is where to read more, not the value
        return [
            Candidate(
                value=value, unit="", statistic=None, value_text=value, tier=tier,
                **base,  # type: ignore[arg-type]
            )
        ]  # fmt: skip


def _term_before(text: str) -> str | None:
    """The term written right before a label (`SFP+ form factor`, `a TO-92 package`).

    The last word before the label's space, looked at alone (so a tenant's long cell
    costs one pass): a word with a digit or two capitals, not a word of the sentence
    (`a small form factor`).
    """
    head = text.rstrip()
    if len(head) == len(text) or not head:
        return None  # the label does not follow a space
    word = head[-41:].split()[-1]
    start = len(head) - len(word)
    if start > 0 and not head[start - 1].isspace():
        return None  # a word longer than any term
    if _TERM.fullmatch(word) is None or re.search(r"\d|[A-Z]{2}", word) is None:
        return None
    return word


def _larger(row: Row, size: float) -> bool:
    """Whether a row is set larger than `size` (the page's body text): a title, not a footer."""
    return max(c.size for c in row.cells) > size


def names_a_field(fields: Sequence[FieldSpec]) -> Callable[[str], bool] | None:
    """A test of a page's text: may it state one of `fields`? `None` without label fields.

    What `parse_pdf(focus=...)` takes, so only pages that matter are laid out and indexed.
    """
    labelled = [f for f in fields if not (f.synonyms or f.patterns or f.vocabulary)]
    return _Reader(labelled).states_a_field if labelled else None


@dataclass(frozen=True)
class TableLinks:
    """Every link the readers made per field, and the ones today's rules choose."""

    links: dict[str, list[Candidate]]
    """Per field key: every candidate link, before the choice."""
    chosen: dict[str, list[Candidate]]
    """Per field key: the links `_choice.choose` keeps."""


def table_links(
    document: ParsedDocument,
    fields: Sequence[FieldSpec],
    source: str,
    quantities: DocumentQuantities | None = None,
) -> TableLinks:
    """The links of `fields` (declared by labels) in `document`, and the rules' choice.

    Args:
        document: A parsed document (boxes used where pages have them).
        fields: Label fields (no synonyms, patterns or vocabulary).
        source: The document's file name, which may name its part among a series'.
        quantities: The document's reading (`read_quantities`), if already made.
    """
    reader = _Reader(fields, source)
    running = running_rows(document)
    sizes = [box.size for page in document.pages for box in page.boxes]
    body = statistics.median(sizes) if sizes else 0.0
    focus = set(document.focus_pages)
    found: list[Candidate] = []
    for page in document.pages:
        if not focus or page.number in focus:
            found.extend(reader.page(page, running, body))
    for extra in own_row_links(document, fields, source, quantities).values():
        found.extend(extra)
    for spec in fields:
        found.extend(count_links(spec, document))
        if (shape := term_shape(spec)) is not None:
            found = [c for c in found if c.key != spec.key] + term_links(
                spec, shape, document, [c for c in found if c.key == spec.key]
            )

    def chosen_of(spec: FieldSpec, mine: list[Candidate]) -> list[Candidate]:
        return choose(
            mine,
            lambda c, kind=spec.kind, unit=spec.unit: scored(c, kind, unit),  # type: ignore[misc]
            statistics=spec.statistics or implied_statistics(spec),
            file_name=source,
        )

    links = {
        spec.key: [c for c in found if c.key == spec.key and to_scale(c, spec.unit)]
        for spec in fields
    }
    chosen = {spec.key: chosen_of(spec, links[spec.key]) for spec in fields}
    for spec in fields:
        if any(c.condition for c in links[spec.key]):
            mine = conditioned(links[spec.key], reader.fields, reader.regexes, spec, chosen)
            chosen[spec.key] = chosen_of(spec, mine)
    by_key = {spec.key: spec for spec in fields}
    for key, sole in sole_links(document, fields, links, chosen, quantities).items():
        links[key].extend(sole)
        chosen[key] = chosen_of(by_key[key], sole)
    for key, part in part_number_links(document, fields, links).items():
        links[key].extend(part)
        chosen[key] = part
    return TableLinks(links=links, chosen=chosen)


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
    return chosen_facts(table_links(document, fields, base["source"]).chosen, fields, base)


def chosen_facts(
    chosen: dict[str, list[Candidate]], fields: Sequence[FieldSpec], base: dict[str, str]
) -> list[Fact]:
    """The facts of the links chosen per field (`TableLinks.chosen`)."""
    facts: list[Fact] = []
    for spec in fields:
        seen: set[tuple[object, ...]] = set()
        for candidate in chosen[spec.key]:
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
                    confidence=CONFIDENCE[candidate.tier],
                    method=ExtractionMethod.LABEL,
                    entity=entity,
                    document_id=base["document_id"],
                    source=base["source"],
                )
            )
    return facts
