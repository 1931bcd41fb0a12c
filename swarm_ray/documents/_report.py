"""`report.render.markdown`: a comparison written out for people and for programs.

One call writes, into an output directory:

- `report.md`, the answer first: a row per field (who states it, its lowest and highest
  value and who states each, the spread, the entities whose sources disagree; see
  `_summary`) and the declared fields no document states; then per dimension its charts
  and a table (entities x fields, each value in the unit its field declares, a column per
  statistic); then the evidence: every conflict with both values, their quotes, pages and
  sources (short ids `D3`, watermark `wm:` and 10 characters), the facts an LLM fallback
  supplied (to check), the warnings, the caller's `sections` (the judges), and last an
  appendix of the sources;
- `charts/DIMENSION.png` (`-2`, `-3` ... when a dimension has many fields): one panel per
  numeric field, of bounded height at any number of entities (see `_charts`);
- `facts.parquet`: one row per fact with its evidence and its full watermark token;
- `report.json`: the documents (with full watermark tokens), the same facts as a list, and
  the comparison, for programs.

The columns of a fact, in both files: `entity`, `source` (file), `field` (the declared
name; `dimension.name` for fields of a named dimension), `dimension`, `statistic` (`min`,
`typ`, `max` or null), `qualifier`, `value` (a number in `unit`, the field's declared
unit) or `term` (text), `unit`, `value_text` (as written), `kind`, `method`, `extractor`
(`rules`, `llm`, or `learned` under a request's `choice: learned`), `page`, `quote`,
`confidence`, `document` (content id), `watermark`.

Facts do not carry watermarks themselves: the caller maps each source document id to the
watermark of the sub-task that produced its facts, so a sentence of the report can be
traced to an agent and an input.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow as pa  # type: ignore[import-untyped]  # ships no py.typed
import pyarrow.parquet as pq  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import SwarmError, UsageView, short_id
from swarm_ray.documents._charts import draw_charts, panels
from swarm_ray.documents._compare import CellStatus, Comparison, ComparisonCell, FactSource
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import ExtractionMethod, NormalisedFact, Statistic
from swarm_ray.documents._format import dimension_of, escape, label, number
from swarm_ray.documents._summary import summarise, summary_lines

_EXTRACTORS = {ExtractionMethod.LLM: "llm", ExtractionMethod.LEARNED: "learned"}
"""What chose a fact, as the `extractor` column says: the rules, the LLM or the model."""

__all__ = ["ReportFiles", "ReportRequest", "render_report", "short_watermark"]

_Series = tuple[str, Statistic | None, str | None, str]
"""A column of a dimension's table: field, statistic, qualifier, unit."""
_COLUMNS_PER_TABLE = 6
"""Value columns in one Markdown table; more fields make more tables (readable widths)."""
_QUOTE_CHARS = 160

_FACTS_SCHEMA = pa.schema(
    [
        ("entity", pa.string()),
        ("source", pa.string()),
        ("field", pa.string()),
        ("dimension", pa.string()),
        ("statistic", pa.string()),
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
        ("watermark", pa.string()),
    ]
)
"""Numbers go to `value` and terms (features, text fields) to `term`: one type per column."""


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
    fields: tuple[FieldSpec, ...] = ()
    """The fields that were asked for: the tables follow their order, and those no
    document states are listed."""
    notes: dict[str, str] = {}
    """Source document id -> a note for the reader (`covers 3 part numbers: ...`)."""
    title: str = "Document comparison"
    sections: tuple[str, ...] = ()
    """Markdown sections from other stages (the judges' verdicts), placed after the
    warnings and before the sources appendix."""
    spend: UsageView | None = None
    """What the task spent before its report (`swarm_ray.agent.task_spend`); None: not
    known (the report ran outside an orchestrator's task)."""


