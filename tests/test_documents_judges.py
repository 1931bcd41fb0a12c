"""Judges on known inputs: hand-made facts with a planted disagreement or misspelling, real
facts from generated brochures (whose planted conflicts factuality must find, and whose
names are coherent), and cost records with a slow and a retried sub-task."""

from __future__ import annotations

import pickle

import pytest
from pydantic import ValidationError

from swarm_ray.documents import (
    ExtractionMethod,
    Fact,
    GroundTruth,
    JudgeName,
    JudgeVerdict,
    NormalisedFact,
    SubTaskCost,
    default_dimensions,
    extract_facts,
    generate_brochures,
    judge_coherence,
    judge_efficiency,
    judge_factuality,
    normalise_facts,
    parse_pdf,
)


def _fact(
    entity: str, field: str, value: float | str, document: str, unit: str = "kWh"
) -> NormalisedFact:
    kind = "text" if isinstance(value, str) else "energy"
    fact = Fact(
        entity=entity,
        field=field,
        kind=kind,
        value=value,
        unit=unit,
        value_text=str(value),
        page=1,
        quote=f"{field} {value}",
        confidence=0.9,
        method=ExtractionMethod.VOCABULARY if isinstance(value, str) else ExtractionMethod.SYNONYM,
        document_id=document,
        source=f"{document}.pdf",
    )
    return NormalisedFact(fact=fact, value=value, unit=unit)


