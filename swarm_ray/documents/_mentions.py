"""Mentions: where a text states a number with a unit, and what that number is.

A mention is the raw material of synonym extraction: `77 kWh`, `310 miles`, `15.4-inch`,
and, in tables that put the unit in the label, `Top speed (km/h) 180`. Some look like
mentions but state nothing on their own and are dropped here: an interval bound
(`0-100 km/h` is a sprint, not a speed), a rate (`16.5 kWh/100 km` is a consumption, not
a capacity) and an alternative spelling in brackets (`204 PS (150 kW)` is one value).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from swarm_ray.documents._facts import QuantityKind
from swarm_ray.documents._units import lookup_unit, unit_regex

__all__ = ["NUMBER", "Mention", "find_mentions", "parse_number"]

NUMBER = r"(?<![\w.,/])(?P<num>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:[.,]\d+)?)"
"""A number as brochures print it: `1,234.5`, `4694`, `77,4`, not part of `ID.4`."""
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_INTERVAL_BEFORE = re.compile(r"\d\s*%?\s*(?:-|\u2013|—|to)\s*$")
_ALTERNATE_GAP = re.compile(r"^\s*[(/]\s*$")


@dataclass(frozen=True)
class Mention:
    """A number with a unit at [start, end) of a page's text."""

    start: int
    end: int
    value: float
    value_text: str
    unit: str
    kind: QuantityKind


@functools.cache
def _mention_regex() -> re.Pattern[str]:
    return re.compile(
        NUMBER
        + r"(?P<sep>[ \t\u00a0]*(?:\n[ \t]*)?(?:-[ \t]?)?)"
        + r"(?P<unit>"
        + unit_regex()
        + r")(?![A-Za-z0-9])"
        # a rate such as 16.5 kWh/100 km is not a capacity
        + r"(?!\s*/\s*\d*\s*[A-Za-z])"
    )


def parse_number(text: str) -> float:
    """Parse `1,234.5`, `77,4` (decimal comma) or `520` to a float.

    A comma followed by exactly three digits groups thousands; any other comma is a
    decimal comma, as European brochures write it.
    """
    text = text.strip()
    if _THOUSANDS.match(text):
        return float(text.replace(",", ""))
    return float(text.replace(",", "."))


@functools.cache
def _label_unit_regex() -> re.Pattern[str]:
    """A bare number after a bracketed unit on one line: `Top speed (km/h) 180`."""
    return re.compile(
        r"\((?P<unit>" + unit_regex() + r")\)[ \t]*:?[ \t]*" + NUMBER + r"(?=[ \t]*(?:\n|$))"
    )


def _mentions(text: str) -> list[Mention]:
    found: list[Mention] = []
    for match in _mention_regex().finditer(text):
        unit = lookup_unit(match["unit"])
        if unit is None or _INTERVAL_BEFORE.search(
            text[max(0, match.start() - 12) : match.start()]
        ):
            continue
        found.append(
            Mention(
                start=match.start(),
                end=match.end(),
                value=parse_number(match["num"]),
                value_text=" ".join(match.group(0).split()),
                unit=unit.symbol,
                kind=unit.kind,
            )
        )
    for match in _label_unit_regex().finditer(text):
        unit = lookup_unit(match["unit"])
        if unit is None:
            continue
        # The mention is the number alone, so the label left of the unit stays its context.
        found.append(
            Mention(
                start=match.start("num"),
                end=match.end("num"),
                value=parse_number(match["num"]),
                value_text=f"{match['num']} ({match['unit']})",
                unit=unit.symbol,
                kind=unit.kind,
            )
        )
    found.sort(key=lambda m: m.start)
    return found


def _primary(mentions: list[Mention], text: str) -> list[Mention]:
    """Drop alternative spellings: `204 PS (150 kW)` states one value, not two."""
    kept: list[Mention] = []
    for mention in mentions:
        previous = kept[-1] if kept else None
        if (
            previous is not None
            and previous.kind is mention.kind
            and _ALTERNATE_GAP.match(text[previous.end : mention.start])
        ):
            continue
        kept.append(mention)
    return kept


def find_mentions(text: str) -> list[Mention]:
    """Return the mentions in `text` that state a value, in text order."""
    return _primary(_mentions(text), text)