class ReportFiles(BaseModel):
    """Where the report was written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out_dir: str
    markdown_path: str
    json_path: str
    parquet_path: str
    chart_paths: dict[str, str]
    """Dimension -> its first PNG, for dimensions with a chart."""
    fact_count: int = Field(ge=0)
    conflict_count: int = Field(ge=0)
    unstated: tuple[str, ...] = ()
    """Declared fields no document states."""


def short_watermark(token: str) -> str:
    """A watermark as a report line shows it: `wm:TASK:SIGNATURE10` (`swarm_ray.short_id`).

    `POST /v1/debug/watermark/extract` and `SwarmClient.trace` take it like the full token.
    """
    try:
        return short_id(token)
    except SwarmError:  # not a swarm-ray token: shown as its signature's first characters
        return f"wm:{token.rsplit('.', 1)[-1][:10]}"


def _cell_text(cell: ComparisonCell) -> str:
    if cell.status is CellStatus.LIST:
        return ", ".join(str(g.value) for g in cell.values)
    text = " / ".join(number(g.value) for g in cell.values)
    flag = {CellStatus.CONFLICT: " (conflict)", CellStatus.AMBIGUOUS: " (ambiguous)"}
    return text + flag.get(cell.status, "")


def _bydimension_of(
    comparison: Comparison, order: dict[str, int]
) -> dict[str, dict[_Series, list[ComparisonCell]]]:
    table: dict[str, dict[_Series, list[ComparisonCell]]] = defaultdict(dict)
    for cell in comparison.cells:
        series = (cell.field, cell.statistic, cell.qualifier, cell.unit)
        table[dimension_of(cell.field)].setdefault(series, []).append(cell)
    rank = {None: 0, Statistic.MIN: 1, Statistic.TYP: 2, Statistic.MAX: 3}

    def key(item: tuple[_Series, list[ComparisonCell]]) -> tuple[object, ...]:
        field, statistic, qualifier, unit = item[0]
        return (order.get(field, len(order)), field, rank[statistic], qualifier or "", unit)

    return {dim: dict(sorted(cols.items(), key=key)) for dim, cols in sorted(table.items())}


class _Document(BaseModel):
    model_config = ConfigDict(frozen=True)
    short: str
    source: str
    entity: str
    facts: int


def _documents(request: ReportRequest) -> dict[str, _Document]:
    """Document id -> its short id (`D1`...), file, main entity and fact count."""
    names: dict[str, str] = {}
    counts: Counter[str] = Counter()
    entities: dict[str, Counter[str]] = defaultdict(Counter)
    for fact in request.facts:
        names[fact.fact.document_id] = fact.fact.source
        counts[fact.fact.document_id] += 1
        entities[fact.fact.document_id][fact.fact.entity] += 1
    for cell in request.comparison.cells:
        for group in cell.values:
            for source in group.sources:
                names.setdefault(source.document_id, source.source)
                entities[source.document_id][cell.entity] += 0
    ordered = sorted(names, key=lambda d: (names[d], d))
    return {
        doc: _Document(
            short=f"D{index}",
            source=names[doc],
            entity=entities[doc].most_common(1)[0][0] if entities[doc] else "",
            facts=counts[doc],
        )
        for index, doc in enumerate(ordered, start=1)
    }


def _stamp(document_id: str, watermarks: dict[str, str]) -> str:
    mark = watermarks.get(document_id)
    return f"`{short_watermark(mark)}`" if mark else "none"


def _cite(source: FactSource, documents: dict[str, _Document], marks: dict[str, str]) -> str:
    quote = " ".join(source.quote.split())
    if len(quote) > _QUOTE_CHARS:
        quote = quote[: _QUOTE_CHARS - 1] + "…"
    short = documents[source.document_id].short if source.document_id in documents else "?"
    return (
        f"{short} ({_stamp(source.document_id, marks)}) `{source.source}` p. {source.page} "
        f"states `{source.value_text}`: “{quote}”"
    )


def _tables(columns: dict[_Series, list[ComparisonCell]]) -> list[str]:
    lines: list[str] = []
    series = list(columns)
    entities = sorted({c.entity for cells in columns.values() for c in cells})
    # Each series' first cell of each entity, looked up (a scan per entity was the square
    # of a thousand documents' entities).
    firsts: dict[_Series, dict[str, ComparisonCell]] = {}
    for key, cells in columns.items():
        firsts[key] = {}
        for cell in cells:
            firsts[key].setdefault(cell.entity, cell)
    for start in range(0, len(series), _COLUMNS_PER_TABLE):
        chunk = series[start : start + _COLUMNS_PER_TABLE]
        lines.append("| Entity | " + " | ".join(escape(label(*s)) for s in chunk) + " |")
        lines.append("| --- |" + " --- |" * len(chunk))
        for entity in entities:
            row = [
                escape(_cell_text(firsts[s][entity])) if entity in firsts[s] else "" for s in chunk
            ]
            if any(row):
                lines.append(f"| {escape(entity)} | " + " | ".join(row) + " |")
        lines.append("")
    return lines


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _markdown(
    request: ReportRequest,
    tables: dict[str, dict[_Series, list[ComparisonCell]]],
    charts: dict[str, list[str]],
    unstated: list[str],
) -> str:
    """The answer first (a row per field), then the values by entity, then the evidence."""
    comparison, marks = request.comparison, request.watermarks
    documents = _documents(request)
    summaries = summarise(
        (series, cells) for columns in tables.values() for series, cells in columns.items()
    )
    lines = [
        f"# {request.title}",
        "",
        f"{len(documents)} documents, {len(comparison.entities)} entities, "
        f"{len(request.facts)} facts, {_plural(len(comparison.conflicts), 'conflict')}, "
        f"{_plural(len(request.warnings), 'warning')}.",
        *_spend_line(request.spend),
        "",
        "## Comparison",
        "",
        *summary_lines(summaries, len(comparison.entities), unstated),
    ]
    if tables:
        lines += ["", "## Values by entity", ""]
        lines.append(
            "Each value in its field's declared unit. Charts rank the entities, highest "
            "first; red, and `(conflict)` in a table: the sources disagree (quoted under "
            "Conflicts)."
        )
    for dimension, columns in tables.items():
        lines += ["", f"### {dimension}", ""]
        lines += [f"![{dimension}](charts/{name})" for name in charts.get(dimension, [])]
        lines.append("")
        lines += _tables(columns)
    lines += ["", "## Conflicts", ""]
    if not comparison.conflicts:
        lines.append("No conflicts: every value is stated once or agreed on.")
    for cell in comparison.conflicts:
        heading = label(cell.field, cell.statistic, cell.qualifier, cell.unit)
        lines += [f"### {cell.entity}: {heading}", ""]
        for group in cell.values:
            value = f"{number(group.value)} {cell.unit}".strip()
            lines += [
                f"- **{value}**, " + _cite(source, documents, marks) for source in group.sources
            ]
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
            short = documents[fact.document_id].short if fact.document_id in documents else "?"
            lines.append(
                f"- {fact.entity}: `{fact.field}` = `{fact.value_text}` "
                f"(confidence {fact.confidence:.2f}), {short} `{fact.source}` p. {fact.page}: "
                f"“{' '.join(fact.quote.split())}”"
            )
    lines += ["", "## Warnings", ""]
    lines += [f"- {' '.join(w.split())}" for w in request.warnings] or ["None."]
    for section in request.sections:
        lines += ["", section.strip("\n")]
    lines += ["", "## Appendix: sources", ""]
    lines += ["| Id | File | Entity | Facts | Watermark |", "| --- | --- | --- | ---: | --- |"]
    for doc, info in documents.items():
        note = f" ({escape(request.notes[doc])})" if doc in request.notes else ""
        lines.append(
            f"| {info.short} | {escape(info.source)} | {escape(info.entity)}{note} | "
            f"{info.facts} | {_stamp(doc, marks)} |"
        )
    lines += [
        "",
        "Full watermark tokens are in `report.json` (`documents`) and `facts.parquet` "
        "(`watermark`); `POST /v1/debug/watermark/extract` traces a token to its agent and "
        "input.",
    ]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)) + "\n"


def _spend_line(spend: UsageView | None) -> list[str]:
    if spend is None:
        return []
    cost = f", cost {spend.cost:.6g}" if spend.cost else ", no prices set (cost 0)"
    return [
        "",
        f"Spend before this report: {spend.total_tokens} model tokens "
        f"({spend.prompt_tokens} prompt, {spend.completion_tokens} completion){cost}, "
        f"{spend.compute_s:.1f} s of agent time.",
    ]


def _fact_rows(request: ReportRequest) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for normalised in request.facts:
        fact, numeric = normalised.fact, not isinstance(normalised.value, str)
        rows.append(
            {
                "entity": fact.entity,
                "source": fact.source,
                "field": fact.field,
                "dimension": fact.field.split(".", 1)[0] if "." in fact.field else "",
                "statistic": fact.statistic.value if fact.statistic else None,
                "qualifier": fact.qualifier,
                "value": float(normalised.value) if numeric else None,
                "term": None if numeric else normalised.value,
                "unit": normalised.unit,
                "value_text": fact.value_text,
                "kind": fact.kind,
                "method": fact.method.value,
                "extractor": _EXTRACTORS.get(fact.method, "rules"),
                "page": fact.page,
                "quote": fact.quote,
                "confidence": fact.confidence,
                "document": fact.document_id,
                "watermark": request.watermarks.get(fact.document_id),
            }
        )
    return rows


def _facts_table(rows: list[dict[str, object]]) -> pa.Table:
    columns: dict[str, list[object]] = {name: [] for name in _FACTS_SCHEMA.names}
    for row in rows:
        for name in _FACTS_SCHEMA.names:
            columns[name].append(row[name])
    return pa.table(columns, schema=_FACTS_SCHEMA)


def _write_text(path: Path, text: str) -> None:
    """Write next to the target, then rename: a reader never opens half a report."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def unstated_fields(fields: tuple[FieldSpec, ...], comparison: Comparison) -> list[str]:
    """Declared field keys that no cell of the comparison holds."""
    stated = {c.field for c in comparison.cells}
    return [f.key for f in fields if f.key not in stated]


