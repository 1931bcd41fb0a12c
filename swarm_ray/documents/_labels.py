"""Labels: how a field's plain-language names are found in a document's text.

A label is words, matched case-insensitively as whole words, with a word's plural
accepted and the space between words optional or written as a hyphen, slash or
underscore: `deep sleep` finds `Deepsleep`, `Deep-sleep current` and `deep sleep`; `I/O`
finds `IO`. A label written `re:...` is a regular expression instead. Which words a
label cell holds besides the label (`RAW supply voltage` for `supply voltage`) is
`extra_words`: the extractor prefers a cell that says exactly what the field is.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

__all__ = ["extra_words", "label_regex", "labels_regex", "plural", "strip_label_noise"]

_SEPARATOR = r"[\s\-_/.·]*"
_NOISE = re.compile(
    r"\([^()]*\)|\[[^\[\]]*\]|[¹²³⁴⁵⁶⁷⁸⁹⁰†‡§*:,;]|\b(?:min|max|typ|nom)\b\.?",
    re.IGNORECASE,
)
_WORDS = re.compile(r"[^\W_]+")


def _plain(label: str) -> str:
    words = _WORDS.findall(label)
    parts = [plural(word) for word in words]
    return _SEPARATOR.join(parts)


def plural(word: str) -> str:
    """A word and its plural: `gates`, `boxes`, `frequencies`."""
    if not word.isalpha() or len(word) <= 2:
        return re.escape(word)
    if len(word) > 3 and word[-1] in "yY" and word[-2].lower() not in "aeiou":
        return re.escape(word[:-1]) + "(?:y|ies)"
    return re.escape(word) + "(?:e?s)?"


@functools.cache
def label_regex(label: str) -> re.Pattern[str]:
    """Compile one label (plain words, or `re:` and a regex) to a case-insensitive regex."""
    body = label[3:] if label.startswith("re:") else _plain(label)
    return re.compile(r"(?<![^\W\d_])(?:" + body + r")(?![^\W\d_])", re.IGNORECASE)


@functools.cache
def labels_regex(labels: Sequence[str]) -> re.Pattern[str]:
    """One regex finding any of `labels` (longer alternatives first)."""
    bodies = sorted(
        (label[3:] if label.startswith("re:") else _plain(label) for label in labels),
        key=len,
        reverse=True,
    )
    return re.compile(
        r"(?<![^\W\d_])(?:" + "|".join(f"(?:{b})" for b in bodies) + r")(?![^\W\d_])",
        re.IGNORECASE,
    )


def strip_label_noise(text: str) -> str:
    """A label cell without brackets, footnote marks, colons and `min`/`max` words."""
    return " ".join(_NOISE.sub(" ", text).split())


def extra_words(cell: str, span: tuple[int, int]) -> list[str]:
    """Words of a label cell outside the label's match (brackets and marks aside)."""
    outside = cell[: span[0]] + " " + cell[span[1] :]
    return _WORDS.findall(strip_label_noise(outside))
