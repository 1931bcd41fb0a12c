"""Dimension files: the shipped defaults load, and mistakes are named by file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm_ray.core.model._errors import InvalidSpecError
from swarm_ray.documents import (
    Dimension,
    default_dimensions,
    load_dimension,
    load_dimensions,
    parse_field_arg,
)

_SHIPPED = Path(__file__).resolve().parents[1] / "swarm_ray" / "documents" / "dimensions"


def test_defaults_cover_the_ev_brochure_fields() -> None:
    fields = {f"{d.name}.{f.name}": f for d in default_dimensions() for f in d.fields}
    for name in (
        "battery.capacity", "battery.range", "battery.charging_power", "battery.charge_time",
        "motor.power", "motor.torque", "motor.top_speed", "motor.acceleration",
        "driver_assistance.level", "driver_assistance.features",
        "interior.seats", "interior.screen_size", "interior.cargo_volume",
        "general.price", "general.weight", "general.length",
    ):  # fmt: skip
        assert name in fields
    assert set(fields["battery.range"].qualifiers) == {"WLTP", "EPA", "NEDC", "CLTC"}
    assert fields["driver_assistance.features"].kind == "text"
    assert fields["battery.charge_time"].unit == "min"  # a 25 min charge is not "1,500 s"
    assert load_dimensions([_SHIPPED]) == default_dimensions()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


_VALID = """
name: acoustics
fields:
  - name: noise
    unit: count
    patterns: ['(?P<value>\\d+)\\s*dB']
"""


def test_a_user_dimension_loads(tmp_path: Path) -> None:
    dimension = load_dimension(_write(tmp_path, "acoustics.yaml", _VALID))
    assert isinstance(dimension, Dimension)
    assert dimension.fields[0].name == "noise"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\nfields: [{name: f, unit: kWh, synonyms: ['cap(']}]",
         r"fields\[0='f'\]\.synonyms.*invalid regex 'cap\('"),
        ("name: x\nfields: [{name: f, unit: count, patterns: ['\\d+ seats']}]",
         r"fields\[0='f'\]\.patterns.*no `\(\?P<value>"),
        ("name: x\nfields: [{name: f, unit: furlongz, synonyms: [a]}]",
         r"fields\[0='f'\]\.unit.*unknown unit 'furlongz'"),
        ("name: x\nfields: [{name: f, unit: kWh, synonyms: [a], patterns: ['(?P<value>1)']}]",
         r"fields\[0='f'\].*at most one of"),
        ("name: x\nfields: [{name: f, unit: kWh, synonyms: [a], colour: red}]",
         r"fields\[0='f'\]\.colour"),
        ("name: x\nfields: [{name: f, unit: currency, synonyms: [price]}]", r"use `patterns`"),
        ("name: x\nfields: [{name: f, unit: kWh, synonyms: [a]}, {name: f, unit: kWh, "
         "synonyms: [b]}]", r"duplicate field names \['f'\]"),
        ("name: Bad Name\nfields: [{name: f, unit: kWh, synonyms: [a]}]", r"`name`"),
        ("name: x\nfields: []", r"declares no fields"),
        ("name: x\nfields: [{name: f, statistics: [max]}]", r"text field has no statistics"),
        ("- just\n- a list\n", r"must hold a mapping"),
        ("name: [unclosed", r"not valid YAML"),
    ],
)  # fmt: skip
def test_mistakes_name_the_file_and_field(tmp_path: Path, text: str, expected: str) -> None:
    path = _write(tmp_path, "broken.yaml", text)
    with pytest.raises(InvalidSpecError, match=expected) as caught:
        load_dimension(path)
    assert caught.value.message.startswith(f"`{path}`")
    assert caught.value.file == str(path)


def test_two_files_may_not_define_one_dimension(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", _VALID)
    _write(tmp_path, "b.yaml", _VALID)
    with pytest.raises(InvalidSpecError, match="'acoustics' is already defined in"):
        load_dimensions([tmp_path])


def test_a_missing_file_is_a_spec_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpecError, match="cannot read"):
        load_dimension(tmp_path / "absent.yaml")


@pytest.mark.parametrize(
    ("text", "name", "unit", "kind", "statistics", "labels"),
    [
        ("data rate:Gb/s", "data rate", "Gb/s", "data rate", (), ()),
        ("case temperature:°C:min,max", "case temperature", "°C", "temperature",
         ("min", "max"), ()),
        ("reach:km", "reach", "km", "length", (), ()),
        ("form factor", "form factor", "", "text", (), ()),
        ("supply voltage|VCC|VDD:V:min, max", "supply voltage", "V", "voltage",
         ("min", "max"), ("VCC", "VDD")),
        ("output power:dBm:typ", "output power", "dBm", "dBm", ("typ",), ()),
        ("memory:Kbytes", "memory", "Kbytes", "information", (), ()),
        ("GPIO:count", "GPIO", "count", "count", (), ()),
        ("wavelength:nm:max,min", "wavelength", "nm", "length", ("min", "max"), ()),
    ],
)  # fmt: skip
def test_field_arguments(
    text: str, name: str, unit: str, kind: str, statistics: tuple[str, ...], labels: tuple[str, ...]
) -> None:
    spec = parse_field_arg(text)
    assert (spec.name, spec.unit, spec.kind, spec.labels) == (name, unit, kind, labels)
    assert tuple(s.value for s in spec.statistics) == statistics
    assert spec.key == name  # fields declared on their own keep their plain names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", r"has no name"),
        (":V", r"has no name"),
        ("reach:furlongz", r"`--field` 'reach:furlongz'.*unknown unit 'furlongz'"),
        ("reach:km:most", r"unknown statistic 'most'"),
        ("form factor::max", r"text field has no statistics"),
        ("a:b:c:d", r"expected NAME\[:UNIT\[:STATISTICS\]\]"),
        ("a.b:V", r"`--field` 'a.b:V'.*name"),
    ],
)
def test_bad_field_arguments_say_what_is_wrong(text: str, expected: str) -> None:
    with pytest.raises(InvalidSpecError, match=expected):
        parse_field_arg(text)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--field", "reach:furlongz"], "unknown unit 'furlongz'"),
        (["--field", ""], "has no name"),
        (["--field", "reach:km", "--field", "Reach:mi"], "duplicate field names"),
        (["--dimensions", "sonar"], "unknown dimension"),
        (["--dimension-file", "/nonexistent/dim.yaml"], "cannot read"),
    ],
)
def test_the_job_refuses_bad_declarations_before_it_starts(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from swarm_ray.documents._job import main

    with pytest.raises(SystemExit) as exited:
        main(["--input", "/nonexistent", *argv])
    assert exited.value.code == 2
    assert expected in capsys.readouterr().err
