"""The LLM fallback and cross-check of the document workload, with the scripted engine.

No Ray and no model: the scripted engine says exactly what the "model" answers, so these
tests pin the logic around it (when the fallback runs, what is kept, what is marked and
warned, what the cross-check flags). The real llama.cpp path is in
`test_documents_llm_serve.py`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from swarm_ray import TaskRequest
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._signals import Fallback, Start, Warn
from swarm_ray.core.planning._catalog import load_catalogs
from swarm_ray.core.scheduling._scheduler import Scheduler
from swarm_ray.documents import (
    ExtractIn,
    ExtractionMethod,
    ExtractionResult,
    ParsedDocument,
    compare_facts,
    default_dimensions,
    extract_facts,
    normalise_facts,
)
from swarm_ray.documents._capabilities import (
    cross_check,
    extract_llm,
    judge_quality,
)
from swarm_ray.documents._llm_extract import RULES_CONFIDENCE_THRESHOLD, CrossCheck
from swarm_ray.documents._llm_facts import keyword_window
from swarm_ray.documents._parse import DocumentMetadata, PageText
from swarm_ray.documents._render import render_markdown
from swarm_ray.documents._stage_inputs import CrossCheckIn, JudgeIn, ReportIn
from swarm_ray.llm import ScriptedEngine, use_engine
from tests.support import done

TEXT = (
    "Aero Nova\n"
    "Its battery, assembled in-house from prismatic cells, stores 58 kWh.\n"
    "A wallbox at home delivers 11 kW.\n"
    "Range (WLTP) 420 km\n"
)
"""Rules read the capacity from a distant weak label (0.55, under the threshold), the range
from a strong one (0.92), and find no charging power: no label is near `11 kW`."""
BATTERY = next(d for d in default_dimensions() if d.name == "battery")


def document(text: str = TEXT) -> ParsedDocument:
    return ParsedDocument(
        document_id="d-aero",
        path="/brochures/aero.pdf",
        file_name="aero.pdf",
        size_bytes=len(text),
        metadata=DocumentMetadata(page_count=1),
        pages=(PageText(number=1, text=text),),
    )


def answer(**values: float | list[float]) -> str:
    """The model's JSON: a number per field, a list where qualifiers allow two."""
    return json.dumps(values)


def scripted(*script: str) -> ScriptedEngine:
    engine = ScriptedEngine(script)
    use_engine(engine)
    return engine


@pytest.fixture(autouse=True)
def _no_engine_left() -> Iterator[None]:
    yield
    use_engine(None)


def test_rules_under_the_threshold_switch_the_subtask_to_the_llm_fallback() -> None:
    registry, router = load_catalogs(["swarm_ray.documents._capabilities:documents_catalog"])
    rules = registry.get("document.extraction.specs")
    assert rules.fallback == "document.extraction.llm"
    assert rules.confidence_threshold == RULES_CONFIDENCE_THRESHOLD
    llm = registry.get("document.extraction.llm")
    assert (llm.input_model, llm.output_model) == (rules.input_model, rules.output_model)
    request = TaskRequest(
        template="compare_documents", items=("aero.pdf",), params={"dimensions": ["battery"]}
    )
    scheduler = Scheduler(expand(router.get("compare_documents"), request, task_id="t1"), registry)
    (parse,) = scheduler.handle(Start(at=0))
    parsed = document().model_dump(mode="json")
    extract = next(
        i for i in scheduler.handle(done(parse, output=parsed)) if "extract" in i.subtask_id
    )
    result = extract_facts(document(), [BATTERY])
    out = scheduler.handle(done(extract, output=result.model_dump(mode="json"), confidence=0.55))
    (fallback,) = [i for i in out if isinstance(i, Fallback)]
    assert fallback.capability_id == "document.extraction.llm" and fallback.input == extract.input
    assert "confidence 0.55 under threshold 0.60" in fallback.reason
    assert any(
        "fallback `document.extraction.llm`" in w.message for w in out if isinstance(w, Warn)
    )


def test_confident_rules_never_reach_the_llm() -> None:
    text = TEXT.replace(
        "Its battery, assembled in-house from prismatic cells, stores", "Battery capacity"
    )
    result = extract_facts(document(text), [BATTERY])
    assert min(f.confidence for f in result.facts) >= RULES_CONFIDENCE_THRESHOLD


