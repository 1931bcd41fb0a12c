"""Units: any unit pint parses, plus the spellings datasheets use, and conversion.

A field declares a unit (`Gb/s`, `°C`, `mW`, `KB`); its *kind* comes from the unit's
dimensionality in pint, so a field accepts any value whose unit converts to its own, and
nothing else. `lookup_unit` reads a unit as documents write it; `convert` converts a value
between two units of one kind; `normalise_facts` converts every fact to the unit its field
declared and records the conversion, so a comparison never mixes units and a reviewer can
see what was converted.

pint's own definitions are used with a few changes that datasheets need, applied to its
definition file when the registry is built (see `_PINT_CHANGES`): a bit is information,
not a pure number (so `Gb/s` is a data rate, not a frequency); an angle and a count are
their own dimensions (so `142°` never fills a percentage); `b` is a bit, not a barn; `fps`
is frames per second, not feet per second; `px` is a pixel. Where a datasheet spelling is
not pint's (`℃`, `deg C`, `Kbytes`, `MP`, `Vpp`) `_normalise` rewrites it first. Memory
sizes use the binary prefixes datasheets mean (`KB` is 1,024 bytes, `128 Mbit` and `128
megabits` are 2^27 bits); rates (`Mb/s`) keep decimal ones.

Decibel units (`dBm`, `dBi`, `dB`) are each their own kind and are never converted:
`20 dBm` is not `100 mW` in any comparison a reader expects. Currencies are one kind,
`money`, and are not converted either.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

import pint
from pydantic import BaseModel, ConfigDict

from swarm_ray.documents._facts import Conversion, Fact, NormalisedFact

__all__ = [
    "COUNT",
    "MONEY",
    "TEXT",
    "NormalisationResult",
    "Unit",
    "convert",
    "lookup_currency",
    "lookup_unit",
    "normalise_facts",
    "parse_unit",
    "plausible",
    "unit_phrase_regex",
]

COUNT = "count"
"""Kind of a number of things (`18 GPIO pins`, `5 seats`): no unit is written."""
MONEY = "money"
"""Kind of prices: currencies are kept apart, never converted."""
TEXT = "text"
"""Kind of a field without a unit: a term or a phrase."""

_DIGITS = 9
"""Significant digits kept after a conversion: enough for any datasheet, no float noise."""

_PINT_CHANGES = {
    "radian = [] = rad": "radian = [angle] = rad",
    "bit = []": "bit = [information] = b",
    "count = []": "count = [count]",
    "barn = 1e-28 * meter ** 2 = b": "barn = 1e-28 * meter ** 2",
    "foot_per_second = foot / second = fps": "foot_per_second = foot / second",
    "css_pixel = inch / 96 = px": "css_pixel = inch / 96",
    "pixel = [printing_unit] = _ = dot": "pixel = [printing_unit] = px = dot",
}
"""Edits of pint's `default_en.txt` (see the module docstring for why)."""

_PINT_EXTRA = """
frame = [frame]
frames_per_second = frame / second = fps = FPS
metric_horsepower_ps = 735.49875 * watt = PS
operation = [operation]
operations_per_second = operation / second = OPS
floating_point_operations_per_second = operation / second = FLOPS
"""
"""Units pint lacks: frames per second (a frame rate, not a clock frequency), `PS` (pint's
`PS` is a petasiemens), and operations per second (`GOPS`, `TOPS`: not a frequency)."""

_DIMENSION_NAMES = {
    "[length]": "length",
    "[mass]": "mass",
    "[time]": "time",
    "[temperature]": "temperature",
    "[current]": "current",
    "[luminosity]": "luminous intensity",
    "[substance]": "amount of substance",
    "[information]": "information",
    "[angle]": "angle",
    "[count]": COUNT,
    "[printing_unit]": "pixels",
    "[operation] / [time]": "compute rate",
    "[frame] / [time]": "frame rate",
    "[information] / [time]": "data rate",
    "[electric_potential]": "voltage",
    "[velocity]": "speed",
    "[frequency]": "frequency",
}
"""Readable names where pint has none, or one less familiar (`magnetomotive force` for
a current); pint's own dimension names name the rest."""
_SKIPPED_DIMENSIONS = ("gaussian", "esu", "_cgs", "magnetomotive")
"""pint dimension names from unit systems nobody writes a datasheet in."""

