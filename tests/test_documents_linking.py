"""How values are linked to fields they are not named by, and how one value is chosen.

Datasheets name a field by its symbol (`VDSS`), its initials (`SR`), its words in another
order or joined by `to`, or only by its qualifiers (`Input Range`); they state one figure
many times, in limits tables and test conditions as well as in the specification. Each
test builds the page a vendor would print (text with cells two spaces apart) and checks
which value the field gets; none names a vendor or a product family.
"""

from __future__ import annotations

import pytest

from swarm_ray.documents import (
    Dimension,
    DocumentMetadata,
    FieldSpec,
    ParsedDocument,
    extract_facts,
    normalise_facts,
    parse_field_arg,
)
from swarm_ray.documents._choice import Scored, choose, file_part
from swarm_ray.documents._counts import count_mentions, counted_noun
from swarm_ray.documents._facts import ExtractionMethod, Fact, Statistic
from swarm_ray.documents._grid import Grid, header_of, page_rows
from swarm_ray.documents._labels import labels_regex
from swarm_ray.documents._layout import Row, TextBox
from swarm_ray.documents._parse import PageText
from swarm_ray.documents._symbols import label_forms
from swarm_ray.documents._table import names_a_field
from swarm_ray.documents._terms import shaped_value


def _doc(*pages: str, file_name: str = "part.pdf") -> ParsedDocument:
    return ParsedDocument(
        document_id="0123456789abcdef",
        path=f"/datasheets/{file_name}",
        file_name=file_name,
        size_bytes=1,
        metadata=DocumentMetadata(page_count=len(pages), title="XQ9000 datasheet"),
        pages=tuple(PageText(number=i + 1, text=text) for i, text in enumerate(pages)),
    )


def _table(*rows: tuple[str, ...], width: int = 26) -> str:
    """Rows of cells in fixed-width columns, as a table's text layer reads."""
    return "".join("".join(cell.ljust(width) for cell in row).rstrip() + "\n" for row in rows)


def _facts(
    fields: list[str], *pages: str, file_name: str = "part.pdf"
) -> set[tuple[str, str | None, float | str]]:
    dimension = Dimension(name="fields", fields=tuple(parse_field_arg(f) for f in fields))
    result = extract_facts(_doc(*pages, file_name=file_name), [dimension])
    return {
        (n.fact.field, n.fact.statistic.value if n.fact.statistic else None, n.value)
        for n in normalise_facts(result.facts).facts
    }


def _names(name: str, text: str) -> bool:
    return labels_regex(label_forms(FieldSpec(name=name, unit="V"))).search(text) is not None


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("drain-source voltage", "VDSS"),
        ("drain-source voltage", "Drain-to-Source Voltage"),
        ("collector-emitter voltage", "Collector to Emitter Voltage"),
        ("gate threshold voltage", "VGS(th)"),
        ("gate threshold voltage", "VGE(th)"),
        ("on-resistance", "RDS(on)"),
        ("reverse recovery time", "trr"),
        ("forward current", "IF(AV)"),
        ("supply voltage", "VDD"),
        ("supply voltage", "Voltage Supply"),
        ("input offset voltage", "VIO"),
        ("slew rate", "SR"),
        ("gain bandwidth product", "GBW"),
        ("max clock frequency", "clock frequency"),
    ],
)
def test_a_field_is_named_by_its_symbol_initials_and_word_forms(name: str, text: str) -> None:
    assert _names(name, text)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("forward current", "If the input is low"),  # a word, not the symbol IF
        ("supply voltage", "VSS"),  # ground, not a supply
        ("collector-emitter voltage", "VCE(sat)"),  # another quantity of the same terminals
        ("drain-source voltage", "id"),
        ("slew rate", "SR5000"),  # initials before a digit are a part number
    ],
)
def test_lookalikes_do_not_name_the_field(name: str, text: str) -> None:
    assert not _names(name, text)


def test_a_symbol_row_of_a_limits_table_gives_the_rating() -> None:
    page = "Absolute Maximum Ratings\n" + _table(
        ("Parameter", "Symbol", "Value", "Unit"),
        ("Drain-Source Voltage", "VDSS", "60", "V"),
        ("VDS, Drain-Source Voltage [V]",),
        ("0", "10", "20", "30"),
    )
    assert _facts(["drain-source voltage:V"], page) == {("drain-source voltage", None, 60.0)}


def test_bare_numbers_under_a_label_are_chart_ticks_not_a_value() -> None:
    page = "Typical characteristics\nVDS, Drain-Source Voltage [V]\n0  10  20  30\n"
    assert _facts(["drain-source voltage:V"], page) == set()


def test_a_value_before_its_label_in_a_feature_line() -> None:
    page = "Features\n• 20KB volatile data storage area SRAM\n• 62KB program memory CodeFlash\n"
    assert _facts(["RAM:KB", "flash memory:KB"], page) == {
        ("RAM", None, 20.0),
        ("flash memory", None, 62.0),
    }


