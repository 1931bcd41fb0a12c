"""The learned extraction: candidates without gates, a scorer fitted on labels, one choice."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from swarm_ray.documents import parse_field_arg, parse_pdf
from swarm_ray.documents._candidates import document_candidates
from swarm_ray.documents._features import FEATURES, features
from swarm_ray.documents._scorer import (
    Scorer,
    choice_groups,
    choose_scored,
    fit_listwise,
    fit_scorer,
    load_scorer,
)
from swarm_ray.documents._training import labels_hash, main, train_extractor

pytest.importorskip("reportlab")


def _pdf(path: Path, lines: list[tuple[str, str]], title: str) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen.canvas import Canvas

    canvas = Canvas(str(path), pagesize=A4, invariant=1)
    canvas.setFont("Helvetica-Bold", 14)
    canvas.drawString(50, 790, title)
    canvas.setFont("Helvetica", 10)
    for i, (label, value) in enumerate(lines):
        canvas.drawString(50, 750 - 16 * i, label)
        canvas.drawString(250, 750 - 16 * i, value)
    canvas.showPage()
    canvas.save()


def _family(root: Path, wanted: str) -> Path:
    """A labeled folder of six datasheets; gold is the `wanted` rail (`supply`/`output`)."""
    folder = root / "regulators"
    folder.mkdir(parents=True)
    (folder / "fields.txt").write_text("supply voltage:V\n")
    (root / "field_map.json").write_text(json.dumps({"supplyvoltage": "supply_voltage_v"}))
    rows = []
    for i in range(6):
        supply, output = 3.0 + i * 0.5, 10.0 + i
        _pdf(
            folder / f"part{i}.pdf",
            [("Supply voltage", f"{supply} V"), ("Output voltage", f"{output} V"),
             ("Weight", f"{2 + i} g")],
            f"PART{i} regulator",
        )  # fmt: skip
        value = supply if wanted == "supply" else output
        rows.append([f"regulators/part{i}.pdf", "supply_voltage_v", value, "V", 1, "", ""])
    with open(root / "gold.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["file", "field", "value", "unit", "page", "quote", "note"])
        writer.writerows(rows)
    return root


def _choice(model: Path, pdf: Path) -> float | str:
    scorer = load_scorer(model)
    assert scorer is not None
    spec = parse_field_arg("supply voltage:V")
    found = document_candidates(parse_pdf(pdf), [spec]).per_field[spec.key]
    groups = choice_groups(found, pdf.name)
    chosen = choose_scored(found, scorer.probabilities(features(spec, found), groups), 0.0, groups)
    assert len(chosen) == 1
    candidate, _ = chosen[0]
    return candidate.scaled if candidate.scaled is not None else candidate.value


def test_every_value_of_the_field_dimension_is_a_candidate(tmp_path: Path) -> None:
    pdf = tmp_path / "a.pdf"
    _pdf(pdf, [("Supply voltage", "3.3 V"), ("Output voltage", "5 V"), ("Weight", "2 g")], "A")
    spec = parse_field_arg("supply voltage:V")
    found = document_candidates(parse_pdf(pdf), [spec]).per_field[spec.key]
    assert sorted(c.scaled for c in found if c.scaled is not None) == [3.3, 5.0]
    assert len(features(spec, found)[0]) == len(FEATURES)


def test_retraining_on_other_labels_changes_the_choice(tmp_path: Path) -> None:
    probe = tmp_path / "probe.pdf"
    _pdf(probe, [("Supply voltage", "4.2 V"), ("Output voltage", "12.5 V")], "PROBE")
    supply = _family(tmp_path / "supply", "supply")
    output = _family(tmp_path / "output", "output")
    assert main(["--labels", str(supply), "--out", str(tmp_path / "a.json"), "-q"]) == 0
    train_extractor(output, tmp_path / "b.json")
    assert _choice(tmp_path / "a.json", probe) == pytest.approx(4.2)
    assert _choice(tmp_path / "b.json", probe) == pytest.approx(12.5)
    saved = json.loads((tmp_path / "a.json").read_text())
    assert saved["labels_sha256"] == labels_hash(
        [supply / "gold.csv", supply / "field_map.json", supply / "regulators" / "fields.txt"]
    )


def test_retraining_the_tree_model_on_other_labels_changes_the_choice(
    tmp_path: Path,
) -> None:
    model = "trees"
    probe = tmp_path / "probe.pdf"
    _pdf(probe, [("Supply voltage", "4.2 V"), ("Output voltage", "12.5 V")], "PROBE")
    supply = _family(tmp_path / "supply", "supply")
    output = _family(tmp_path / "output", "output")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(["--labels", str(supply), "--out", str(a), "--model", model, "-q"]) == 0
    train_extractor(output, b, model=model)
    assert _choice(a, probe) == pytest.approx(4.2)
    assert _choice(b, probe) == pytest.approx(12.5)


def test_the_listwise_model_shares_each_slot_and_reads_back_from_json() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, len(FEATURES)))
    slots = [i // 6 for i in range(300)]
    # Each slot of six: the candidate of highest first feature is gold; every fifth slot
    # states nothing.
    y = [0] * 300
    for slot in range(50):
        if slot % 5:
            y[slot * 6 + int(np.argmax(x[slot * 6 : slot * 6 + 6, 0]))] = 1
    scorer = fit_listwise(x.tolist(), y, slots, penalty=1.0)
    again = Scorer.from_json(json.loads(json.dumps(scorer.to_json())))
    assert again.listwise and again.features == FEATURES
    p = again.probabilities(x.tolist(), slots)
    assert np.allclose(p, scorer.probabilities(x.tolist(), slots), atol=1e-6)
    shares = np.bincount(slots, weights=p)
    assert (shares < 1.0).all()  # the rest is "not stated"
    picked = [slot * 6 + int(np.argmax(p[slot * 6 : slot * 6 + 6])) for slot in range(50)]
    assert np.mean([y[i] for i, s in zip(picked, range(50), strict=True) if s % 5]) > 0.9
    with pytest.raises(ValueError, match="slot"):
        again.probabilities(x.tolist())


def test_the_model_file_reads_back_as_scikit_learn_predicts() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(FEATURES)))
    x[rng.random(x.shape) < 0.05] = np.nan
    y = (np.nan_to_num(x[:, 0]) + 0.5 * np.nan_to_num(x[:, 3]) > 0.3).astype(int)
    scorer = fit_scorer(x.tolist(), y.tolist())
    again = Scorer.from_json(json.loads(json.dumps(scorer.to_json())))
    reference = HistGradientBoostingClassifier(
        max_iter=100, learning_rate=0.08, max_leaf_nodes=7, min_samples_leaf=20,
        l2_regularization=1.0, random_state=0,
    ).fit(x, y)  # fmt: skip
    expected = reference.predict_proba(x)[:, 1]
    assert np.allclose(again.probabilities(x.tolist()), expected, atol=1e-5)


def test_the_shipped_model_lists_the_features_it_was_fitted_on() -> None:
    scorer = load_scorer()
    assert scorer is not None, "the package ships no model fitted on today's features"
    assert scorer.features == FEATURES
    assert len(scorer.labels_hash) == 64


def test_a_request_chooses_with_the_installed_model_by_name_only() -> None:
    from pydantic import ValidationError

    from swarm_ray import TaskRequest
    from swarm_ray.core.model._plan import expand
    from swarm_ray.core.model._signals import Start
    from swarm_ray.core.planning._catalog import load_catalogs
    from swarm_ray.core.scheduling._scheduler import Scheduler
    from swarm_ray.documents import Dimension, ExtractionMethod, extract_facts
    from swarm_ray.documents._capabilities import extract_specs
    from swarm_ray.documents._stage_inputs import ExtractIn
    from tests.support import done
    from tests.test_documents_linking import _doc

    # Two memories a feature list names apart: the rules keep both, the model its best.
    document = _doc("Features\n• 1 MB SRAM\n• 32 MB SDRAM\n")
    fields = (parse_field_arg("RAM:MB"),)
    scorer = load_scorer()
    assert scorer is not None
    learned = extract_facts(document, [Dimension(name="fields", fields=fields)], scorer=scorer)
    rules = extract_facts(document, [Dimension(name="fields", fields=fields)])
    assert learned.facts != rules.facts
    assert {f.method for f in learned.facts} == {ExtractionMethod.LEARNED}  # in provenance
    for choice, expected in (("learned", learned), ("rules", rules)):
        data = ExtractIn(document=document, dimension="fields", fields=fields, choice=choice)
        assert extract_specs(data).output.facts == expected.facts
    with pytest.raises(ValidationError, match="choice"):
        ExtractIn(document=document, dimension="fields", choice="/tmp/model.json")  # type: ignore[arg-type]

    # The request's `choice` reaches each extraction sub-task; absent, the input's default.
    registry, router = load_catalogs(["swarm_ray.documents._capabilities:documents_catalog"])
    for params, wanted in (({"choice": "learned"}, "learned"), ({}, "rules")):
        request = TaskRequest(
            template="compare_documents",
            items=("a.pdf",),
            params={"dimensions": ["fields"], "fields": [fields[0].model_dump(mode="json")]}
            | params,
        )
        plan = expand(router.get("compare_documents"), request, task_id="t")
        scheduler = Scheduler(plan, registry)
        (parse,) = scheduler.handle(Start(at=0))
        started = scheduler.handle(done(parse, output=document.model_dump(mode="json")))
        extract = next(i for i in started if "extract" in getattr(i, "subtask_id", ""))
        assert extract.input["choice"] == wanted
