"""Features: what a candidate's context says, as numbers a learned scorer can weigh.

The third stage of the learned extraction. Each candidate (`_candidates`) becomes one row
of `FEATURES`, described, never decided:

- **label**: how much of the declared name (its words, their plural and singular forms,
  its initials and symbols, `_symbols.label_forms`) the value's line, the line above, the
  reader's matched label and the page title say;
- **unit**: written in the declared unit itself, or another of its dimension;
- **magnitude**: the value's size in the declared unit (a user declares the unit the field
  is stated in), its sign;
- **statistic**: the slot, what the document states (a `Max` column, a range's end,
  `up to`), and whether they agree;
- **context**: the section (absolute maximum ratings, recommended operating conditions,
  electrical characteristics, ordering, features, typical characteristics), a test
  condition, a footnote or figure, `typ`/`min`/`max` words;
- **position**: the first page or not (the page's number, its order on the page, the
  line's length and the value's rank among the field's were dropped: leave-one-family-out
  they let the model learn a family's layout, not the field);
- **repeats**: how often the document states the same value for the field, on how many
  pages;
- **today's rules**: the reader's link tier and score, and whether the rule choice picked
  the value: the existing extractor's pick is one feature among the others.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from swarm_ray.documents._candidates import FieldCandidate
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._labels import LabelPattern, labels_regex
from swarm_ray.documents._symbols import head_word, label_forms, partial_words
from swarm_ray.documents._units import COUNT, TEXT

__all__ = ["FEATURES", "features"]

FEATURES: tuple[str, ...] = (
    "linked", "tier", "link_score", "rule_chosen", "quantity",
    "form_line", "form_above", "form_label", "form_title",
    "words_line", "words_above", "words_label", "words_before",
    "form_header", "words_header", "has_header", "part_own", "part_other",
    "head_line", "partial_line",
    "unit_exact", "unit_bare", "log_size", "negative", "zero",
    "slot_min", "slot_typ", "slot_max", "slot_none",
    "stated_min", "stated_typ", "stated_max", "stated_none", "stated_is_slot",
    "sec_absmax", "sec_recommended", "sec_electrical", "sec_ordering", "sec_features",
    "sec_typical", "sec_other",
    "condition", "assignments", "at_sign", "figure", "note", "stat_words",
    "page_first", "repeats", "repeat_pages",
    "kind_text", "kind_count",
    "rel_link_score", "rel_words_line", "rel_words_before", "rel_words_header",
    "rel_words_label", "first_form", "first_linked", "slot_chosen", "slot_linked",
    "slot_size", "words_any", "form_any", "rel_words_any",
)  # fmt: skip
"""The feature names, in the order `features` writes them; the model file lists them too."""

_WORD = re.compile(r"\b[a-z]/[a-z]\b|[a-z0-9]+")
"""A word, or an initialism written with a slash (`I/O`, `A/D`): one word, `io`, as the
label forms read it (`_labels`), not two letters that name nothing."""
_STOP = frozenset({"of", "and", "the", "per", "for", "with", "to", "in", "on", "at", "a"})
_STAT_WORDS = re.compile(r"\b(?:typ|typical|min|minimum|max|maximum|nom|nominal)\b", re.I)
_FIGURE = re.compile(r"\b(?:fig(?:ure)?\.?\s*\d|graph|curve|vs\.?)\b", re.I)
_NOTE = re.compile(r"\bnotes?\b|\(\d\)|\*", re.I)
_SECTIONS = (
    ("sec_absmax", ("absolute", "maximum ratings")),
    ("sec_recommended", ("recommended", "operating conditions")),
    ("sec_electrical", ("electrical", "dc characteristics", "ac characteristics", "switching",
                        "timing")),
    ("sec_ordering", ("ordering", "package information")),
    ("sec_features", ("features", "description", "applications", "application")),
    ("sec_typical", ("typical",)),
)  # fmt: skip


_SUFFIX = re.compile(r"(?:ing|ed|e)$")
"""Endings a word form drops after a plural's `s` (`sampling`, `samples` -> `sampl`)."""


def _stem(word: str) -> str:
    """A word's form without its inflection, so `sampling rate` shares `sample rate`'s."""
    if len(word) > 3 and word.endswith("s"):
        word = word[:-1]
    stem = _SUFFIX.sub("", word) if len(word) > 4 else word
    return stem if len(stem) >= 3 else word


def _words(text: str) -> set[str]:
    return {_stem(w.replace("/", "")) for w in _WORD.findall(text.lower()) if w not in _STOP}


@dataclass(frozen=True)
class _Names:
    """What names a field: its forms as one regex, its qualifier words, its words."""

    forms: LabelPattern
    partial: LabelPattern | None
    words: frozenset[str]
    head: str


@functools.cache
def _names_of(name: str, labels: tuple[str, ...], spec_json: str) -> _Names:
    spec = FieldSpec.model_validate_json(spec_json)
    words = _words(name)
    for label in labels:
        if not label.startswith("re:"):
            words |= _words(label)
    partial = partial_words(spec)
    return _Names(
        forms=labels_regex(label_forms(spec)),
        partial=labels_regex(partial) if partial else None,
        words=frozenset(words),
        head=head_word(spec).lower(),
    )


def _names(spec: FieldSpec) -> _Names:
    return _names_of(spec.name, tuple(spec.all_labels), spec.model_dump_json())


def _share(name: frozenset[str], text: str) -> float:
    if not name:
        return 0.0
    return len(name & _words(text)) / len(name)


