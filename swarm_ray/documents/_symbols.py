"""Other ways documents name a field: its symbol, its initials, its words reordered.

A user declares `drain-source voltage`; the datasheet's table says `VDSS`, `Drain-to-Source
Voltage` or `Collector to Emitter Voltage`. These forms are derived from the field's name
by general conventions of technical writing, never from a list of products:

- **Quantity symbols** (IEC 60027 and the semiconductor symbols of IEC 60747): the
  quantity's letter (`V` voltage, `I` current, `R` resistance, `f` frequency, `t` time, `P`
  power, `C` capacitance, `Q` charge, `T` temperature) followed by the initials of the
  terminals or qualifiers the name lists (`drain-source` -> `DS`, `forward` -> `F`,
  `reverse recovery` -> `rr`) and a bracketed condition (`threshold` -> `(th)`,
  `saturation` -> `(sat)`, `on-resistance` -> `(on)`). `VDS` also stands as `VDSS` (a
  rating, the third terminal shorted; `VCEO` open, `VCER`, `VCEX`; `(sus)` sustaining)
  and, where a condition follows, may carry terminal
  letters the name leaves out (`gate threshold voltage` -> `VGS(th)`, `VGE(th)`).
- **Initials** of a name of two words or more that is not a quantity with a symbol
  (`slew rate` -> `SR`, never before a digit: `OV` is not in `OV5640`), with the common
  abbreviations of single words (`bandwidth` -> `BW`: `GBW`).
- **Word order**: a two-word name reversed (`Voltage Supply` for `supply voltage`).
- **Connectives**: words joined by a hyphen may be joined by `to` (`drain-to-source`,
  `collector to emitter`).
- **Compounds**: a short acronym after the letters that name its kinds (`RAM` in
  `SRAM`, `DRAM`, `SDRAM`, `PSRAM`), a word
  closing a camel-case name (`CodeFlash`), and the first word of `X memory` alone.
- **Statistic words** in the name are not part of the label: `max clock frequency` is
  also found as `clock frequency` (the statistic still comes from the document).

Symbols are matched case-sensitively in their letter (`ID`, not the word `id`); a
one-letter subscript must be written as such (`IF`, not the word `If`).
"""

from __future__ import annotations

import functools
import re

from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._labels import plural

__all__ = ["head_word", "implied_statistics", "label_forms", "limit_forms", "partial_words"]

_QUANTITY = {
    "voltage": "V",
    "voltages": "V",
    "current": "I",
    "currents": "I",
    "resistance": "R",
    "frequency": "[fF]",
    "time": "t",
    "power": "P",
    "dissipation": "P",
    "capacitance": "C",
    "charge": "Q",
    "temperature": "T",
    "impedance": "Z",
    "inductance": "L",
}
"""The quantity a field's last word names, and its letter."""
_TERMINAL = {
    "drain": ("D",),
    "source": ("S",),
    "gate": ("G",),
    "collector": ("C",),
    "emitter": ("E",),
    "base": ("B",),
    "anode": ("A",),
    "cathode": ("K",),
    "forward": ("F",),
    "reverse": ("R",),
    "recovery": ("R",),
    "input": ("I", "IN"),
    "output": ("O", "OUT"),
    "offset": ("O", "OS"),
    "quiescent": ("Q",),
    "switching": ("SW", "S"),
    "supply": ("CC", "DD", "S", "SUP"),
    "bias": ("B",),
    "leakage": ("L",),
    "rise": ("r",),
    "fall": ("f",),
    "clock": ("CLK", "C"),
    "operating": ("OPR", "OP", "A"),
    "storage": ("STG", "S"),
    "ambient": ("A",),
    "dissipation": ("D", "tot", "TOT", "Diss"),
}
"""Words of a name that become subscript letters, with their usual spellings."""
_CONDITION = {
    "threshold": "th",
    "saturation": "sat",
    "on": "on",
    "off": "off",
    "average": "AV",
    "breakdown": "BR",
}
"""Words of a name that become a bracketed condition after the subscript."""
_SILENT = frozenset({"continuous", "rated", "static", "peak", "dc", "total", "maximum", "max"})
"""Words that qualify a rating without a letter of their own."""
_ABBREVIATION = {"bandwidth": "BW", "frequency": "F", "temperature": "T", "voltage": "V"}
"""Single words written as more than one initial in acronyms (`GBW`)."""
_STATISTIC = re.compile(r"\b(?:max(?:imum)?|min(?:imum)?|typ(?:ical)?|nom(?:inal)?)\b\.?\s*", re.I)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[\s\-_/]+", name.lower()) if w]