_BINARY = {"k": "Ki", "K": "Ki", "M": "Mi", "G": "Gi", "T": "Ti", "P": "Pi"}

# Spellings with a space or a symbol pint cannot read, rewritten to pint expressions.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(p, re.IGNORECASE if i else 0), r)
    for p, r, i in (
        (r"^(?:°|º|˚|deg\.?|degrees?)\s*C(?:elsius)?$", "degC", True),
        (r"^(?:°|º|˚|deg\.?|degrees?)\s*F(?:ahrenheit)?$", "degF", True),
        (r"^℃$", "degC", False),
        (r"^℉$", "degF", False),
        (r"^frames?\s*(?:/|per)\s*s(?:ec(?:ond)?)?$", "fps", True),
        (r"^([kKMG]?)(?:sps|SPS|S/s|Sa/s|samples?/s)$", r"\1Hz", False),
        (r"^(?:cu\.?\s?ft|cubic\s+f(?:ee|oo)t)$", "cubic_foot", True),
        (r"^(?:lbf?[\s·⋅*.-]?ft|pound[\s-]f(?:ee|oo)t)$", "force_pound * foot", True),
        (r"^(?:N[\s·⋅*.-]m|newton[\s-]?met(?:re|er)s?)$", "newton * meter", False),
        (r"^(?:Nm)$", "newton * meter", False),
        (r"^([kMGT]?)W[\s·⋅*.-]h$", r"\1W * hour", False),
        (r"^kilowatt[\s-]?hours?$", "kilowatt_hour", True),
        (r"^metric\s+horsepower$", "metric_horsepower_ps", True),
        (r"^miles?\s+per\s+hour$", "mile / hour", True),
        (r"^(?:kph|km/hr)$", "kilometer / hour", False),
        (r"^bhp$", "horsepower", False),
        (r'^(?:"|”|″|in\.)$', "inch", False),
        (r"^(?:M|Mega)\s?(?:P|px|Px|pix|pixels?|Pixels?)$", "megapixel", False),
        (r"^(?:k|K)\s?(?:px|pix|pixels?)$", "kilopixel", False),
        (r"^([mµμunk]?)V\s?(?:pp|p-p|rms|RMS|dc|DC|ac|AC|pk)$", r"\1V", False),
        (r"^([mµμun]?)A\s?(?:rms|RMS|dc|DC|pk)$", r"\1A", False),
        (r"^(?:pcs|pieces?|pins?|channels?|lanes?|ports?|I/Os?|GPIOs?|units?)$", "count", True),
        (r"^%\s?RH$", "percent", False),
        (r"^([kMm]?)(?:Ohm|OHM|ohm)s?$", r"\1ohm", False),
    )
)
_LEVEL = re.compile(r"^(?:dB|db|DB)(?P<suffix>[A-Za-zµμ~]*(?:\(\w+\))?)$")
_SPELLED = r"|[Kk]ilo-?|[Mm]ega-?|[Gg]iga-?|[Tt]era-?"
_BYTES = re.compile(rf"^(?P<prefix>[kKMGTP]{_SPELLED})(?:B|[Bb]ytes?)$")
_BITS = re.compile(rf"^(?P<prefix>[kKMGTP]{_SPELLED})(?:b|bits?|Bits?)$")
"""Memory sizes with a prefix, as a letter (`Mbit`, `KB`) or spelled out (`megabit`)."""
_TOKEN = re.compile(r"[A-Za-z_°µμΩ%‰][\w°µμΩ%‰]*")
_SUPERSCRIPT_POWER = re.compile(r"^((?:[mckuµμ]?m|in|ft|yd))([23])$")
_CURRENCIES: dict[str, str] = {
    "€": "EUR",
    "EUR": "EUR",
    "$": "USD",
    "USD": "USD",
    "US$": "USD",
    "£": "GBP",
    "GBP": "GBP",
    "¥": "CNY",
    "CNY": "CNY",
    "RMB": "CNY",
}
_NOT_UNITS = frozenset(
    [
        "a",
        "an",
        "at",
        "are",
        "as",
        "point",
        "points",
        "line",
        "lines",
        "hand",
        "hands",
        "drop",
        "drops",
        "cup",
        "cups",
        "stone",
        "knot",
        "light",
        "pi",
        "tex",
        "denier",
        "cord",
        "dozen",
        "score",
        "gross",
        "mil",
        "has",
        "galileo",
        "nit",
        "stere",
        "bag",
        "barrel",
        "bbl",
        "pint",
        "ounce",
        "second_radiation_constant",
        "x",
        "X",
        "bus",
        "frame",
        "frames",
    ]
)
"""Words pint reads as units that a document almost always means as words (`2 are`, `at`)."""


