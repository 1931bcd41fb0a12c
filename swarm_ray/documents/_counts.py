"""Counts stated in words: `four 2-input NAND gates`, `Quad`, `two input`.

A field of unit `count` names what it counts: `number of gates` and `gate count` count
gates, `inputs per gate` counts inputs. Documents state counts before the counted noun,
in digits or in words (`four`, `dual`, `quadruple`, `hex`), often with adjectives between
(`four 2-input NAND gates`), or glued to it by a hyphen when the noun qualifies another
(`2-input NAND gates`: two inputs each). `count_mentions` finds those in a page's text;
the table reader still reads counts that stand in a labelled cell.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

__all__ = ["CountMention", "count_mentions", "counted_noun", "qualifiers", "unit_counts"]

_NUMBER_WORDS = {
    "one": 1, "single": 1, "two": 2, "dual": 2, "twin": 2, "double": 2, "three": 3,
    "triple": 3, "four": 4, "quad": 4, "quadruple": 4, "five": 5, "six": 6, "hex": 6,
    "seven": 7, "eight": 8, "octal": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "sixteen": 16,
}  # fmt: skip
_NUMBER = r"(?:\d{1,3}|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")"
_BETWEEN = 3
"""Words an adjective phrase may put between a count and its noun (`2-input NAND`)."""
_MULTIPLIERS = {
    w: _NUMBER_WORDS[w] for w in ("dual", "triple", "quad", "quadruple", "hex", "octal")
}
"""The number words a device's title leads with to say how many units it holds."""
_CONTAINS = (
    r"(?:consists\s+of|contains|provides|comprises|integrates|includes|incorporates|features)"
)
"""Verbs a description says what a part holds with."""


@dataclass(frozen=True)
class CountMention:
    """A count the text states for a noun."""

    value: int
    start: int
    end: int
    hyphenated: bool
    """`2-input`: the count of a noun that qualifies another (inputs of each gate)."""


def counted_noun(name: str) -> str | None:
    """What a count field counts: `gate` of `number of gates`, `input` of `inputs per gate`.

    A name in the plural counts its last word: `timer` of `timers`, `source` of
    `interrupt sources` (`qualifiers` gives the words before it).
    """
    words = [w for w in re.findall(r"[a-z/]+", name.lower()) if w]
    if len(words) >= 3 and words[0] == "number" and words[1] == "of":
        noun = words[2]
    elif (len(words) >= 3 and words[1] == "per") or (len(words) == 2 and words[1] == "count"):
        noun = words[0]
    elif words and _PLURAL.search(words[-1]) and "per" not in words and "of" not in words:
        noun = words[-1]
    else:
        return None
    return re.sub(r"(?<=[^s])s$", "", noun) if len(noun) > 3 else noun


_PLURAL = re.compile(r"^[a-z/]{2,}[^s]s$")
"""A plural noun (`timers`, `UARTs`, `lines`), not a word ending in `ss` or a unit (`bus`)."""


def qualifiers(name: str) -> tuple[str, ...] | None:
    """The words a name in the plural puts before what it counts, or `None`.

    `interrupt` of `interrupt sources`; `None` for a name of another form (`number of
    gates`).

    A count of `sources` states the field's only where those words qualify it, and
    `8-channel ADC` counts the channels of `ADC channels` (the count glued to the noun
    it qualifies is one of the field's own, not a count per something else).
    """
    words = [w for w in re.findall(r"[a-z/]+", name.lower()) if w]
    if not words or not _PLURAL.search(words[-1]) or "per" in words or "of" in words:
        return None
    if len(words) == 2 and words[1] == "count":
        return None
    return tuple(words[:-1])


def _value(token: str) -> int:
    return int(token) if token.isdigit() else _NUMBER_WORDS[token.lower()]


@functools.cache
def _regexes(noun: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    # `Timer/Counters`: a noun paired with another by a slash, in their number.
    body = re.escape(noun) + r"(?:e?s)?(?:/[A-Za-z-]+)?"
    spaced = re.compile(
        rf"(?<![\w.-])(?P<n>{_NUMBER})(?P<gap>,?(?:\s+[\w/]+(?:-[\w/]+)?){{0,{_BETWEEN}}}?)\s+"
        rf"(?P<noun>{body})\b",
        re.IGNORECASE,
    )
    glued = re.compile(rf"(?<![\w.-])(?P<n>{_NUMBER})[-\s]{body}\b(?=\s+\w)", re.IGNORECASE)
    return spaced, glued


def _counted_between(gap: str) -> bool:
    """Whether the words between a count and its noun hold another count (`two of four`).

    A hyphenated adjective's number does not count (`four 2-input NAND gates`).
    """
    return bool(re.search(rf"\b{_NUMBER}\b", gap, re.IGNORECASE)) and not re.search(r"\d-\w", gap)


def count_mentions(noun: str, text: str) -> list[CountMention]:
    """Counts `text` states of `noun`, in text order.

    A count stands before the noun with at most a few words between, none of them a
    number but in a hyphenated adjective (`four 2-input NAND gates` counts gates four,
    not two), and agrees with it (`two ... gate` is not a count of gates); `2-input` or
    `two input` before another noun counts the noun per that other thing (`hyphenated`).
    """
    spaced, glued = _regexes(noun)
    out: list[CountMention] = []
    flat = text.replace("\n", " ")
    for match in spaced.finditer(flat):
        gap = match["gap"]
        if _counted_between(gap):
            continue
        if re.search(r"[.;:]", gap):
            continue
        value = _value(match["n"])
        written = match["noun"].lower()
        plural = written != noun.lower() and written.endswith("s")
        if (value == 1) == plural:
            continue  # `a two input NAND gate`: one gate; the count agrees with its noun
        out.append(CountMention(value, match.start(), match.end(), False))
    for match in glued.finditer(flat):
        out.append(CountMention(_value(match["n"]), match.start(), match.end(), True))
    return sorted(out, key=lambda m: m.start)


@functools.cache
def _unit_regexes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    words = "|".join(sorted(_MULTIPLIERS, key=len, reverse=True))
    title = re.compile(rf"(?:^|\n)[ \t]*(?P<n>{words})\b(?=[ \t-]+[\w(])", re.IGNORECASE)
    contains = re.compile(
        rf"\b{_CONTAINS}\s+(?P<n>{_NUMBER})(?P<gap>(?:\s+[\w/]+(?:-[\w/]+)?){{0,{_BETWEEN}}}?)"
        r"\s+(?P<noun>[a-z]{3,}s)\b",
        re.IGNORECASE,
    )
    return title, contains


def unit_counts(text: str) -> list[CountMention]:
    """How many units a part holds, said without naming what a field counts.

    A device's title leads with a multiplier (`Quadruple 2-input NAND Schmitt trigger`,
    `Dual operational amplifier`, `Hex inverter`), and its description says what it
    holds (`provides six inverting buffers`, `consists of four Schmitt trigger
    circuits`). Either states how many of the part's units (gates, channels,
    amplifiers) one package holds, whatever the datasheet calls them; a field counting
    those finds them here when the text never puts a count before the field's own noun.
    """
    title, contains = _unit_regexes()
    out = [
        CountMention(_MULTIPLIERS[m["n"].lower()], m.start("n"), m.end("n"), False)
        for m in title.finditer(text)
    ]
    for match in contains.finditer(text.replace("\n", " ")):
        if _counted_between(match["gap"]):
            continue
        value = _value(match["n"])
        if value > 1:
            out.append(CountMention(value, match.start("n"), match.end(), False))
    return sorted(out, key=lambda m: m.start)