_PAIRS = {("input", "offset"): ("IO", "OS")}
"""Word pairs with a subscript of their own: an input offset voltage is `VIO` or `VOS`."""


_MOST_SUBSCRIPTS = 64
"""Spellings of one symbol's subscript at most (three words of four spellings each): a
tenant's name of ten known words had a million, 126 MB of pattern and minutes to compile."""


def _subscripts(words: list[str]) -> list[str] | None:
    """Regex alternatives for the subscript of `words`, or `None` if one has no letter.

    A word with no usual spelling is written by its initial (`zener test current` ->
    `IZT`, `junction temperature` -> `TJ`), as IEC 60747 writes most qualifiers, and the
    last of two or more also in full (`IZtest`); a name of more than three such words
    has no symbol anyone writes.
    """
    for pair, joined in _PAIRS.items():
        if tuple(words[:2]) == pair:
            rest = _subscripts(words[2:]) if words[2:] else [""]
            return [s + r for s in joined for r in rest or []] or None
    options = [""]
    unknown = 0
    kept = [w for w in words if not (w in _SILENT or (w in _QUANTITY and w not in _TERMINAL))]
    for at, word in enumerate(kept):  # `power dissipation`: `P` already says `power`
        spellings = _TERMINAL.get(word)
        if spellings is None:
            if not word.isalpha():
                return None
            unknown += 1
            # The last qualifier may also be written out, lower case (`IZtest`, `VZnom`).
            last = at == len(kept) - 1 and at > 0
            spellings = (word[0].upper(), word) if last else (word[0].upper(),)
        if len(options) * len(spellings) > _MOST_SUBSCRIPTS:
            return None  # `supply supply ... voltage`: each word multiplied the spellings
        options = [o + s for o in options for s in spellings]
    if unknown > 2:
        return None
    return [o for o in options if o] or None


def _symbol(name: str) -> str | None:
    """A case-sensitive regex for the symbol of a quantity named `name`, if it has one."""
    words = _words(name)
    if not words or words[-1] not in _QUANTITY:
        return None
    letter = _QUANTITY[words[-1]]
    head = words[:-1]
    if words[-1] == "dissipation":  # `PD`, `Ptot`: the dissipation is the subscript
        head = [w for w in head if w != "power"] + ["dissipation"]
    conditions = [_CONDITION[w] for w in head if w in _CONDITION]
    terms = [w for w in head if w not in _CONDITION]
    subscripts = _subscripts(terms)
    if subscripts is None and (terms or not conditions):
        return None
    bodies: list[str] = []
    if conditions:
        subscripts = [*(subscripts or []), ""]  # `Vth`, `R(on)`: the condition alone
    for sub in subscripts or ():
        body = "".join(
            re.escape(c) if not c.isalpha() or len(sub) == 1 else f"[{c.upper()}{c.lower()}]"
            for c in sub
        )
        if conditions:
            condition = "".join(rf"\(?(?i:{re.escape(c)})\)?" for c in conditions)
            bodies.append(rf"{body}[A-Z]{{0,2}}\s?{condition}")
        else:
            # A rating's third terminal: shorted, open, through a resistor (`VCES`, `VCEO`).
            rating = "[SORX]?" if len(sub) >= 2 and sub.isupper() else ""
            bodies.append(body + rating + r"(?:\((?:AV|av|sus|SUS)\))?(?!\()")
    return rf"(?-i:{letter}[\s_]?(?:{'|'.join(bodies)}))"


def _initials(name: str) -> list[str]:
    words = [w for w in _words(_STATISTIC.sub("", name)) if w not in {"of", "and", "the", "per"}]
    if len(words) < 2 or words[-1] in _QUANTITY:  # a quantity is named by its symbol
        return []
    plain = "".join(w[0].upper() for w in words)
    forms = [plain]
    abbreviated = "".join(_ABBREVIATION.get(w, w[0].upper()) for w in words)
    if abbreviated != plain:
        forms.append(abbreviated)
    short = "".join(_ABBREVIATION.get(w, w[0].upper()) for w in words if w != "product")
    if short not in forms and len(short) >= 2:
        forms.append(short)
    return [rf"(?-i:{re.escape(f)})(?!\d)" for f in forms]


