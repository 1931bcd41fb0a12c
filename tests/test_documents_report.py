"""`report.render.markdown` on a real comparison of generated brochures.

The comparison comes from the whole pipeline (generate, parse, extract, normalise, compare)
so the report is checked against what the pipeline really produces: planted conflicts with
their quotes, canonical units, features as lists, and one document left without a
watermark to show how a gap is reported rather than hidden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from swarm_ray.documents import (
    CellStatus,
    Comparison,
    ComparisonCell,
    ExtractionMethod,
    Fact,
    FieldSpec,
    NormalisedFact,
    ReportFiles,
    ReportRequest,
    Statistic,
    compare_facts,
    default_dimensions,
    extract_facts,
    generate_brochures,
    normalise_facts,
    parse_field_arg,
    parse_pdf,
    render_report,
)
from swarm_ray.documents._report import short_watermark
from swarm_ray.documents._summary import summarise

_WARNING = "extraction of `brochure_004.pdf` fell back to `document.extraction.llm`"


@dataclass(frozen=True)
class Rendered:
    comparison: Comparison
    facts: tuple[NormalisedFact, ...]
    watermarks: dict[str, str]
    unmarked: str
    """The document id left out of `watermarks`."""
    files: ReportFiles
    markdown: str


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    sample = generate_brochures(tmp_path_factory.mktemp("report-brochures"), n=30, seed=0)
    facts: list[NormalisedFact] = []
    documents = [parse_pdf(path) for path in sample.pdf_paths]
    for document in documents:
        facts.extend(normalise_facts(extract_facts(document, default_dimensions()).facts).facts)
    comparison = compare_facts(facts)
    assert comparison.conflicts, "seed 0 plants conflicts; the report must show some"
    watermarks = {d.document_id: f"wm-{d.file_name}" for d in documents[1:]}
    request = ReportRequest(
        comparison=comparison,
        facts=tuple(facts),
        out_dir=str(tmp_path_factory.mktemp("report") / "out"),
        warnings=(_WARNING,),
        watermarks=watermarks,
        title="EV brochures",
    )
    files = render_report(request)
    markdown = Path(files.markdown_path).read_text(encoding="utf-8")
    return Rendered(comparison, tuple(facts), watermarks, documents[0].document_id, files, markdown)


def _section(markdown: str, heading: str) -> str:
    return markdown.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def _dimension(markdown: str, name: str) -> str:
    """A dimension's charts and tables, under `## Values by entity`."""
    return _section(markdown, "Values by entity").split(f"\n### {name}\n", 1)[1].split("\n### ")[0]


def test_every_file_is_written(rendered: Rendered) -> None:
    files = rendered.files
    for path in (files.markdown_path, files.json_path, files.parquet_path):
        assert Path(path).is_file() and Path(path).stat().st_size > 0
    assert set(files.chart_paths) == {c.field.split(".")[0] for c in rendered.comparison.cells}
    for dimension, path in files.chart_paths.items():
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert Path(path) == Path(files.out_dir) / "charts" / f"{dimension}.png"
        assert f"![{dimension}](charts/{dimension}.png)" in _dimension(rendered.markdown, dimension)
    assert not list(Path(files.out_dir).glob("*.partial"))
    assert files.fact_count == len(rendered.facts)
    assert files.conflict_count == len(rendered.comparison.conflicts)


def _tables(section: str) -> list[list[str]]:
    """A section's tables, each as its lines (header first)."""
    tables: list[list[str]] = []
    for line in section.splitlines():
        if line.startswith("| Entity |"):
            tables.append([line])
        elif line.startswith("|") and tables:
            tables[-1].append(line)
    return tables


def _row(section: str, entity: str, column: str) -> str:
    """The row of `entity` in the table of `section` that has a column starting `column`."""
    for table in _tables(section):
        headers = [h.strip() for h in table[0].strip("|").split("|")]
        if any(h.startswith(column) for h in headers):
            return next(line for line in table if line.startswith(f"| {entity} |"))
    raise AssertionError(f"no column {column!r} for {entity!r}")


