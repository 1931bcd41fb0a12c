"""Text fields whose values have a known shape: a package outline, a logic function.

A text field is declared by name only (`package`), so a label's neighbour is all the
extractor has, and datasheets rarely print `Package: TO-220`: the outline code stands in
a drawing's title, an ordering table or a feature line. Some text fields recur across
every kind of electronic part, and their values are drawn from public vocabularies:

- **package**: outline codes of JEDEC, JEITA and IEC (`TO-220AB`, `DO-41`, `SOT-23`,
  `SOIC-8`, `QFN32`, `SC-67`, `PG-TO220`, `D2PAK`), and case outline numbers as their
  vendors print them in capitals (`CASE 17`, `CASE 318-08`);
- **logic function**: the Boolean function of a gate (`NAND`, `NOR`, `XOR`, `AND`, `OR`,
  `inverter`, `buffer`), named where gates or buffers are.

For such a field a value must have the shape (a label's neighbour that does not, such as
`Ordering Code`, is no value), and the document's own mentions are candidates too: the
term it names most often wins, the earliest on a tie. A mention said to be another
part's (`TO-39 (for 2N2219A)` in a file about the 2N2222A) is not this file's; one said
to be the file's own part's ranks first. Fields of other names are read by their labels
alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from swarm_ray.documents._choice import file_part
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._parse import ParsedDocument

__all__ = ["TermMention", "shaped_value", "term_mentions", "term_shape"]

_OUTLINE = re.compile(
    r"(?<![\w-])(?:PG-)?(?:TO|DO|SOT|SOD|SC|SOIC|SOP|SSOP|TSSOP|MSOP|QSOP|QFN|VQFN|WQFN|DFN|"
    r"UDFN|SON|VSON|WSON|USON|QFP|LQFP|TQFP|BGA|FBGA|WLCSP|PDIP|DIP|SIP|TSOP|TSOT|SMA|SMB|"
    r"SMC|SMAF|MELF|PowerPAK|TDSON|HSOP)-?\d{1,4}[A-Z]{0,3}(?:-\d{1,3})?(?![\w-])"
    r"|(?<![\w-])(?:D2PAK|DPAK|IPAK|I2PAK|D3PAK)(?![\w-])"
)
_CASE = re.compile(r"(?<![\w-])CASE \d{1,4}[A-Z]?(?:-\d{2})?(?![\w-])")
"""A vendor's case outline number, printed in capitals (`CASE 17`, `CASE 221A-09`): the
package where no standard outline code is named, a second name where one is."""
_LOGIC = {
    "NAND": re.compile(r"\bNAND\b"),
    "NOR": re.compile(r"\bNOR\b"),
    "XNOR": re.compile(r"\bXNOR\b|\bexclusive[- ]NOR\b", re.I),
    "XOR": re.compile(r"\bXOR\b|\bexclusive[- ]OR\b", re.I),
    "AND": re.compile(r"\bAND(?=(?:\s+\S+)?\s+(?:gates?|functions?)\b)"),
    "OR": re.compile(r"\bOR(?=(?:\s+\S+)?\s+(?:gates?|functions?)\b)"),
    "inverter": re.compile(r"\binvert(?:er|ers|ing)\b", re.I),
    "buffer": re.compile(r"\bnon-?inverting\s+buffers?\b", re.I),
}
_HYPHENS = str.maketrans(dict.fromkeys("\u2010\u2011\u2012\u2013\u2212", "-"))
"""Dashes a text layer writes for a name's hyphen (`TO\u2013220AB`): one character each, so
offsets hold."""
_SHAPES: dict[str, str] = {"package": "outline", "logic function": "logic"}
"""Field names (and labels) whose values have a known shape, and which shape."""


@dataclass(frozen=True)
class TermMention:
    """A term of a field's shape, as the document names it most."""

    term: str
    page: int
    quote: str
    count: int
    """How often the document names it: the candidates' order."""


def term_shape(spec: FieldSpec) -> str | None:
    """The shape of `spec`'s values, when its name or a label is a field of known shape."""
    for name in spec.all_labels:
        shape = _SHAPES.get(" ".join(name.lower().replace("_", " ").split()))
        if shape is not None:
            return shape
    return None


def shaped_value(shape: str, text: str) -> str | None:
    """The term of `shape` that `text` names first, if any (`TO-220AB` in `S D G TO-220AB`)."""
    text = text.translate(_HYPHENS)
    if shape == "outline":
        match = _OUTLINE.search(text) or _CASE.search(text)
        return match.group(0) if match else None
    found = [(m.start(), term) for term, regex in _LOGIC.items() if (m := regex.search(text))]
    return min(found)[1] if found else None


_FOR_PART = re.compile(r"\s*\(?\s*for\s+(?:the\s+)?([A-Z0-9][A-Za-z0-9]*\d[A-Za-z0-9-]*)")
"""What follows a term said to be one part's: `TO-18 (for 2N2222A)`, `SOT-23 for BC847`."""


def term_mentions(shape: str, document: ParsedDocument) -> list[TermMention]:
    """Every term of `shape` the document names, most named first (then the earliest).

    A term said to be another part's is left out; one said to be the file's own
    part's comes first.
    """
    counts: Counter[str] = Counter()
    first: dict[str, tuple[int, int, str]] = {}
    own: set[str] = set()
    order = 0
    for page in document.pages:
        flat = page.text.replace("\n", " ").translate(_HYPHENS)
        for term, start in _mentions(shape, flat):
            after = _FOR_PART.match(flat, start + len(term))
            if after is not None:
                if file_part(document.file_name, [after.group(1)]) is None:
                    continue  # another part's
                own.add(term)
            counts[term] += 1
            if term not in first:
                left = max(0, start - 60)
                first[term] = (order, page.number, " ".join(flat[left : start + 60].split()))
                order += 1
    # A case number ranks after every standard outline code the document names.
    ranked = sorted(
        counts,
        key=lambda t: (t not in own, _CASE.match(t) is not None, -counts[t], first[t][0]),
    )
    return [TermMention(t, first[t][1], first[t][2], counts[t]) for t in ranked]


def _mentions(shape: str, text: str) -> list[tuple[str, int]]:
    if shape == "outline":
        found = [*_OUTLINE.finditer(text), *_CASE.finditer(text)]
        return [(m.group(0), m.start()) for m in found]
    return [(term, m.start()) for term, regex in _LOGIC.items() for m in regex.finditer(text)]
