"""Wording for the sample brochures: how each market writes each value, in prose and tables.

The generator's point is variety that a real corpus has and a rule set must survive:
units spelled several ways and in several systems (`kWh`/`kW·h`/`kilowatt-hours`,
km/miles, kW/hp/PS, N·m/lb-ft, mm/inches), decimal commas, labels before or after the
value, alternative units in brackets, and distractor numbers that are not facts
(warranties, consumption, wheelbase). The ground truth value of a statement is computed
here from what is printed, with this module's own conversion factors, so the test does
not grade the unit code with itself.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

__all__ = [
    "FEATURE_TEXT",
    "Item",
    "Style",
    "Written",
    "number",
    "prose",
    "range_pair",
    "table_label",
    "write",
]

MILE, HP, PS, LBFT, INCH, CUFT, LB = (
    1.609344,
    0.745699872,
    0.73549875,
    1.3558179483314004,
    25.4,
    28.316846592,
    0.45359237,
)

_Units = tuple[tuple[str, ...], float, int | None]
"""Spellings, size of one written unit in canonical units, decimals (None: as the value needs)."""


def _by_market(
    metric: _Units, imperial: _Units, uk: _Units | None = None
) -> dict[str, tuple[_Units, ...]]:
    return {"EU": (metric,), "CN": (metric,), "US": (imperial,), "UK": (uk or metric,)}


def _same(units: _Units) -> dict[str, tuple[_Units, ...]]:
    return _by_market(units, units)


_KM: _Units = ((" km", " km", " kilometres"), 1.0, 0)
_MI: _Units = ((" miles", " mi"), MILE, 0)
_MM: _Units = ((" mm",), 1.0, 0)
_IN: _Units = ((" in.", " inches"), INCH, 1)
_KW: _Units = ((" kW", " kilowatts"), 1.0, 0)
_PS: _Units = ((" PS",), PS, 0)
_UNITS: dict[str, dict[str, tuple[_Units, ...]]] = {
    "battery.capacity": _same(((" kWh", " kWh", " kW·h", " kilowatt-hours"), 1.0, None)),
    "battery.range": _by_market(_KM, _MI, uk=_MI),
    "battery.charging_power": _same(((" kW",), 1.0, 0)),
    "battery.charge_time": _same(((" min", " minutes"), 60.0, 0)),
    "motor.power": {
        "EU": (_KW, _KW, _PS),
        "UK": (((" bhp",), HP, 0), _PS),
        "US": (((" hp", " horsepower"), HP, 0),),
        "CN": (_KW,),
    },
    "motor.torque": _by_market(
        ((" N·m", " Nm"), 1.0, 0), ((" lb-ft", " lb·ft", " pound-feet"), LBFT, 0)
    ),
    "motor.top_speed": _by_market(
        ((" km/h",), 1.0, 0), ((" mph",), MILE, 0), uk=((" mph",), MILE, 0)
    ),
    "motor.acceleration": _same(((" s", " seconds", " sec"), 1.0, 1)),
    "interior.screen_size": _same((("-inch", " in.", '"', " inches"), INCH, 1)),
    "interior.cargo_volume": _by_market(
        ((" L", " litres"), 1.0, 0), ((" cu ft", " cubic feet"), CUFT, 1)
    ),
    "general.weight": _by_market(((" kg",), 1.0, 0), ((" lbs", " lb"), LB, 0)),
    "general.length": _by_market(_MM, _IN),
    "general.width": _by_market(_MM, _IN),
    "general.height": _by_market(_MM, _IN),
}
_CURRENCY = {"EU": ("€", "EUR"), "UK": ("£", "GBP"), "US": ("$", "USD"), "CN": ("¥", "CNY")}

FEATURE_TEXT: dict[str, tuple[str, ...]] = {
    "adaptive_cruise_control": ("adaptive cruise control", "intelligent cruise control"),
    "lane_keeping_assist": ("lane keeping assist", "lane-centring assistance"),
    "blind_spot_monitoring": ("blind-spot monitoring", "blind spot warning"),
    "automatic_emergency_braking": (
        "automatic emergency braking",
        "autonomous emergency braking (AEB)",
    ),
    "traffic_sign_recognition": ("traffic sign recognition",),
    "parking_assist": ("automated parking assist", "remote park assist"),
    "surround_view_camera": ("360° camera", "surround-view camera"),
    "driver_monitoring": ("driver attention monitoring", "driver monitoring"),
    "highway_assist": ("highway assist", "motorway assist"),
    "rear_cross_traffic_alert": ("rear cross-traffic alert",),
}


@dataclass(frozen=True)
class Style:
    """How one brochure writes numbers: its market and its decimal separator."""

    market: str
    decimal_comma: bool


@dataclass(frozen=True)
class Item:
    """A true statement to print: field, qualifier and value in canonical units.

    Numbers are canonical (km, kW, s, mm, ...); money is in the market's currency;
    features are a tuple of term names.
    """

    field: str
    qualifier: str | None
    value: float | tuple[str, ...]


@dataclass(frozen=True)
class Written:
    """An item as printed, and the ground truth that the print implies."""

    item: Item
    text: str
    """The value as printed (`310 miles`, `150 kW (204 PS)`, `€49,990`, a feature list)."""
    truth: tuple[tuple[float | str, str], ...]
    """(canonical value, canonical unit) per fact a reader can take from `text`."""
    split: tuple[str, str] | None = None
    """(number, unit) of a plain quantity, for tables that put the unit in the label."""


def number(value: float, decimals: int, style: Style) -> str:
    """Format like the market does: `4,694` or, with decimal commas, `4694` and `5,9`."""
    if decimals == 0:
        return str(round(value)) if style.decimal_comma else f"{round(value):,}"
    text = f"{value:,.{decimals}f}" if not style.decimal_comma else f"{value:.{decimals}f}"
    return text.replace(".", ",") if style.decimal_comma else text


def _decimals_of(value: float) -> int:
    return 0 if float(value).is_integer() else 1


def _quantity(field: str, value: float, style: Style, rng: random.Random) -> tuple[str, str, float]:
    spellings, size, decimals = rng.choice(_UNITS[field][style.market])
    shown = round(value / size, _decimals_of(value) if decimals is None else decimals)
    places = _decimals_of(shown) if decimals is None else decimals
    return number(shown, places, style), rng.choice(spellings), shown * size


def write(item: Item, style: Style, rng: random.Random) -> Written:
    """Print `item` the way a brochure of `style` would."""
    if isinstance(item.value, tuple):
        names = [rng.choice(FEATURE_TEXT[term]) for term in item.value]
        text = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]
        return Written(item, text, tuple((term, "") for term in item.value))
    value = float(item.value)
    if item.field == "general.price":
        symbol, code = _CURRENCY[style.market]
        return Written(item, symbol + number(value, 0, style), ((value, code),))
    if item.field in ("interior.seats", "driver_assistance.level"):
        return Written(item, str(round(value)), ((value, ""),))
    shown, unit, truth = _quantity(item.field, value, style, rng)
    text = shown + unit
    split: tuple[str, str] | None = (shown, unit.strip(" -"))
    if item.field == "motor.power" and style.market == "EU" and rng.random() < 0.4:
        # `150 kW (204 PS)`: one fact, its alternative spelling in brackets.
        alt_value, alt_unit = (value, "kW") if text.endswith("PS") else (value / PS, "PS")
        text = f"{text} ({number(round(alt_value), 0, style)} {alt_unit})"
        split = None
    return Written(item, text, ((round(truth, 6), _CANONICAL[item.field]),), split)


_CANONICAL = {
    "battery.capacity": "kWh",
    "battery.range": "km",
    "battery.charging_power": "kW",
    "battery.charge_time": "s",
    "motor.power": "kW",
    "motor.torque": "N·m",
    "motor.top_speed": "km/h",
    "motor.acceleration": "s",
    "interior.screen_size": "mm",
    "interior.cargo_volume": "L",
    "general.weight": "kg",
    "general.length": "mm",
    "general.width": "mm",
    "general.height": "mm",
}

_PROSE: dict[str, tuple[str, ...]] = {
    "battery.capacity": (
        "Its {v} battery pack sits low in the floor.",
        "A usable battery capacity of {v} keeps long journeys relaxed.",
        "The battery stores {v} of energy.",
    ),
    "battery.range": (
        "It covers up to {v} on a single charge ({q}).",
        "Expect a range of up to {v} ({q} cycle).",
        "{q} range: up to {v}.",
    ),
    "battery.range/": ("Drive up to {v} on a single charge.", "Range: up to {v}."),
    "battery.charging_power/DC": (
        "DC fast charging runs at up to {v}.",
        "Peak charging power is {v} at a DC fast charger.",
        "On a rapid charger it charges at up to {v}.",
    ),
    "battery.charging_power/AC": (
        "At home, the {v} on-board charger refills the battery overnight.",
        "AC charging is supported at up to {v}.",
    ),
    "battery.charge_time": (
        "From 10 to 80% takes just {v}.",
        "A 10\u201380% charge takes {v}.",
        "Charging from 10% to 80% takes around {v}.",
    ),
    "motor.power": (
        "The electric motor delivers {v}.",
        "With {v} of power on tap, overtaking is effortless.",
        "Peak output: {v}.",
    ),
    "motor.torque": ("{v} of torque is available from standstill.", "Peak torque reaches {v}."),
    "motor.top_speed": ("Top speed is limited to {v}.", "It tops out at {v}."),
    "motor.acceleration/0-100 km/h": (
        "0\u2013100 km/h takes {v}.",
        "It sprints from 0 to 100 km/h in {v}.",
    ),
    "motor.acceleration/0-60 mph": ("0-60 mph takes {v}.", "It sprints from 0 to 60 mph in {v}."),
    "driver_assistance.level": (
        "SAE Level {v} driver assistance comes as standard.",
        "Level {v} assisted driving is standard on every trim.",
    ),
    "driver_assistance.features": (
        "Standard safety systems include {v}.",
        "Assistance features: {v}.",
    ),
    "interior.seats": (
        "Room for {v} adults makes family trips easy.",
        "Seating for {v}.",
        "It offers {v} seats in two rows.",
    ),
    "interior.screen_size": (
        "A {v} touchscreen sits at the centre of the dashboard.",
        "The central display measures {v}.",
    ),
    "interior.cargo_volume": (
        "The boot holds {v}.",
        "{v} of luggage space swallows a holiday.",
        "Cargo space: {v}.",
    ),
    "general.price": (
        "Prices start at {v}.",
        "Priced from {v}.",
        "Starting at {v}, it undercuts rivals.",
    ),
    "general.weight": ("Kerb weight is {v}.", "It weighs {v}."),
    "general.length": ("Length {v}.", "At {v} long, it fits any garage."),
    "general.width": ("Width {v}.", "It is {v} wide."),
    "general.height": ("Height {v}.", "It stands {v} tall."),
}

_LABELS: dict[str, tuple[str, ...]] = {
    "battery.capacity": ("Battery capacity (usable)", "Usable capacity", "Battery size"),
    "battery.range": ("Range ({q})", "{q} range", "Driving range ({q} combined)"),
    "battery.range/": ("Range", "Driving range"),
    "battery.charging_power/DC": (
        "DC charging power (peak)",
        "Max. DC charging",
        "Fast charging (DC)",
    ),
    "battery.charging_power/AC": ("On-board charger (AC)", "AC charging power"),
    "battery.charge_time": ("Charging time 10-80%", "10\u201380% charge time"),
    "motor.power": ("Max. power", "Power output", "System power"),
    "motor.torque": ("Max. torque", "Torque"),
    "motor.top_speed": ("Top speed", "Maximum speed"),
    "motor.acceleration/0-100 km/h": ("0\u2013100 km/h", "Acceleration 0-100 km/h"),
    "motor.acceleration/0-60 mph": ("0-60 mph", "Acceleration 0-60 mph"),
    "driver_assistance.level": ("Driver assistance",),
    "driver_assistance.features": ("Assistance features", "Safety and assistance"),
    "interior.seats": ("Seats", "Seating capacity"),
    "interior.screen_size": ("Central touchscreen", "Infotainment display"),
    "interior.cargo_volume": ("Boot volume", "Luggage capacity", "Cargo space"),
    "general.price": ("List price", "Starting price"),
    "general.weight": ("Kerb weight", "Curb weight", "Unladen weight"),
    "general.length": ("Length", "Overall length"),
    "general.width": ("Width", "Width (excl. mirrors)"),
    "general.height": ("Height",),
}


def _key(table: dict[str, tuple[str, ...]], item: Item) -> tuple[str, ...]:
    specific = f"{item.field}/{item.qualifier or ''}"
    return table.get(specific) or table[item.field]


def prose(written: Written, rng: random.Random) -> str:
    """A sentence stating `written`, label before or after the value."""
    sentence = rng.choice(_key(_PROSE, written.item))
    value = written.text
    if written.item.field == "driver_assistance.level":
        value = value.split()[-1]
    return sentence.format(v=value, q=written.item.qualifier or "")


def table_label(written: Written, rng: random.Random, unit_in_label: bool) -> tuple[str, str]:
    """A spec-table row (label, value) for `written`; `Top speed (km/h) | 180` if asked."""
    label = rng.choice(_key(_LABELS, written.item)).format(q=written.item.qualifier or "")
    if written.item.field == "driver_assistance.level":
        return label, f"SAE Level {written.text}"
    if unit_in_label and written.split is not None and written.split[1] not in ('"', "in."):
        return f"{label} ({written.split[1]})", written.split[0]
    return label, written.text


def range_pair(first: Written, second: Written) -> str:
    """One sentence with two ranges, each followed by its cycle: `614 km (CLTC) or ...`."""
    return (
        f"Range: up to {first.text} ({first.item.qualifier}) or "
        f"{second.text} ({second.item.qualifier})."
    )


Layout = Literal["table", "prose", "two_column"]


@dataclass(frozen=True)
class Block:
    """A heading, a paragraph, or a two-column table of (label, value) rows."""

    kind: Literal["header", "subtitle", "heading", "paragraph", "table"]
    text: str = ""
    rows: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class BrochureContent:
    """Everything on and about one brochure."""

    layout: Layout
    blocks: tuple[Block, ...]
    title: str | None
    author: str
    subject: str
    created: datetime
    back_cover: bool = False