def test_a_label_of_qualifiers_alone_links_but_not_to_another_field_of_that_kind() -> None:
    page = "Features\n• Wide 4.5V to 26V Operating Input Range\n"
    assert _facts(["input voltage:V:min,max"], page) == {
        ("input voltage", "min", 4.5),
        ("input voltage", "max", 26.0),
    }
    table = _table(("Parameter", "Min", "Max", "Unit"), ("Input Voltage", "-0.3", "32", "V"))
    assert _facts(["input offset voltage:mV:max"], table) == set()


def test_the_operating_range_beats_the_limits_range_and_its_ends_stay_together() -> None:
    limits = "Absolute Maximum Ratings\n" + _table(
        ("Parameter", "Symbol", "Rating"), ("Supply Voltage", "VCC", "-0.5V to +7.0V")
    )
    operating = "Recommended Operating Conditions\n" + _table(
        ("Parameter", "Min", "Max", "Unit"), ("Supply Voltage", "2.0", "3.6", "V")
    )
    facts = _facts(["supply voltage:V:min,max"], limits, operating)
    assert facts == {("supply voltage", "min", 2.0), ("supply voltage", "max", 3.6)}


def test_a_supply_range_from_below_zero_is_a_limit_even_untitled() -> None:
    page = "The device operates on a 2.7V to 3.6V power supply.\n" + _table(
        ("Supply Voltage", "VCC", "-0.6 to 4.6", "V")
    )
    assert _facts(["supply voltage:V:min,max"], page) == {
        ("supply voltage", "min", 2.7),
        ("supply voltage", "max", 3.6),
    }


def test_a_lone_value_is_reported_under_the_one_statistic_asked_for() -> None:
    page = _table(("Parameter", "Symbol", "Value", "Unit"), ("Forward Voltage", "VF", "1.1", "V"))
    assert _facts(["forward voltage:V:max"], page) == {("forward voltage", "max", 1.1)}


def test_a_lost_micro_sign_is_read_as_the_declared_unit() -> None:
    page = "Features\n• High Slew Rate: 7.0 V/s\n"
    assert _facts(["slew rate:V/us"], page) == {("slew rate", None, 7.0)}


def test_a_micro_sign_lost_as_a_space_is_read_as_the_declared_unit() -> None:
    page = "Features\n• High Slew Rate . . . 13 V/ s Typ\n"
    assert _facts(["slew rate:V/us"], page) == {("slew rate", None, 13.0)}


def test_a_label_centred_on_its_two_rows_takes_the_first_row() -> None:
    # The label cell spans two rows of conditions; the text layer puts it on the second.
    page = "Absolute Maximum Ratings\n" + _table(
        ("Symbol", "Parameter", "Conditions", "Value", "Unit"),
        ("", "", "VO = 5 V to 18 V", "35", ""),
        ("VI", "Input Voltage", "VO = 24 V", "40", "V"),
        ("TJ", "Junction Temperature", "", "150", "°C"),
    )
    assert _facts(["input voltage:V:max"], page) == {("input voltage", "max", 35.0)}


def _variants(output: str) -> str:
    limits = "Absolute Maximum Ratings\n" + _table(
        ("Input Voltage",),
        ("  (Vo = -5V)", "", "", "-25V"),
        ("  (Vo = -12V and -15V)", "", "", "-35V"),
        ("Input-Output Differential", "", "", "25V"),
    )
    return limits + "\nElectrical Characteristics\n" + _table(("Output Voltage", "", output))


def test_a_labels_variant_is_the_one_whose_condition_names_the_parts_other_value() -> None:
    fields = ["input voltage:V:max", "output voltage:V"]
    assert ("input voltage", "max", -35.0) in _facts(fields, _variants("-12V"))
    assert ("input voltage", "max", -25.0) in _facts(fields, _variants("-5V"))
    ranges = _table(
        ("Input Voltage",),
        ("  (VO = 5 V to 18 V)", "", "", "35 V"),
        ("  (VO = 24 V)", "", "", "40 V"),
    )
    for output, rating in (("24 V", 40.0), ("12 V", 35.0)):
        page = ranges + _table(("Output Voltage", "", output))
        assert ("input voltage", "max", rating) in _facts(fields, page)  # in the range too
    # With no output voltage declared, nothing tells the variants apart: the first.
    assert _facts(["input voltage:V:max"], _variants("-12V")) == {("input voltage", "max", -25.0)}


def _placed(
    fields: list[str], rows: list[list[tuple[float, str]]], file_name: str
) -> set[tuple[str | None, Statistic | None, float | str]]:
    """Facts of a page of rows of cells placed at `x` (indentation kept), as a PDF's are."""
    boxes = tuple(
        TextBox(x0=x, top=20.0 * i, x1=x + 4.5 * len(text), bottom=20.0 * i + 8, size=8, text=text)
        for i, row in enumerate(rows)
        for x, text in row
    )
    text = "\n".join(" ".join(cell for _, cell in row) for row in rows)
    document = _doc(file_name=file_name).model_copy(
        update={"pages": (PageText(number=1, text=text, boxes=boxes),)}
    )
    dimension = Dimension(name="fields", fields=tuple(parse_field_arg(f) for f in fields))
    return {(f.entity, f.statistic, f.value) for f in extract_facts(document, [dimension]).facts}