def _connected(name: str) -> str | None:
    """`drain-source voltage` as a regex that also reads `Drain to Source Voltage`."""
    if "-" not in name:
        return None
    parts = [re.escape(p) for p in re.split(r"[\s]+", name.strip()) if p]
    joined = r"\s+".join(p.replace(r"\-", r"(?:\s*-\s*|\s*-?\s*to\s*-?\s*)") for p in parts)
    return joined


_GENERIC = frozenset({"memory", "size", "capacity"})
"""Last words that only say what kind of thing the first word is (`flash memory`)."""


def _compounds(name: str) -> list[str]:
    """`RAM` in `SRAM`, `flash` in `CodeFlash` and `4 MB flash`: a name inside a compound."""
    words = _words(name)
    if len(words) == 2 and words[1] in _GENERIC and words[0] not in _GENERIC:
        words = words[:1]  # `flash memory` is also said `flash`
        out = [re.escape(words[0])]
    elif len(words) == 1:
        out = []
    else:
        return []
    word = words[0]
    if name.strip().isupper() and len(word) <= 4:
        out.append(rf"(?-i:(?:S|D|SD|PS){re.escape(name.strip())})")  # SRAM, SDRAM
    elif word.isalpha():
        out.append(rf"(?-i:[A-Z][a-z]+{re.escape(word.capitalize())})")  # CodeFlash
    return out


_HEAD_SYNONYMS = {
    "rate": ("frequency",),
    "frequency": ("rate",),
    "reach": ("distance",),
    "distance": ("reach",),
}
"""Last words that name one quantity two ways: a sample rate is a sampling frequency, a
link's reach its distance. Qualifiers carry over unchanged."""


_OTHER_NAMES = {
    "propagation delay": ("response time",),
    "propagation delay time": ("response time",),
    "power": ("wattage", "total dissipation", "power consumption"),
    "power dissipation": ("wattage", "power consumption"),
    "output power": (
        "launch power",
        "transmit power",
        "tx power",
        "output optical power",
        "tx optical power",
    ),
    "optical output power": ("launch power", "transmit power", "output optical power"),
    "data rate": ("bit rate", "signaling rate", "signalling rate", "line rate"),
    "reach": ("link length",),
    "density": ("memory size", "memory capacity"),
    "memory density": ("memory size", "memory capacity"),
    "total power dissipation": ("wattage",),
    "power rating": ("wattage",),
    "clock": ("operating frequency", "oscillator frequency", "crystal frequency"),
    "clock frequency": ("operating frequency", "oscillator frequency", "crystal frequency"),
    "clock speed": ("operating frequency", "oscillator frequency", "crystal frequency"),
    "case temperature": ("operating temperature",),
    "operating case temperature": ("operating temperature",),
}
"""Whole names a document uses for a quantity with no word of the field's name in them
(issue 41's classes, from general usage, not from one vendor's file): a comparator's or
an optocoupler's propagation delay is its `response time`, a resistor's or a lamp's
power its `wattage`, a transistor's its `total dissipation`, a controller's maximum clock
its `operating frequency` (`DC to 20 MHz`) or, an 8051's, its `oscillator frequency`, a
module's case temperature range its `operating temperature`; and an optical module's
dissipation its `power consumption`, its output power its `launch power`, its data rate
its `bit rate` or `signaling rate`, its reach its `link length` (the SFF terms); its
transmit power is its output power too, a memory's size or capacity its density, and an
8051's crystal frequency its clock. Keyed by the whole
name without its statistic words, so `output power` or `junction temperature` gain none."""


def _spoken(name: str) -> list[str]:
    """The name as documents also write it.

    A first qualifier as a gerund (`sample` -> `sampling`), the quantity by its other word
    (`rate` -> `frequency`, `reach` -> `distance`).
    """
    words = name.split()
    if not words or not all(w.isalpha() for w in words):
        return []
    heads = [words[-1], *_HEAD_SYNONYMS.get(words[-1].lower(), ())]
    if len(words) == 1:
        return heads[1:]
    firsts = [words[0]]
    if len(words[0]) > 3 and words[0].lower().endswith("e"):
        firsts.append(words[0][:-1] + "ing")
    out = [" ".join([f, *words[1:-1], h]) for f in firsts for h in heads]
    return [o for o in out if o.lower() != name.lower()]