@dataclass(frozen=True)
class Unit:
    """A unit as a document or a declaration writes it.

    Attributes:
        text: As written (`Gb/s`, `°C`); what a report shows.
        expr: The pint expression (`gigabit / second`); empty for levels and money.
        kind: What it measures (`data rate`, `temperature`, `dBm`, `money`, `count`).
    """

    text: str
    expr: str
    kind: str


@functools.cache
def _registry() -> pint.UnitRegistry[float]:
    """Pint's registry with the datasheet changes; built once per process (~0.1 s)."""
    text = (resources.files("pint") / "default_en.txt").read_text(encoding="utf-8")
    constants = (resources.files("pint") / "constants_en.txt").read_text(encoding="utf-8")
    for old, new in _PINT_CHANGES.items():
        if old not in text:  # a pint release that changed its definitions: fail loudly
            raise RuntimeError(f"pint's definitions no longer contain {old!r}")
        text = text.replace(old, new)
    text = text.replace("@import constants_en.txt", constants) + _PINT_EXTRA
    registry: pint.UnitRegistry[float] = pint.UnitRegistry(None)
    registry.load_definitions(text.splitlines())
    return registry


@functools.cache
def _dimension_names() -> dict[Any, str]:
    """Dimensionality -> a readable kind name, from the dimensions pint itself defines."""
    registry = _registry()
    names: dict[Any, str] = {}
    text = (resources.files("pint") / "default_en.txt").read_text(encoding="utf-8")
    for match in re.finditer(r"^\[(\w+)\]\s*=", text, re.MULTILINE):
        name = match.group(1)
        if not any(skip in name for skip in _SKIPPED_DIMENSIONS):
            names.setdefault(registry.get_dimensionality(f"[{name}]"), name.replace("_", " "))
    for expression, name in _DIMENSION_NAMES.items():
        names[registry.get_dimensionality(expression)] = name
    return names


def _normalise(text: str) -> str:
    """Rewrite a datasheet spelling into a pint expression (see the module docstring)."""
    text = " ".join(text.replace("\u00a0", " ").split())
    for pattern, replacement in _PHRASES:
        if pattern.match(text):
            return pattern.sub(replacement, text)
    text = re.sub(r"\s*(?:/|\bper\b)\s*", "/", text)
    text = re.sub(r"\s*[·⋅•*]\s*|(?<=[A-Za-z])[- ](?=[A-Za-z])", "*", text)
    per_time = "/" in text
    parts = re.split(r"([/*])", text)
    out: list[str] = []
    for part in parts:
        if part in ("/", "*"):
            out.append(part)
            continue
        part = _SUPERSCRIPT_POWER.sub(r"\1**\2", part)
        if (m := _BYTES.match(part)) is not None:
            prefix = m["prefix"][0].upper()
            part = (
                (prefix.lower() if prefix == "K" else prefix) + "B"
                if per_time
                else (_BINARY[prefix] + "B")
            )
        elif (m := _BITS.match(part)) is not None:
            prefix = m["prefix"][0].upper()
            part = (
                (prefix.lower() if prefix == "K" else prefix) + "bit"
                if per_time
                else _BINARY[prefix] + "bit"
            )
        elif part in ("°C", "ºC", "℃"):
            part = "degC"
        out.append(part)
    expr = "".join(out)
    if "degC" in expr and expr != "degC":
        expr = expr.replace("degC", "delta_degC")  # a rate per degree is a difference
    return expr