def test_a_labels_sub_rows_of_parts_are_read_under_the_tables_statistics() -> None:
    rows = [  # the sub-rows' part names indented under the label
        [
            (160, "Parameter"),
            (334, "Symbol"),
            (394, "Min"),
            (440, "Typ"),
            (485, "Max"),
            (530, "Unit"),
        ],
        [(68, "Input Offset Voltage (RS ≤ 10 k, VCM = 0)"), (341, "VIO"), (532, "mV")],
        [(76, "XQ81C, XQ82C"), (399, "-"), (441, "5.0"), (488, "15")],
        [(76, "XQ84C"), (399, "-"), (441, "4.0"), (488, "12")],
        [(76, "XQ8_AC"), (399, "-"), (441, "3.0"), (487, "6.0")],
    ]
    fields = ["input offset voltage:mV:typ,max"]
    assert _placed(fields, rows, "xq84c.pdf") == {
        ("XQ84C", Statistic.TYP, 4.0),
        ("XQ84C", Statistic.MAX, 12.0),
    }
    # The label's bracket holds its test conditions, not a value; the page is laid out.
    states = names_a_field([parse_field_arg(f) for f in fields])
    assert states is not None and states(
        "Input Offset Voltage (RS ≤ 10 k) VIO mV\nXQ84C - 4.0 12\n"
    )


def test_the_tables_at_25_c_beat_the_same_table_over_the_temperature_range() -> None:
    def table(condition: str, typ: str, most: str) -> str:
        return f"ELECTRICAL CHARACTERISTICS (VCC = 15 V, {condition})\n" + _table(
            ("Characteristics", "Symbol", "Min", "Typ", "Max", "Unit"),
            ("Input Offset Voltage", "VIO", "-", typ, most, "mV"),
        )

    hot, room = table("TA = Tlow to Thigh", "-", "20"), table("TA = 25°C", "5.0", "15")
    assert _facts(["input offset voltage:mV:typ,max"], hot, room) == {
        ("input offset voltage", "typ", 5.0),
        ("input offset voltage", "max", 15.0),
    }
    ranged = table("TA = -40 to +85°C", "-", "20")
    assert ("input offset voltage", "max", 15.0) in _facts(
        ["input offset voltage:mV:max"], ranged, room
    )
    alone = _facts(["input offset voltage:mV:max"], hot)  # no table at 25 °C: the one there is
    assert alone == {("input offset voltage", "max", 20.0)}


def test_sub_rows_naming_runs_of_parts_under_a_bare_label_give_each_run_its_value() -> None:
    rows = [  # no table header: the label alone, its sub-rows indented
        [(53, "Electrical Characteristics @ 25°C Unless Otherwise Specified")],
        [(62, "Forward Voltage")],
        [(107, "XQ4001-4003"), (184, "VF"), (227, "1.0 V"), (265, "IFM = 1.0A")],
        [(107, "XQ4004"), (227, "1.3 V")],
        [(107, "XQ4005-4007"), (227, "1.7 V"), (265, "TA = 25°C")],
        [(62, "Maximum DC Reverse Current")],
    ]
    assert _placed(["forward voltage:V:max"], rows, "xq4007.pdf") == {
        ("XQ4005-4007", Statistic.MAX, 1.7)
    }
    said = [  # the label's row states its value in words: the next rows are not its own
        [(62, "IO"), (90, "Output current"), (200, "Internally limited"), (300, "A")],
        [(70, "XQ217"), (200, "- 25 to 150")],
    ]
    assert _placed(["output current:A:max"], said, "xq217.pdf") == set()


def test_a_span_is_no_value_of_a_field_asking_one_and_bullets_are_items() -> None:
    page = "Features\n• Output voltage range: 1.2 to 37 V\n• Output current in excess of 1.5 A\n"
    assert _facts(["output voltage:V", "output current:A:max"], page) == {
        ("output current", "max", 1.5)
    }  # adjustable: the output voltage has no one value
    asked = _facts(["output voltage:V:min,max"], page)
    assert ("output voltage", "min", 1.2) in asked  # asked for, the range is the answer
    variants = "Features\n- 16 to 32 Kbytes of Flash memory\n"  # the family's parts, no span
    assert _facts(["flash memory:KB"], variants) == {
        ("flash memory", "min", 16.0),
        ("flash memory", "max", 32.0),
    }


def test_a_row_under_another_label_is_not_a_first_variant() -> None:
    page = _table(
        ("Symbol", "Parameter", "Conditions", "Value", "Unit"),
        ("VO", "Output Voltage", "IO = 5 mA", "5", "V"),
        ("", "", "IO = 40 mA", "4.9", "V"),
        ("VI", "Input Voltage", "", "30", "V"),
    )
    assert _facts(["input voltage:V:max"], page) == {("input voltage", "max", 30.0)}