def render_report(request: ReportRequest) -> ReportFiles:
    """Write `report.md`, the charts, `facts.parquet` and `report.json` into `out_dir`.

    Returns:
        The paths written. Documents without a watermark in `watermarks` are reported
        with `none` in the Markdown and a null watermark in Parquet, not refused: a
        missing watermark is for the reviewer to see, not a reason to lose the report.
    """
    out = Path(request.out_dir)
    (out / "charts").mkdir(parents=True, exist_ok=True)
    order = {f.key: i for i, f in enumerate(request.fields)}
    tables = _bydimension_of(request.comparison, order)
    charts: dict[str, list[str]] = {}
    for dimension, columns in tables.items():
        found = panels(columns, label)
        if found:
            names = draw_charts(dimension, found, out / "charts", dimension)
            charts[dimension] = names
    unstated = unstated_fields(request.fields, request.comparison)
    _write_text(out / "report.md", _markdown(request, tables, charts, unstated))
    rows = _fact_rows(request)
    pq.write_table(_facts_table(rows), out / "facts.parquet")
    documents = _documents(request)
    summary = {
        "title": request.title,
        "documents": [
            {
                "id": info.short,
                "document_id": doc,
                "source": info.source,
                "entity": info.entity,
                "facts": info.facts,
                "watermark": request.watermarks.get(doc),
                **({"note": request.notes[doc]} if doc in request.notes else {}),
            }
            for doc, info in documents.items()
        ],
        "charts": {d: [f"charts/{n}" for n in names] for d, names in charts.items()},
        "warnings": list(request.warnings),
        "spend": None if request.spend is None else request.spend.model_dump(mode="json"),
        "unstated_fields": unstated,
        "fact_count": len(request.facts),
        "facts": rows,
        "comparison": request.comparison.model_dump(mode="json"),
    }
    _write_text(out / "report.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return ReportFiles(
        out_dir=str(out),
        markdown_path=str(out / "report.md"),
        json_path=str(out / "report.json"),
        parquet_path=str(out / "facts.parquet"),
        chart_paths={d: str(out / "charts" / names[0]) for d, names in charts.items()},
        fact_count=len(request.facts),
        conflict_count=len(request.comparison.conflicts),
        unstated=tuple(unstated),
    )