@functools.cache
def unit_phrase_regex() -> str:
    """An alternation of the spellings above that a text scanner must read as one unit.

    They contain spaces or symbols (`kW h`, `deg C`, `in.`, `Vpp`) where a scan for a
    unit token would stop early; `lookup_unit` reads each of them.
    """
    parts = []
    for pattern, _ in _PHRASES:
        body = pattern.pattern.removeprefix("^").removesuffix("$")
        parts.append(f"(?i:{body})" if pattern.flags & re.IGNORECASE else f"(?:{body})")
    parts.append(r"(?:dB|db)[A-Za-zµμ]*")
    return "(?:" + "|".join(parts) + ")"


def _kind(quantity: Any) -> str:
    dimensionality = quantity.dimensionality
    if not dimensionality:
        return "ratio"
    name = _dimension_names().get(dimensionality)
    if name == "energy":
        # A force times a length is a torque (N·m, lbf·ft), whatever pint's dimensions say:
        # comparing a motor's torque with a battery's energy would be nonsense.
        registry = _registry()
        parts = [registry.get_dimensionality(u) for u in quantity.units._units]
        force = registry.get_dimensionality("[force]")
        length = registry.get_dimensionality("[length]")
        if force in parts and length in parts:
            return "torque"
    return name or str(dimensionality)


def _words_only(text: str) -> bool:
    """A lower-case word of four letters or more: a unit only if it names one."""
    return text.isalpha() and text.islower() and len(text) > 3


@functools.cache
def lookup_unit(text: str) -> Unit | None:
    """Read a unit as written (`Gb/s`, `℃`, `kW·h`, `Kbytes`), or `None` if it is not one.

    Words that pint happens to know but documents use as words (`at`, `are`) are not units.
    """
    text = text.strip()
    if not text or len(text) > 40:
        return None
    if (code := lookup_currency(text)) is not None:
        return Unit(text=text, expr=code, kind=MONEY)
    if (level := _LEVEL.match(text)) is not None:
        return Unit(text=text, expr="", kind="dB" + level["suffix"])
    if text in _NOT_UNITS:
        return None
    expr = _normalise(text)
    if not expr or re.fullmatch(r"[\d.\s]+", expr):
        return None
    if expr == COUNT:
        return Unit(text=text, expr=COUNT, kind=COUNT)
    registry = _registry()
    try:
        quantity = registry.Quantity(1, expr)
    except Exception:  # pint raises several types for text that is not a unit
        return None
    if _words_only(text) and text not in _KNOWN_WORDS and not _is_plain_unit_word(text):
        return None
    return Unit(text=text, expr=expr, kind=_kind(quantity))


_KNOWN_WORDS = frozenset(
    [
        "secs",
        "mins",
        "kbps",
        "mbps",
        "gbps",
        "kbit",
        "mbit",
        "gbit",
        "kohm",
        "mohm",
        "kwh",
        "mwh",
        "msps",
        "ksps",
    ]
)
"""Lower-case symbols of four letters or more that are units, not words."""


@functools.cache
def _is_plain_unit_word(word: str) -> bool:
    """Whether a lower-case word names a unit (`volts`, `kilometres`, `degrees`)."""
    registry = _registry()
    try:
        name = str(registry.Unit(word))
    except Exception:
        return False
    stem = word.rstrip("s").replace("re", "er")
    return stem[:4] in name.replace("re", "er") or name.endswith(stem[-4:])


def parse_unit(text: str) -> Unit:
    """Read a declared unit; raises `ValueError` naming it when it is not a unit.

    Besides pint's units and the datasheet spellings, two words declare kinds without a
    unit: `count` (a number of things) and `currency` (a price in any currency).
    """
    clean = text.strip()
    if clean.lower() == "currency":
        return Unit(text="", expr="", kind=MONEY)
    unit = lookup_unit(clean)
    if unit is None:
        raise ValueError(
            f"unknown unit {text!r}: not a unit pint knows (`Gb/s`, `°C`, `mW`, `dBm`, "
            "`KB`, ...), `count` for a number of things or `currency` for a price"
        )
    return unit


def lookup_currency(text: str) -> str | None:
    """Return the ISO code for a currency symbol or code (`€` -> `EUR`), else `None`."""
    text = text.strip()
    return _CURRENCIES.get(text.upper() if text.isalpha() else text)