def test_a_label_wrapped_on_its_two_rows_of_conditions_takes_the_first_row() -> None:
    page = _table(
        ("Symbol", "Parameter", "Conditions", "Min", "Typ", "Max", "Unit"),
        ("VGE(th)", "Threshold Voltage", "IC = 40mA", "3.5", "4.5", "6.5", "V"),
        ("", "Collector to Emitter", "IC = 40A, VGE = 15V", "--", "2.1", "2.6", "V"),
        ("VCE(sat)", "Saturation Voltage", "IC = 80A, VGE = 15V", "--", "2.6", "--", "V"),
        width=22,
    )
    assert _facts(["collector-emitter saturation voltage:V:typ"], page) == {
        ("collector-emitter saturation voltage", "typ", 2.1)
    }


def test_a_parameter_repeated_under_another_condition_keeps_its_first_row() -> None:
    page = _table(
        ("Symbol", "Parameter", "Test conditions", "Min", "Max", "Unit"),
        ("VIN", "Input voltage range", "once started", "2.0", "16", "V"),
        ("VIN", "Input voltage range", "for start-up", "3.0", "16", "V"),
    )
    assert _facts(["input voltage:V:min,max"], page) == {
        ("input voltage", "min", 2.0),
        ("input voltage", "max", 16.0),
    }


def test_a_symbol_set_to_a_range_states_both_ends_and_beats_a_partial_label() -> None:
    page = (
        "Features\n- Digital and I/Os supply: VDD = 2 V to 3.6 V\n"
        "- Separate analog supply: 2.4 V to 3.6 V\n"
    )
    assert _facts(["supply voltage:V:min,max"], page) == {
        ("supply voltage", "min", 2.0),
        ("supply voltage", "max", 3.6),
    }


def _parts_table(*parts: str) -> str:
    """`Part Number` over each part's `Typ / Max` pair, the part centred over its pair."""
    values = {"LM7912C": ("1.5", "3")}
    rows = [
        ("Part Number", "", *(cell for part in parts for cell in (part, "")), "Units"),
        ("Symbol", "Parameter", *(("Typ", "Max") * len(parts)), ""),
        ("IQ", "Quiescent Current", *(v for p in parts for v in values.get(p, ("1", "2"))), "mA"),
    ]
    widths = (12, 20, *([9] * (2 * len(parts))), 8)
    return "".join(
        "".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() + "\n"
        for row in rows
    )


def test_a_row_naming_parts_above_a_table_gives_each_column_its_part() -> None:
    page2 = "Electrical characteristics\n" + _parts_table("LM7905C")
    page3 = "Electrical characteristics\n" + _parts_table("LM7912C", "LM7915C")
    found = _facts(["quiescent current:mA"], page2, page3, file_name="lm7912.pdf")
    assert found == {("quiescent current", None, 1.5)}
    # Named after no part: each part keeps its own value.
    both = _facts(["quiescent current:mA:max"], page3, file_name="regulators.pdf")
    assert both == {("quiescent current", "max", 3.0), ("quiescent current", "max", 2.0)}


def test_a_parts_typical_alone_does_not_hide_a_family_value_of_the_statistic_asked() -> None:
    page1 = "Features\n• 1.5A Output Current\n"
    page2 = _table(
        ("Part Number", "XR7912C", "Units"),
        ("Symbol", "Parameter", "Typ", ""),
        ("IOMAX", "Peak Output Current", "2.2", "A"),
        width=24,
    )
    assert _facts(["output current:A:max"], page1, page2, file_name="xr7912.pdf") == {
        ("output current", "max", 1.5)
    }


def test_two_whole_labels_on_consecutive_rows_are_two_rows() -> None:
    page = _table(
        ("Operating Temperature", "-10°C to +65°C"), ("Storage Temperature", "-40°C to +80°C")
    )
    assert _facts(["storage temperature:°C:min,max"], page) == {
        ("storage temperature", "min", -40.0),
        ("storage temperature", "max", 80.0),
    }


def test_a_graphs_legend_states_no_value() -> None:
    page = "Typical Characteristics\n" + _table(("1.5", "Iout=1mA"), ("IOUT = 0A", "IOUT = 1A"))
    assert _facts(["output current:A:max"], page) == set()


def test_a_plain_value_early_outranks_a_sub_systems_limit_deep_in_the_document() -> None:
    first = "Features\n- 72 MHz maximum frequency, 1.25 DMIPS/MHz\n"
    deep = _table(
        ("Symbol", "Parameter", "Min", "Max", "Unit"),
        ("fPCLK1", "Internal APB1 clock frequency", "0", "36", "MHz"),
        width=34,
    )
    pages = [first, *["Functional description\n"] * 35, deep]
    assert _facts(["max clock frequency:MHz"], *pages) == {("max clock frequency", "max", 72.0)}
    # Near the front, the column's stated maximum keeps its edge over a weaker phrase.
    assert _facts(["max clock frequency:MHz"], first, deep) == {
        ("max clock frequency", "max", 36.0)
    }


