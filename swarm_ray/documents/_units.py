"""Units: how they are spelled in brochures, and conversion to one canonical unit per kind.

Brochures write the same unit many ways (`kWh`, `kW·h`, `kilowatt-hours`) and the same
quantity in different units (`km`, `miles`). Extraction recognises the spellings through
`unit_regex` and `lookup_unit`; `normalise_facts` converts every value to the canonical
unit of its `QuantityKind` with pint and records each conversion, so a comparison never
mixes units and a reviewer can see what was converted.

Qualifiers (test cycles such as WLTP and EPA) are never touched here: a range converted
from miles keeps its `EPA` label and is only compared with other EPA ranges.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

import pint
from pydantic import BaseModel, ConfigDict

from swarm_ray.documents._facts import Conversion, Fact, NormalisedFact, QuantityKind

__all__ = [
    "CANONICAL_UNITS",
    "NormalisationResult",
    "UnitDef",
    "canonical_unit",
    "convert_value",
    "lookup_currency",
    "lookup_unit",
    "normalise_facts",
    "unit_regex",
]

CANONICAL_UNITS: dict[QuantityKind, str] = {
    QuantityKind.ENERGY: "kWh",
    QuantityKind.DISTANCE: "km",
    QuantityKind.LENGTH: "mm",
    QuantityKind.POWER: "kW",
    QuantityKind.TORQUE: "N·m",
    QuantityKind.SPEED: "km/h",
    QuantityKind.DURATION: "s",
    QuantityKind.VOLUME: "L",
    QuantityKind.MASS: "kg",
    QuantityKind.NUMBER: "",
    QuantityKind.CATEGORY: "",
}
"""Canonical unit symbol per kind. Money has none: currencies are not converted."""

_DIGITS = 6
"""Decimal places kept after a conversion; enough for mm, not so many that float noise shows."""


@dataclass(frozen=True)
class UnitDef:
    """A unit the extractor recognises.

    Attributes:
        symbol: The normalised symbol stored in facts (`mi`, `hp`, `N·m`).
        pint_expr: The pint expression for the unit. Note `PS` is petasiemens in pint,
            hence explicit expressions rather than the symbols.
        kind: The quantity kind; a unit only fills fields of its kind.
        spellings: Regular expressions for the ways documents write the unit.
    """

    symbol: str
    pint_expr: str
    kind: QuantityKind
    spellings: tuple[str, ...]


_K = QuantityKind
# `\s` rather than a space inside a spelling: a PDF line may break between its words.
_UNITS: tuple[UnitDef, ...] = (
    UnitDef(
        "kWh",
        "kilowatt_hour",
        _K.ENERGY,
        (r"[kK]Wh", r"[kK]W·h", r"[kK]W\.h", r"[kK]W h", r"[kK]W-h", r"(?i:kilowatt[- ]?hours?)"),
    ),
    UnitDef("km", "kilometer", _K.DISTANCE, (r"km", r"(?i:kilomet(?:re|er)s?)")),
    UnitDef("mi", "mile", _K.DISTANCE, (r"(?i:miles?)", r"mi")),
    UnitDef("kW", "kilowatt", _K.POWER, (r"[kK]W", r"(?i:kilowatts?)")),
    UnitDef("hp", "horsepower", _K.POWER, (r"hp", r"bhp", r"(?i:horsepower)")),
    UnitDef("PS", "metric_horsepower", _K.POWER, (r"PS", r"(?i:metric\shorsepower)")),
    UnitDef(
        "N·m",
        "newton * meter",
        _K.TORQUE,
        (r"N·m", r"Nm", r"N m", r"N-m", r"N\.m", r"(?i:newton[- ]?met(?:re|er)s?)"),
    ),
    UnitDef(
        "lbf·ft",
        "force_pound * foot",
        _K.TORQUE,
        (r"lb[- ·]?ft", r"lbf[- ·]?ft", r"(?i:pound[-\s]f(?:ee|oo)t)"),
    ),
    UnitDef("km/h", "kilometer / hour", _K.SPEED, (r"km/h", r"km/hr", r"kph")),
    UnitDef("mph", "mile / hour", _K.SPEED, (r"mph", r"(?i:miles\sper\shour)")),
    UnitDef("s", "second", _K.DURATION, (r"s", r"secs?", r"(?i:seconds?)")),
    UnitDef("min", "minute", _K.DURATION, (r"min", r"mins", r"(?i:minutes?)")),
    UnitDef("h", "hour", _K.DURATION, (r"h", r"hrs?", r"(?i:hours?)")),
    UnitDef("mm", "millimeter", _K.LENGTH, (r"mm", r"(?i:millimet(?:re|er)s?)")),
    UnitDef("cm", "centimeter", _K.LENGTH, (r"cm", r"(?i:centimet(?:re|er)s?)")),
    # Bare `in` only before punctuation or a line end: "5 in two rows" is not inches.
    UnitDef(
        "in",
        "inch",
        _K.LENGTH,
        (r"(?i:inch(?:es)?)", r"in\.(?=[\s.,;)]|$)", r"in(?=\s*(?:$|[),;\n]))", r'"'),
    ),
    UnitDef("L", "liter", _K.VOLUME, (r"L", r"(?i:lit(?:re|er)s?)")),
    UnitDef("cu ft", "cubic_foot", _K.VOLUME, (r"cu\.?\s?ft", r"(?i:cubic\sf(?:ee|oo)t)", r"ft³")),
    UnitDef("kg", "kilogram", _K.MASS, (r"kg", r"(?i:kilo(?:gram)?s)")),
    UnitDef("lb", "pound", _K.MASS, (r"lbs?", r"(?i:pounds)")),
)

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


@functools.cache
def unit_regex() -> str:
    """Return one regex alternation of every known unit spelling.

    Longer spellings come first so that `kW·h` wins over `kW` and `lb-ft` over `lb`. The
    caller adds the boundary after the unit.
    """
    spellings = [s for unit in _UNITS for s in unit.spellings]
    spellings.sort(key=len, reverse=True)
    return "(?:" + "|".join(spellings) + ")"


@functools.cache
def _compiled_spellings() -> tuple[tuple[re.Pattern[str], UnitDef], ...]:
    return tuple((re.compile(s), unit) for unit in _UNITS for s in unit.spellings)


def lookup_unit(text: str) -> UnitDef | None:
    """Return the unit that `text` spells, or `None` when it is not a known spelling."""
    text = text.strip()
    for pattern, unit in _compiled_spellings():
        # Some spellings look ahead (`in.` must be followed by a space or a line end):
        # give them the line end that the isolated text lost.
        match = pattern.match(text + "\n")
        if match is not None and match.end() == len(text):
            return unit
    return None


def lookup_currency(text: str) -> str | None:
    """Return the ISO code for a currency symbol or code (`€` -> `EUR`), else `None`."""
    return _CURRENCIES.get(text.strip().upper() if text.isalpha() else text.strip())


def canonical_unit(kind: QuantityKind) -> str | None:
    """Return the canonical unit symbol of `kind`; `None` for money, which has none."""
    return CANONICAL_UNITS.get(kind)


@functools.cache
def _registry() -> pint.UnitRegistry[float]:
    # Building a registry parses pint's definition files (about half a second): do it once
    # per process, lazily, so importing the package stays cheap.
    return pint.UnitRegistry()


@functools.cache
def _symbol_to_unit() -> dict[str, UnitDef]:
    return {unit.symbol: unit for unit in _UNITS}


def convert_value(value: float, unit: str, kind: QuantityKind) -> tuple[float, str]:
    """Convert `value` in `unit` to the canonical unit of `kind`.

    Args:
        value: The magnitude as written.
        unit: A unit symbol (`UnitDef.symbol`), any spelling the lexicon knows
            (`kW·h`, `miles`), or for money a currency code or symbol.
        kind: The kind the value must have; guards against pint happily converting
            N·m to kWh, which share a dimensionality.

    Returns:
        The converted value and the canonical unit.

    Raises:
        ValueError: When the unit is unknown or not of `kind`.
    """
    if kind is QuantityKind.MONEY:
        code = lookup_currency(unit)
        if code is None:
            raise ValueError(f"unknown currency `unit`={unit!r}")
        return value, code
    target = CANONICAL_UNITS[kind]
    if kind in (QuantityKind.NUMBER, QuantityKind.CATEGORY):
        if unit:
            raise ValueError(f"`unit`={unit!r} given for a {kind.value!r} value")
        return value, target
    unit_def = _symbol_to_unit().get(unit) or lookup_unit(unit)
    if unit_def is None:
        raise ValueError(f"unknown `unit`={unit!r}")
    if unit_def.kind is not kind:
        raise ValueError(f"`unit`={unit!r} measures {unit_def.kind.value!r}, not {kind.value!r}")
    if unit_def.symbol == target:
        return value, target
    target_def = _symbol_to_unit()[target]
    registry = _registry()
    converted = registry.Quantity(value, unit_def.pint_expr).to(target_def.pint_expr)
    return round(float(converted.magnitude), _DIGITS), target


class NormalisationResult(BaseModel):
    """Facts in canonical units, and what could not be normalised."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    facts: tuple[NormalisedFact, ...]
    """One entry per input fact that could be normalised, in input order."""
    warnings: tuple[str, ...] = ()
    """One line per fact left out (unknown unit, unit of the wrong kind)."""


