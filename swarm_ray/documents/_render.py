"""The report step: the comparison rendered with the judges' verdicts and the LLM's readings.

`render_markdown` is the `report.render.markdown` capability (the template's last stage):
it gathers what the task's earlier stages left (the comparison, the facts with their
watermarks, the judges, the LLM readings, every warning) and hands them to
`_report.render_report`, which writes the files. Here stays what only this step says:
the judges' section, the per-field table of where the rules and the LLM agree, and a
warning for each declared field that no document states.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from swarm_ray.agent import state_dir, task_spend
from swarm_ray.documents._compare import Comparison
from swarm_ray.documents._dimensions import Dimension, declared_dimensions
from swarm_ray.documents._llm_extract import CrossCheck
from swarm_ray.documents._report import ReportFiles, ReportRequest, render_report
from swarm_ray.documents._stage_inputs import ReportIn
from swarm_ray.documents._units import NormalisationResult

__all__: list[str] = []


def _notes(results: Sequence[NormalisationResult]) -> dict[str, str]:
    return {doc: note for r in results for doc, note in r.notes.items()}


def _unstated_warnings(dimensions: Sequence[Dimension], comparison: Comparison) -> list[str]:
    """One warning per declared field that no document states (the batch still reports)."""
    stated = {c.field for c in comparison.cells}
    return [
        f"field `{f.key}`: no document states it (labels tried: "
        f"{', '.join(repr(label) for label in f.all_labels)})"
        for d in dimensions
        for f in d.fields
        if f.key not in stated
    ]


def render_markdown(data: ReportIn) -> ReportFiles:
    """Write the report files, with the judges' verdicts before the sources appendix."""
    out_dir = data.out_dir or str(state_dir() / "reports" / uuid.uuid4().hex[:12])
    declared = declared_dimensions(data.dimensions, data.fields)
    facts = tuple(f for r in data.results for f in r.facts)
    sections: list[str] = []
    if data.judgement is not None:
        verdicts = (data.judgement.factuality, data.judgement.coherence, data.judgement.efficiency)
        lines = ["## Judges", "", "| judge | score | worst finding |", "| --- | --- | --- |"]
        for verdict in verdicts:
            worst = verdict.findings[0].message if verdict.findings else "none"
            lines.append(f"| {verdict.judge} | {verdict.score:.2f} | {worst} |")
        crossed = [f for f in data.judgement.factuality.findings if f.cross_check]
        if crossed:
            lines += ["", "### LLM cross-check: disagreements with the rules", ""]
            lines += [f"- **{f.subject}**: {' '.join(f.message.split())}" for f in crossed]
        sections.append("\n".join(lines))
    if table := _readings_table([c for c in data.llm_readings if c is not None and c.enabled]):
        sections.append("\n".join(table))
    return render_report(
        ReportRequest(
            comparison=data.comparison,
            facts=facts,
            out_dir=out_dir,
            warnings=(
                *data.warnings,
                *(w for r in data.results for w in r.warnings),  # implausible values dropped
                *_unstated_warnings(declared, data.comparison),
            ),
            watermarks=dict(zip(data.document_ids, data.watermarks, strict=False)),
            fields=tuple(f for d in declared for f in d.fields),
            notes=_notes(data.results),
            spend=task_spend(),
            sections=tuple(sections),
        )
    )


def _readings_table(checks: Sequence[CrossCheck]) -> list[str]:
    """The report's `llm_extract` section: per field, where the rules and the LLM agree."""
    rows = [(c.source, r) for c in checks for r in c.readings]
    if not rows:
        return []
    tally: dict[str, dict[str, int]] = {}
    for _, reading in rows:
        counts = tally.setdefault(reading.field, {})
        counts[reading.status] = counts.get(reading.status, 0) + 1
    lines = ["", "## Rules and LLM, per field", "", "| field | " + " | ".join(_STATUSES) + " |"]
    lines.append("| --- |" + " --- |" * len(_STATUSES))
    for field, counts in tally.items():
        lines.append(f"| {field} | " + " | ".join(str(counts.get(s, 0)) for s in _STATUSES) + " |")
    lines += ["", "| document | field | rules | LLM | reading |", "| --- | --- | --- | --- | --- |"]
    for source, r in rows:
        rules, llm = ", ".join(r.rules) or "-", ", ".join(r.llm) or "-"
        lines.append(f"| {source} | {r.field} | {rules} | {llm} | {r.status} |")
    return lines


_STATUSES = ("agree", "differ", "rules only", "llm only", "neither")
