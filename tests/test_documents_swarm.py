"""The document comparison workload end to end on the real local Ray."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import swarm_ray
from swarm_ray import SwarmClient, TaskState
from swarm_ray.documents._job import list_pdfs, main
from tests.datasheet_samples import FIELDS, write_datasheets

pytestmark = pytest.mark.ray

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "pdf"


@pytest.fixture(scope="module")
def docs_swarm(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    client = swarm_ray.connect(
        catalogs=["swarm_ray.catalog:default_catalog"],
        state_dir=tmp_path_factory.mktemp("docs-state"),
        name="swarm-docs",
    )
    yield client
    client.shutdown()


def test_main_job_on_generated_brochures(
    ray_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "--samples",
            "16",
            "--seed",
            "3",
            "--out",
            str(tmp_path),
            "--dimensions",
            "battery",
            "motor",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "precision 1.000" in out or "precision 0.9" in out
    comparison = json.loads((tmp_path / "report.json").read_text())["comparison"]
    assert comparison["entities"] and comparison["cells"]
    assert {c["field"].split(".")[0] for c in comparison["cells"]} == {"battery", "motor"}
    report = (tmp_path / "report.md").read_text()
    assert "## Judges" in report and "factuality" in report
    assert (tmp_path / "facts.parquet").exists() and (tmp_path / "charts" / "battery.png").exists()
    assert f"report: {tmp_path / 'report.md'}" in out


def test_compare_with_fields_by_name_and_unit(
    ray_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    samples = write_datasheets(tmp_path / "pdfs")
    argv = ["--input", str(tmp_path / "pdfs"), "--out", str(tmp_path / "out")]
    for field in (*FIELDS, "bit error rate:%"):  # the last one no datasheet states
        argv += ["--field", field]
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{len(samples)} documents x 15 fields" in out
    assert "no document states `bit error rate`" in out
    table = pq.read_table(tmp_path / "out" / "facts.parquet")
    for column in ("entity", "source", "field", "statistic", "value", "unit", "watermark"):
        assert column in table.column_names
    rows = table.to_pylist()
    temperature = {
        (r["statistic"], r["value"], r["unit"])
        for r in rows
        if r["source"] == "optical.pdf" and r["field"] == "case temperature"
    }
    assert temperature == {("min", 0.0, "°C"), ("max", 70.0, "°C")}
    rates = {r["value"] for r in rows if r["field"] == "data rate"}
    assert rates == {10.3, 10.3125, 25.78125}  # 25.78125 GBd read, reported in Gb/s
    assert all(r["watermark"] for r in rows)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["unstated_fields"] == ["bit error rate"]
    assert {f["field"] for f in report["facts"]} >= {"case temperature", "data rate"}
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "covers 3 part numbers: LDM-850, LDM-1310, LDM-1550" in markdown


def test_corpus_pdfs_in_one_batch_get_a_result_or_a_named_error(docs_swarm: SwarmClient) -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS}")
    # Every fourth file (65 of the corpus's 258, among them files that fail for each of
    # its five reasons) goes through the swarm: what this adds is a batch of real files
    # that completes around its failures, each named. test_documents_corpus.py reads
    # every file in process, and the whole corpus here took 65 s of the suite.
    paths = list_pdfs(str(CORPUS))[::4]
    task_id = docs_swarm.submit(
        template="compare_documents", items=tuple(paths), params={"dimensions": ["battery"]}
    )
    record = docs_swarm.task(task_id).wait(timeout_s=600)
    assert record.machine.state is TaskState.COMPLETED, record.error
    status = docs_swarm.task(task_id).status().model_dump(mode="json")
    parse = {sid: s for sid, s in status["subtasks"].items() if sid.startswith("parse[")}
    assert len(parse) == len(paths)
    assert {s["status"] for s in parse.values()} <= {"succeeded", "failed"}
    # No `llm_cross_check` nor `llm_extract`: those stages are left out, not run as no-ops.
    assert not [sid for sid in status["subtasks"] if sid.startswith(("crosscheck", "llmextract"))]
    reasons: Counter[str] = Counter()
    for sid, s in parse.items():
        if s["status"] == "failed":
            index = int(sid[len("parse[") : -1])
            name = Path(paths[index]).name
            warning = next(w for w in record.warnings if f"`{sid}`" in w and "failed" in w)
            assert name in warning, warning  # the error names the file ...
            reasons[warning.rsplit("(reason ", 1)[-1].strip(")'")] += 1  # ... and the reason
    ok = sum(s["status"] == "succeeded" for s in parse.values())
    print(f"\ncorpus: {len(paths)} PDFs, {ok} parsed, failures by reason: {dict(reasons)}")
    assert ok + sum(reasons.values()) == len(paths)
    assert ok > len(paths) // 2
    assert len(reasons) >= 2  # the batch did meet failures of more than one kind


def test_the_notebook_runs(ray_cluster: None, capsys: pytest.CaptureFixture[str]) -> None:
    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "compare_documents.ipynb"
    cells = json.loads(notebook.read_text())["cells"]
    namespace: dict[str, object] = {}
    for cell in cells:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), namespace)
    out = capsys.readouterr().out
    assert "completed" in out and "precision" in out
    score = namespace["score"]
    assert score.recall > 0.9  # type: ignore[attr-defined]
