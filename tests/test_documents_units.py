"""Unit normalisation: canonical units per kind, recorded conversions, qualifiers kept apart."""

from __future__ import annotations

import pickle

import pytest

from swarm_ray.documents import (
    CellStatus,
    ExtractionMethod,
    Fact,
    QuantityKind,
    compare_facts,
    convert_value,
    normalise_facts,
)
from swarm_ray.documents._mentions import parse_number
from swarm_ray.documents._units import lookup_unit

MILE_KM = 1.609344
HP_KW = 0.745699872
PS_KW = 0.73549875


def _fact(
    value: float | str,
    unit: str,
    *,
    field: str = "battery.range",
    kind: QuantityKind = QuantityKind.DISTANCE,
    qualifier: str | None = None,
    source: str = "a.pdf",
    page: int = 1,
) -> Fact:
    return Fact(
        entity="Voltara Aero",
        field=field,
        kind=kind,
        value=value,
        unit=unit,
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
    ("value", "unit", "kind", "expected", "canonical"),
    [
        (310, "mi", QuantityKind.DISTANCE, 310 * MILE_KM, "km"),
        (402, "hp", QuantityKind.POWER, 402 * HP_KW, "kW"),
        (204, "PS", QuantityKind.POWER, 204 * PS_KW, "kW"),
        (310, "lbf·ft", QuantityKind.TORQUE, 310 * 1.3558179483314004, "N·m"),
        (15.4, "in", QuantityKind.LENGTH, 15.4 * 25.4, "mm"),
        (38.1, "cm", QuantityKind.LENGTH, 381.0, "mm"),
        (112, "mph", QuantityKind.SPEED, 112 * MILE_KM, "km/h"),
        (28, "min", QuantityKind.DURATION, 1680.0, "s"),
        (18.4, "cu ft", QuantityKind.VOLUME, 18.4 * 28.316846592, "L"),
        (4630, "lb", QuantityKind.MASS, 4630 * 0.45359237, "kg"),
        (77, "kWh", QuantityKind.ENERGY, 77.0, "kWh"),
    ],
)
def test_converts_to_the_canonical_unit(
    value: float, unit: str, kind: QuantityKind, expected: float, canonical: str
) -> None:
    converted, to_unit = convert_value(value, unit, kind)
    assert to_unit == canonical
    assert converted == pytest.approx(expected, rel=1e-6)


def test_conversions_are_recorded_and_identity_is_not() -> None:
    result = normalise_facts(
        [
            _fact(310, "mi", qualifier="EPA"),
            _fact(520, "km", qualifier="WLTP"),
            _fact(402, "hp", field="motor.power", kind=QuantityKind.POWER),
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
            _fact(420, "N·m", field="battery.capacity", kind=QuantityKind.ENERGY),
            _fact(3, "furlong"),
            _fact(520, "km"),
        ]
    )
    assert [f.value for f in result.facts] == [520]
    assert len(result.warnings) == 2
    assert "'N·m'" in result.warnings[0] and "battery.capacity" in result.warnings[0]
    with pytest.raises(ValueError, match="furlong"):
        convert_value(1, "furlong", QuantityKind.DISTANCE)


def test_money_keeps_its_currency() -> None:
    assert convert_value(49_990, "€", QuantityKind.MONEY) == (49_990, "EUR")
    assert convert_value(52_500, "USD", QuantityKind.MONEY) == (52_500, "USD")
    eur = _fact(49_990, "EUR", field="general.price", kind=QuantityKind.MONEY)
    usd = _fact(54_000, "USD", field="general.price", kind=QuantityKind.MONEY, source="b.pdf")
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
            _fact(75, "kWh", field="battery.capacity", kind=QuantityKind.ENERGY, source="a.pdf"),
            _fact(77, "kW·h", field="battery.capacity", kind=QuantityKind.ENERGY, source="b.pdf"),
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
    ("text", "symbol"),
    [
        ("kWh", "kWh"), ("kW·h", "kWh"), ("kilowatt-hours", "kWh"), ("km", "km"),
        ("kilometres", "km"), ("miles", "mi"), ("hp", "hp"), ("PS", "PS"), ("Nm", "N·m"),
        ("N·m", "N·m"), ("lb-ft", "lbf·ft"), ("in.", "in"), ("inches", "in"), ("cu ft", "cu ft"),
    ],
)  # fmt: skip
def test_unit_spellings(text: str, symbol: str) -> None:
    unit = lookup_unit(text)
    assert unit is not None and unit.symbol == symbol


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,234", 1234.0), ("1,234.5", 1234.5), ("77,4", 77.4), ("4694", 4694.0), ("5.9", 5.9)],
)
def test_numbers_as_brochures_print_them(text: str, value: float) -> None:
    assert parse_number(text) == value


def test_models_survive_pickle_and_json() -> None:
    fact = normalise_facts([_fact(310, "mi", qualifier="EPA")]).facts[0]
    assert pickle.loads(pickle.dumps(fact)) == fact
    assert type(fact).model_validate_json(fact.model_dump_json()) == fact
