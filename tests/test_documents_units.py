"""Units: pint's and datasheets' spellings, kinds from dimensionality, conversion to the
unit a field declares, recorded conversions, qualifiers kept apart."""

from __future__ import annotations

import pickle

import pytest

from swarm_ray.documents import (
    CellStatus,
    ExtractionMethod,
    Fact,
    compare_facts,
    convert,
    normalise_facts,
    parse_unit,
)
from swarm_ray.documents._mentions import find_mentions, parse_number
from swarm_ray.documents._units import lookup_unit

MILE_KM = 1.609344
HP_KW = 0.745699872
PS_KW = 0.73549875


def _fact(
    value: float | str,
    unit: str,
    *,
    field: str = "battery.range",
    field_unit: str = "km",
    qualifier: str | None = None,
    source: str = "a.pdf",
    page: int = 1,
) -> Fact:
    return Fact(
        entity="Voltara Aero",
        field=field,
        kind=parse_unit(field_unit).kind,
        value=value,
        unit=unit,
        field_unit=field_unit,
        qualifier=qualifier,
        value_text=f"{value} {unit}",
        page=page,
        quote=f"{field} {value} {unit}",
        confidence=0.9,
        method=ExtractionMethod.SYNONYM,
        document_id=source.removesuffix(".pdf"),
        source=source,
    )


@pytest.mark.parametrize(
    ("value", "unit", "to_unit", "expected"),
    [
        (310, "mi", "km", 310 * MILE_KM),
        (402, "hp", "kW", 402 * HP_KW),
        (204, "PS", "kW", 204 * PS_KW),
        (310, "lbf·ft", "N·m", 310 * 1.3558179483314004),
        (15.4, "in", "mm", 15.4 * 25.4),
        (38.1, "cm", "mm", 381.0),
        (112, "mph", "km/h", 112 * MILE_KM),
        (28, "min", "s", 1680.0),
        (1500, "s", "min", 25.0),
        (18.4, "cu ft", "L", 18.4 * 28.316846592),
        (4630, "lb", "kg", 4630 * 0.45359237),
        (77, "kW·h", "kWh", 77.0),
        (10, "Gb/s", "Mbps", 10_000.0),
        (10.3125, "GBd", "Gb/s", 10.3125),
        (-40, "°C", "°F", -40.0),
        (70, "℃", "K", 343.15),
        (85, "deg C", "ºC", 85.0),
        (512, "KB", "MB", 0.5),
        (64, "Kbytes", "KB", 64.0),
        (128, "Mbit", "MB", 16.0),
        (1550, "nm", "µm", 1.55),
        (2.5, "W", "mW", 2500.0),
        (3300, "mV", "V", 3.3),
        (1, "GHz", "MHz", 1000.0),
    ],
)
def test_converts_to_the_declared_unit(
    value: float, unit: str, to_unit: str, expected: float
) -> None:
    assert convert(value, unit, to_unit) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize(
    ("unit", "other"),
    [
        ("dBm", "mW"),  # a level is its own kind
        ("Gb/s", "MHz"),  # a data rate is not a frequency
        ("fps", "MHz"),  # nor is a frame rate
        ("N·m", "kWh"),  # a torque is not an energy, whatever the dimensions
        ("°", "%"),  # an angle is not a ratio
        ("count", "%"),
        ("EUR", "USD"),  # currencies are not converted
    ],
)
def test_different_kinds_do_not_convert(unit: str, other: str) -> None:
    assert parse_unit(unit).kind != parse_unit(other).kind or unit == "EUR"
    with pytest.raises(ValueError, match="measures|not converted"):
        convert(1, unit, other)


def test_unknown_units_are_named() -> None:
    with pytest.raises(ValueError, match="unknown unit 'furlongz'"):
        parse_unit("furlongz")
    assert lookup_unit("at") is None and lookup_unit("are") is None  # words, not units


def test_conversions_are_recorded_and_identity_is_not() -> None:
    result = normalise_facts(
        [
            _fact(310, "mi", qualifier="EPA"),
            _fact(520, "km", qualifier="WLTP"),
            _fact(402, "hp", field="motor.power", field_unit="kW"),
        ]
    )
    miles, km, hp = result.facts
    assert miles.conversion is not None
    assert (miles.conversion.from_value, miles.conversion.from_unit) == (310, "mi")
    assert miles.conversion.to_unit == "km"
    assert miles.value == pytest.approx(498.897, abs=1e-3)
    assert miles.fact.qualifier == "EPA"  # the cycle survives normalisation
    assert km.conversion is None and km.value == 520
    assert hp.unit == "kW" and hp.value == pytest.approx(299.77, abs=0.01)