def test_the_tables_have_a_row_per_entity_and_its_values(rendered: Rendered) -> None:
    for cell in rendered.comparison.cells:
        section = _dimension(rendered.markdown, cell.field.split(".")[0])
        row = _row(section, cell.entity, cell.field.split(".")[1])
        if cell.field == "battery.capacity" and cell.status is CellStatus.SINGLE:
            assert f"| {float(cell.values[0].value):g} |" in row
        if cell.status is CellStatus.LIST:
            assert all(str(group.value) in row for group in cell.values)
    for cell in rendered.comparison.conflicts:
        section = _dimension(rendered.markdown, cell.field.split(".")[0])
        assert "(conflict)" in _row(section, cell.entity, cell.field.split(".")[1])
    for table in _tables(rendered.markdown):
        assert table[0].count("|") <= 8  # at most six value columns: readable widths
    header = _dimension(rendered.markdown, "battery").splitlines()
    assert any(line.startswith("| Entity | capacity [kWh] |") for line in header)


def test_conflicts_show_both_values_with_quotes_sources_and_watermarks(rendered: Rendered) -> None:
    conflicts = _section(rendered.markdown, "Conflicts")
    for cell in rendered.comparison.conflicts:
        assert f"### {cell.entity}: " in conflicts
        assert len(cell.values) >= 2
        for group in cell.values:
            for source in group.sources:
                quote = " ".join(source.quote.split())
                line = next(x for x in conflicts.splitlines() if f"“{quote}”" in x)
                assert f"`{source.source}` p. {source.page}" in line
                mark = rendered.watermarks.get(source.document_id)
                assert f"(`{short_watermark(mark)}`)" in line if mark else "(none)" in line
                assert f"`{source.value_text}`" in line
                assert len(line) < 400  # short ids, not 300-character tokens
    sources = _section(rendered.markdown, "Appendix: sources")
    for mark in rendered.watermarks.values():
        assert short_watermark(mark) in sources and mark not in rendered.markdown
    assert "| none |" in sources  # the document left without a watermark says so
    assert f"- {_WARNING}" in _section(rendered.markdown, "Warnings")


def test_the_facts_table_reads_back_one_row_per_fact(rendered: Rendered) -> None:
    table = pq.read_table(rendered.files.parquet_path)
    assert table.num_rows == len(rendered.facts)
    for column in ("entity", "field", "value", "unit", "qualifier", "page", "quote"):
        assert column in table.column_names
    assert {"confidence", "document", "watermark"} <= set(table.column_names)
    rows = table.to_pylist()
    for row, fact in zip(rows, rendered.facts, strict=True):
        assert row["document"] == fact.fact.document_id and row["quote"] == fact.fact.quote
        assert row["watermark"] == rendered.watermarks.get(fact.fact.document_id)
        if isinstance(fact.value, str):
            assert row["term"] == fact.value and row["value"] is None
        else:
            assert row["value"] == pytest.approx(fact.value) and row["term"] is None
    assert any(row["watermark"] is None for row in rows), "the unmarked document's facts"
    assert {row["document"] for row in rows if row["watermark"] is None} == {rendered.unmarked}


def test_the_json_report_round_trips_the_comparison(rendered: Rendered) -> None:
    data = json.loads(Path(rendered.files.json_path).read_text(encoding="utf-8"))
    assert Comparison.model_validate(data["comparison"]) == rendered.comparison
    assert data["warnings"] == [_WARNING]
    assert data["fact_count"] == len(rendered.facts)
    marks = {d["document_id"]: d["watermark"] for d in data["documents"]}
    assert marks[rendered.unmarked] is None
    assert {k: v for k, v in marks.items() if v} == rendered.watermarks


def test_an_empty_comparison_still_gives_a_report(tmp_path: Path) -> None:
    empty = Comparison(entities=(), fields=(), cells=(), conflicts=(), rel_tolerance=0.01)
    files = render_report(ReportRequest(comparison=empty, out_dir=str(tmp_path)))
    markdown = Path(files.markdown_path).read_text(encoding="utf-8")
    assert "No conflicts" in markdown and "None." in markdown
    assert files.chart_paths == {} and pq.read_table(files.parquet_path).num_rows == 0
    assert "Spend" not in markdown  # not known outside a task: not made up


