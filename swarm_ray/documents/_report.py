"""`report.render.markdown`: a comparison written out for people and for programs.

One call writes, into an output directory:

- `report.md`: a table per dimension (entities x fields), every conflict with both values,
  their quotes, sources and watermarks, the facts an LLM fallback supplied (to check),
  and the warnings fallbacks left;
- `charts/DIMENSION.png`: one chart per dimension with numeric fields, conflicts in red;
- `facts.parquet`: one row per fact with its evidence and watermark, for analysis;
- `report.json`: the comparison and the same metadata, for programs.

Facts do not carry watermarks themselves: the caller maps each source document id to the
watermark of the sub-task that produced its facts, so a sentence of the report can be
traced to an agent and an input. Charts are drawn on matplotlib's Agg canvas directly,
never through `pyplot`, which keeps global state and wants a display: this runs in many
worker threads and processes at once, headless.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]  # ships no py.typed
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.documents._compare import CellStatus, Comparison, ComparisonCell, FactSource
from swarm_ray.documents._facts import ExtractionMethod, NormalisedFact

__all__ = ["ReportFiles", "ReportRequest", "render_report"]

_Series = tuple[str, str | None, str]
"""A column of a dimension's table: field, qualifier, unit."""

_FACTS_SCHEMA = pa.schema(
    [
        ("entity", pa.string()),
        ("field", pa.string()),
        ("qualifier", pa.string()),
        ("value", pa.float64()),
        ("term", pa.string()),
        ("unit", pa.string()),
        ("value_text", pa.string()),
        ("kind", pa.string()),
        ("method", pa.string()),
        ("extractor", pa.string()),
        ("page", pa.int32()),
        ("quote", pa.string()),
        ("confidence", pa.float64()),
        ("document", pa.string()),
        ("source", pa.string()),
        ("watermark", pa.string()),
    ]
)
"""Numbers go to `value` and terms (features, levels) to `term`: one type per column."""


class ReportRequest(BaseModel):
    """Input of `report.render.markdown`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    comparison: Comparison
    facts: tuple[NormalisedFact, ...] = ()
    """The facts the comparison was built from; one Parquet row each."""
    out_dir: str
    """Created if missing; files of the same names are replaced."""
    warnings: tuple[str, ...] = ()
    """Degradations to show the reader: fallbacks, retries, documents that failed."""
    watermarks: dict[str, str] = {}
    """Source document id -> watermark of the sub-task that produced its facts."""
    title: str = "Document comparison"


class ReportFiles(BaseModel):
    """Where the report was written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out_dir: str
    markdown_path: str
    json_path: str
    parquet_path: str
    chart_paths: dict[str, str]
    """Dimension -> PNG, for dimensions with at least one numeric field."""
    fact_count: int = Field(ge=0)
    conflict_count: int = Field(ge=0)


def _dimension(field: str) -> str:
    return field.split(".", 1)[0]


def _label(series: _Series) -> str:
    field, qualifier, unit = series
    name = field.split(".", 1)[-1]
    return name + (f" ({qualifier})" if qualifier else "") + (f" [{unit}]" if unit else "")


def _number(value: float | str) -> str:
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _cell_text(cell: ComparisonCell) -> str:
    if cell.status is CellStatus.LIST:
        return ", ".join(str(g.value) for g in cell.values)
    text = " / ".join(_number(g.value) for g in cell.values)
    flag = {CellStatus.CONFLICT: " (conflict)", CellStatus.AMBIGUOUS: " (ambiguous)"}
    return text + flag.get(cell.status, "")


def _escape(text: str) -> str:
    """One line, and no `|` to break a table row."""
    return " ".join(text.split()).replace("|", "\\|")


def _is_numeric(cell: ComparisonCell) -> bool:
    return cell.status is not CellStatus.LIST and all(
        not isinstance(g.value, str) for g in cell.values
    )


def _by_dimension(comparison: Comparison) -> dict[str, dict[_Series, list[ComparisonCell]]]:
    table: dict[str, dict[_Series, list[ComparisonCell]]] = defaultdict(dict)
    for cell in comparison.cells:
        series = (cell.field, cell.qualifier, cell.unit)
        table[_dimension(cell.field)].setdefault(series, []).append(cell)
    return {
        dim: dict(sorted(cols.items(), key=lambda i: (i[0][0], i[0][1] or "", i[0][2])))
        for dim, cols in sorted(table.items())
    }


