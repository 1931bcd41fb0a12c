"""Mentions: where a text states a number with a unit, and what that number is.

A mention is the raw material of extraction: `77 kWh`, `310 miles`, `15.4-inch`, `10 Gb/s`,
`-40 ℃` and, in tables that put the unit in the label, `Top speed (km/h) 180`. Units are
read by `read_unit`: any unit `lookup_unit` knows, written after the number (a datasheet
spelling with spaces such as `deg C` or `kW h` included). Some look like mentions but
state nothing on their own and are dropped by `find_mentions`: an interval bound
(`0-100 km/h` is a sprint, not a speed), a rate (`16.5 kWh/100 km` is a consumption, not
a capacity) and an alternative spelling in brackets (`204 PS (150 kW)` is one value).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from swarm_ray.documents._units import Unit, lookup_unit, unit_phrase_regex

__all__ = ["NUMBER", "SPACED_THOUSANDS", "Mention", "find_mentions", "parse_number", "read_unit"]

SPACED_THOUSANDS = r"\d{1,3}(?:[\u00a0\u2009\u202f]\d{3}| 0\d{2})+(?!\d)"
"""Thousands set apart by a space: a narrow or no-break one (`3 750`), or a plain one
before a group a column value never starts with (`5 000`, `1 000 000`). `3 750` with a
plain space is also how a table prints a min and a max (`5 200 kHz`), so it stays two."""
NUMBER = (
    r"(?<![\w.,/])(?P<num>\d{1,3}(?:,\d{3})+(?!\d)(?:\.\d+)?|"
    + SPACED_THOUSANDS
    + r"(?:\.\d+)?|\d+(?:[.,]\d+)?)"
)
"""A number as documents print it: `1,234.5`, `4694`, `77,4`, `5 000`, not part of `ID.4`."""
_GROUP_SPACE = re.compile(r"(?<=\d)[ \u00a0\u2009\u202f](?=\d{3}(?!\d))")
_THOUSANDS = re.compile(r"^\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_INTERVAL_BEFORE = re.compile(r"\d\s*%?\s*(?:-|\u2013|—|to)\s*$")
_INTERVAL_AFTER = re.compile(r"\s*(?:-|\u2013|—|to)\s*\d")
_ALTERNATE_GAP = re.compile(r"^\s*[(/]\s*$")
_TOKEN = re.compile(r"[A-Za-z°º˚℃℉µμΩ%‰][A-Za-z0-9°º˚µμΩ%‰/·⋅²³_]*")
_GAP = re.compile(r"[ \t\u00a0]*(?:\n[ \t]*)?(?:-[ \t]?)?")
_RATE_AFTER = re.compile(r"\s*/\s*\d*\s*[A-Za-z]")
_NEXT_IS_WORD = re.compile(r"[A-Za-z0-9]")
_BARE_INCH_OK = re.compile(r"\s*(?:$|[),;\n])")
_DROPPED_GLYPH = re.compile(r" (?P<rest>[A-Za-z]{1,3})\b")
"""`13 V/ s`: a space where the text layer dropped a glyph (the `µ` of `V/µs`) after `/`."""


@dataclass(frozen=True)
class Mention:
    """A number with a unit at [start, end) of a page's text."""

    start: int
    end: int
    value: float
    value_text: str
    unit: str
    """The unit as written (`kWh`, `miles`, `°C`)."""
    kind: str
    """What the unit measures (`energy`, `length`, `temperature`, ...)."""


def parse_number(text: str) -> float:
    """Parse `1,234.5`, `77,4` (decimal comma), `5 000`, `-40` or `520` to a float.

    A comma followed by exactly three digits groups thousands; any other comma is a
    decimal comma, as European documents write it.
    """
    text = text.strip().replace("\u2212", "-").replace("\u2013", "-").lstrip("+")
    text = _GROUP_SPACE.sub("", text)  # `5 000`: spaced thousands (`SPACED_THOUSANDS`)
    text = text.replace(". ", ".")  # `1. 7`: a decimal split by the text layer
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("-").strip()
    if _THOUSANDS.match(text):
        return sign * float(text.replace(",", ""))
    return sign * float(text.replace(",", "."))


@functools.cache
def _phrase() -> re.Pattern[str]:
    return re.compile(unit_phrase_regex())


