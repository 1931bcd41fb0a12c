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
from swarm_ray.documents._unit_grammar import MAX_CHARS, UnitSyntaxError, parse_factors

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
        (r"^([mµμunk]?)V\s?(?:pp|p-p|rms|RMS|r\.m\.s\.?|dc|DC|ac|AC|pk)$", r"\1V", False),
        (r"^([mµμun]?)A\s?(?:rms|RMS|dc|DC|pk)$", r"\1A", False),
        (
            r"^(?:pcs|pieces?|pins?|channels?|lanes?|ports?|I/Os?|GPIOs?|units?|cycles?)$",
            "count",
            True,
        ),
        (r"^%\s?RH$", "percent", False),
        (r"^([kMm]?)(?:Ohm|OHM|ohm)s?$", r"\1ohm", False),
    )
)
_SPACED_PREFIX = r"([kKMGT])[ \u00a0]((?:[Bb]ytes?|BYTES?|[Bb]its?|BITS?)(?![A-Za-z]))"
"""`4K Bytes`, `128 M bits`: a memory prefix written apart from its unit (`K` is kilo here,
never kelvin)."""

_READINGS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(spelling), reading)
    for spelling, reading in (
        # A prefix and `S` is siemens, except in a time field: `µS`, `nS` are seconds there.
        (r"(?P<p>[munpµμ]?)S", r"\g<p>s"),
        (r"(?P<p>[munpµμ]?)(?:SEC|Sec|sec)", r"\g<p>s"),
        # `C` alone is a coulomb, `F` a farad, except in a temperature field (`0 to 70 C`).
        (r"C", "degC"),
        (r"F", "degF"),
        # The ring of `°` read as a letter or a digit by a text layer (`70 OC`).
        (r"[Oo0]C", "degC"),
        (r"[Oo0]F", "degF"),
        # `K` as kilo before a unit's symbol (`KHz`, `KV`, `KΩ`); alone it is kelvin.
        (r"K(?P<u>Hz|V|W|VA|A|Ω|[Oo]hms?|bps|sps|SPS|g|m|J)", r"k\g<u>"),
        # A bit in title case or capitals (`24-Bit`), too short for the rule below.
        (r"Bit|BIT", "bit"),
        # A unit's name in capitals or title case (`WATTS`, `Years`, `Bits`).
        (r"(?P<w>[A-Z][a-z]{3,}|[A-Z]{4,})", "lower"),
    )
)
"""Spellings with a reading besides pint's, or where pint has none, as data: a spelling
(matched whole) and the reading it may have, in the unit grammar (`lower`: the spelling
in lower case). `lookup_unit` takes such a reading where pint knows no unit of that
spelling, or where the field's declared kind asks for it (`µS` in a time field). The
reading's kind comes from its unit, so a row need not say which kind it serves."""

_LEVEL = re.compile(r"^(?:dB|db|DB)(?P<suffix>[A-Za-zµμ~]*(?:\(\w+\))?)$")
_SPELLED = r"|[Kk]ilo-?|[Mm]ega-?|[Gg]iga-?|[Tt]era-?"
_BYTES = re.compile(rf"^(?P<prefix>[kKMGTP]{_SPELLED})(?:B|[Bb]ytes?)$")
_BITS = re.compile(rf"^(?P<prefix>[kKMGTP]{_SPELLED})(?:b|bits?|Bits?)$")
"""Memory sizes with a prefix, as a letter (`Mbit`, `KB`) or spelled out (`megabit`)."""
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
    text = re.sub(f"^{_SPACED_PREFIX}$", r"\1\2", text)
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
    parts.append(f"(?:{_SPACED_PREFIX})")
    parts.append(r"(?:dB|db)[A-Za-zµμ]*")
    return "(?:" + "|".join(parts) + ")"


@functools.cache
def _base_dimensions() -> tuple[Any, Any]:
    """The dimensionalities of a force and a length (pint's own names, parsed once)."""
    registry = _registry()
    return registry.get_dimensionality("[force]"), registry.get_dimensionality("[length]")


@functools.lru_cache(maxsize=1024)
def _name_dimensionality(name: str) -> Any:
    """A unit's dimensionality from its canonical name, built without pint's parser."""
    registry = _registry()
    return registry.Unit(registry.UnitsContainer({name: 1})).dimensionality


def _kind(unit: Any) -> str:
    dimensionality = unit.dimensionality
    if not dimensionality:
        return "ratio"
    name = _dimension_names().get(dimensionality)
    if name == "energy":
        # A force times a length is a torque (N·m, lbf·ft), whatever pint's dimensions say:
        # comparing a motor's torque with a battery's energy would be nonsense.
        force, length = _base_dimensions()
        parts = [_name_dimensionality(name) for name in unit._units]
        if force in parts and length in parts:
            return "torque"
    return name or str(dimensionality)