@pytest.fixture(scope="module")
def generated(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[tuple[NormalisedFact, ...], GroundTruth]:
    sample = generate_brochures(tmp_path_factory.mktemp("judge-brochures"), n=20, seed=1)
    facts = [
        f
        for path in sample.pdf_paths
        for f in normalise_facts(extract_facts(parse_pdf(path), default_dimensions()).facts).facts
    ]
    return tuple(facts), sample.ground_truth


def _agreeing() -> list[NormalisedFact]:
    return [
        _fact("Aero", "battery.capacity", 75.0, "d1"),
        _fact("Aero", "battery.capacity", 75.0, "d2"),
        _fact("Aero", "battery.capacity", 75.2, "d3"),  # within 1 %: the same value
        _fact("Nova", "battery.capacity", 60.0, "d1"),
        _fact("Nova", "battery.capacity", 60.0, "d2"),
        _fact("Nova", "battery.capacity", 82.0, "d9"),  # d9 disagrees with d1 and d2
        _fact("Aero", "interior.features", "heat pump", "d1", unit=""),
        _fact("Aero", "interior.features", "sunroof", "d2", unit=""),  # lists never conflict
    ]


def test_agreeing_sources_score_full_factuality() -> None:
    facts = [f for f in _agreeing() if f.fact.document_id != "d9"]
    verdict = judge_factuality(facts)
    assert verdict.judge is JudgeName.FACTUALITY
    assert verdict.score == 1.0 and verdict.findings == ()
    assert verdict.scores == {"d1": 1.0, "d2": 1.0, "d3": 1.0}
    assert judge_factuality([]).score == 1.0


def test_a_planted_disagreement_lowers_factuality() -> None:
    planted = _fact("Aero", "battery.capacity", 77.0, "d4")
    verdict = judge_factuality([*_agreeing(), planted], sub_tasks={"d4": "extract-4"})
    # checked facts: Aero 75/75/75.2/77 (3 agree) and Nova 60/60/82 (2 agree) -> 5 of 7
    assert verdict.score == pytest.approx(5 / 7)
    assert verdict.scores["extract-4"] == 0.0 and verdict.scores["d1"] == 1.0
    assert verdict.scores["d9"] == 0.0
    first, second = verdict.findings  # worst first
    assert first.subject == "Nova: battery.capacity" and first.sub_tasks == ("d9",)
    assert second.subject == "Aero: battery.capacity" and second.sub_tasks == ("extract-4",)
    assert second.score == pytest.approx(3 / 4)
    assert "77 kWh by d4.pdf p. 1" in second.message


def test_a_tie_has_no_majority_and_blames_both_sides() -> None:
    verdict = judge_factuality(
        [_fact("Aero", "battery.capacity", 75.0, "a"), _fact("Aero", "battery.capacity", 77.0, "b")]
    )
    assert verdict.score == 0.5 and verdict.findings[0].sub_tasks == ("a", "b")


def test_factuality_finds_the_planted_conflicts_of_generated_brochures(
    generated: tuple[tuple[NormalisedFact, ...], GroundTruth],
) -> None:
    facts, truth = generated
    verdict = judge_factuality(facts)
    assert truth.conflicts and 0.5 < verdict.score < 1.0
    planted = {
        f"{c.entity}: {c.field}" + (f" ({c.qualifier})" if c.qualifier else "")
        for c in truth.conflicts
    }
    assert {f.subject for f in verdict.findings} == planted
    without = [
        f
        for f in facts
        if not any(
            c.entity == f.fact.entity
            and c.field == f.fact.field
            and c.qualifier == f.fact.qualifier
            for c in truth.conflicts
        )
    ]
    assert judge_factuality(without).score == 1.0


def test_generated_names_are_coherent_and_a_misspelling_is_not(
    generated: tuple[tuple[NormalisedFact, ...], GroundTruth],
) -> None:
    facts, truth = generated
    clean = judge_coherence(facts)
    assert clean.judge is JudgeName.COHERENCE and clean.score == 1.0 and clean.findings == ()
    assert set(clean.scores.values()) == {1.0}
    entity = truth.entities[0]
    brand, model = entity.split(" ", 1)
    typo = brand[:-1] + " " + model  # `Solenne Nova` -> `Solenn Nova`
    victim = next(f for f in facts if f.fact.entity == entity)
    misspelled = victim.model_copy(update={"fact": victim.fact.model_copy(update={"entity": typo})})
    verdict = judge_coherence([misspelled if f is victim else f for f in facts])
    assert verdict.score < clean.score
    (finding,) = verdict.findings
    assert finding.subject == f"entity {entity!r}" and repr(typo) in finding.message
    assert finding.sub_tasks == (victim.fact.document_id,)
    assert verdict.scores[victim.fact.document_id] < 1.0


def test_coherence_tells_typos_from_different_names() -> None:
    def facts(*names: str, field: str = "battery.capacity") -> list[NormalisedFact]:
        return [_fact(n, field, 1.0, f"d{i}") for i, n in enumerate(names)]

    different = facts("Model S", "Model X", "Kestrel K4", "Kestrel X7", "ID.3", "ID.4")
    assert judge_coherence(different).score == 1.0
    spaced = judge_coherence(facts("Solenne Nova", "Solenne Nova", "solenne  nova"))
    # two terms (the entity and the field), one of them spelled two ways
    assert spaced.score == 0.5 and spaced.findings[0].sub_tasks == ("d2",)
    swapped = judge_coherence(facts("Tessaro Aero", "Tesasro Aero", "Lumeo Terra"))
    assert swapped.score == pytest.approx(2 / 3)
    fields = judge_coherence(
        [_fact("Aero", "battery.capacity", 1.0, "a"), _fact("Aero", "battery.capasity", 1.0, "b")]
    )
    assert fields.findings[0].subject == "field 'battery.capacity'"
    declared = facts("Aero", field="general.height") + facts("Aero", field="general.weight")
    assert judge_coherence(declared).score == 1.0  # one letter apart, both declared


def test_efficiency_against_the_median_and_one_call() -> None:
    records = [
        ("a", 1.0, 1),
        ("b", 1.0, 1),
        SubTaskCost(sub_task_id="slow", seconds=3.0, calls=1),
        ("retried", 0.5, 1),
        ("retried", 0.5, 2),  # attempts add up: 1 s, 3 calls
    ]
    verdict = judge_efficiency(records)
    assert verdict.judge is JudgeName.EFFICIENCY
    assert verdict.scores["a"] == 1.0
    assert verdict.scores["slow"] == pytest.approx((1 / 3 + 1) / 2)
    assert verdict.scores["retried"] == pytest.approx((1 + 1 / 3) / 2)
    assert verdict.score == pytest.approx((1 + 1 + 2 / 3 + 2 / 3) / 4)
    assert {f.subject for f in verdict.findings} == {"slow", "retried"}
    assert "3 calls" in next(f.message for f in verdict.findings if f.subject == "retried")
    budget = judge_efficiency(records, seconds_budget=5.0, calls_budget=3)
    assert budget.score == 1.0 and budget.findings == ()
    assert judge_efficiency([]).score == 1.0
    with pytest.raises(ValidationError):
        judge_efficiency([("bad", -1.0, 1)])


def test_verdicts_are_frozen_and_travel() -> None:
    verdict = judge_factuality([*_agreeing(), _fact("Aero", "battery.capacity", 77.0, "d4")])
    assert JudgeVerdict.model_validate_json(verdict.model_dump_json()) == verdict
    assert pickle.loads(pickle.dumps(verdict)) == verdict
    with pytest.raises(ValidationError):
        verdict.score = 1.0