@pytest.mark.parametrize(
    ("text", "gates"),
    [
        ("HEF4093B\nQuadruple 2-input NAND Schmitt trigger\n", 4.0),
        ("The 74XX14 provides six inverting buffers with Schmitt-trigger action.\n", 6.0),
        ("The XX4093 type consists of four Schmitt trigger circuits.\n", 4.0),
    ],
)
def test_how_many_units_a_part_holds_counts_them_under_any_name(text: str, gates: float) -> None:
    caption = "Fig.3 Logic diagram (one gate).\n"
    assert _facts(["number of gates:count"], text, caption) == {("number of gates", None, gates)}


def test_a_count_of_the_fields_own_noun_beats_a_title_multiplier() -> None:
    page = "Dual supply logic\nThe device contains four 2-input NAND gates.\n"
    assert _facts(["number of gates:count"], page) == {("number of gates", None, 4.0)}


def test_counts_in_words_before_the_counted_noun() -> None:
    page = "General description\nThe device contains four 2-input NAND gates.\n"
    facts = _facts(["number of gates:count", "inputs per gate:count", "logic function"], page)
    assert facts == {
        ("number of gates", None, 4.0),
        ("inputs per gate", None, 2.0),
        ("logic function", None, "NAND"),
    }


def test_a_count_agrees_with_its_noun_and_a_year_is_no_count() -> None:
    assert counted_noun("number of gates") == "gate"
    assert counted_noun("inputs per gate") == "input"
    assert count_mentions("gate", "functions as a two input NAND gate") == []
    assert count_mentions("gate", "January 1995 integrated gates") == []


def test_a_package_is_an_outline_code_not_the_next_cell() -> None:
    assert shaped_value("outline", "Ordering Code") is None
    assert shaped_value("outline", "S D G TO-220AB") == "TO-220AB"
    pages = (
        _table(("Type", "Package", "Ordering Code"), ("XQ9000", "TO-220", "Q67040")),
        "Package outline TO-220\nTO-220 dimensions\n",
    )
    assert _facts(["package"], *pages) == {("package", None, "TO-220")}


def _view(c: tuple[float, Statistic | None, str | None, int, int, float]) -> Scored:
    score, statistic, entity, page, row, value = c
    return Scored(score=score, statistic=statistic, entity=entity, page=page, row=row, value=value)


def test_one_value_per_entity_and_statistic_the_best_and_earliest() -> None:
    rows = [
        (0.9, Statistic.MAX, None, 5, 1, 36.0),  # a sub-block's table, deep in the document
        (0.9, Statistic.MAX, None, 1, 3, 48.0),  # the same link on the first page
        (0.6, Statistic.MAX, None, 1, 1, 72.0),  # a weaker link
    ]
    assert choose(rows, _view, statistics=(Statistic.MAX,), file_name="x.pdf") == [rows[1]]


def test_the_file_names_its_part_among_several() -> None:
    assert file_part("1n4007_fairchild.pdf", ["1N4001", "1N4004", "1N4007"]) == "1N4007"
    assert file_part("uf5408_vishay.pdf", ["UF5400-E3", "UF5408-E3"]) == "UF5408-E3"
    assert file_part("report.pdf", ["1N4001", "1N4007"]) is None
    # An ordering table's grades and packages extend the base part the file is named
    # after: the closest extension is the file's, whatever the order of the rows.
    grades = ["CA3306CE", "CA3306E", "CA3306CM", "CA3306M"]
    assert file_part("ca3306.pdf", grades) == "CA3306E"
    assert file_part("ca3306.pdf", grades[::-1]) == "CA3306M"
    # A part the stem names whole beats any extension, and the longest of those wins.
    assert file_part("1n4742a_philips.pdf", ["1N4742", "1N4742A", "1N4742AT"]) == "1N4742A"
    rows = [
        (1.0, None, "1N4001", 1, 1, 50.0),
        (1.0, None, "1N4007", 1, 1, 1000.0),
    ]
    assert choose(rows, _view, statistics=(), file_name="1n4007_fairchild.pdf") == [rows[1]]


def test_a_series_row_gives_the_value_of_the_part_the_file_is_named_after() -> None:
    page = _table(
        ("", "", "1N", "1N", "1N", "1N"),
        ("Characteristic", "Symbol", "5400", "5401", "5404", "5408", "Unit"),
        ("Peak Reverse Voltage", "VRRM", "50", "100", "400", "1000", "V"),
        width=22,
    )
    fields = ["reverse voltage:V"]
    assert _facts(fields, page, file_name="1n5408_vendor.pdf") == {
        ("reverse voltage", None, 1000.0)
    }
    # A file named after no part of the series: one value, as the table states it first.
    assert _facts(fields, page, file_name="rectifiers.pdf") == {("reverse voltage", None, 50.0)}


def test_a_value_of_the_right_dimension_but_an_absurd_size_is_no_candidate() -> None:
    page = "Features\n• Wavelength 1310 nm\n• Wavelength class reach 3,000 km\n"
    assert _facts(["wavelength:nm"], page) == {("wavelength", None, 1310.0)}


