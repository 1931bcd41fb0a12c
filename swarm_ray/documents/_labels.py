"""Labels: how a field's plain-language names are found in a document's text.

A label is words, matched case-insensitively as whole words, with a word's plural
accepted and the space between words optional or written as a hyphen, slash or
underscore: `deep sleep` finds `Deepsleep`, `Deep-sleep current` and `deep sleep`; `I/O`
finds `IO`. A label written `re:...` is a regular expression instead. Which words a
label cell holds besides the label (`RAW supply voltage` for `supply voltage`) is
`extra_words`: the extractor prefers a cell that says exactly what the field is.

Many labels are looked for at once (`labels_regex`, every declared field's over each
page), so they are matched by RE2, whose cost is linear in the text whatever the number
of labels: one alternation run by Python's `re` cost the text's length times the labels'
total length. A tenant's labels are plain words (a `re:` label is refused for HTTP
callers), capped in number and length by `FieldSpec`; an operator's `re:` label that RE2
cannot read is matched by `re`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import re2

__all__ = [
    "LabelMatch",
    "LabelPattern",
    "extra_words",
    "label_regex",
    "labels_regex",
    "plural",
    "strip_label_noise",
]

_SEPARATOR = r"[\s\-_/.·]*"
_RE2_SEPARATOR = r"[\s\p{Z}\-_/.·]*"
"""`_SEPARATOR` for RE2, whose `\\s` is ASCII only (Python's also takes no-break spaces)."""
_NOISE = re.compile(
    r"\([^()]*\)|\[[^\[\]]*\]|[¹²³⁴⁵⁶⁷⁸⁹⁰†‡§*:,;]|\b(?:min|max|typ|nom)\b\.?",
    re.IGNORECASE,
)
_WORDS = re.compile(r"[^\W_]+")


def _plain(label: str, separator: str = _SEPARATOR) -> str:
    words = _WORDS.findall(label)
    parts = [_forms(word) for word in words]
    return separator.join(parts)


def _forms(word: str) -> str:
    """A word's spellings: it and its plural, and a pair of letters with a slash.

    `io` is also `I/O`, `ad` also `A/D`, `rw` also `R/W`: initialisms are often written so.
    """
    if len(word) == 2 and word.isalpha():
        return f"(?:{re.escape(word)}|{re.escape(word[0])}/{re.escape(word[1])})"
    return plural(word)


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


@dataclass(frozen=True)
class LabelMatch:
    """Where a label was found: the parts of `re.Match` the extractor reads."""

    string: str
    """The text searched."""
    first: int
    last: int

    def start(self) -> int:
        """Where the label starts."""
        return self.first

    def end(self) -> int:
        """Where the label ends."""
        return self.last

    def span(self) -> tuple[int, int]:
        """`(start, end)`."""
        return self.first, self.last

    def group(self, index: int = 0) -> str:
        """The label as the text writes it (only group 0 exists)."""
        if index != 0:
            raise IndexError(f"a label match has only group 0, not {index!r}")
        return self.string[self.first : self.last]

    def __getitem__(self, index: int) -> str:
        return self.group(index)


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.max_mem = 256 << 20
"""RE2's budget for one matcher, allocated as it is used: below it RE2 runs its DFA (a
few ns a character); past it, its NFA, still linear but slower by the pattern's size.
Thousands of labels of a request's fields need more than the default 8 MiB."""


@functools.lru_cache(maxsize=16_384)
def _reads_in_re2(body: str) -> bool:
    """Whether RE2 compiles a label's body (lookaround and backreferences it cannot)."""
    try:
        re2.compile(body, _OPTIONS)
    except re2.error:
        return False
    return True


class LabelPattern:
    r"""Several labels found at once (see the module docstring).

    `search` and `finditer` find what `(?<![^\W\d_])(?:A|B|...)(?![^\W\d_])` finds
    (ignoring case): a label not inside a longer word, the longer match winning where
    two start at one place. Plain labels run on RE2, in time linear in the text however
    many there are; the few derived forms RE2 cannot read (a symbol's `(?!\()`, the
    extractor's own, never a tenant's) run on `re`, each starting with a literal.
    """

    def __init__(self, labels: tuple[str, ...]) -> None:
        self.labels = labels
        linear = [_body(label, _RE2_SEPARATOR) for label in labels]
        fast = [b for b in linear if _reads_in_re2(b)]
        slow = [_body(label) for label, b in zip(labels, linear, strict=True) if b not in fast]
        self._re2: tuple[Any, Any] | None = None
        self._re: re.Pattern[str] | None = None
        if fast:
            # RE2 cannot look around: a non-letter (or the text's start) is consumed
            # before the label, and one (or the end) after it. The second form, without
            # the start, serves searches that begin past it.
            body = "(" + _alternation(fast) + r")(?:[^\pL]|$)"
            self._re2 = (
                re2.compile(r"(?i)(?:^|[^\pL])" + body, _OPTIONS),
                re2.compile(r"(?i)[^\pL]" + body, _OPTIONS),
            )
        if slow:
            self._re = re.compile(
                r"(?<![^\W\d_])(?:" + _alternation(slow) + r")(?![^\W\d_])", re.IGNORECASE
            )

    def __reduce__(self) -> tuple[Any, ...]:
        return labels_regex, (self.labels,)

    def _linear(self, text: _Encoded | None, pos: int) -> tuple[int, int] | None:
        if self._re2 is None or text is None:
            return None
        # RE2 sees nothing before `pos`: start one back, so that character is the
        # non-letter consumed before a label starting at `pos`.
        back = pos - 1 if pos > 0 and not text.text[pos - 1].isalpha() else pos
        found = self._re2[0 if pos == 0 else 1].search(text.data, text.byte(back))
        if found is None:
            return None
        start, end = found.span(1)
        return text.char(start), text.char(end)

    def _backtracking(self, text: str, pos: int) -> tuple[int, int] | None:
        found = None if self._re is None else self._re.search(text, pos)
        return None if found is None else found.span()

    def finditer(self, text: str) -> Iterator[LabelMatch]:
        """Every label in `text`, left to right, none overlapping."""
        pos = 0
        encoded = None if self._re2 is None else _Encoded(text)
        linear, backtracking = self._linear(encoded, 0), self._backtracking(text, 0)
        while linear is not None or backtracking is not None:
            spans = [s for s in (linear, backtracking) if s is not None]
            start, end = min(spans, key=lambda s: (s[0], -s[1]))
            yield LabelMatch(text, start, end)
            pos = end if end > start else end + 1
            if pos > len(text):
                return
            if linear is not None and linear[0] < pos:
                linear = self._linear(encoded, pos)
            if backtracking is not None and backtracking[0] < pos:
                backtracking = self._backtracking(text, pos)

    def search(self, text: str) -> LabelMatch | None:
        """The first label in `text`, or `None`."""
        return next(self.finditer(text), None)


class _Encoded:
    """A text as RE2 reads it (UTF-8), encoded once for all the searches of one pass.

    Given a `str`, RE2's Python wrapper encodes the whole text and counts characters
    from its start at every search, so searching a long cell label by label took time
    quadratic in its length (2.4 s on 80 KB of `supply current 5 µA `). Offsets are
    converted from the last one converted: a pass moves forward, so all its conversions
    together read the text once.
    """

    __slots__ = ("_byte", "_char", "_wide", "data", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.data = text.encode("utf-8")
        self._wide = len(self.data) != len(text)  # offsets differ only past ASCII
        self._char = self._byte = 0  # a character offset and its byte offset

    def byte(self, char: int) -> int:
        """The byte offset of character offset `char`."""
        if self._wide:
            sign, (low, high) = (1 if char >= self._char else -1), sorted((self._char, char))
            self._byte += sign * len(self.text[low:high].encode("utf-8"))
            self._char = char
            return self._byte
        return char

    def char(self, byte: int) -> int:
        """The character offset of byte offset `byte` (a character's first byte)."""
        if self._wide:
            sign, (low, high) = (1 if byte >= self._byte else -1), sorted((self._byte, byte))
            self._char += sign * len(self.data[low:high].decode("utf-8"))
            self._byte = byte
            return self._char
        return byte


def _body(label: str, separator: str = _SEPARATOR) -> str:
    return label[3:] if label.startswith("re:") else _plain(label, separator)


def _alternation(bodies: list[str]) -> str:
    return "|".join(f"(?:{b})" for b in sorted(bodies, key=len, reverse=True))


@functools.lru_cache(maxsize=4096)
def labels_regex(labels: Sequence[str]) -> LabelPattern:
    """A matcher finding any of `labels` (longer alternatives first)."""
    return LabelPattern(tuple(labels))


def strip_label_noise(text: str) -> str:
    """A label cell without brackets, footnote marks, colons and `min`/`max` words."""
    return " ".join(_NOISE.sub(" ", text).split())


def extra_words(cell: str, span: tuple[int, int]) -> list[str]:
    """Words of a label cell outside the label's match (brackets and marks aside)."""
    outside = cell[: span[0]] + " " + cell[span[1] :]
    return _WORDS.findall(strip_label_noise(outside))
