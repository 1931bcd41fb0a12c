"""General classes of facts unseen families state: each written without any vendor's file.

- symbols derived for any qualifier (`zener test current` is `IZT`), ratings' third
  terminals (`VCEO(sus)`), and word forms (`sampling rate` for `sample rate`);
- series tables: the file's own part's row, its cells under their column headers, and
  no candidate from another part's row;
- a memory's organisation (`128 x 8-bit`) is its size, not its word width;
- a first page's sole value of a field's dimension, where no label names the field;
- one definition of a sentence; weak synonyms keep to the declared unit's scale;
- a name's pair of letters is also its initialism with a slash (`io lines`: `I/O Lines`);
- a range whose two ends are one value is that value (`10GBASE-SR and 10GBASE-SW`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from swarm_ray.documents import (
    Dimension,
    ParsedDocument,
    extract_facts,
    normalise_facts,
    parse_field_arg,
)
from swarm_ray.documents._candidates import document_candidates
from swarm_ray.documents._cells import sentence_bounds
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._features import _words
from swarm_ray.documents._layout import TextBox
from swarm_ray.documents._parse import PageText
from swarm_ray.documents._values import read_values
from tests.test_documents_linking import _doc, _facts, _names, _table


@pytest.mark.parametrize(
    ("name", "text", "names"),
    [
        ("zener test current", "Test Current IZT mA", True),
        ("zener test current", "I ZT", True),  # a subscript set on the line below
        ("zener test current", "TEST CURRENT IZtest (mA)", True),  # the last one in full
        ("zener test current", "IZener", False),  # only the last
        ("zener voltage", "Nominal Zener Voltage VZ @ IZT", True),
        ("junction temperature", "TJ", True),
        ("power dissipation", "Ptot", True),
        ("power dissipation", "PD", True),
        ("power dissipation", "PDF", False),
        ("collector-emitter voltage", "VCEO(sus) 400 V", True),
        ("collector-emitter voltage", "VCE(sat)", False),  # a condition is another quantity
        ("operating temperature", "TOPR", True),
        ("storage temperature", "TSTG", True),
    ],
)
def test_symbols_follow_the_convention_for_any_qualifier(name: str, text: str, names: bool) -> None:
    assert _names(name, text) is names


def test_word_forms_share_a_stem() -> None:
    assert _words("Sampling Frequency") & _words("sample rate") == {"sampl"}
    assert _words("rates") == _words("rate")
    assert _words("Output Voltages") == _words("output voltage")
    assert _words("I/O lines") == _words("io lines") == {"io", "line"}
    assert _words("A/D converter") == {"ad", "converter"}
    assert _words("slew rate V/us") == {"slew", "rate", "v", "us"}  # a unit stays apart


@pytest.mark.parametrize(
    ("text", "value", "unit"),
    [
        ("128 x 8-bit Internal RAM", 1024.0, "bit"),
        ("256 x 8 bits of RAM", 2048.0, "bits"),
        ("32K \u00d7 8-bit Flash", 262144.0, "bit"),
    ],
)
def test_a_memorys_organisation_is_its_size(text: str, value: float, unit: str) -> None:
    (read,) = read_values(text)
    assert (read.value, read.unit.text if read.unit else None) == (value, unit)


def test_a_product_of_other_units_stays_two_values() -> None:
    assert [v.value for v in read_values("2 x 10 mA outputs")] == [2.0, 10.0]


def test_ram_written_as_words_by_width_is_read_in_bytes() -> None:
    page = "Features\n• 4K Bytes of Flash Memory\n• 128 x 8-bit Internal RAM\n"
    assert ("RAM", None, 128.0) in _facts(["RAM:bytes"], page)


_FIRST_PAGE = "\n".join(
    [
        "AT9000 8-bit Microcontroller with 4K Bytes Flash",
        "Features",
        "• Compatible with MCS-51 Products",
        "• 4K Bytes of In-System Reprogrammable Flash Memory",
        "• Fully Static Operation: 0 Hz to 24 MHz",
        "• 32 Programmable I/O Lines",
        "• Operating Range: 4.0V to 5.5V",
        "Description",
        "The AT9000 is a low-power microcontroller with 4K bytes of Flash memory.",
        "",
        "",
        "",
        "",
    ]
)


def test_the_unit_identifies_a_field_no_label_names() -> None:
    facts = _facts(["max clock frequency:MHz", "supply voltage:V:min,max"], _FIRST_PAGE)
    assert ("max clock frequency", "max", 24.0) in facts
    assert {("supply voltage", "min", 4.0), ("supply voltage", "max", 5.5)} <= facts


def test_the_unit_says_nothing_where_two_fields_share_it_or_values_differ() -> None:
    both = _facts(["supply voltage:V:min,max", "output voltage:V"], _FIRST_PAGE)
    assert not any(f[0] in ("supply voltage", "output voltage") for f in both)
    two = _FIRST_PAGE.replace("• 32 Programmable", "• 12 MHz crystal oscillator\n• 32 Programmable")
    assert not any(f[0] == "max clock frequency" for f in _facts(["max clock frequency:MHz"], two))
    # A value of a size the declared unit is not chosen for is no one's: 375 Hz in MHz.
    slow = _FIRST_PAGE.replace("0 Hz to 24 MHz", "375 Hz event rate")
    assert _facts(["CPU clock:MHz"], slow) == set()


def test_a_label_keeps_its_field_from_the_unit() -> None:
    page = _FIRST_PAGE + "\nSupply voltage: 3.3 V\n"
    facts = _facts(["supply voltage:V:min,max"], page)
    assert ("supply voltage", "min", 4.0) not in facts


def _placed(rows: list[list[tuple[float, str]]], file_name: str) -> ParsedDocument:
    boxes = tuple(
        TextBox(x0=x, top=12.0 * i, x1=x + 3.0 * len(t), bottom=12.0 * i + 8, size=8, text=t)
        for i, row in enumerate(rows)
        for x, t in row
    )
    text = "\n".join(" ".join(t for _, t in row) for row in rows)
    return _doc(file_name=file_name).model_copy(
        update={"pages": (PageText(number=1, text=text, boxes=boxes),)}
    )


def _series_page(file_name: str) -> ParsedDocument:
    rows: list[list[tuple[float, str]]] = [
        [(117, "Zener voltage"), (173, "Maximum Zener Impedance")],
        [(122, "Vznom"), (153, "I"), (207, "r")],
        [(155, "ZT"), (209, "zjT")],
        [(126, "V"), (152, "mA")],
        [(60, "XZ4741"), (125, "11"), (154, "23"), (190, "8")],
        [(60, "XZ4742"), (124, "12"), (154, "21"), (190, "9")],
        [(60, "XZ4743"), (124, "13"), (154, "19"), (188, "10")],
    ]
    return _placed(rows, file_name)


def test_a_series_table_offers_its_own_parts_row_under_its_headers() -> None:
    document = _series_page("xz4742_vendor.pdf")
    fields = [parse_field_arg("zener voltage:V"), parse_field_arg("zener test current:mA")]
    found = document_candidates(document, fields)
    voltages = {c.scaled: c for c in found.per_field["zener voltage"] if c.header}
    assert set(voltages) == {12.0}  # the other parts' rows are other entities' facts
    assert re.search(r"zener voltage", voltages[12.0].header, re.IGNORECASE)
    currents = {c.scaled: c for c in found.per_field["zener test current"] if c.header}
    assert set(currents) == {21.0}
    assert "I ZT" in currents[21.0].header  # the symbol, letter and subscript
    assert "Zener voltage" not in currents[21.0].header  # a span brushing its edge


def test_a_series_table_of_no_named_part_offers_every_row() -> None:
    found = document_candidates(_series_page("catalogue.pdf"), [parse_field_arg("zener voltage:V")])
    assert {c.scaled for c in found.per_field["zener voltage"] if c.header} == {11.0, 12.0, 13.0}


@pytest.mark.parametrize(
    ("text", "at", "sentence"),
    [
        (
            "Low noise. Gain is 0.5 V/V typ. at 1 kHz. Next one.",
            "0.5",
            "Gain is 0.5 V/V typ. at 1 kHz.",
        ),
        ("• Fast: 5 ns\n• Small: 2 mm", "5 ns", "Fast: 5 ns\n"),
        ("First part; 12 V rail; more", "12 V", "12 V rail;"),
    ],
)
def test_one_definition_of_a_sentence(text: str, at: str, sentence: str) -> None:
    start = text.index(at)
    left, right = sentence_bounds(text, start, start + len(at))
    assert text[left:right].strip() == sentence.strip()


def test_a_weak_synonym_keeps_to_the_declared_units_scale() -> None:
    from swarm_ray.documents import default_dimensions

    battery = next(d for d in default_dimensions() if d.name == "battery")
    text = "Warranty\nThe battery and its charging system carry an 8-year warranty.\n"
    facts = extract_facts(_doc(text), [battery]).facts
    assert not [f for f in facts if f.field == "charge_time"]


def test_a_rows_unit_column_and_a_columns_part_describe_a_cell() -> None:
    rows: list[list[tuple[float, str]]] = [
        [(78, "Symbol"), (189, "Parameter"), (497, "Units")],
        [(314, "XQ3904"), (367, "MMBT3904")],
        [(132, "Total Device Dissipation"), (322, "625"), (385, "350"), (501, "mW")],
    ]
    found = document_candidates(
        _placed(rows, "xq3904.pdf"), [parse_field_arg("power dissipation:W")]
    )
    cells = {
        round(c.scaled or 0, 6): c.part for c in found.per_field["power dissipation"] if c.header
    }
    assert cells == {0.625: 1, 0.35: -1}


def test_the_rules_link_the_files_own_row_by_its_column_headers() -> None:
    fields = ("zener voltage:V", "zener test current:mA")
    dimension = Dimension(name="fields", fields=tuple(parse_field_arg(f) for f in fields))
    facts = extract_facts(_series_page("xz4742_vendor.pdf"), [dimension]).facts
    assert {(f.field, f.value, f.entity) for f in facts} == {
        ("zener voltage", 12.0, "XZ4742"),
        ("zener test current", 21.0, "XZ4742"),
    }
    # A file of no one part of the table: no row is its own, nothing to link.
    assert not extract_facts(_series_page("catalogue.pdf"), [dimension]).facts


def test_a_terms_dash_is_a_hyphen() -> None:
    page = "XQ13009\nNPN Silicon Power Transistors\nCASE 221A\u201309 TO\u2013220AB\n"
    assert _facts(["package"], page) == {("package", None, "TO-220AB")}


def test_a_quantity_written_by_its_other_word_or_a_gerund_links() -> None:
    page = "XQ1753\nFeatures\n\u2022 Sampling Frequency: 5 kHz to 200 kHz\n"
    assert _facts(["sample rate:kHz:max"], page) == {("sample rate", "max", 200.0)}
    assert _names("reach", "Transmission distance 40 km")


def test_a_bit_in_title_case_is_a_bit() -> None:
    (read,) = read_values("24-Bit Conversion")
    assert (read.value, read.unit.kind if read.unit else None) == (24.0, "information")


def test_a_column_its_header_names_but_gives_no_unit_is_in_the_declared_unit() -> None:
    dimension = Dimension(name="fields", fields=(parse_field_arg("zener impedance:Ω:max"),))
    facts = extract_facts(_series_page("xz4742_vendor.pdf"), [dimension]).facts
    assert [(f.field, f.value, f.unit) for f in facts] == [("zener impedance", 9.0, "Ω")]


_TURNS = {  # display (x right, y up) -> PDF space for a page of /Rotate r: (a, b, c, d, e, f)
    0: lambda w, h: (1, 0, 0, 1, 0, 0),
    90: lambda w, h: (0, 1, -1, 0, w, 0),
    180: lambda w, h: (-1, 0, 0, -1, w, h),
    270: lambda w, h: (0, -1, 1, 0, 0, h),
}


def _turned_table(tmp_path: Path, rotate: int, sideways: bool) -> str:
    """A series table that reads upright on screen, on a page turned `rotate` degrees
    (`/Rotate`), or drawn turned on an upright page where `sideways`."""
    from reportlab.pdfgen.canvas import Canvas

    path = str(tmp_path / f"xz4742_turned_{rotate}_{sideways}.pdf")
    width, height = 595.0, 842.0
    canvas = Canvas(path, pagesize=(width, height))
    if not sideways:
        canvas.setPageRotation(rotate)
    canvas.transform(*_TURNS[rotate](width, height))
    rows = [
        [(60, "Type"), (120, "Zener voltage"), (220, "Test current")],
        [(120, "VZ (V)"), (220, "IZT (mA)")],
        [(60, "XZ4741"), (130, "11"), (230, "23")],
        [(60, "XZ4742"), (130, "12"), (230, "21")],
        [(60, "XZ4743"), (130, "13"), (230, "19")],
    ]
    canvas.setFont("Helvetica", 9)
    for i, row in enumerate(rows):
        for x, text in row:
            canvas.drawString(x, 500 - 14 * i, text)
    canvas.save()
    return path


@pytest.mark.parametrize(
    ("rotate", "sideways"),
    [(0, False), (90, False), (180, False), (270, False), (90, True), (270, True)],
)
def test_a_turned_page_is_read_in_its_reading_direction(
    tmp_path: Path, rotate: int, sideways: bool
) -> None:
    from swarm_ray.documents import parse_pdf
    from swarm_ray.documents._layout import rows

    document = parse_pdf(_turned_table(tmp_path, rotate, sideways))
    lines = [row.text for row in rows(document.pages[0].boxes)]
    assert "XZ4742\t12\t21" in lines, lines  # one row, its cells left to right
    assert lines.index("Type\tZener voltage\tTest current") < lines.index("XZ4742\t12\t21")
    fields = [parse_field_arg("zener voltage:V"), parse_field_arg("zener test current:mA")]
    found = document_candidates(document, fields)
    assert {c.scaled for c in found.per_field["zener voltage"] if c.header} == {12.0}
    assert {c.scaled for c in found.per_field["zener test current"] if c.header} == {21.0}


@pytest.mark.parametrize("rotate", [90, 180, 270])
def test_a_turned_pages_boxes_are_the_upright_pages_in_text_and_place(
    tmp_path: Path, rotate: int
) -> None:
    # An upright page takes `page_boxes`' own shorter path; every other direction the
    # general one. Both must place the same characters in the same boxes.
    from swarm_ray.documents import parse_pdf

    def boxes(path: str) -> list[tuple[str, float, float, float, float]]:
        # From the text's own top-left corner: a page turned a quarter is landscape.
        page = parse_pdf(path).pages[0]
        x, y = min(b.x0 for b in page.boxes), min(b.top for b in page.boxes)
        return sorted((b.text, b.x0 - x, b.top - y, b.x1 - x, b.bottom - y) for b in page.boxes)

    upright = boxes(_turned_table(tmp_path, 0, False))
    assert len(upright) == 14 and ("XZ4742", 0.0) in [b[:2] for b in upright]
    turned = boxes(_turned_table(tmp_path, rotate, False))
    assert [b[0] for b in turned] == [b[0] for b in upright]
    assert all(
        abs(a - b) <= 0.11
        for t, u in zip(turned, upright, strict=True)
        for a, b in zip(t[1:], u[1:], strict=True)
    ), (turned, upright)


def test_a_case_number_is_a_package_where_no_outline_code_is_named() -> None:
    from swarm_ray.documents._terms import shaped_value, term_mentions

    assert shaped_value("outline", "AXIAL LEAD CASE 17 PLASTIC") == "CASE 17"
    assert shaped_value("outline", "CASE 221A-09 TO-220AB") == "TO-220AB"
    assert shaped_value("outline", "in case 17 of them") is None  # prose, not a number
    named = _placed([[(60, "CASE 221A-09")], [(60, "TO-220AB")], [(60, "CASE 221A-09")]], "x.pdf")
    assert [m.term for m in term_mentions("outline", named)] == ["TO-220AB", "CASE 221A-09"]


def test_a_package_said_to_be_another_parts_is_not_the_files() -> None:
    from swarm_ray.documents._terms import term_mentions

    text = "NPN transistors in Jedec TO-39 (for XQ2219A) and in Jedec TO-18 (for XQ2222A)"
    rows = [[(60, text)], [(60, "TO-39 outline")], [(60, "SOT-23 for XQ2219A only")]]
    ours = [m.term for m in term_mentions("outline", _placed(rows, "xq2222a_vendor.pdf"))]
    assert ours == ["TO-18", "TO-39"]  # the file's part's first; no other part's mention
    theirs = [m.term for m in term_mentions("outline", _placed(rows, "xq2219a_vendor.pdf"))]
    assert theirs[0] == "TO-39" and "TO-18" not in theirs and "SOT-23" in theirs


def test_a_label_and_unit_drawn_once_over_sub_rows_describe_each_of_them() -> None:
    # `Bias current` and `mA` span the 25 °C and 125 °C sub-rows, drawn once between them.
    def box(x: float, top: float, text: str) -> TextBox:
        return TextBox(x0=x, top=top, x1=x + 5.0 * len(text), bottom=top + 8, size=8, text=text)

    boxes = (
        box(76, 0, "PARAMETER"), box(318, 0, "TJ"), box(440, 0, "MIN"), box(480, 0, "TYP"),
        box(520, 0, "MAX"), box(560, 0, "UNIT"),
        box(76, 12, "Dropout voltage"), box(318, 12, "25°C"), box(480, 12, "1.7"),
        box(560, 12, "V"),
        box(318, 24, "25°C"), box(480, 24, "6"),
        box(76, 31, "Bias current"), box(560, 31, "mA"),
        box(316, 38, "125°C"), box(480, 38, "5.5"),
    )  # fmt: skip
    text = "\n".join(
        ["PARAMETER TJ MIN TYP MAX UNIT", "Dropout voltage 25°C 1.7 V", "25°C 6",
         "Bias current mA", "125°C 5.5"]
    )  # fmt: skip
    document = _doc(file_name="xr79.pdf").model_copy(
        update={"pages": (PageText(number=1, text=text, boxes=boxes),)}
    )
    found = document_candidates(document, [parse_field_arg("quiescent current:mA")])
    cells = {c.scaled: c for c in found.per_field["quiescent current"] if c.header}
    assert set(cells) == {6.0, 5.5}
    assert all("TYP" in c.header for c in cells.values())
    # The dropout row has a label and a unit of its own: nothing of it is a current.
    voltages = document_candidates(document, [parse_field_arg("dropout voltage:V")])
    assert {c.scaled for c in voltages.per_field["dropout voltage"] if c.header} == {1.7}


_BODY = "".join(f"General description line {i} of the body text.\n" for i in range(14))


@pytest.mark.parametrize(
    "line",
    ["Supply range: 2.7 V to 5.5 V", "Supply voltage range 2.7 V to 5.5 V", "Supply: 2.7 to 5.5 V"],
)
def test_a_range_after_its_label_keeps_both_ends(line: str) -> None:
    facts = _facts(["supply voltage:V:min,max"], "XQ9000\nDatasheet\n" + _BODY + line + "\n")
    assert {("supply voltage", "min", 2.7), ("supply voltage", "max", 5.5)} <= facts


def test_a_label_in_words_compared_to_a_value_states_a_bound_a_symbol_a_condition() -> None:
    page = "XQ9000\nDatasheet\n" + _BODY
    assert ("lifetime", "min", 50.0) in _facts(["lifetime:years:min"], page + "Lifetime > 50 years")
    current = _facts(["supply current:uA:max"], page + "Supply current < 5 µA")
    assert ("supply current", "max", 5.0) in current
    # `VO ≤ 5 V` heads other rows' condition: it is no statement of the output voltage.
    rows = "VO ≤ 5 V\nLine regulation 3 mV\n"
    assert not any(f[0] == "output voltage" for f in _facts(["output voltage:V"], page + rows))


def test_a_name_made_only_of_its_quantity_is_named_by_its_last_word() -> None:
    page = "XQ9000\nDatasheet\n" + _BODY
    facts = _facts(["power dissipation:W:max"], page + "Total dissipation: 0.5 W\n")
    assert ("power dissipation", "max", 0.5) in facts
    assert _names("power dissipation", "Total dissipation")
    # A qualifier that says which one stays needed: `Total power` names no output power.
    assert not _names("output power", "Total power")


@pytest.mark.parametrize(
    ("line", "statistic"),
    [("3 µA typical", "typ"), ("3 µA typ.", "typ"), ("3 µA (max)", "max"), ("3 µA minimum", "min")],
)
def test_a_statistic_written_after_the_unit_is_the_values(line: str, statistic: str) -> None:
    page = "XQ9000\nDatasheet\n" + _BODY + f"Supply current: {line}\n"
    assert _facts(["supply current:uA:min,typ,max"], page) == {("supply current", statistic, 3.0)}
    # A word that heads the next value is that one's: `typ 3 µA, max 5 µA`.
    [low, high] = read_values("3 µA max 5 µA")
    assert (low.statistic, high.statistic) == (None, Statistic.MAX)
    assert read_values("10 minutes")[0].statistic is None


@pytest.mark.parametrize(
    ("field", "line", "term"),
    [
        ("form factor", "SFP+ form factor, hot-pluggable", "SFP+"),
        ("form factor", "Compact QSFP28 form factor", "QSFP28"),
        ("connector", "Duplex LC connector", "LC"),
    ],
)
def test_a_term_written_before_its_label_is_its_value(field: str, line: str, term: str) -> None:
    page = "XQ9000\nDatasheet\n" + _BODY + line + "\n"
    assert _facts([field], page) == {(field, None, term)}
    # A word of the sentence is no term: `a small form factor` states none.
    assert _facts([field], "XQ9000\nDatasheet\n" + _BODY + f"in a small {field}\n") == set()


def test_a_part_number_no_label_names_is_the_part_the_title_names() -> None:
    page = "XQ9000-25SR\n25 Gb/s SFP28 transceiver\n" + _BODY + "Order XQ9000-25SR.\n"
    assert _facts(["part number"], page) == {("part number", None, "XQ9000-25SR")}
    assert _facts(["ordering code"], page) == {("ordering code", None, "XQ9000-25SR")}
    # A labelled one is read from its label; a field of another name is not the part.
    labelled = page + "Part number: XQ9000-25SR-C\n"
    assert _facts(["part number"], labelled) == {("part number", None, "XQ9000-25SR-C")}
    assert _facts(["form factor"], page) == set()


@pytest.mark.parametrize(
    ("text", "rate", "unit"),
    [
        ("Compliant with 25GBASE-SR", 25.0, "Gb/s"),
        ("1000BASE-LX transceiver", 1000.0, "Mb/s"),
        ("10 Gigabit Ethernet", 10.0, "Gb/s"),
        ("Fast Ethernet transceiver", 100.0, "Mb/s"),
    ],
)
def test_a_standards_name_carries_its_data_rate(text: str, rate: float, unit: str) -> None:
    [value] = read_values(text)
    assert (value.value, value.unit.text if value.unit else None) == (rate, unit)
    page = "XQ25 transceiver\nDatasheet\n" + _BODY + f"• {text}\n"
    [fact] = _facts([f"data rate:{unit}"], page)
    assert fact[2] == rate


@pytest.mark.parametrize(
    ("declared", "unit", "kind"),
    [
        ("case temperature:C:min,max", "°C", "temperature"),
        ("junction temperature:F", "°F", "temperature"),
        ("rise time:nS:max", "ns", "time"),
        ("propagation delay:uS", "us", "time"),
        # A name that says no such kind keeps the unit's own reading.
        ("gate charge:C", "C", "charge"),
        ("output capacitance:F", "F", "capacitance"),
        ("transconductance:S", "S", "conductance"),
    ],
)
def test_a_declared_unit_is_read_by_what_the_fields_name_measures(
    declared: str, unit: str, kind: str
) -> None:
    spec = parse_field_arg(declared)
    assert (spec.unit, spec.kind) == (unit, kind)


def test_a_temperature_declared_in_c_and_an_endurance_in_cycles_are_read() -> None:
    page = "XQ9000\nDatasheet\n" + _BODY
    facts = _facts(["case temperature:C:min,max"], page + "Operating case temperature: 0 to 70 C")
    assert facts == {("case temperature", "min", 0.0), ("case temperature", "max", 70.0)}
    cycles = _facts(["endurance:cycles:min"], page + "Endurance: 100,000 cycles\n")
    assert cycles == {("endurance", "min", 100000.0)}


@pytest.mark.parametrize(
    ("field", "line", "count"),
    [
        ("timers:count", "• Three 16-bit Timer/Counters", 3.0),
        ("interrupt sources:count", "• Eight Interrupt Sources", 8.0),
        ("UARTs:count", "• Two full-duplex UARTs", 2.0),
        ("serial ports:count", "• Two Programmable Serial Ports", 2.0),
        ("ADC channels:count", "• 8-channel 10-bit ADC", 8.0),
        ("ADC channels:count", "• Two 12-bit ADCs with 16 channels", 16.0),
    ],
)
def test_a_count_field_named_in_the_plural_counts_its_last_word(
    field: str, line: str, count: float
) -> None:
    page = "XQ9000\nDatasheet\n" + _BODY + line + "\n"
    name = field.split(":")[0]
    assert _facts([field], page) == {(name, None, count)}


def test_a_plural_names_count_needs_its_qualifiers_and_agrees_in_number() -> None:
    page = "XQ9000\nDatasheet\n" + _BODY
    assert _facts(["interrupt sources:count"], page + "• Two power sources\n") == set()
    assert _facts(["timers:count"], page + "• Three modes; the watchdog timer resets it\n") == set()


@pytest.mark.parametrize(
    ("line", "low", "high"),
    [
        ("Supply voltage 5 V ± 0.5 V", 4.5, 5.5),  # never a supply from -0.5 V to 0.5 V
        ("Supply voltage: 5 V ± 10%", 4.5, 5.5),
        ("Supply voltage 5 V ±250 mV", 4.75, 5.25),
        ("Supply voltage 5 V ±5%", 4.75, 5.25),
    ],
)
def test_a_tolerance_after_a_value_reaches_either_side_of_it(
    line: str, low: float, high: float
) -> None:
    page = "XQ9000\nDatasheet\n" + _BODY + line + "\n"
    facts = _facts(["supply voltage:V:min,typ,max"], page)
    assert facts == {
        ("supply voltage", "min", low),
        ("supply voltage", "typ", 5.0),
        ("supply voltage", "max", high),
    }
    # A tolerance of another kind stands alone, and a bare one keeps both signs.
    other = read_values("5 V ± 2 A")
    assert [(v.value, v.statistic) for v in other] == [
        (5.0, None),
        (-2.0, Statistic.MIN),
        (2.0, Statistic.MAX),
    ]
    assert [v.value for v in read_values("Input offset voltage ±5 mV")] == [-5.0, 5.0]
    # A temperature's tolerance in another scale is a difference, not a temperature.
    assert [v.value for v in read_values("25 °C ± 5 K")] == [25.0, -5.0, 5.0]
    # `=` before it makes it a test condition, like any value after `=`.
    assert all(v.condition for v in read_values("VCC = 5.0 V ± 20%"))


def test_a_pair_of_letters_names_its_initialism_written_with_a_slash() -> None:
    page = "XQ9000\nDatasheet\n" + _BODY
    lines = _facts(["io lines:count"], page + "• 32 Programmable I/O Lines\n")
    assert lines == {("io lines", None, 32.0)}
    assert _facts(["io lines:count"], page + "I/O lines: 32\n") == {("io lines", None, 32.0)}
    assert _facts(["IO pins:count"], page + "• 32 I/O pins\n") == {("IO pins", None, 32.0)}
    resolution = _facts(
        ["ad converter resolution:bits"], page + "A/D converter resolution: 10 bits\n"
    )
    assert resolution == {("ad converter resolution", None, 10.0)}
    # the two letters as a word of their own, never inside one
    assert _facts(["io lines:count"], page + "• 32 radio lines\n") == set()


def test_a_range_whose_ends_are_one_value_is_that_value() -> None:
    """`10GBASE-SR and 10GBASE-SW` name one data rate twice, not a range of rates (which a
    field asking for one value drops); ends that differ stay a range."""
    page = "XQ9000\nDatasheet\n" + _BODY
    one = _facts(["data rate:Gb/s"], page + "• Supports 10GBASE-SR and 10GBASE-SW\n")
    assert one == {("data rate", None, 10.0)}
    assert [v.statistic for v in read_values("5 V to 5 V")] == [None, None]
    # the same number in another unit is another value: a range still
    assert [v.statistic for v in read_values("5 mV to 5 V")] == [Statistic.MIN, Statistic.MAX]
    ends = [(v.value, v.statistic) for v in read_values("1 to 10 Gb/s")]
    assert ends == [(1.0, Statistic.MIN), (10.0, Statistic.MAX)]


@pytest.mark.parametrize(
    ("field", "line", "expected"),
    [
        ("propagation delay:ns", "Response time: 40 ns", {(None, 40.0)}),
        ("power dissipation:W", "Wattage: 0.5 W", {(None, 0.5)}),
        ("power:mW", "Total dissipation Ptot 500 mW", {(None, 500.0)}),
        ("clock frequency:MHz:max", "Oscillator Frequency 0 24 MHz", {("max", 24.0)}),
        ("isolation voltage:V", "Isolation test voltage (t = 1 min) VISO 5300 VRMS", {
            (None, 5300.0)
        }),
        ("isolation voltage:V", "Isolation withstand voltage Viso 5000 Vrms", {(None, 5000.0)}),
        ("max clock frequency:MHz", "Operating frequency: DC to 20 MHz", {("max", 20.0)}),
        ("case temperature:°C:min,max", "Operating temperature -5 °C to +85 °C", {
            ("min", -5.0), ("max", 85.0)
        }),
    ],
)  # fmt: skip
def test_a_name_with_no_word_of_the_fields_names_it_where_usage_says_so(
    field: str, line: str, expected: set[tuple[str | None, float]]
) -> None:
    name = parse_field_arg(field).name
    facts = _facts([field], "XQ9000\nDatasheet\n" + _BODY + line + "\n")
    assert {(statistic, value) for _, statistic, value in facts} == expected
    assert _names(name, line)


def test_another_name_is_the_whole_fields_not_a_qualified_ones() -> None:
    # `Wattage` is a power rating, never an output or input power; an operating
    # temperature is no junction temperature, nor is a response time a rise time.
    assert _names("power", "Wattage") and not _names("output power", "Wattage")
    assert not _names("output power", "Total dissipation")
    assert not _names("junction temperature", "Operating temperature")
    assert not _names("rise time", "Response time")
    page = "XQ9000\nDatasheet\n" + _BODY + "Operating temperature -5 °C to +85 °C\n"
    assert not _facts(["junction temperature:°C:max"], page)


def test_a_table_cell_stands_on_its_rows_line_not_where_its_label_first_appears() -> None:
    from swarm_ray.documents._quantities import read_quantities

    # The part numbers and `IC` are written first in the title and a feature bullet; each
    # cell's line is its own row's, so it is placed in `LIMITING VALUES`, not `FEATURES`.
    rows: list[list[tuple[float, str]]] = [
        [(60, "NPN transistors XQ546; XQ547")],
        [(60, "FEATURES")],
        [(60, "IC up to 100 mA")],
        [(60, "LIMITING VALUES")],
        [(60, "SYMBOL"), (120, "PARAMETER"), (300, "MAX."), (340, "UNIT")],
        [(60, "VCEO"), (120, "collector-emitter voltage")],
        [(80, "XQ546"), (300, "65"), (340, "V")],
        [(80, "XQ547"), (300, "45"), (340, "V")],
        [(80, "XQ548"), (300, "6"), (340, "V")],
        [(80, "XQ548"), (300, "65"), (340, "V")],
    ]
    document = _placed(rows, "xq547.pdf")
    lines = document.pages[0].text.split("\n")
    cells = [q for q in read_quantities(document).quantities if q.row]
    assert [(q.label, q.value, q.line) for q in cells] == [
        ("XQ546", 65.0, 6), ("XQ547", 45.0, 7), ("XQ548", 6.0, 8), ("XQ548", 65.0, 9)
    ]  # fmt: skip
    assert all(lines[q.line].startswith(q.label) for q in cells)


def _split_by_part(
    file_name: str, parent: tuple[str, str] = ("VCEO", "collector-emitter voltage")
) -> ParsedDocument:
    rows: list[list[tuple[float, str]]] = [
        [(60, "NPN transistors XQ546; XQ547")],
        [(60, "LIMITING VALUES")],
        [(60, "SYMBOL"), (120, "PARAMETER"), (260, "CONDITIONS"), (340, "MAX."), (380, "UNIT")],
        [(60, "VCBO"), (120, "collector-base voltage"), (260, "open emitter")],
        [(80, "XQ546"), (300, "-"), (340, "80"), (380, "V")],
        [(80, "XQ547"), (300, "-"), (340, "50"), (380, "V")],
        [(60, parent[0]), (120, parent[1]), (260, "open base")],
        [(80, "XQ546"), (300, "-"), (340, "65"), (380, "V")],
        [(80, "XQ547"), (300, "-"), (340, "45"), (380, "V")],
        [(60, "VCEsat"), (120, "collector-emitter saturation"), (260, "IC = 10 mA"),
         (340, "250"), (380, "mV")],
    ]  # fmt: skip
    return _placed(rows, file_name)


def test_a_parameter_split_by_part_into_sub_rows_gives_the_files_own_parts_value() -> None:
    fields = [parse_field_arg("collector-emitter voltage:V")]
    dimension = Dimension(name="fields", fields=tuple(fields))

    def values(document: ParsedDocument) -> set[float | str]:
        return {f.value for f in normalise_facts(extract_facts(document, [dimension]).facts).facts}

    # The parameter is named on its own row, its value once per part on the rows below.
    assert values(_split_by_part("xq547_vendor.pdf")) == {45.0}
    assert values(_split_by_part("xq546_vendor.pdf")) == {65.0}
    # Sub-rows that hang from another parameter link nothing (the part's `80` under
    # `collector-base voltage` above, and these under a parameter renamed).
    other = values(_split_by_part("xq546_vendor.pdf", parent=("VEBO", "emitter-base voltage")))
    assert not other & {65.0, 80.0}


def test_a_value_in_the_labels_bracket_is_its_value_and_an_item_number_is_none() -> None:
    # A bracket stating a value of the field's kind is no bracket of test conditions,
    # and a numbered list's `1.` is no value before the label.
    item = "1. Current transfer ratio (CTR: MIN. 50% at IF = 5mA, VCE = 5V)\n"
    assert _facts(["current transfer ratio:%:min"], item) == {
        ("current transfer ratio", "min", 50.0)
    }
    conditions = "Input offset voltage (VCC = 5 V, IO = 1 mA) 2 mV\n"
    assert _facts(["supply voltage:V"], conditions) == set()  # its conditions stay conditions


def test_a_tolerance_written_typical_is_the_typical_size_either_way() -> None:
    # `±2 mV Typical`: an offset's typical size, not a range from -2 to +2 mV.
    assert [(v.value, v.statistic) for v in read_values("±2 mV Typical")] == [(2.0, Statistic.TYP)]
    line = "• Low Input Offset Voltage: ±2 mV Typical\n"
    assert _facts(["input offset voltage:mV:typ"], line) == {("input offset voltage", "typ", 2.0)}
    limit = "• Input Offset Voltage: ±5 mV max\n"
    assert _facts(["input offset voltage:mV:max"], limit) == {("input offset voltage", "max", 5.0)}


def test_a_memorys_bare_organisation_is_its_size_and_the_title_names_it_first() -> None:
    # `32,768 x 8` after `organized`, or in a bracket, is words by width: 262,144 bits.
    assert [(v.value, v.unit and v.unit.text) for v in read_values("Organized 32,768 x 8")] == [
        (262144.0, "bit")
    ]
    assert all(v.unit is None or v.unit.text != "bit" for v in read_values("Pins (2 x 8)"))
    # No label names the density: the unit does. The title's one size is the part's, not
    # a feature bullet's page size.
    page = (
        "XQ24C256\nTwo-wire Serial EEPROM 256K (32,768 x 8)\nFeatures\n"
        "• 64-byte Page Write Mode\n• Self-timed Write Cycle (5 ms max)\n"
        + "".join(f"Description, line {i}.\n" for i in range(12))
    )
    assert _facts(["density:Kbit"], page, file_name="xq24c256.pdf") == {("density", None, 256.0)}


def test_a_statistic_between_a_value_and_the_words_naming_it_is_the_values_own() -> None:
    # `200 ksps max. sampling rate`: the `max.` and its dot belong to the value; the phrase
    # names the field. A second frequency on the page keeps the unit from deciding alone.
    page = "Features\n• 200 ksps max. sampling rate at VDD = 5V\n• 1 MHz input bandwidth\n"
    assert _facts(["sample rate:kHz:max"], page) == {("sample rate", "max", 200.0)}


def test_a_phrase_stating_a_limit_and_a_typical_value_gives_each_its_statistic() -> None:
    # Prose keeps its first value of each statistic it states: the limit, then the typical.
    line = "• Supply current less than 5 µA, 3 µA typical\n"
    assert _facts(["supply current:uA:typ"], line) == {("supply current", "typ", 3.0)}
    assert _facts(["supply current:uA:max"], line) == {("supply current", "max", 5.0)}
    variants = "• Output current 1.5 A, 3 A peak with a heat sink\n"  # plain: the first
    assert _facts(["output current:A"], variants) == {("output current", None, 1.5)}


def test_test_conditions_after_a_label_leave_its_values_in_the_row() -> None:
    # `Standby Current VCC = 1.8V`: the assignment is the row's condition, as it would be
    # in brackets; the values stand in the row's statistic columns.
    header = ("Symbol", "Parameter", "Test Condition", "Min", "Typ", "Max", "Units")
    row = ("ISB1", "Standby Current VCC = 1.8V", "VIN = VCC or VSS", "", "0.6", "3.0", "µA")
    page = "DC Characteristics\n" + _table(header, row, width=30)
    assert _facts(["standby current:uA:max"], page) == {("standby current", "max", 3.0)}
    # The label's own symbol set to a value still states it.
    assert _facts(["drain-source voltage:V"], "VDSS = 55V\n") == {
        ("drain-source voltage", None, 55.0)
    }


@pytest.mark.parametrize(
    ("field", "label", "value", "expected"),
    [
        ("reach:km:max", "Max. Link Length", "10", ("max", 10.0)),
        ("data rate:Gb/s", "Bit Rate", "10.3125", (None, 10.3125)),
        ("data rate:Gb/s", "Signaling Rate", "10.3125", (None, 10.3125)),
        ("output power:dBm:max", "Average Launch Power", "0.5", ("max", 0.5)),
        ("power dissipation:W:max", "Power Consumption", "1.0", ("max", 1.0)),
        ("output power:dBm:max", "Optical Transmit Power", "0.5", ("max", 0.5)),
        ("output power:dBm:max", "Output Optical Power", "0.5", ("max", 0.5)),
        ("density:Kbit", "Memory Size", "256", (None, 256.0)),
        ("clock frequency:MHz:max", "Crystal Frequency", "33", ("max", 33.0)),
    ],
)
def test_a_table_names_its_fields_in_its_familys_own_terms(
    field: str, label: str, value: str, expected: tuple[str | None, float]
) -> None:
    # A transceiver's datasheet says link length, bit or signaling rate, launch or
    # transmit power and power consumption, where a user declares reach, data rate, output
    # power and power dissipation; a memory's its size, an 8051's its crystal frequency.
    header = ("Parameter", "Symbol", "Min.", "Typ.", "Max.", "Unit")
    statistic, number = expected
    cells = ("", value, "") if statistic is None else ("", "", value)
    unit = parse_field_arg(field).unit
    page = _table(header, (label, "", *cells, unit), width=30)
    assert {(s, v) for _, s, v in _facts([field], page)} == {(statistic, number)}
    assert not _names("input power", "Launch Power")