def _chart(dimension: str, columns: dict[_Series, list[ComparisonCell]], path: Path) -> None:
    """One panel per numeric column: a dot per value, red where the sources disagree."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.font_manager import FontProperties

    # Panels placed by hand, in inches: a panel is 0.3 in per row plus 0.3 in for its
    # title and 0.3 in for its tick labels, and the left margin fits the longest entity
    # name. Constrained layout found the same by measuring every tick label of every
    # panel, about a fifth of the chart's time.
    heights = [0.3 * len(cells) + 0.8 for cells in columns.values()]
    width, height = 8.0, sum(heights) + 0.4
    fig = Figure(figsize=(width, height))
    renderer = FigureCanvasAgg(fig).get_renderer()  # type: ignore[no-untyped-call]
    font = FontProperties(size=8)
    names = {cell.entity for cells in columns.values() for cell in cells}
    longest = max(renderer.get_text_width_height_descent(n, font, ismath=False)[0] for n in names)
    left = (longest / fig.dpi + 0.2) / width
    top = height - 0.4
    axes = []
    for panel in heights:
        top -= panel
        axes.append(fig.add_axes((left, (top + 0.3) / height, 0.98 - left, (panel - 0.6) / height)))
    for ax, (series, cells) in zip(axes, columns.items(), strict=True):
        # One artist per kind of mark, not two per row: drawing and layout cost grows
        # with the number of artists, and a panel has a row per entity.
        values = [[float(g.value) for g in cell.values] for cell in cells]
        ax.hlines(range(len(cells)), 0, [max(v) for v in values], color="0.85", linewidth=3)
        for review, color in ((False, "C0"), (True, "red")):
            dots = [
                (x, y)
                for y, (cell, row) in enumerate(zip(cells, values, strict=True))
                if cell.needs_review is review
                for x in row
            ]
            if dots:
                xs, ys = zip(*dots, strict=True)
                ax.plot(xs, ys, "o", color=color)
        ax.set_yticks(range(len(cells)), [cell.entity for cell in cells])
        ax.set_ylim(len(cells) - 0.5, -0.5)
        ax.set_title(_label(series), loc="left", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(dimension, y=1 - 0.1 / height, va="top")
    # zlib's fastest level: charts of many entities are tall images, and the default
    # level spent about a tenth of the chart's time compressing them.
    fig.savefig(path, format="png", dpi=100, pil_kwargs={"compress_level": 1})


def _documents(request: ReportRequest) -> dict[str, tuple[str, int]]:
    """Document id -> (file name, fact count), from the facts and the comparison."""
    names: dict[str, str] = {}
    counts: dict[str, int] = defaultdict(int)
    for fact in request.facts:
        names[fact.fact.document_id] = fact.fact.source
        counts[fact.fact.document_id] += 1
    for cell in request.comparison.cells:
        for group in cell.values:
            for source in group.sources:
                names.setdefault(source.document_id, source.source)
    return {doc: (names[doc], counts[doc]) for doc in sorted(names, key=lambda d: names[d])}


def _stamp(document_id: str, watermarks: dict[str, str]) -> str:
    mark = watermarks.get(document_id)
    return f"`{mark}`" if mark else "none"


def _cite(source: FactSource, watermarks: dict[str, str]) -> str:
    quote = " ".join(source.quote.split())
    return (
        f"`{source.source}` page {source.page} (document `{source.document_id}`, "
        f"watermark {_stamp(source.document_id, watermarks)}) states "
        f"`{source.value_text}`: “{quote}”"
    )


def _markdown(
    request: ReportRequest,
    tables: dict[str, dict[_Series, list[ComparisonCell]]],
    charts: dict[str, str],
) -> str:
    comparison, marks = request.comparison, request.watermarks
    documents = _documents(request)
    lines = [
        f"# {request.title}",
        "",
        f"{len(documents)} documents, {len(comparison.entities)} entities, "
        f"{len(request.facts)} facts, {len(comparison.conflicts)} conflicts, "
        f"{len(request.warnings)} warnings.",
        "",
        "## Sources",
        "",
        "| Document | File | Facts | Watermark |",
        "| --- | --- | ---: | --- |",
    ]
    for doc, (name, count) in documents.items():
        lines.append(f"| `{doc}` | {_escape(name)} | {count} | {_stamp(doc, marks)} |")
    for dimension, columns in tables.items():
        lines += ["", f"## {dimension}", ""]
        if dimension in charts:
            lines += [f"![{dimension}]({charts[dimension]})", ""]
        entities = sorted({c.entity for cells in columns.values() for c in cells})
        lines.append("| Entity | " + " | ".join(_escape(_label(s)) for s in columns) + " |")
        lines.append("| --- |" + " --- |" * len(columns))
        for entity in entities:
            row = [
                next((_escape(_cell_text(c)) for c in cells if c.entity == entity), "")
                for cells in columns.values()
            ]
            lines.append(f"| {_escape(entity)} | " + " | ".join(row) + " |")
    lines += ["", "## Conflicts", ""]
    if not comparison.conflicts:
        lines.append("No conflicts: every value is stated once or agreed on.")
    for cell in comparison.conflicts:
        lines += [f"### {cell.entity}: {_label((cell.field, cell.qualifier, cell.unit))}", ""]
        for group in cell.values:
            value = f"{_number(group.value)} {cell.unit}".strip()
            lines += [f"- **{value}**, " + _cite(source, marks) for source in group.sources]
        lines.append("")
    llm = [n.fact for n in request.facts if n.fact.method is ExtractionMethod.LLM]
    if llm:
        lines += ["", "## Facts from the LLM fallback", ""]
        lines.append(
            f"{len(llm)} facts where the rules were unsure came from an LLM "
            "(`extractor: llm`, lower confidence); check them against their quotes:"
        )
        lines.append("")
        for fact in llm:
            lines.append(
                f"- {fact.entity}: `{fact.field}` = `{fact.value_text}` "
                f"(confidence {fact.confidence:.2f}), `{fact.source}` page {fact.page}: "
                f"“{' '.join(fact.quote.split())}”"
            )
    lines += ["", "## Warnings", ""]
    lines += [f"- {' '.join(w.split())}" for w in request.warnings] or ["None."]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)) + "\n"


def _facts_table(request: ReportRequest) -> pa.Table:
    rows: dict[str, list[object]] = {name: [] for name in _FACTS_SCHEMA.names}
    for normalised in request.facts:
        fact, numeric = normalised.fact, not isinstance(normalised.value, str)
        row: dict[str, object] = {
            "entity": fact.entity,
            "field": fact.field,
            "qualifier": fact.qualifier,
            "value": float(normalised.value) if numeric else None,
            "term": None if numeric else normalised.value,
            "unit": normalised.unit,
            "value_text": fact.value_text,
            "kind": fact.kind.value,
            "method": fact.method.value,
            "extractor": "llm" if fact.method is ExtractionMethod.LLM else "rules",
            "page": fact.page,
            "quote": fact.quote,
            "confidence": fact.confidence,
            "document": fact.document_id,
            "source": fact.source,
            "watermark": request.watermarks.get(fact.document_id),
        }
        for name, value in row.items():
            rows[name].append(value)
    return pa.table(rows, schema=_FACTS_SCHEMA)


def _write_text(path: Path, text: str) -> None:
    """Write next to the target, then rename: a reader never opens half a report."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def render_report(request: ReportRequest) -> ReportFiles:
    """Write `report.md`, the charts, `facts.parquet` and `report.json` into `out_dir`.

    Returns:
        The paths written. Documents without a watermark in `watermarks` are reported
        with `none` in the Markdown and a null watermark in Parquet, not refused: a
        missing watermark is for the reviewer to see, not a reason to lose the report.
    """
    out = Path(request.out_dir)
    (out / "charts").mkdir(parents=True, exist_ok=True)
    tables = _by_dimension(request.comparison)
    charts: dict[str, str] = {}
    for dimension, columns in tables.items():
        numeric = {s: cells for s, cells in columns.items() if all(map(_is_numeric, cells))}
        if numeric:
            charts[dimension] = f"charts/{dimension}.png"
            _chart(dimension, numeric, out / charts[dimension])
    _write_text(out / "report.md", _markdown(request, tables, charts))
    pq.write_table(_facts_table(request), out / "facts.parquet")
    summary = {
        "title": request.title,
        "documents": [
            {"document_id": d, "source": n, "facts": c, "watermark": request.watermarks.get(d)}
            for d, (n, c) in _documents(request).items()
        ],
        "charts": charts,
        "warnings": list(request.warnings),
        "fact_count": len(request.facts),
        "comparison": request.comparison.model_dump(mode="json"),
    }
    _write_text(out / "report.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return ReportFiles(
        out_dir=str(out),
        markdown_path=str(out / "report.md"),
        json_path=str(out / "report.json"),
        parquet_path=str(out / "facts.parquet"),
        chart_paths={d: str(out / p) for d, p in charts.items()},
        fact_count=len(request.facts),
        conflict_count=len(request.comparison.conflicts),
    )