def test_the_report_shows_what_the_task_spent(tmp_path: Path) -> None:
    from swarm_ray.core.views._views import UsageView

    empty = Comparison(entities=(), fields=(), cells=(), conflicts=(), rel_tolerance=0.01)
    spend = UsageView(prompt_tokens=900, completion_tokens=100, total_tokens=1000, cost=0.0125)
    files = render_report(ReportRequest(comparison=empty, out_dir=str(tmp_path), spend=spend))
    markdown = Path(files.markdown_path).read_text(encoding="utf-8")
    assert "1000 model tokens (900 prompt, 100 completion), cost 0.0125" in markdown
    assert json.loads(Path(files.json_path).read_text())["spend"]["cost"] == 0.0125


def test_a_hundred_entities_stay_legible(tmp_path: Path) -> None:
    """Charts of bounded height (a sorted strip per field), tables of six value columns."""
    from PIL import Image

    from swarm_ray.documents import ExtractionMethod, Fact, Statistic, parse_field_arg

    fields = [
        parse_field_arg(f)
        for f in ("case temperature:°C:min,max", "data rate:Gb/s", "wavelength:nm", "reach:km")
    ]
    facts: list[Fact] = []
    for n in range(100):
        for spec, statistic, value, unit in (
            (fields[0], Statistic.MIN, -40 + n % 3 * 20, "°C"),
            (fields[0], Statistic.MAX, 70 + n % 2 * 15, "°C"),
            (fields[1], None, 10 + n % 4, "Gb/s"),
            (fields[2], None, 1300 + n, "nm"),
            (fields[3], None, 1 + n % 5, "km"),
        ):
            facts.append(
                Fact(
                    entity=f"Part {n:03d}",
                    field=spec.key,
                    kind=spec.kind,
                    value=value,
                    unit=unit,
                    field_unit=spec.unit,
                    statistic=statistic,
                    value_text=f"{value} {unit}",
                    page=1,
                    quote=f"{spec.name} {value}",
                    confidence=0.9,
                    method=ExtractionMethod.LABEL,
                    document_id=f"d{n}",
                    source=f"d{n}.pdf",
                )
            )
    normalised = normalise_facts(facts).facts
    files = render_report(
        ReportRequest(
            comparison=compare_facts(normalised),
            facts=normalised,
            out_dir=str(tmp_path),
            fields=tuple(fields),
        )
    )
    (chart,) = files.chart_paths.values()
    with Image.open(chart) as image:
        width, height = image.size
    assert height <= 1000 and width <= 1200  # four panels of 100 entities each
    markdown = Path(files.markdown_path).read_text(encoding="utf-8")
    assert "| Entity | case temperature min [°C] | case temperature max [°C] |" in markdown
    rows = [line for line in markdown.splitlines() if line.startswith("| Part 042 |")]
    assert len(rows) == 1  # five columns: one table


