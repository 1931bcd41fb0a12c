"""Fields by name and unit on datasheets the extractor has never seen, and on real ones.

The generated samples (`datasheet_samples`) each state a known set of facts in a layout of
their own: Min / Typ / Max tables with symbol, conditions and notes columns, footnote
marks, ranges in several spellings, a table comparing three part numbers, feature
bullets, text fields. Extraction must find exactly those facts (values compared in each
field's declared unit). The OpenMV datasheets in the shared corpus, when present, are
scored against their YAML specs as `bench/datasheets.py` does, with the goal's thresholds.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from swarm_ray.documents import (
    Dimension,
    EntitySource,
    ExtractionResult,
    Statistic,
    detect_entity,
    extract_facts,
    normalise_facts,
    parse_field_arg,
    parse_pdf,
)
from swarm_ray.documents._scorer import Scorer, load_scorer
from swarm_ray.testing.score import score_facts
from tests.datasheet_samples import FIELDS, Expected, write_datasheets

_ROOT = Path(__file__).resolve().parents[1]
_OPENMV = _ROOT.parent / "shared" / "corpus" / "datasheets" / "openmv"
_SAMPLES = ["optical.pdf", "family.pdf", "mcu.pdf", "spellings.pdf", "ordering.pdf"]
_DIMENSION = Dimension(name="fields", fields=tuple(parse_field_arg(f) for f in FIELDS))


@pytest.fixture(scope="module")
def samples(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[ExtractionResult, list[Expected]]]:
    return _read_samples(tmp_path_factory.mktemp("datasheets"), None)


def _read_samples(
    folder: Path, scorer: Scorer | None
) -> dict[str, tuple[ExtractionResult, list[Expected]]]:
    return {
        name: (extract_facts(parse_pdf(folder / name), [_DIMENSION], scorer=scorer), facts)
        for name, facts in write_datasheets(folder).items()
    }


def _found(result: ExtractionResult) -> set[tuple[str, str | None, float | str, str]]:
    return {
        (
            f.fact.field,
            f.fact.statistic.value if f.fact.statistic else None,
            round(f.value, 6) if isinstance(f.value, float) else f.value,
            f.fact.entity,
        )
        for f in normalise_facts(result.facts).facts
    }


@pytest.mark.parametrize("name", _SAMPLES)
def test_each_sample_gives_exactly_what_it_states(
    samples: dict[str, tuple[ExtractionResult, list[Expected]]], name: str
) -> None:
    _states_exactly(*samples[name], name)


def _states_exactly(result: ExtractionResult, expected: list[Expected], name: str) -> None:
    want = {
        (e.field, e.statistic, float(e.value) if not isinstance(e.value, str) else e.value,
         e.entity or result.entity)
        for e in expected
    }  # fmt: skip
    found = _found(result)
    assert found - want == set(), f"wrong in {name}"
    assert want - found == set(), f"missed in {name}"


@pytest.fixture(scope="module")
def learned(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[ExtractionResult, list[Expected]]]:
    scorer = load_scorer()
    assert scorer is not None
    return _read_samples(tmp_path_factory.mktemp("learned"), scorer)


@pytest.mark.parametrize("name", _SAMPLES)
def test_the_learned_choice_gives_each_part_what_each_sample_states(
    learned: dict[str, tuple[ExtractionResult, list[Expected]]], name: str
) -> None:
    # One choice per entity, field and statistic: a family's table of three parts gives
    # each part its own values (`family.pdf`, `ordering.pdf`), not one for the file.
    _states_exactly(*learned[name], name)


def test_a_footnote_mark_is_not_a_digit(
    samples: dict[str, tuple[ExtractionResult, list[Expected]]],
) -> None:
    result, _ = samples["optical.pdf"]
    temperature = [f for f in result.facts if f.field == "case temperature"]
    assert {f.value for f in temperature} == {0.0, 70.0}  # not 702


def test_absolute_maximum_ratings_give_way_to_operating_conditions(
    samples: dict[str, tuple[ExtractionResult, list[Expected]]],
) -> None:
    result, _ = samples["optical.pdf"]
    supply = {(f.statistic, f.value) for f in result.facts if f.field == "supply voltage"}
    assert supply == {(Statistic.MIN, 3.135), (Statistic.MAX, 3.465)}  # not -0.5 to 4.0
    storage = [f for f in result.facts if f.field == "storage temperature"]
    assert len(storage) == 2  # stated only there: still found


def test_a_family_datasheet_names_its_parts(
    samples: dict[str, tuple[ExtractionResult, list[Expected]]],
) -> None:
    result, _ = samples["family.pdf"]
    assert result.parts == ("LDM-850", "LDM-1310", "LDM-1550")
    assert {f.entity for f in result.facts} == set(result.parts)


def test_entities_come_from_the_content_not_a_template_title(
    samples: dict[str, tuple[ExtractionResult, list[Expected]]],
) -> None:
    mcu, _ = samples["mcu.pdf"]  # its metadata title is `PDF with Fullscreen Cover and Content`
    assert (mcu.entity, mcu.entity_source) == ("QX32F407", EntitySource.TITLE_BLOCK)
    spellings, _ = samples["spellings.pdf"]  # `QS28-ER4 Product Specification`
    assert (spellings.entity, spellings.entity_source) == ("QS28-ER4", EntitySource.TITLE)
    optical, _ = samples["optical.pdf"]  # `XT-SFP10G-LR 10G SFP+ LR Transceiver`
    assert (optical.entity, optical.entity_source) == ("XT-SFP10G-LR", EntitySource.TITLE_BLOCK)


def test_conditions_are_not_values(
    samples: dict[str, tuple[ExtractionResult, list[Expected]]],
) -> None:
    result, _ = samples["mcu.pdf"]
    supply = {f.value for f in result.facts if f.field == "supply voltage"}
    assert 3.3 not in supply  # `VDD = 3.3 V` is a test condition of another row
    temperature = {f.value for f in result.facts if f.field == "case temperature"}
    assert 25.0 not in temperature  # `TA = 25 °C` likewise


@pytest.mark.timeout(120)
def test_openmv_datasheets_meet_the_goal() -> None:
    if not _OPENMV.is_dir():
        pytest.skip(f"no corpus at {_OPENMV}")
    sys.path.insert(0, str(_ROOT / "bench"))
    try:
        from _datasheet_truth import expected_facts
        from datasheets import in_process  # the benchmark's own loop, without Ray
    finally:
        sys.path.remove(str(_ROOT / "bench"))
    paths = sorted(_OPENMV.rglob("*.pdf"))
    truth = expected_facts(_OPENMV / "_products_yaml" / "products")
    found, _, _ = in_process([str(p) for p in paths])
    score = score_facts({p.name: truth.get(p.name, []) for p in paths}, found)
    print(f"\nOpenMV: precision {score.precision:.3f}, recall {score.recall:.3f}")
    assert score.recall >= 0.85 and score.precision >= 0.95, (score.misses, score.wrong)
    for path in paths:  # every datasheet is named after its product, not its file
        assert detect_entity(parse_pdf(path))[1] is not EntitySource.FILE_NAME


def test_a_column_for_a_run_of_parts_is_the_files_part() -> None:
    from swarm_ray.documents._choice import file_part

    runs = ["UF4001-4003", "UF4004", "UF4005-4007"]
    assert file_part("uf4007_mcc.pdf", runs) == "UF4005-4007"
    assert file_part("1n4004_diodes.pdf", ["1N4001~1N4007"]) == "1N4001~1N4007"
    assert file_part("uf4002.pdf", ["UF4001-03"]) == "UF4001-03"  # the run's last digits
    assert file_part("uf4008.pdf", runs) is None  # past every run
    assert file_part("lm7805.pdf", ["LM7805", "LM7812"]) == "LM7805"  # a part by name first


def test_the_lofo_bench_counts_a_fact_on_its_page_in_any_decimal_multiple() -> None:
    sys.path.insert(0, str(_ROOT / "bench"))
    try:
        from _lofo import on_page
    finally:
        sys.path.remove(str(_ROOT / "bench"))
    from swarm_ray.documents._training import GoldFact

    def fact(*values: str, page: int | None = 1) -> GoldFact:
        return GoldFact("x.pdf", "f", None, values, "W", page=page)

    pages = ("Total dissipation 1,000 mW for the XQ7905", "Output -5 V; package TO\u2013220AB")
    assert on_page(fact("1"), pages)  # 1 W printed as 1,000 mW
    assert not on_page(fact("5"), pages)  # on page 2, not the cited one (not `XQ7905`)
    assert on_page(fact("5", page=2), pages) and on_page(fact("-5", page=2), pages)
    assert on_page(fact("TO-220AB", page=2), pages)  # a dash is a hyphen
    assert on_page(fact("DO-41", "5", page=None), pages)  # any value, any page
    assert not on_page(fact("DO-41"), pages)  # a drawing's label, not in the text layer