def test_an_implausible_conversion_is_dropped_with_a_warning() -> None:
    fact = Fact(
        entity="XQ9000", field="wavelength", kind="length", value=3000.0, unit="km",
        field_unit="nm", value_text="3,000 km", page=1, quote="reach 3,000 km",
        confidence=0.9, method=ExtractionMethod.LABEL, document_id="d", source="x.pdf",
    )  # fmt: skip
    result = normalise_facts([fact])
    assert result.facts == ()
    assert "not a plausible value" in result.warnings[0] and "3,000 km" in result.warnings[0]


def test_a_scan_with_no_text_layer_is_named_as_such() -> None:
    dimension = Dimension(name="fields", fields=(parse_field_arg("supply voltage:V"),))
    result = extract_facts(_doc("", "  \n"), [dimension])
    assert result.facts == ()
    assert result.warnings == ("`part.pdf`: no text layer, not OCR'd: nothing extracted",)


def test_a_name_asking_for_a_limit_finds_the_limit_stated_without_its_qualifier() -> None:
    pages = (
        "Features\n• Arm Cortex-M0 CPU, frequency up to 48 MHz\n",
        _table(("Parameter", "Max", "Unit"), ("Internal APB clock frequency", "36", "MHz")),
    )
    assert _facts(["max clock frequency:MHz"], *pages) == {("max clock frequency", "max", 48.0)}
    assert _facts(["max clock frequency:MHz"], "• 72 MHz maximum frequency\n") == {
        ("max clock frequency", "max", 72.0)
    }


def test_words_beside_a_label_that_make_it_another_parameter() -> None:
    pages = (
        "Features\n• Wide 4.5V to 100V Input Range\n",
        _table(
            ("Parameter", "Min", "Typ", "Max", "Unit"),
            ("VIN UVLO threshold", "3.6", "4.0", "4.35", "V"),
        ),
    )
    assert _facts(["input voltage:V:min,max"], *pages) == {
        ("input voltage", "min", 4.5),
        ("input voltage", "max", 100.0),
    }


def _grid_row(top: float, *cells: tuple[float, str], size: float = 8.0) -> Row:
    boxes = tuple(
        TextBox(x0=x, top=top, x1=x + 6.0 * len(text), bottom=top + size, size=size, text=text)
        for x, text in cells
    )
    return Row(top=top, bottom=top + size, cells=boxes)


def test_a_section_heading_inside_a_table_keeps_the_header_above_it() -> None:
    header = _grid_row(0, (0, "Parameter"), (200, "Min"), (240, "Typ"), (280, "Max"))
    heading = _grid_row(12, (0, "On Characteristics"), size=11.0)
    under = _grid_row(26, (0, "Gate Threshold Voltage"), (200, "1.0"), (240, "--"), (280, "2.5"))
    elsewhere = _grid_row(40, (0, "Gate Threshold Voltage"), (120, "1.0"), (160, "2.5"))
    grid = Grid(1, [header, heading, under, elsewhere])
    assert header_of(grid, 2) is header
    assert header_of(grid, 3) is None  # its numbers stand under no statistic: another table


def test_a_value_spanning_series_columns_is_the_part_nearest_to_it() -> None:
    page = _table(
        ("", "", "UF", "UF", "UF", "UF", "UF", "UF"),
        ("Characteristic", "Symbol", "5400", "5401", "5402", "5406", "5407", "5408", "Unit"),
        ("Reverse Recovery Time", "trr", "", "50", "", "", "75", "", "ns"),
        width=22,
    )
    fields = ["reverse recovery time:ns:max"]
    assert _facts(fields, page, file_name="uf5408_vendor.pdf") == {
        ("reverse recovery time", "max", 75.0)
    }
    assert _facts(fields, page, file_name="uf5400_vendor.pdf") == {
        ("reverse recovery time", "max", 50.0)
    }


def test_an_ordering_table_beside_the_values_names_no_series() -> None:
    page = _table(
        ("Type", "Package", "Marking"),
        ("XQ17N80", "TO220 XQ0002163", "17N80C3"),
        ("Parameter", "Symbol", "", "", "Value", "Value", "Unit"),
        ("Pulsed drain current", "ID puls", "", "", "51", "51", "A"),
        width=16,
    )
    facts = _facts(["pulsed drain current:A"], page, file_name="xq17n80.pdf")
    assert facts == {("pulsed drain current", None, 51.0)}


def test_an_rms_rating_is_another_parameter() -> None:
    page = "Maximum Ratings\n" + _table(
        ("Parameter", "Symbol", "Value", "Unit"),
        ("RMS Reverse Voltage", "VR(RMS)", "700", "V"),
        ("Peak Reverse Voltage", "VRRM", "1000", "V"),
    )
    assert _facts(["reverse voltage:V"], page) == {("reverse voltage", None, 1000.0)}


