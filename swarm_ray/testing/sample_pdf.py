"""Rendering sample brochures to PDF with reportlab, in three layouts.

Layouts matter to the parser and extractor, not just to the eye: a spec table puts a
label and its value on one text line, prose wraps sentences across lines, and two
columns interleave nothing only if the text order follows the columns. An optional back
cover with a drawing and no text gives the parser a page to warn about.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from reportlab.graphics.shapes import Circle, Drawing, Rect
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import mm
from reportlab.pdfgen.canvas import Canvas
from reportlab.platypus import (
    BaseDocTemplate,
    Flowable,
    Frame,
    FrameBreak,
    PageBreak,
    PageTemplate,
    Paragraph,
    Spacer,
    Table,
    TableStyle,
)

from swarm_ray.testing.sample_text import BrochureContent

__all__ = ["render"]


def _styles() -> dict[str, ParagraphStyle]:
    sheet = getSampleStyleSheet()
    return {
        "header": ParagraphStyle("header", parent=sheet["Title"]),
        "subtitle": ParagraphStyle("subtitle", parent=sheet["Heading3"]),
        "heading": ParagraphStyle("heading", parent=sheet["Heading2"]),
        "paragraph": ParagraphStyle("paragraph", parent=sheet["BodyText"]),
        "cell": ParagraphStyle("cell", parent=sheet["BodyText"], fontSize=9, leading=11),
    }


def _table(rows: tuple[tuple[str, str], ...], width: float, style: ParagraphStyle) -> Table:
    # Values are Paragraphs so that a long feature list wraps inside its cell.
    cells = [[label, Paragraph(escape(value), style)] for label, value in rows]
    table = Table(cells, colWidths=[width * 0.45, width * 0.55])
    table.setStyle(
        TableStyle(
            [
                ("FONT", (0, 0), (-1, -1), "Helvetica", 9),
                ("FONT", (0, 0), (0, -1), "Helvetica-Bold", 9),
                ("GRID", (0, 0), (-1, -1), 0.25, colors.grey),
                ("ROWBACKGROUNDS", (0, 0), (-1, -1), [colors.whitesmoke, colors.white]),
            ]
        )
    )
    return table


def _back_cover() -> Drawing:
    drawing = Drawing(160 * mm, 160 * mm)
    # Colours set as attributes: the reportlab stubs mistype the shapes' keyword arguments.
    square = Rect(0, 0, 160 * mm, 160 * mm)
    square.fillColor, square.strokeColor = colors.darkblue, None
    disc = Circle(80 * mm, 80 * mm, 50 * mm)
    disc.fillColor, disc.strokeColor = colors.lightblue, None
    drawing.add(square)
    drawing.add(disc)
    return drawing


def render(path: str, content: BrochureContent) -> None:
    """Write `content` as a PDF at `path`; deterministic for equal content."""
    styles = _styles()
    margin = 18 * mm
    width, height = A4
    body_width = width - 2 * margin
    header_height = 30 * mm
    body = height - 2 * margin - header_height
    header = Frame(margin, height - margin - header_height, body_width, header_height, id="header")
    later = [Frame(margin, margin, body_width, height - 2 * margin, id="later")]
    if content.layout == "two_column":
        gap = 8 * mm
        column = (body_width - gap) / 2
        frames = [
            header,
            Frame(margin, margin, column, body, id="left"),
            Frame(margin + column + gap, margin, column, body, id="right"),
        ]
        body_width = column
    else:
        frames = [header, Frame(margin, margin, body_width, body, id="body")]
    created = content.created.strftime("D:%Y%m%d%H%M%S+00'00'")

    def stamp(canvas: Canvas, _doc: BaseDocTemplate) -> None:
        # reportlab stamps the wall clock; a fixed date keeps output deterministic.
        canvas.setDateFormatter(lambda *_: created)

    doc = BaseDocTemplate(
        path,
        pagesize=A4,
        title=content.title or "",
        author=content.author,
        subject=content.subject,
        creator="swarm_ray sample generator",
        invariant=1,
        pageTemplates=[
            PageTemplate(id="first", frames=frames, onPage=stamp, autoNextPageTemplate="later"),
            PageTemplate(id="later", frames=later, onPage=stamp),
        ],
    )
    story: list[Flowable] = []
    for block in content.blocks:
        if block.kind == "header":
            # The title spans the page, above the columns, as in a real brochure.
            story.extend([Paragraph(escape(block.text), styles["header"]), FrameBreak()])
        elif block.kind == "table":
            story.append(_table(block.rows, body_width, styles["cell"]))
            story.append(Spacer(1, 4 * mm))
        else:
            story.append(Paragraph(escape(block.text), styles[block.kind]))
    if content.back_cover:
        story.extend([PageBreak(), _back_cover()])
    doc.build(story)
