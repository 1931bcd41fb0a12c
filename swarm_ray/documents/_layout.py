"""Page layout: text in boxes with positions, so a value can be tied to its row and column.

Plain page text loses what a datasheet's tables say by position: which row label a value
sits next to, under which column header (`Min`, `Typ`, `Max`, a part number), whether a
small raised `1` is a footnote mark or a digit. `page_boxes` reads PDFium's character
boxes (a few microseconds a character, about what reading the text costs) and groups
characters into `TextBox`es: runs of text on one line with no wide gap inside, which is
what a table cell or a line of prose looks like. A character set smaller and raised after
a digit or a letter is a footnote or superscript mark and is left out of the box, so
`85¹` reads `85`. `rows` groups boxes into visual rows, left to right.

Coordinates are PDF points from the page's top-left corner as it reads, y growing
downwards. A page turned a quarter (a landscape table, by `/Rotate` or by text drawn
sideways) is read in its own reading direction: the commonest rotation of its characters
sets which way is right and which way is down.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pypdfium2.raw as pdfium_c  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict

__all__ = ["LOOKALIKES", "Row", "TextBox", "page_boxes", "rows"]

_CELL_GAP = 0.8
"""A horizontal gap wider than this many font heights starts a new box (a new cell)."""
_WORD_GAP = 0.15
"""A gap wider than this many font heights is a word space, when the PDF has none."""
_MARK_SIZE = 0.8
"""A glyph smaller than this share of the box's height may be a footnote mark."""
LOOKALIKES = {0x2126: "\u03a9", 0x212A: "K", 0x212B: "\u00c5"}
"""Letterlike symbols written for the letter a unit uses: the ohm sign (U+2126) for `Ω`,
the kelvin and angstrom signs; read as the letters, `8.0mΩ` is a resistance either way."""
_SPACES = frozenset(" \t\u00a0\u2002\u2003\u2009\u200b")
_MARKS = frozenset("0123456789*†‡§¶#")
"""What a footnote mark is made of; a raised small `°` or letter stays (`85 °C`)."""


class TextBox(BaseModel):
    """A run of text on one line: a table cell, a heading, a line of prose."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    x0: float
    top: float
    x1: float
    bottom: float
    size: float
    """Line height in points: the height of the font's box, not of the glyphs."""
    text: str


def _close(
    x0: float, top: float, x1: float, bottom: float, size: float, chars: list[str]
) -> TextBox | None:
    text = "".join(chars).strip()
    if not text:
        return None
    return TextBox(
        x0=round(x0, 1),
        top=round(top, 1),
        x1=round(x1, 1),
        bottom=round(bottom, 1),
        size=round(size, 1),
        text=text,
    )


_ASCII = tuple(chr(code) for code in range(0x80))
"""Printable ASCII is most of a datasheet's characters: read without the general test."""


_QUARTERS = ((1, 0), (0, -1), (-1, 0), (0, 1))
"""Reading directions in PDF space (y up) for PDFium's character angles, a quarter turn
clockwise each: upright, then turned right, upside down, turned left."""