@pytest.mark.parametrize(
    ("row", "field"),
    [
        (("VO ≤ 5 V", "TJ = 25°C", "5", "15", "mV"), "output voltage:V"),
        (("Input Voltage (unless otherwise specified)", "-19V"), "input voltage:V"),
        (("ΔIQ", "Quiescent Current", "With Line", "0.5", "mA"), "quiescent current:mA"),
        (("VI - VO", "Input-output differential", "40", "V"), "output voltage:V"),
        (("Line regulation", "VI =", "25°C", "150", "mV"), "input voltage:V"),
    ],
)
def test_a_row_stating_a_condition_or_a_change_gives_no_value(
    row: tuple[str, ...], field: str
) -> None:
    page = _table(("Parameter", "Symbol", "Conditions", "Value", "Unit"), row, width=44)
    assert _facts([field], page) == set()


def test_a_rows_plain_values_are_its_columns_in_order_for_the_one_statistic_asked() -> None:
    # No header over the row (a table continued on a page without it): its two or three
    # plain values are one parameter's Min, Typ, Max in that order, never two maxima.
    row = _table(("Supply current", "ICC", "1", "-", "3", "mA"), width=24)
    assert _facts(["supply current:mA:max"], row) == {("supply current", "max", 3.0)}
    assert _facts(["supply current:mA:min"], row) == {("supply current", "min", 1.0)}
    assert _facts(["supply current:mA:typ"], row) == set()  # which two columns: unknown
    three = _table(("Supply current", "ICC", "1", "2", "3", "mA"), width=24)
    assert _facts(["supply current:mA:typ"], three) == {("supply current", "typ", 2.0)}


def test_a_list_of_variants_is_no_value() -> None:
    page = "Features\n• Output Voltages: 5, 6, 8, 9, 12, 15, 24 V\n"
    assert _facts(["output voltage:V"], page) == set()
    one = "• Output Voltage: 5 V\n"
    assert _facts(["output voltage:V"], one) == {("output voltage", None, 5.0)}


def test_letters_printed_sideways_in_the_margin_are_no_values() -> None:
    letters = [
        TextBox(x0=560, top=10.0 + 7 * i, x1=573, bottom=16.0 + 7 * i, size=6, text=ch)
        for i, ch in enumerate("LM78XX")
    ]
    label = TextBox(x0=50, top=31, x1=140, bottom=39, size=8, text="Output Voltage")
    unit = TextBox(x0=300, top=31, x1=306, bottom=39, size=8, text="V")
    page = PageText(number=1, text="Output Voltage V 8", boxes=(*letters, label, unit))
    cells = [c.text for row in page_rows(page) for c in row.cells]
    assert cells == ["Output Voltage", "V"]


def test_a_title_wrapped_after_its_value_links_across_the_break() -> None:
    title = "3V 32M-BIT\nSERIAL FLASH MEMORY\n"
    assert _facts(["memory density:Mbit"], title) == {("memory density", None, 32.0)}
    sentence = "Supply 3.3 V and 32M-BIT.\nSERIAL FLASH MEMORY\n"
    assert _facts(["memory density:Mbit"], sentence) == set()


def test_a_titles_value_is_read_past_the_other_headline_values_before_the_name() -> None:
    title = "16-Mbit, 2.5V Minimum\nSPI Serial Flash Memory with Dual-I/O Support\n"
    assert _facts(["memory density:Mbit"], title) == {("memory density", None, 16.0)}
    above = "32/64/128M-BIT\n3V SERIAL FLASH MEMORY WITH 133MHZ SPI\n"
    assert _facts(["memory density:Mbit"], above) == {("memory density", None, 128.0)}
    prose = "Erase 4 KB, then 16-Mbit, or the whole\nSPI Serial Flash Memory\n"
    assert _facts(["memory density:Mbit"], prose) == set()  # a sentence, not a title


def _boxed(number: int, *lines: tuple[float, float, str]) -> PageText:
    """A page of one-box lines, each `(top, size, text)`, as the PDF's layer gives them."""
    boxes = tuple(
        TextBox(x0=50, top=top, x1=50 + 5.0 * len(text), bottom=top + size, size=size, text=text)
        for top, size, text in lines
    )
    return PageText(number=number, text="\n".join(text for _, _, text in lines), boxes=boxes)


def test_the_first_pages_title_counts_though_a_running_header_repeats_it() -> None:
    title, footer = "3V 128M-BIT SERIAL FLASH MEMORY", "Rev 1, 4 MB edition"
    pages = [_boxed(1, (40, 16, title), (300, 8, "Features"), (760, 8, footer))]
    for number in (2, 3):
        body = (100, 8, "Pages of 256 bytes are programmed at once.")
        pages.append(_boxed(number, (20, 8, title), body, (760, 8, footer)))
    document = _doc().model_copy(update={"pages": tuple(pages)})
    dimension = Dimension(name="fields", fields=(parse_field_arg("memory density:Mbit"),))
    facts = [(f.page, f.value) for f in extract_facts(document, [dimension]).facts]
    assert facts == [(1, 128.0)]  # the title on page 1; the headers on 2 and 3 repeat it
    edition = Dimension(name="fields", fields=(parse_field_arg("edition:MB"),))
    assert extract_facts(document, [edition]).facts == ()  # a footer is never content


