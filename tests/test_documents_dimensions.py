"""Dimension files: the shipped defaults load, and mistakes are named by file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from swarm_ray._errors import InvalidSpecError
from swarm_ray.documents import (
    Dimension,
    QuantityKind,
    default_dimensions,
    load_dimension,
    load_dimensions,
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
    assert fields["driver_assistance.features"].kind is QuantityKind.CATEGORY
    assert load_dimensions([_SHIPPED]) == default_dimensions()


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


_VALID = """
name: acoustics
fields:
  - name: noise
    kind: number
    patterns: ['(?P<value>\\d+)\\s*dB']
"""


def test_a_user_dimension_loads(tmp_path: Path) -> None:
    dimension = load_dimension(_write(tmp_path, "acoustics.yaml", _VALID))
    assert isinstance(dimension, Dimension)
    assert dimension.fields[0].name == "noise"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: x\nfields: [{name: f, kind: energy, synonyms: ['cap(']}]",
         r"fields\[0='f'\]\.synonyms.*invalid regex 'cap\('"),
        ("name: x\nfields: [{name: f, kind: number, patterns: ['\\d+ seats']}]",
         r"fields\[0='f'\]\.patterns.*no `\(\?P<value>"),
        ("name: x\nfields: [{name: f, kind: furlongs, synonyms: [a]}]",
         r"fields\[0='f'\]\.kind"),
        ("name: x\nfields: [{name: f, kind: energy}]", r"fields\[0='f'\].*exactly one of"),
        ("name: x\nfields: [{name: f, kind: energy, synonyms: [a], colour: red}]",
         r"fields\[0='f'\]\.colour"),
        ("name: x\nfields: [{name: f, kind: money, synonyms: [price]}]", r"use `patterns`"),
        ("name: x\nfields: [{name: f, kind: energy, synonyms: [a]}, {name: f, kind: energy, "
         "synonyms: [b]}]", r"duplicate field names \['f'\]"),
        ("name: Bad Name\nfields: [{name: f, kind: energy, synonyms: [a]}]", r"`name`"),
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
