"""Extraction rules on hand-written text: the cases the rules exist for, one at a time."""

from __future__ import annotations

import pytest

from swarm_ray.documents import (
    DocumentMetadata,
    EntitySource,
    ExtractionMethod,
    PageText,
    ParsedDocument,
    default_dimensions,
    detect_entity,
    extract_facts,
)

Row = tuple[str, str | None, float | str, str]


def _doc(
    *pages: str, title: str | None = "Voltara Aero — Technical Specifications"
) -> ParsedDocument:
    return ParsedDocument(
        document_id="0123456789abcdef",
        path="/brochures/voltara-aero.pdf",
        file_name="voltara-aero.pdf",
        size_bytes=1,
        metadata=DocumentMetadata(page_count=len(pages), title=title),
        pages=tuple(PageText(number=i + 1, text=text) for i, text in enumerate(pages)),
    )


def _rows(*pages: str) -> set[Row]:
    result = extract_facts(_doc(*pages), default_dimensions())
    return {(f.field, f.qualifier, f.value, f.unit) for f in result.facts}


def test_table_rows_with_cycles_as_qualifiers() -> None:
    text = "Range (WLTP) 520 km\nRange (EPA) 323 miles\nBattery capacity (usable) 77 kWh"
    assert _rows(text) == {
        ("battery.range", "WLTP", 520, "km"),
        ("battery.range", "EPA", 323, "miles"),  # units as written; reports convert
        ("battery.capacity", None, 77, "kWh"),
    }


def test_an_alternative_unit_in_brackets_is_one_fact() -> None:
    assert _rows("Power output 150 kW (204 PS)") == {("motor.power", None, 150, "kW")}


def test_a_sprint_interval_is_not_a_top_speed() -> None:
    assert _rows("0\u2013100 km/h in 5,9 sec. Top speed 180 km/h.") == {
        ("motor.acceleration", "0-100 km/h", 5.9, "sec"),
        ("motor.top_speed", None, 180, "km/h"),
    }


def test_distractors_state_no_fact() -> None:
    text = (
        "Energy consumption 16.5 kWh/100 km\n"
        "Battery warranty 8 years / 160,000 km\n"
        "A 15-minute top-up adds up to 200 km of range. Efficiency: 3.6 mi/kWh.\n"
        "Level 2 home charging adds up to 30 miles of range per hour."
    )
    assert _rows(text) == set()


def test_a_row_label_does_not_stick_to_the_row_above() -> None:
    text = (
        "Wheelbase 2,900 mm\nLength 4,694 mm\nGround clearance 160 mm\n"
        "Width (excl. mirrors) 1,890 mm"
    )
    assert _rows(text) == {
        ("general.length", None, 4694, "mm"),
        ("general.width", None, 1890, "mm"),
    }


def test_unit_in_the_label() -> None:
    assert _rows("Top speed (km/h) 180\nKerb weight (kg) 2,100") == {
        ("motor.top_speed", None, 180, "km/h"),
        ("general.weight", None, 2100, "kg"),
    }


def test_two_values_sharing_one_label() -> None:
    result = extract_facts(
        _doc("Range: up to 614 km (CLTC) or 572 km\n(NEDC). Top speed 180 km/h."),
        default_dimensions(),
    )
    ranges = [f for f in result.facts if f.field == "battery.range"]
    assert [(f.qualifier, f.value) for f in ranges] == [("CLTC", 614), ("NEDC", 572)]
    assert ranges[1].confidence < ranges[0].confidence


def test_labels_on_either_side_in_prose() -> None:
    text = (
        "Its 77 kWh battery pack sits low in the floor. With 150 kW of power on tap, "
        "overtaking is effortless. DC fast charging runs at up to 175 kW, and the 11 kW "
        "on-board charger refills it overnight. A 15.4-inch touchscreen sits in the middle."
    )
    assert _rows(text) == {
        ("battery.capacity", None, 77, "kWh"),
        ("motor.power", None, 150, "kW"),
        ("battery.charging_power", "DC", 175, "kW"),
        ("battery.charging_power", "AC", 11, "kW"),
        ("interior.screen_size", None, 15.4, "inch"),
    }


def test_pattern_fields() -> None:
    text = (
        "SAE Level 2 driver assistance comes as standard.\n"
        "Level 2 home charging is supported.\n"
        "Seats 5\nPrices start at €49,990."
    )
    assert _rows(text) == {
        ("driver_assistance.level", None, 2, ""),
        ("interior.seats", None, 5, ""),
        ("general.price", None, 49990, "EUR"),
    }


def test_features_are_one_fact_per_term_and_document() -> None:
    result = extract_facts(
        _doc(
            "Standard: adaptive cruise control, lane-centring assistance and 360° camera.",
            "Adaptive cruise control works at any speed.",
        ),
        default_dimensions(),
    )
    features = [f for f in result.facts if f.field == "driver_assistance.features"]
    assert sorted(str(f.value) for f in features) == [
        "adaptive_cruise_control",
        "lane_keeping_assist",
        "surround_view_camera",
    ]
    assert {f.page for f in features} == {1}
    assert all(f.method is ExtractionMethod.VOCABULARY for f in features)


def test_evidence_page_quote_and_confidence() -> None:
    dimensions = default_dimensions()
    result = extract_facts(
        _doc("Intro text.", "Torque 420 N·m\nThe battery stores 77 kWh."), dimensions
    )
    torque, capacity = result.facts
    assert (torque.page, torque.quote, torque.value_text) == (2, "Torque 420 N·m", "420 N·m")
    assert capacity.quote == "The battery stores 77 kWh"
    assert torque.confidence > capacity.confidence  # strong label vs the vague `battery`
    assert torque.document_id == "0123456789abcdef" and torque.source == "voltara-aero.pdf"
    text = "Torque 420 N·m\nThe battery stores 77 kWh."
    strict = extract_facts(_doc(text), dimensions, min_confidence=0.8)
    assert [f.field for f in strict.facts] == ["motor.torque"]


@pytest.mark.parametrize(
    ("title", "first_line", "entity", "source"),
    [
        ("Voltara Aero — Technical Specifications", "x", "Voltara Aero", EntitySource.TITLE),
        ("Kestrel K4 | Feature Overview", "x", "Kestrel K4", EntitySource.TITLE),
        (None, "Meet the Auron Nova GT", "Auron Nova GT", EntitySource.HEADER),
        ("untitled", "The all-new Lumeo X7", "Lumeo X7", EntitySource.HEADER),
        ("brochure.docx", "Introducing the Bravik Orbit", "Bravik Orbit", EntitySource.HEADER),
        (
            None,
            "A long opening sentence is prose, not a header, " * 2,
            "voltara-aero",
            EntitySource.FILE_NAME,
        ),
    ],
)
def test_entity_detection(
    title: str | None, first_line: str, entity: str, source: EntitySource
) -> None:
    assert detect_entity(_doc(f"{first_line}\nRange 520 km", title=title)) == (entity, source)


def test_a_given_entity_wins() -> None:
    result = extract_facts(_doc("Range 520 km"), default_dimensions(), entity="Nordwind Terra")
    assert result.entity_source is EntitySource.GIVEN
    assert {f.entity for f in result.facts} == {"Nordwind Terra"}