def _words_only(text: str) -> bool:
    """A lower-case word of four letters or more: a unit only if it names one."""
    return text.isalpha() and text.islower() and len(text) > 3


def _pint_unit(expr: str) -> Any:
    """The pint unit of an expression in the unit grammar (`_unit_grammar`), or `None`.

    pint's registry only names each factor (`get_name`, a table look-up); pint's parser,
    which evaluates arithmetic, never sees the text.
    """
    try:
        factors = parse_factors(expr)
    except UnitSyntaxError:
        return None
    return _unit_of(factors)


@functools.lru_cache(maxsize=4096)
def _unit_of(factors: tuple[Any, ...]) -> Any:
    registry = _registry()
    powers: dict[str, int] = {}
    for factor in factors:
        try:
            name = registry.get_name("degree" if factor.name == "°" else factor.name)
        except Exception:  # pint raises several types for a name it does not define
            return None
        powers[name] = powers.get(name, 0) + factor.power
    return registry.Unit(registry.UnitsContainer({n: p for n, p in powers.items() if p}))


@functools.lru_cache(maxsize=16_384)
def lookup_unit(text: str, kind: str | None = None) -> Unit | None:
    """Read a unit as written (`Gb/s`, `℃`, `kW·h`, `Kbytes`), or `None` if it is not one.

    With `kind` (the declared field's), an ambiguous spelling takes the reading of that
    kind (`_READINGS`): `µS` is microseconds for a time, `C` degrees Celsius for a
    temperature. Words that pint happens to know but documents use as words (`at`, `are`)
    are not units. Text outside the unit grammar is no unit; nothing is evaluated.
    """
    text = text.strip()
    if not text or len(text) > 40:
        return None
    plain = _plain_unit(text)
    if kind is not None and (plain is None or plain.kind != kind):
        for reading in _readings(text):
            if reading.kind == kind:
                return reading
    if plain is None:
        return next(iter(_readings(text)), None)
    return plain


def _readings(text: str) -> list[Unit]:
    """The readings `_READINGS` gives a spelling besides pint's, in the table's order."""
    found: list[Unit] = []
    for spelling, reading in _READINGS:
        if (match := spelling.fullmatch(text)) is None:
            continue
        written = text.lower() if reading == "lower" else match.expand(reading)
        unit = _plain_unit(written)
        if unit is not None:
            found.append(Unit(text=text, expr=unit.expr, kind=unit.kind))
    return found


def _plain_unit(text: str) -> Unit | None:
    """`lookup_unit` without a field's kind: the one reading pint and `_PHRASES` give."""
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
    unit = _pint_unit(expr)
    if unit is None:
        return None
    if _words_only(text) and text not in _KNOWN_WORDS and not _is_plain_unit_word(text):
        return None
    return Unit(text=text, expr=expr, kind=_kind(unit))


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


_NAME_ONLY = re.compile(r"[^\W\d_]{1,32}")


@functools.lru_cache(maxsize=4096)
def _is_plain_unit_word(word: str) -> bool:
    """Whether a lower-case word names a unit (`volts`, `kilometres`, `degrees`)."""
    if _NAME_ONLY.fullmatch(word) is None:
        return False
    try:
        name = _registry().get_name(word)
    except Exception:  # pint raises several types for a name it does not define
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
    if len(clean) > MAX_CHARS:
        raise ValueError(
            f"unit {text[:MAX_CHARS]!r}... is {len(clean)} characters long; a unit has at "
            f"most {MAX_CHARS}"
        )
    unit = lookup_unit(clean)
    if unit is not None:
        return unit
    try:
        parse_factors(_normalise(clean))
    except UnitSyntaxError as error:
        raise ValueError(
            f"unit {text!r} {error.why}; a unit is names with `*`, one `/` and small "
            "powers (`m/s**2`, `kWh`, `°C`), never an expression"
        ) from None
    raise ValueError(
        f"unknown unit {text!r}: not a unit pint knows (`Gb/s`, `°C`, `mW`, `dBm`, "
        "`KB`, ...), `count` for a number of things or `currency` for a price"
    )


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
    target = lookup_unit(to_unit)
    if target is None:
        raise ValueError(f"unknown `unit`={to_unit!r}")
    source = lookup_unit(unit, target.kind)  # `µS` is a time where one is asked for
    if source is None:
        raise ValueError(f"unknown `unit`={unit!r}")
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
    converted = _registry().Quantity(value, _pint_unit(source.expr)).to(_pint_unit(target.expr))
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