def test_wrong_kind_and_unknown_units_are_left_out_with_a_warning() -> None:
    result = normalise_facts(
        [
            _fact(420, "N·m", field="battery.capacity", field_unit="kWh"),
            _fact(3, "furlongz"),
            _fact(520, "km"),
        ]
    )
    assert [f.value for f in result.facts] == [520]
    assert len(result.warnings) == 2
    assert "'N·m'" in result.warnings[0] and "battery.capacity" in result.warnings[0]
    with pytest.raises(ValueError, match="furlongz"):
        convert(1, "furlongz", "km")


def test_money_keeps_its_currency() -> None:
    assert parse_unit("€").kind == parse_unit("USD").kind == "money"
    eur = _fact(49_990, "€", field="general.price", field_unit="currency")
    usd = _fact(54_000, "USD", field="general.price", field_unit="currency", source="b.pdf")
    table = compare_facts(normalise_facts([eur, usd]).facts)
    assert table.conflicts == ()
    assert {c.unit for c in table.cells} == {"EUR", "USD"}


def test_cltc_and_wltp_are_never_compared_as_one() -> None:
    facts = normalise_facts(
        [
            _fact(614, "km", qualifier="CLTC", source="cn.pdf"),
            _fact(520, "km", qualifier="WLTP", source="eu.pdf"),
            _fact(323, "mi", qualifier="WLTP", source="uk.pdf"),
        ]
    ).facts
    table = compare_facts(facts)
    assert table.conflicts == ()
    cltc = table.cell("Voltara Aero", "battery.range", "CLTC")
    wltp = table.cell("voltara  aero", "battery.range", "WLTP")
    assert [c.status for c in cltc] == [CellStatus.SINGLE]
    assert [c.status for c in wltp] == [CellStatus.AGREED]  # 323 mi is 519.8 km
    assert {s.source for g in wltp[0].values for s in g.sources} == {"eu.pdf", "uk.pdf"}


def test_a_difference_beyond_tolerance_is_a_conflict_with_both_sources() -> None:
    facts = normalise_facts(
        [
            _fact(75, "kWh", field="battery.capacity", field_unit="kWh", source="a.pdf"),
            _fact(77, "kW·h", field="battery.capacity", field_unit="kWh", source="b.pdf"),
        ]
    ).facts
    table = compare_facts(facts)
    (conflict,) = table.conflicts
    assert conflict.needs_review
    assert [g.value for g in conflict.values] == [75, 77]
    assert [g.sources[0].source for g in conflict.values] == ["a.pdf", "b.pdf"]
    assert compare_facts(facts, rel_tolerance=0.05).conflicts == ()


def test_different_values_on_one_page_are_ambiguous_not_a_conflict() -> None:
    facts = normalise_facts([_fact(520, "km"), _fact(480, "km")]).facts
    table = compare_facts(facts)
    assert table.conflicts == ()
    assert [c.status for c in table.cells] == [CellStatus.AMBIGUOUS]
    assert table.cells[0].needs_review
    other_page = normalise_facts([_fact(520, "km"), _fact(480, "km", page=2)]).facts
    assert len(compare_facts(other_page).conflicts) == 1


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("kWh", "energy"), ("kW·h", "energy"), ("kilowatt-hours", "energy"), ("km", "length"),
        ("kilometres", "length"), ("miles", "length"), ("hp", "power"), ("PS", "power"),
        ("Nm", "torque"), ("N·m", "torque"), ("lb-ft", "torque"), ("in.", "length"),
        ("inches", "length"), ("cu ft", "volume"), ("Gbps", "data rate"), ("Gb/s", "data rate"),
        ("GBd", "data rate"), ("°C", "temperature"), ("℃", "temperature"),
        ("ºC", "temperature"), ("deg C", "temperature"), ("Kbytes", "information"),
        ("KB", "information"), ("mW", "power"), ("dBm", "dBm"), ("V", "voltage"),
        ("mA", "current"), ("MHz", "frequency"), ("nm", "length"), ("%", "ratio"),
        ("FPS", "frame rate"), ("MP", "pixels"), ("pins", "count"), ("Vpp", "voltage"),
    ],
)  # fmt: skip
def test_unit_spellings(text: str, kind: str) -> None:
    unit = lookup_unit(text)
    assert unit is not None and unit.kind == kind