def reading_direction(raw: Any, count: int, samples: int = 600) -> tuple[int, int]:
    """The direction a page's text runs, as a unit vector in PDF space (y up).

    It is the commonest rotation among up to `samples` of its characters, to a quarter
    turn.
    """
    votes: Counter[int] = Counter()
    for index in range(0, count, max(1, count // samples)):
        if pdfium_c.FPDFText_GetUnicode(raw, index) <= 0x20:
            continue
        angle = pdfium_c.FPDFText_GetCharAngle(raw, index)  # radians clockwise; -1: none
        if angle >= 0:
            votes[round(angle / (math.pi / 2)) % 4] += 1
    return _QUARTERS[votes.most_common(1)[0][0]] if votes else _QUARTERS[0]


def page_boxes(textpage: Any, width: float, height: float) -> list[TextBox]:
    """Group a PDFium text page's characters into boxes (the caller holds PDFium's lock).

    Args:
        textpage: A `pypdfium2.PdfTextPage` (its `raw` handle is read).
        width: The page's width in points, before any `/Rotate`.
        height: The page's height in points, before any `/Rotate`.
    """
    raw = textpage.raw
    count = pdfium_c.FPDFText_CountChars(raw)
    dx, dy = reading_direction(raw, count)
    upright = (dx, dy) == (1, 0)
    # Reading coordinates: x along the text, y from its top down; offsets keep both >= 0.
    x_at = (width if dx < 0 else 0.0) + (height if dy < 0 else 0.0)
    y_at = (width if dy < 0 else 0.0) + (height if dx > 0 else 0.0)
    rect = pdfium_c.FS_RECTF()
    rect_ref = ctypes.byref(rect)
    # The loop runs once a character (about 3,000 a page): PDFium's calls, the open box
    # and the upright page's coordinates are held in locals and plain comparisons, which
    # takes 38 % off its time over attributes, `min` and `max` (the same boxes, checked
    # on the corpus's 1,863 pages).
    get_unicode = pdfium_c.FPDFText_GetUnicode
    get_box = pdfium_c.FPDFText_GetLooseCharBox
    out: list[TextBox] = []
    chars: list[str] | None = None  # the open box's characters; None: no box is open
    bx0 = btop = bx1 = bbottom = bsize = 0.0
    space = False
    for index in range(count):
        code = get_unicode(raw, index)
        if 0x20 < code < 0x7F:
            char = _ASCII[code]
        else:
            # Control characters and lone surrogates (broken font encodings) are not text.
            usable = 0x20 <= code < 0x110000 and not 0xD800 <= code < 0xE000 and code != 0xFFFE
            char = LOOKALIKES.get(code) or (chr(code) if usable or code in (10, 13) else "")
            if char in ("\r", "\n", "\x02", "") or char in _SPACES:
                if chars is not None:
                    if char in ("\r", "\n"):
                        closed = _close(bx0, btop, bx1, bbottom, bsize, chars)
                        if closed is not None:
                            out.append(closed)
                        chars = None
                    else:
                        space = True
                continue
        if not get_box(raw, index, rect_ref):
            continue
        x0, x1, y0, y1 = rect.left, rect.right, rect.bottom, rect.top
        if upright:
            left, right = (x0, x1) if x0 <= x1 else (x1, x0)
            top, bottom = (y_at - y1, y_at - y0) if y0 <= y1 else (y_at - y0, y_at - y1)
        else:
            xs = (dx * x0 + dy * y0, dx * x1 + dy * y1)
            ys = (dy * x0 - dx * y0, dy * x1 - dx * y1)
            left, right = x_at + min(xs), x_at + max(xs)
            top, bottom = y_at + min(ys), y_at + max(ys)
        size = bottom - top if bottom - top > 0.1 else 0.1
        if chars is not None:
            gap = left - bx1
            if btop - 0.3 * bsize <= (top + bottom) / 2 <= bbottom + 0.3 * bsize:  # same line
                if (
                    char in _MARKS
                    and size < _MARK_SIZE * bsize
                    and bottom < bbottom - 0.2 * bsize
                    and -0.2 * bsize <= gap < _WORD_GAP * bsize
                ):
                    continue  # a raised footnote or superscript mark: `85¹`, `VCC(1)`
                if -0.5 * bsize <= gap <= _CELL_GAP * (bsize if bsize >= size else size):
                    if space or gap > _WORD_GAP * bsize:
                        chars.append(" ")
                    chars.append(char)
                    if right > bx1:
                        bx1 = right
                    if top < btop:
                        btop = top
                    if bottom > bbottom:
                        bbottom = bottom
                    space = False
                    continue
            closed = _close(bx0, btop, bx1, bbottom, bsize, chars)
            if closed is not None:
                out.append(closed)
        bx0, btop, bx1, bbottom, bsize, chars, space = left, top, right, bottom, size, [char], False
    if chars is not None:
        closed = _close(bx0, btop, bx1, bbottom, bsize, chars)
        if closed is not None:
            out.append(closed)
    return out


@dataclass(frozen=True)
class Row:
    """Boxes on one visual line of a page, left to right."""

    top: float
    bottom: float
    cells: tuple[TextBox, ...]

    @property
    def text(self) -> str:
        """The row's cells joined by a tab: cell boundaries stay visible."""
        return "\t".join(cell.text for cell in self.cells)

    @functools.cached_property
    def columns(self) -> tuple[list[float], list[float], list[float]] | None:
        """Its cells' left edges, right edges and centres, in order, or `None`.

        `None` unless the cells stand side by side without overlapping (a header's columns).
        """
        lefts = [c.x0 for c in self.cells]
        rights = [c.x1 for c in self.cells]
        if any(a > b for edges in (lefts, rights) for a, b in itertools.pairwise(edges)):
            return None
        return lefts, rights, [(c.x0 + c.x1) / 2 for c in self.cells]


def rows(boxes: Sequence[TextBox]) -> list[Row]:
    """Group boxes into rows: boxes whose vertical middles lie within each other's band.

    Each open row keeps its top, bottom and smallest type as boxes join it, so a line of
    thousands of boxes costs as many steps, not their square.
    """
    ordered = sorted(boxes, key=lambda b: (b.top + b.bottom) / 2)
    out: list[list[TextBox]] = []
    top = bottom = size = 0.0  # of the last row
    for box in ordered:
        middle = (box.top + box.bottom) / 2
        if out:
            band = 0.35 * size
            if top + band <= middle <= bottom - band or abs(
                middle - (top + bottom) / 2
            ) <= 0.5 * min(box.size, size):
                out[-1].append(box)
                top, bottom, size = min(top, box.top), max(bottom, box.bottom), min(size, box.size)
                continue
        out.append([box])
        top, bottom, size = box.top, box.bottom, box.size
    return [
        Row(
            top=min(b.top for b in group),
            bottom=max(b.bottom for b in group),
            cells=tuple(sorted(group, key=lambda b: b.x0)),
        )
        for group in out
    ]