def normalise_facts(facts: Iterable[Fact]) -> NormalisationResult:
    """Convert every fact to the canonical unit of its kind, recording each conversion.

    A fact whose unit cannot be converted is left out with a warning rather than raising,
    because one odd unit in one brochure should not sink a comparison of a hundred.

    Args:
        facts: Extracted facts, values and units as written.

    Returns:
        The normalised facts (qualifiers untouched) and a warning per fact left out.
    """
    out: list[NormalisedFact] = []
    warnings: list[str] = []
    for fact in facts:
        if isinstance(fact.value, str):
            if fact.kind is not QuantityKind.CATEGORY:
                warnings.append(
                    f"`{fact.field}` in `{fact.source}`: non-numeric value {fact.value!r} skipped"
                )
                continue
            out.append(NormalisedFact(fact=fact, value=fact.value, unit=""))
            continue
        try:
            value, unit = convert_value(fact.value, fact.unit, fact.kind)
        except ValueError as error:
            warnings.append(f"`{fact.field}` in `{fact.source}` page {fact.page}: {error}")
            continue
        conversion = None
        if unit != fact.unit or value != fact.value:
            conversion = Conversion(
                from_value=fact.value, from_unit=fact.unit, to_value=value, to_unit=unit
            )
        out.append(NormalisedFact(fact=fact, value=value, unit=unit, conversion=conversion))
    return NormalisationResult(facts=tuple(out), warnings=tuple(warnings))