def test_mentions_read_datasheet_spellings() -> None:
    text = "Data rate 10.3 Gbps, 0~70℃ case, 1,024 Kbytes, output 3 dBm, reach 10 km."
    found = [(m.value, m.unit, m.kind) for m in find_mentions(text)]
    assert (10.3, "Gbps", "data rate") in found
    assert (1024.0, "Kbytes", "information") in found
    assert (3.0, "dBm", "dBm") in found
    assert (10.0, "km", "length") in found


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,234", 1234.0), ("1,234.5", 1234.5), ("77,4", 77.4), ("4694", 4694.0), ("5.9", 5.9)],
)
def test_numbers_as_brochures_print_them(text: str, value: float) -> None:
    assert parse_number(text) == value


def test_models_survive_pickle_and_json() -> None:
    fact = normalise_facts([_fact(310, "mi", qualifier="EPA")]).facts[0]
    assert fact.unit == "km" and fact.conversion is not None
    assert pickle.loads(pickle.dumps(fact)) == fact
    assert type(fact).model_validate_json(fact.model_dump_json()) == fact


def test_a_prefix_hyphenated_to_its_unit_is_one_unit() -> None:
    text = "3V 32M-BIT SERIAL FLASH, organised as 4M-byte; 1G-bit NAND"
    found = [(m.value, m.unit) for m in find_mentions(text)]
    assert (32.0, "Mbit") in found
    assert (4.0, "Mbyte") in found or (4.0, "Mbytes") in found
    assert (1.0, "Gbit") in found


def test_spelled_out_memory_prefixes_are_binary_like_their_letters_and_rates_stay_decimal() -> None:
    from swarm_ray.documents._units import convert, lookup_unit

    assert convert(4, "megabit", "Mbit") == 4 and convert(64, "kilobytes", "KB") == 64
    assert convert(1, "Megabyte", "KB") == 1024
    assert lookup_unit("megabits/s").expr == lookup_unit("Mb/s").expr == "Mbit/s"


def test_a_decimal_split_after_its_point_by_the_text_layer_is_read_whole() -> None:
    from swarm_ray.documents._values import read_values

    def read(text: str) -> list[tuple[float, str | None]]:
        return [(v.value, v.unit.text if v.unit else None) for v in read_values(text)]

    assert read("VF 1. 0 V 1. 7V") == [(1.0, "V"), (1.7, "V")]
    assert read("trr 2. 5 ns") == [(2.5, "ns")]
    assert read("Figure 1. 5 pins") == [(1.0, None), (5.0, "pins")]  # a list, not a decimal
    assert read("see note 1. The supply is 3.3 V") == [(1.0, None), (3.3, "V")]


@pytest.mark.parametrize(
    ("text", "kind", "expr"),
    [
        ("µS", "time", "µs"),  # siemens elsewhere: a conductance
        ("nS", "time", "ns"),
        ("mS", "time", "ms"),
        ("uSec", "time", "us"),
        ("C", "temperature", "degC"),  # `0 to 70 C`; a coulomb elsewhere
        ("F", "temperature", "degF"),
        ("OC", "temperature", "degC"),  # the ring of `°` read as a letter
        ("0C", "temperature", "degC"),
        ("KHz", "frequency", "kHz"),  # `K` is kilo before a symbol, kelvin alone
        ("KV", "voltage", "kV"),
        ("KΩ", "resistance", "kΩ"),
        ("Years", "time", "years"),  # a unit's name in title case or capitals
        ("WATTS", "power", "watts"),
        ("Bits", "information", "bits"),
        ("VOLTS", "voltage", "volts"),
    ],
)
def test_a_spelling_takes_the_reading_the_declared_kind_asks_for(
    text: str, kind: str, expr: str
) -> None:
    unit = lookup_unit(text, kind)
    assert unit is not None and (unit.kind, unit.expr, unit.text) == (kind, expr, text)