def _candidates(token: str) -> list[str]:
    """Unit spellings a token may hold: itself, without a footnote digit, before a `/`."""
    if re.search(r"/\s*\d", token):  # `kWh/100`: a rate's numerator at most
        return [token.split("/", 1)[0]]
    out = [token]
    bare = token.rstrip("0123456789¹²³")
    if bare != token and bare:
        out.append(bare)
    if "/" in token:
        out.append(token.split("/", 1)[0])
    return out


_HYPHENATED = re.compile(r"(?P<prefix>[kKMGT])-(?P<unit>bits?|bytes?)(?![A-Za-z])", re.IGNORECASE)


def read_unit(text: str, pos: int, *, gap: bool = True) -> tuple[Unit, int] | None:
    """Read the unit written at `pos` (after a number), returning it and where it ends.

    Args:
        text: The text.
        pos: Where the number ends.
        gap: Allow spaces (and one line break or hyphen) between number and unit.

    Returns:
        `None` when no known unit follows, when the unit is a rate's numerator
        (`kWh/100 km`), or for a bare `in` that is a word (`5 in two rows`).
    """
    start = pos
    if gap:
        match = _GAP.match(text, pos)
        start = match.end() if match else pos
    hyphenated = _HYPHENATED.match(text, start)
    if hyphenated is not None:  # `32M-BIT`, `1G-bit`: the prefix, a hyphen, the unit
        unit = lookup_unit(hyphenated["prefix"] + hyphenated["unit"].lower())
        if unit is not None:
            return unit, hyphenated.end()
    phrase = _phrase().match(text, start)
    if phrase is not None and phrase.end() > start:
        end = phrase.end()
        if not (end < len(text) and _NEXT_IS_WORD.match(text, end)) or text[end - 1] == ".":
            unit = lookup_unit(phrase.group(0))
            if unit is not None:
                return unit, end
    token = _TOKEN.match(text, start)
    if token is None:
        return None
    if token.group(0).endswith("/") and (rest := _DROPPED_GLYPH.match(text, token.end())):
        unit = lookup_unit(token.group(0) + rest["rest"])
        if unit is not None:
            return unit, rest.end()
    for candidate in _candidates(token.group(0)):
        unit = lookup_unit(candidate)
        if unit is None:
            continue
        end = start + len(candidate)
        if _RATE_AFTER.match(text, end):
            return None  # a rate such as 16.5 kWh/100 km is not a capacity
        if candidate == "in" and not _BARE_INCH_OK.match(text, end):
            return None
        return unit, end
    return None


@functools.cache
def _number_regex() -> re.Pattern[str]:
    return re.compile(NUMBER)


@functools.cache
def _label_unit_regex() -> re.Pattern[str]:
    """A bare number after a bracketed unit on one line: `Top speed (km/h) 180`."""
    return re.compile(r"\((?P<unit>[^()\n]{1,24})\)[ \t]*:?[ \t]*" + NUMBER + r"(?=[ \t]*(?:\n|$))")


def _mentions(text: str) -> list[Mention]:
    found: list[Mention] = []
    for match in _number_regex().finditer(text):
        read = read_unit(text, match.end())
        if read is None or _INTERVAL_BEFORE.search(
            text[max(0, match.start() - 12) : match.start()]
        ):
            continue
        unit, end = read
        if _INTERVAL_AFTER.match(text, end):
            continue  # `10% to 80%`: the first bound of an interval, not a value
        found.append(
            Mention(
                start=match.start(),
                end=end,
                value=parse_number(match["num"]),
                value_text=" ".join(text[match.start() : end].split()),
                unit=unit.text,
                kind=unit.kind,
            )
        )
    for match in _label_unit_regex().finditer(text):
        label_unit = lookup_unit(match["unit"])
        if label_unit is None:
            continue
        # The mention is the number alone, so the label left of the unit stays its context.
        found.append(
            Mention(
                start=match.start("num"),
                end=match.end("num"),
                value=parse_number(match["num"]),
                value_text=f"{match['num']} ({match['unit']})",
                unit=label_unit.text,
                kind=label_unit.kind,
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
            and previous.kind == mention.kind
            and _ALTERNATE_GAP.match(text[previous.end : mention.start])
        ):
            continue
        kept.append(mention)
    return kept


def find_mentions(text: str) -> list[Mention]:
    """Return the mentions in `text` that state a value, in text order."""
    return _primary(_mentions(text), text)