def _round(value: float) -> float:
    return float(f"{value:.{_DIGITS}g}")


def convert(value: float, unit: str, to_unit: str) -> float:
    """Convert `value` from `unit` to `to_unit` (both as written, e.g. `mi` to `km`).

    Raises:
        ValueError: When either is not a unit, or the two measure different kinds.
    """
    source, target = lookup_unit(unit), lookup_unit(to_unit)
    if source is None:
        raise ValueError(f"unknown `unit`={unit!r}")
    if target is None:
        raise ValueError(f"unknown `unit`={to_unit!r}")
    if source.kind != target.kind:
        raise ValueError(f"`unit`={unit!r} measures {source.kind!r}, not {target.kind!r}")
    if source.kind == MONEY:
        if source.expr != target.expr and target.expr:
            raise ValueError(f"currencies are not converted ({unit!r} to {to_unit!r})")
        return value
    if not source.expr:  # a level (dBm): only ever the same level
        if source.text != target.text:
            raise ValueError(f"{unit!r} is not converted to {to_unit!r}")
        return value
    if source.expr == target.expr:
        return value
    registry = _registry()
    converted = registry.Quantity(value, source.expr).to(target.expr)
    return _round(float(converted.magnitude))


_PLAUSIBLE = (1e-5, 1e7)
"""Magnitudes a value may take in its field's declared unit: a user who declares `nm`
for a wavelength or `mV` for an offset does not mean 3 x 10^15 of them or 10^-9."""


def plausible(value: float) -> bool:
    """Whether a value in its field's unit has a size a user would declare that unit for.

    Zero is always plausible.
    """
    magnitude = abs(value)
    return magnitude == 0 or _PLAUSIBLE[0] <= magnitude <= _PLAUSIBLE[1]


class NormalisationResult(BaseModel):
    """Facts in their fields' declared units, and what could not be normalised."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    facts: tuple[NormalisedFact, ...]
    """One entry per input fact that could be normalised, in input order."""
    warnings: tuple[str, ...] = ()
    """One line per fact left out (unknown unit, unit of the wrong kind)."""
    notes: dict[str, str] = {}
    """Source document id -> a note for the report (the part numbers it covers)."""


def _target(fact: Fact) -> str:
    """The unit a fact is reported in: its field's declared unit; money keeps its currency."""
    if fact.kind == MONEY:
        return lookup_currency(fact.unit) or fact.unit
    return fact.field_unit or fact.unit  # a count keeps its declared word (`count`, `pins`)


def normalise_facts(facts: Iterable[Fact]) -> NormalisationResult:
    """Convert every fact to the unit its field declared, recording each conversion.

    A fact whose unit cannot be converted is left out with a warning rather than raising,
    because one odd unit in one datasheet should not sink a comparison of a hundred.
    """
    out: list[NormalisedFact] = []
    warnings: list[str] = []
    for fact in facts:
        if isinstance(fact.value, str):
            if fact.kind != TEXT:
                warnings.append(
                    f"`{fact.field}` in `{fact.source}`: non-numeric value {fact.value!r} skipped"
                )
                continue
            out.append(NormalisedFact(fact=fact, value=fact.value, unit=""))
            continue
        target = _target(fact)
        if fact.kind == COUNT or fact.unit == target:
            out.append(NormalisedFact(fact=fact, value=fact.value, unit=target))
            continue
        try:
            value = convert(fact.value, fact.unit, target)
        except ValueError as error:
            warnings.append(f"`{fact.field}` in `{fact.source}` page {fact.page}: {error}")
            continue
        if not plausible(value):
            warnings.append(
                f"`{fact.field}` in `{fact.source}` page {fact.page}: {fact.value_text!r} is "
                f"{value:g} {target}, not a plausible value of the field: dropped"
            )
            continue
        conversion = Conversion(
            from_value=fact.value, from_unit=fact.unit, to_value=value, to_unit=target
        )
        out.append(NormalisedFact(fact=fact, value=value, unit=target, conversion=conversion))
    return NormalisationResult(facts=tuple(out), warnings=tuple(warnings))