def test_a_feature_list_naming_the_field_again_for_a_block_keeps_the_first() -> None:
    page = (
        "Features\n• Memories\n- 64 Kbytes of general-purpose SRAM\n"
        "• USB 2.0 full-speed controller\nwith 1.25 Kbytes of dedicated SRAM\n"
        "• 10/100 Ethernet MAC with dedicated DMA\nand SRAM (4 Kbytes): IEEE1588 support\n"
    )
    assert _facts(["RAM:KB"], page) == {("RAM", None, 64.0)}
    two = "Features\n• 1 MB SRAM\n• 32 MB SDRAM\n"  # two memories, named apart: both
    assert _facts(["RAM:MB"], two) == {("RAM", None, 1.0), ("RAM", None, 32.0)}


def test_a_block_diagrams_boxes_give_way_to_the_feature_list() -> None:
    features = "Features\n• 64 Kbytes of SRAM\n• 72 MHz maximum frequency\n"
    boxes = [("JTDO", "Dbus", "POR", "Supply"), ("SRAM 1.25 KB", "APB2", "APB1", "as AF")]
    boxes += [(f"TIM{i}", f"{i} Channels", f"GPIO port {i}", "as AF") for i in range(30)]
    diagram = "Figure 1. Block diagram\n" + _table(*boxes, width=16)
    assert _facts(["RAM:KB"], features, diagram) == {("RAM", None, 64.0)}
    table = "Parameter  Min  Max  Unit\n" + _table(*boxes, width=16)  # a table: not a diagram
    assert _facts(["RAM:KB"], features, table) == {("RAM", None, 1.25)}


def test_a_weak_link_in_the_declared_unit_beats_one_in_another() -> None:
    page = "Family of Memories with 4KB sectors\n\n3V 128M-BIT SERIAL MEMORY\n"
    assert _facts(["memory density:Mbit"], page) == {("memory density", None, 128.0)}


@pytest.mark.parametrize("dash", ["-", "—", "⎯", "–––", "n/a", "‒"])  # noqa: RUF001
def test_any_dash_marks_an_empty_statistic_cell(dash: str) -> None:
    page = _table(
        ("Parameter", "Min", "Typ", "Max", "Unit"),
        ("Gate threshold voltage", "2.0", dash, "4.0", "V"),
        width=24,
    )
    assert _facts(["gate threshold voltage:V:min,max"], page) == {
        ("gate threshold voltage", "min", 2.0),
        ("gate threshold voltage", "max", 4.0),
    }


def test_of_packages_named_together_the_first_is_the_one() -> None:
    page = "Features\nHigh power capability. TO-220 & TO-263 package.\n"
    assert _facts(["package"], page) == {("package", None, "TO-220")}


def test_a_row_repeating_a_label_under_other_conditions_gives_way_to_the_first() -> None:
    page = _table(
        ("Parameter", "Symbol", "Min", "Typ", "Max", "Unit", "Conditions"),
        ("Saturation voltage", "VCE(sat)", "\uf0be", "1.35", "1.75", "V", "IC = 50 A"),
        ("", "VCE(sat)", "\uf0be", "1.6", "\uf0be", "V", "IC = 90 A"),
        width=20,
    )
    assert _facts(["collector-emitter saturation voltage:V:typ"], page) == {
        ("collector-emitter saturation voltage", "typ", 1.35)
    }
    rails = _table(
        ("Parameter", "Symbol", "Min", "Max", "Unit"),
        ("Supply voltage", "VUSB", "4.5", "5.5", "V"),
        ("Supply voltage", "VIN", "3.6", "5.0", "V"),
        width=20,
    )
    assert len(_facts(["supply voltage:V:min,max"], rails)) == 4  # two rails, both kept


def test_a_design_example_gives_way_to_the_parts_own_range() -> None:
    features = "Features\n• Wide 4.5V to 100V Input Range\n"
    example = "Table 1: Design Example\n" + _table(("Vin", "8V to 95V"), ("Vout", "5V"))
    assert _facts(["input voltage:V:min,max"], features, example) == {
        ("input voltage", "min", 4.5),
        ("input voltage", "max", 100.0),
    }


def test_a_page_whose_unit_column_reads_apart_from_its_numbers_is_laid_out() -> None:
    states = names_a_field([parse_field_arg("input offset voltage:mV:typ,max")])
    assert states is not None
    page = "Input offset voltage VO = 0, TA = 25°C 0.5 4\nVIO Input offset voltage mV\n"
    assert states(page)
    assert not states("Input offset voltage is low, see the notes.\nAll values in mV\n")


def test_a_weak_link_far_below_the_declared_unit_is_no_candidate() -> None:
    page = "One Time Programmable Memory of 16 bytes\nMemory array of uniform 4 Kbyte sectors\n"
    assert _facts(["memory density:Mbit"], page) == set()
    # The field's own label keeps the wide plausible range.
    ((_, _, value),) = _facts(["memory density:Mbit"], "Memory density: 16 bytes\n")
    assert value == pytest.approx(16 * 8 / 2**20, rel=1e-6)