@functools.cache
def _forms(name: str) -> tuple[str, ...]:
    out: list[str] = []
    plain = " ".join(_STATISTIC.sub("", name).split())
    if plain and plain.lower() != name.lower():
        out.append(plain)
    out.extend(_spoken(plain or name))
    out.extend(_OTHER_NAMES.get(" ".join((plain or name).lower().split()), ()))
    out.extend("re:" + c for c in _compounds(plain or name))
    words = (plain or name).split()
    if len(words) == 2 and all(w.isalpha() for w in words):
        out.append(f"{words[1]} {words[0]}")  # `Voltage Supply`, `Current Output`
        if words[1].lower() in _QUANTITY:
            # `Isolation test voltage`, `Isolation withstand voltage`: the quantity a test
            # applies, or the part withstands, the field's own
            out.extend(f"{words[0]} {w} {words[1]}" for w in ("test", "withstand"))
    symbols = {_QUANTITY.get(w.lower()) for w in words}
    if len(words) >= 2 and len(symbols) == 1 and None not in symbols:
        out.append(words[-1])  # `Total dissipation`: `power` only says again what it is
    if (connected := _connected(name)) is not None:
        out.append("re:" + connected)
    if (symbol := _symbol(plain or name)) is not None:
        out.append("re:" + symbol)
    else:
        out.extend("re:" + i for i in _initials(name))
    return tuple(out)


def label_forms(spec: FieldSpec) -> tuple[str, ...]:
    """Everything that names `spec` in a document: its name, labels and derived forms."""
    plain = [label for label in spec.all_labels if not label.startswith("re:")]
    derived = [form for label in plain for form in _forms(label)]
    seen: dict[str, None] = dict.fromkeys((*spec.all_labels, *derived))
    return tuple(seen)


_STOP = frozenset({"of", "and", "the", "per", "for", "with", "to", "in", "on", "at"})


def partial_words(spec: FieldSpec) -> tuple[str, ...]:
    """The words of the name that still point at the field alone, for a weaker link.

    `Input Range` for `input voltage`, `power supply` for `supply voltage`, `Unity-Gain
    Bandwidth` for `gain bandwidth product`: the qualifiers, not the last word (what the
    field is: `length` alone is any length). Statistic words say nothing about which one,
    and short words match too much. A cell that also says the last word names another
    field of that kind (`Input Voltage` is not `input offset voltage`): see `head_word`.
    """
    words = _words(_STATISTIC.sub("", spec.name))
    if len(words) < 2:
        return ()
    return tuple(w for w in words[:-1] if len(w) >= 4 and w not in _QUANTITY and w not in _STOP)


def head_word(spec: FieldSpec) -> str:
    """The name's last word, what it is (`voltage` of `input offset voltage`)."""
    words = _words(spec.name)
    return words[-1] if words else ""


_LIMIT_WORD = {"max": Statistic.MAX, "maximum": Statistic.MAX, "min": Statistic.MIN,
               "minimum": Statistic.MIN}  # fmt: skip


def implied_statistics(spec: FieldSpec) -> tuple[Statistic, ...]:
    """The statistic a name asks for when none is declared: `max clock frequency` -> max."""
    words = _words(spec.name)
    statistic = _LIMIT_WORD.get(words[0]) if len(words) >= 2 else None
    return (statistic,) if statistic is not None and not spec.statistics else ()


def limit_forms(spec: FieldSpec) -> tuple[str, ...]:
    """Weak labels for a name that asks for a limit: the limit word and the last word.

    `max clock frequency` is also stated as `72 MHz maximum frequency`, `Maximum Operating
    Frequency` or `frequency up to 48 MHz`: the qualifier is left out, the limit is said.
    """
    (statistic,) = implied_statistics(spec) or (None,)
    if statistic is None:
        return ()
    head = plural(_words(spec.name)[-1])
    if statistic is Statistic.MAX:
        before, after = r"max(?:imum)?\.?|highest|peak", r"up\s+to|as\s+high\s+as"
    else:
        before, after = r"min(?:imum)?\.?|lowest", r"down\s+to|as\s+low\s+as"
    return (
        rf"re:(?:{before})\s+(?:[\w-]+\s+)?{head}",
        rf"re:{head}(?=\s+(?:of\s+)?(?:{after})\b)",
    )