def _stat(value: Statistic | None) -> tuple[float, float, float, float]:
    return (
        float(value is Statistic.MIN),
        float(value is Statistic.TYP),
        float(value is Statistic.MAX),
        float(value is None),
    )


def _before(candidate: FieldCandidate) -> str:
    text = str(candidate.value_text)
    at = candidate.line.find(text) if text else -1
    return candidate.line[:at] if at > 0 else candidate.line[:60]


def _headed(candidate: FieldCandidate, forms: LabelPattern) -> bool:
    """A table cell whose column header names the field: linked as a row's label links.

    A series table (parts down the side, fields across the top) names each field once,
    over its column; a reader of row labels never links its cells, yet the header says
    what they are as plainly as a label does.
    """
    return bool(candidate.header) and forms.search(candidate.header) is not None


def features(spec: FieldSpec, candidates: Sequence[FieldCandidate]) -> list[list[float]]:
    """One row of `FEATURES` per candidate of one field of one document."""
    names = _names(spec)
    forms, partial, name, head = names.forms, names.partial, names.words, names.head
    counted = Counter(c.scaled if c.scaled is not None else c.value for c in candidates)
    on_pages: dict[object, set[int]] = {}
    for c in candidates:
        on_pages.setdefault(c.scaled if c.scaled is not None else c.value, set()).add(c.page)
    rows: list[list[float]] = []
    for c in candidates:
        value = c.scaled if c.scaled is not None else c.value
        size = abs(c.scaled) if c.scaled is not None else 0.0
        section = c.section
        flags = [float(any(w in section for w in words)) for _, words in _SECTIONS]
        lowered = c.line.lower()
        rows.append(
            [
                float(c.tier >= 0 or _headed(c, forms)), float(c.tier), c.link_score,
                float(c.chosen),
                float(c.quantity),
                float(forms.search(c.line) is not None),
                float(forms.search(c.above) is not None),
                float(bool(c.label)), float(forms.search(c.title) is not None),
                _share(name, c.line), _share(name, c.above), _share(name, c.label),
                _share(name, _before(c)),
                float(bool(c.header) and forms.search(c.header) is not None),
                _share(name, c.header), float(bool(c.header)),
                float(c.part == 1), float(c.part == -1),
                float(bool(head) and head in lowered),
                float(partial is not None and partial.search(c.line) is not None),
                float(c.unit == spec.unit), float(not c.unit),
                math.log10(size) if size > 0 else -6.0,
                float(c.scaled is not None and c.scaled < 0), float(size == 0),
                *_stat(c.slot), *_stat(c.stated), float(c.stated == c.slot),
                *flags, float(bool(section) and not any(flags)),
                float(c.condition), float(c.line.count("=")), float("@" in c.line),
                float(_FIGURE.search(c.line) is not None),
                float(_NOTE.search(c.line) is not None),
                float(_STAT_WORDS.search(c.line) is not None),
                float(c.page == 1), float(min(counted[value], 20)), float(len(on_pages[value])),
                float(spec.kind == TEXT), float(spec.kind == COUNT),
            ]
        )  # fmt: skip
    rows = _relative(candidates, rows)
    return _anywhere(candidates, rows, names)


def _anywhere(
    candidates: Sequence[FieldCandidate], rows: list[list[float]], names: _Names
) -> list[list[float]]:
    """The label's evidence wherever it stands: label, words before, column header.

    A reader's label, the words before the value on its line, or its column's header.

    Where a document names a field moves with its layout (a row's label in one family, a
    column's header in another); the same evidence in one feature lets what is learned
    on one layout hold on the next.
    """
    share = [
        max(_share(names.words, c.label), _share(names.words, _before(c)),
            _share(names.words, c.header))
        for c in candidates
    ]  # fmt: skip
    best: dict[object, float] = {}
    for c, value in zip(candidates, share, strict=True):
        best[c.slot] = max(best.get(c.slot, 0.0), value)
    for row, c, value in zip(rows, candidates, share, strict=True):
        form = any(
            names.forms.search(text) is not None for text in (c.label, _before(c), c.header) if text
        )
        row.extend([value, float(form), value - best[c.slot]])
    return rows


_RELATIVE = ("link_score", "words_line", "words_before", "words_header", "words_label")


def _relative(candidates: Sequence[FieldCandidate], rows: list[list[float]]) -> list[list[float]]:
    """Each row's standing among its slot's candidates: what a choice compares."""
    at = {name: FEATURES.index(name) for name in (*_RELATIVE, "form_line", "linked")}
    groups: dict[object, list[int]] = {}
    for index, candidate in enumerate(candidates):
        groups.setdefault(candidate.slot, []).append(index)
    for members in groups.values():
        best = {n: max(rows[i][at[n]] for i in members) for n in _RELATIVE}
        by_order = sorted(members, key=lambda i: candidates[i].order)
        first_form = next((i for i in by_order if rows[i][at["form_line"]] > 0), -1)
        first_linked = next((i for i in by_order if rows[i][at["linked"]] > 0), -1)
        chosen = float(any(candidates[i].chosen for i in members))
        linked = float(any(rows[i][at["linked"]] > 0 for i in members))
        for i in members:
            rows[i].extend(rows[i][at[n]] - best[n] for n in _RELATIVE)
            rows[i].extend(
                [float(i == first_form), float(i == first_linked), chosen, linked,
                 math.log1p(len(members))]
            )  # fmt: skip
    return rows