def test_fallback_fills_the_unsure_and_missing_fields_marked_llm_with_a_warning() -> None:
    engine = scripted(answer(capacity=58, charging_power=[11], charge_time=[9]))
    reply = extract_llm(ExtractIn(document=document(), dimension="battery"))
    result = reply.output
    assert isinstance(result, ExtractionResult)
    by_field = {f.field: f for f in result.facts}
    # the LLM confirmed the unsure capacity: the rule fact stays
    assert by_field["battery.capacity"].method is ExtractionMethod.SYNONYM
    assert by_field["battery.range"].confidence == 0.92  # confident rule facts are untouched
    power = by_field["battery.charging_power"]  # filled from the text, marked, less sure
    assert power.method is ExtractionMethod.LLM and power.confidence == 0.5
    assert (power.value, power.unit, power.page) == (11.0, "kW", 1)
    assert power.quote == "A wallbox at home delivers 11 kW."
    assert "battery.charge_time" not in by_field  # `9 h` is stated nowhere: dropped
    (warning,) = reply.warnings
    assert "LLM `scripted`" in warning and "marked `llm`" in warning
    assert "confirmed 1 rule fact(s)" in warning and "dropped 1 ungrounded" in warning
    assert reply.confidence == 0.5 and reply.usage.calls == 1
    ((messages, schema),) = engine.calls
    assert schema is not None
    # asked only what rules were unsure of or missed: never the confident range
    assert list(schema["properties"]) == ["capacity", "charging_power", "charge_time"]
    assert schema["additionalProperties"] is False  # nothing else can be answered
    assert "wallbox at home delivers 11 kW" in messages[-1].content


def test_the_answer_schema_allows_each_field_once_and_caps_tokens_by_the_fields_asked() -> None:
    import jsonschema

    from swarm_ray.documents._llm_facts import answer_tokens, facts_schema

    fields = [f for f in BATTERY.fields if f.name in ("capacity", "charging_power")]
    validator = jsonschema.Draft202012Validator(facts_schema(fields))
    assert validator.is_valid({"capacity": 58, "charging_power": [150, 11]})  # DC and AC
    assert validator.is_valid({})  # nothing stated: nothing answered
    # a small model repeating itself cannot: one value, two where qualifiers tell them apart
    assert not validator.is_valid({"capacity": [58, 58]})
    assert not validator.is_valid({"charging_power": [11, 11, 11]})
    assert not validator.is_valid({"range": 420})  # not asked
    one = answer_tokens(fields[:1])
    assert one < 64 and answer_tokens(fields) > one  # the cap grows with what is asked