@pytest.mark.parametrize(
    ("text", "plain"),
    [("µS", "conductance"), ("nS", "conductance"), ("C", "charge"), ("F", "capacitance")],
)
def test_without_a_kind_a_spelling_keeps_pints_reading(text: str, plain: str) -> None:
    unit = lookup_unit(text)
    assert unit is not None and unit.kind == plain
    assert lookup_unit(text, "length") == unit  # no reading of that kind: pint's stays


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("OC", "temperature"), ("KHz", "frequency"), ("Years", "time"), ("WATTS", "power"),
        ("Bits", "information"), ("Vr.m.s.", "voltage"), ("V r.m.s.", "voltage"),
        ("Vrms", "voltage"), ("VDC", "voltage"), ("K Bytes", "information"),
        ("M bits", "information"),
    ],
)  # fmt: skip
def test_spellings_pint_cannot_read_are_read(text: str, kind: str) -> None:
    unit = lookup_unit(text)
    assert unit is not None and unit.kind == kind


def test_words_in_capitals_stay_words() -> None:
    assert lookup_unit("NOTE") is None and lookup_unit("Figure") is None
    assert lookup_unit("Case") is None and lookup_unit("Gross") is None


def test_conversion_reads_the_source_in_the_targets_kind() -> None:
    assert convert(15, "nS", "ns") == 15
    assert convert(5, "µS", "ns") == 5000
    assert convert(70, "C", "°C") == 70 and convert(70, "OC", "K") == pytest.approx(343.15)
    assert convert(4, "K Bytes", "B") == 4096  # a memory size: K is binary kilo
    assert convert(20, "Years", "h") == pytest.approx(20 * 8765.82, rel=1e-3)
    with pytest.raises(ValueError, match="measures"):
        convert(5, "µS", "V")  # no reading of a voltage: still a conductance


def test_values_read_datasheet_spellings_with_their_numbers() -> None:
    from swarm_ray.documents._values import read_values

    def read(text: str) -> list[tuple[float, str | None]]:
        return [(v.value, v.unit.text if v.unit else None) for v in read_values(text)]

    assert read("4K Bytes of RAM") == [(4.0, "K Bytes")]
    assert read("Endurance: 20 Years") == [(20.0, "Years")]
    assert read("Isolation 2500 Vr.m.s.") == [(2500.0, "Vr.m.s.")]
    assert read("Supply range: 2.7 V to 5.5 V") == [(2.7, "V"), (5.5, "V")]  # both ends
    assert read("0 to 70 OC") == [(0.0, "OC"), (70.0, "OC")]


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("Isolation voltage 3\u00a0750 V", [(3750.0, "V")]),  # a no-break space
        ("Isolation voltage 3\u202f750 V", [(3750.0, "V")]),  # a narrow one
        ("VISO 5 000 Vrms", [(5000.0, "Vrms")]),  # no column value starts with 0
        ("MTBF 1 000 000 h", [(1_000_000.0, "h")]),
        ("1 000.5 h", [(1000.5, "h")]),
        # A plain space before a group that could be a number of its own: a table's
        # min and max (`fS Sampling frequency 5 200 kHz` is 5 to 200 kHz).
        ("fS 5 200 kHz", [(5.0, None), (200.0, "kHz")]),
    ],
)
def test_spaced_thousands_are_one_number_where_nothing_else_can_be_meant(
    text: str, read: list[tuple[float, str | None]]
) -> None:
    from swarm_ray.documents._values import read_values

    assert [(v.value, v.unit.text if v.unit else None) for v in read_values(text)] == read
    if read[0][1] is not None:
        assert [(m.value, m.unit) for m in find_mentions(text)] == read


def test_a_compared_value_keeps_the_precision_its_source_wrote() -> None:
    def shown(*facts: Fact) -> list[float | str]:
        table = compare_facts(normalise_facts(list(facts)).facts)
        return [g.value for c in table.cells for g in c.values]

    # 294 mi is 473.147 km: a conversion adds no precision the document did not state.
    assert shown(_fact(294, "mi", qualifier="EPA")) == [473.0]
    assert shown(_fact(1, "in", field="size.length", field_unit="mm")) == [25.4]  # 3 at least
    # A value in the field's own unit is shown as written; the facts keep the exact one.
    assert shown(_fact(473.147, "km", qualifier="EPA")) == [473.147]
    [miles] = normalise_facts([_fact(294, "mi")]).facts
    assert miles.value == pytest.approx(294 * MILE_KM)