def test_the_comparison_comes_first_and_the_sources_last(rendered: Rendered) -> None:
    """A reader gets the answer on the first screen; provenance follows, sources at the end."""
    headings = [line for line in rendered.markdown.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Comparison"
    assert headings[-1] == "## Appendix: sources"
    order = ["## Comparison", "## Values by entity", "## Conflicts", "## Warnings"]
    assert [h for h in headings if h in order] == order
    first_screen = "\n".join(rendered.markdown.splitlines()[:40])
    assert "| Field | Stated by | Lowest (who) | Highest (who) | Spread |" in first_screen
    assert "| Id | File |" not in first_screen


def _fact(entity: str, spec: FieldSpec, value: float | str, doc: str, unit: str = "") -> Fact:
    text = f"{value} {unit}".strip()
    return Fact(
        entity=entity,
        field=spec.key,
        kind=spec.kind,
        value=value,
        unit=unit,
        field_unit=spec.unit,
        value_text=text,
        page=1,
        quote=f"{spec.name}: {text}",
        confidence=0.9,
        method=ExtractionMethod.LABEL,
        document_id=doc,
        source=f"{doc}.pdf",
    )


@pytest.fixture(scope="module")
def transceivers() -> tuple[tuple[FieldSpec, ...], tuple[NormalisedFact, ...]]:
    """Three parts: A's documents disagree on its data rate, C's one page states two."""
    fields = tuple(
        parse_field_arg(f) for f in ("data rate:Gb/s", "reach:km", "form factor", "power:W")
    )
    rate, reach, form, _ = fields
    facts = [
        _fact("A", rate, 10, "d1", "Gb/s"),
        _fact("A", rate, 25, "d2", "Gb/s"),
        _fact("B", rate, 25, "d3", "Gb/s"),
        _fact("C", rate, 1.25, "d4", "Gb/s"),
        _fact("C", rate, 2.5, "d4", "Gb/s"),
        _fact("A", reach, 10, "d1", "km"),
        _fact("B", reach, 40, "d3", "km"),
        _fact("C", reach, 40, "d4", "km"),
        _fact("A", form, "SFP+", "d1"),
        _fact("B", form, "QSFP28", "d3"),
        _fact("C", form, "SFP+", "d4"),
    ]
    return fields, normalise_facts(facts).facts


def test_a_field_summary_gives_both_ends_who_states_them_and_disputes(
    transceivers: tuple[tuple[FieldSpec, ...], tuple[NormalisedFact, ...]],
) -> None:
    _, facts = transceivers
    comparison = compare_facts(facts)
    columns: dict[tuple[str, Statistic | None, str | None, str], list[ComparisonCell]] = {}
    for cell in comparison.cells:
        columns.setdefault((cell.field, cell.statistic, cell.qualifier, cell.unit), []).append(cell)
    summaries = {s.field: s for s in summarise(columns.items())}
    rate, reach, form = summaries["data rate"], summaries["reach"], summaries["form factor"]
    assert (rate.field, rate.entities, rate.lowest, rate.lowest_by) == (
        "data rate",
        3,
        1.25,
        ("C",),
    )
    assert (rate.highest, rate.highest_by, rate.spread) == (25, ("A", "B"), 23.75)
    assert (rate.conflicts, rate.ambiguous) == (("A",), ("C",))
    assert (reach.lowest_by, reach.highest_by, reach.spread, reach.disputed) == (
        ("A",), ("B", "C"), 30, frozenset()
    )  # fmt: skip
    assert (form.lowest, form.terms) == (None, (("SFP+", 2), ("QSFP28", 1)))


def test_the_summary_rows_read_as_the_answer(
    transceivers: tuple[tuple[FieldSpec, ...], tuple[NormalisedFact, ...]], tmp_path: Path
) -> None:
    fields, facts = transceivers
    files = render_report(
        ReportRequest(
            comparison=compare_facts(facts),
            facts=facts,
            out_dir=str(tmp_path),
            fields=fields,
            sections=("## Judges\n\n| judge | score | worst finding |",),
        )
    )
    markdown = Path(files.markdown_path).read_text(encoding="utf-8")
    summary = _section(markdown, "Comparison")
    assert "| Dimension |" not in summary  # one group of fields: no column for it
    assert (
        "| data rate [Gb/s] | 3/3 | 1.25 (C) ⚠ | 25 (A, B) ⚠ | 23.75 "
        "| 1 conflict: A; 1 one page: C |"
    ) in summary
    assert "| reach [km] | 3/3 | 10 (A) | 40 (B, C) | 30 |  |" in summary
    assert "| form factor | 3/3 | SFP+ (2), QSFP28 (1) |  |" in summary
    assert "No document states `power`." in summary
    assert "better" in summary  # says why no value is called the best
    headings = [line for line in markdown.splitlines() if line.startswith("## ")]
    assert headings[-3:] == ["## Warnings", "## Judges", "## Appendix: sources"]
    assert markdown.index("## Conflicts") < markdown.index("\n- **10 Gb/s**, D1")


def test_implausible_values_dropped_in_normalisation_are_warnings_of_the_report(
    transceivers: tuple[tuple[FieldSpec, ...], tuple[NormalisedFact, ...]], tmp_path: Path
) -> None:
    from swarm_ray.documents._render import render_markdown
    from swarm_ray.documents._stage_inputs import ReportIn

    _, facts = transceivers
    wavelength = parse_field_arg("wavelength:nm")
    absurd = normalise_facts([_fact("A", wavelength, 3000, "d1", "km")])
    assert not absurd.facts and absurd.warnings
    results = [absurd.model_copy(update={"facts": facts})]
    files = render_markdown(
        ReportIn(comparison=compare_facts(facts), results=results, out_dir=str(tmp_path))
    )
    markdown = Path(files.markdown_path).read_text(encoding="utf-8")
    assert "1 warning." in markdown.splitlines()[2]
    assert "not a plausible value of the field: dropped" in _section(markdown, "Warnings")