def test_the_report_lists_llm_facts_and_marks_their_extractor(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    scripted(answer(charging_power=[11]))
    result = extract_llm(ExtractIn(document=document(), dimension="battery")).output
    assert isinstance(result, ExtractionResult)
    normalised = normalise_facts(result.facts)
    files = render_markdown(
        ReportIn(
            comparison=compare_facts(normalised.facts),
            results=[normalised],
            warnings=[
                "sub-task `extract[0,battery]` switched to fallback `document.extraction.llm`"
            ],
            out_dir=str(tmp_path),
        )
    )
    report = Path(files.markdown_path).read_text()
    section = report[report.index("## Facts from the LLM fallback") : report.index("## Warnings")]
    assert "`battery.charging_power` = `11 kW` (confidence 0.50), D1 `aero.pdf` p. 1" in section
    assert "fallback `document.extraction.llm`" in report[report.index("## Warnings") :]
    rows = pq.read_table(files.parquet_path).to_pylist()
    assert {(r["field"], r["extractor"]) for r in rows} == {
        ("battery.capacity", "rules"),
        ("battery.range", "rules"),
        ("battery.charging_power", "llm"),
    }


def test_fallback_replaces_an_unsure_rule_fact_the_llm_reads_otherwise() -> None:
    text = TEXT.replace("stores 58 kWh.", "stores 58 kWh.\nUsable: 54 kWh in the warm-up mode")
    scripted(answer(capacity=54))
    result = extract_llm(ExtractIn(document=document(text), dimension="battery")).output
    assert isinstance(result, ExtractionResult)
    capacity = [f for f in result.facts if f.field == "battery.capacity"]
    assert [(f.value, f.method) for f in capacity if f.confidence < 0.6] == [
        (54.0, ExtractionMethod.LLM)
    ]
    assert "replaced 1" in result.warnings[-1]


def test_an_answer_failing_the_schema_raises_so_the_scheduler_keeps_the_rules() -> None:
    from swarm_ray.core.model._errors import InvalidOutputError

    scripted(answer(wheelbase=1))
    with pytest.raises(InvalidOutputError, match="LLM extraction of `battery` from `aero.pdf`"):
        extract_llm(ExtractIn(document=document(), dimension="battery"))


def test_the_llm_reads_a_keyword_window_not_the_whole_document() -> None:
    filler = "\n".join(f"Paragraph {i} about the seats and the sound system." for i in range(400))
    doc = document(TEXT + filler)
    fields = [f for f in BATTERY.fields if f.name in ("capacity", "range")]
    windows = keyword_window(doc, fields)
    joined = "\n".join(w.text for w in windows)
    assert "stores 58 kWh" in joined and "Range (WLTP) 420 km" in joined
    assert "Paragraph 5 " not in joined and len(joined) < 400


def test_cross_check_is_off_by_default_and_loads_no_model() -> None:
    extraction = extract_facts(document(), [BATTERY])
    reply = cross_check(CrossCheckIn(document=document(), extractions=[extraction]))
    assert reply.output == CrossCheck(document_id="d-aero", source="aero.pdf")


def test_cross_check_disagreement_is_flagged_by_the_factuality_judge_and_reported(
    tmp_path: Path,
) -> None:
    text = TEXT.replace("stores 58 kWh.", "stores 58 kWh.\nA spare module holds 12 kWh")
    doc = document(text)
    extraction = extract_facts(doc, [BATTERY])
    scripted(answer(capacity=12, range=[420]))
    check = cross_check(CrossCheckIn(document=doc, extractions=[extraction], enabled=True)).output
    assert isinstance(check, CrossCheck)
    assert check.enabled and (check.checked, check.agreed) == (2, 1)
    statuses = {r.field: r.status for r in check.readings}
    assert statuses == {"battery.capacity": "differ", "battery.range": "agree"}
    (disagreement,) = check.disagreements
    assert disagreement.rules.value == 58.0 and disagreement.llm.value == 12.0
    assert disagreement.llm.method is ExtractionMethod.LLM
    normalised = normalise_facts(extraction.facts)
    judged = judge_quality(JudgeIn(results=[normalised], cross_checks=[check, None])).output
    (finding,) = [f for f in judged.factuality.findings if f.cross_check]  # type: ignore[attr-defined]
    assert finding.subject == "Aero Nova: battery.capacity"
    assert "'58 kWh'" in finding.message and "'12 kWh'" in finding.message
    assert judged.factuality.score == 0.5  # type: ignore[attr-defined]
    files = render_markdown(
        ReportIn(
            comparison=compare_facts(normalised.facts),
            results=[normalised],
            judgement=judged,  # type: ignore[arg-type]
            out_dir=str(tmp_path),
        )
    )
    report = Path(files.markdown_path).read_text()
    judges = report[report.index("## Judges") :]
    assert "LLM cross-check: disagreements with the rules" in judges
    assert "Aero Nova: battery.capacity" in judges


def test_llm_extract_reads_every_declared_field_and_the_report_lists_them(
    tmp_path: Path,
) -> None:
    doc = document()
    extraction = extract_facts(doc, [BATTERY])
    engine = scripted(answer(capacity=58, range=[400], charging_power=[11], charge_time=[9]))
    request = CrossCheckIn(
        document=doc, extractions=[extraction], enabled=True, every_field=True,
        dimensions=["battery"],
    )  # fmt: skip
    check = cross_check(request).output
    assert isinstance(check, CrossCheck)
    ((_, schema),) = engine.calls  # every unit field asked, found by the rules or not
    assert schema is not None
    assert list(schema["properties"]) == ["capacity", "range", "charging_power", "charge_time"]
    readings = {r.field: (r.status, r.rules, r.llm) for r in check.readings}
    assert readings == {
        "battery.capacity": ("agree", ("58 kWh",), ("58 kWh",)),
        "battery.range": ("rules only", ("420 km",), ()),  # 400 km is stated nowhere: dropped
        "battery.charging_power": ("llm only", (), ("11 kW",)),
        "battery.charge_time": ("neither", (), ()),
    }
    assert (check.checked, check.agreed) == (1, 1)
    normalised = normalise_facts(extraction.facts)
    files = render_markdown(
        ReportIn(
            comparison=compare_facts(normalised.facts),
            results=[normalised],
            llm_readings=[check],
            out_dir=str(tmp_path),
        )
    )
    report = Path(files.markdown_path).read_text()
    section = report[report.index("## Rules and LLM, per field") :]
    assert "| battery.charging_power | 0 | 0 | 0 | 1 | 0 |" in section
    assert "| aero.pdf | battery.charging_power | - | 11 kW | llm only |" in section


def test_a_label_field_the_rules_cannot_place_goes_to_the_llm_grounded() -> None:
    from swarm_ray.documents import FieldSpec, parse_field_arg
    from swarm_ray.documents._capabilities import extract_specs

    text = "XT-10 transceiver\n10.3 Gb/s, the data rate of each lane, is set by the host.\n"
    fields: tuple[FieldSpec, ...] = (parse_field_arg("data rate:Gb/s"),)
    data = ExtractIn(document=document(text), dimension="fields", fields=fields)
    rules = extract_specs(data)
    assert rules.output.facts == ()  # a comma between value and label: the rules pass
    assert rules.confidence < RULES_CONFIDENCE_THRESHOLD  # ... but the line names both
    engine = scripted(answer(data_rate=10.3))
    reply = extract_llm(data)
    (fact,) = reply.output.facts
    assert (fact.field, fact.value, fact.unit, fact.method) == (
        "data rate",
        10.3,
        "Gb/s",
        ExtractionMethod.LLM,
    )
    ((_, schema),) = engine.calls
    assert list(schema["properties"]) == ["data_rate"]
