"""Training the scorer from labeled families: gold facts in the corpus schema.

A labeled folder (`../shared/corpus/datasheets/multi/` is one) holds `gold.csv`
(`file,field,value,unit,page,quote,note`: one gold fact a row, `alt=a|b` in the note for
other values the document also states for it), `field_map.json` (a declared field's
normalised name, plus `_min`/`_max`/`_typ`, to its gold field id), and one folder per
family with its PDFs and `fields.txt` (one `--field` declaration a line).

Every candidate of every labeled document (`_candidates`) is labeled 1 when its value is
a gold value of its file and slot (within 1 % after unit conversion, or the same text), 0
otherwise; the features (`_features`) and labels fit the scorer (`_scorer`). The same
labeled candidates tell where a gold fact is lost (`trace`): never read as a quantity of
its field's dimension (parsing), read but not a candidate of its slot (linking), or a
candidate that another outranked (choice).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from swarm_ray.documents._candidates import (
    DocumentCandidates,
    FieldCandidate,
    document_candidates,
    slots,
)
from swarm_ray.documents._dimensions import FieldSpec, parse_field_arg
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._features import features
from swarm_ray.documents._parse import ParsedDocument, parse_pdf
from swarm_ray.documents._quantities import focus_of, in_unit
from swarm_ray.documents._scorer import (
    MODEL_PATH,
    Scorer,
    choice_groups,
    fit_listwise,
    fit_scorer,
)
from swarm_ray.documents._table import names_a_field

__all__ = [
    "MODELS",
    "GoldFact",
    "LabeledDocument",
    "family_fields",
    "fit_documents",
    "in_declared",
    "label",
    "labeled_document",
    "labeled_families",
    "labels_hash",
    "main",
    "matches",
    "read_gold",
    "reported_statistic",
    "train_extractor",
    "value_matches",
]

_CLOSE = 0.01
"""Relative tolerance of a numeric match, as the corpus's `score.py` has it."""


@dataclass(frozen=True)
class GoldFact:
    """One value a labeled document states for one declared field."""

    source: str
    """The file's base name."""
    key: str
    """The declared field's key."""
    statistic: Statistic | None
    """The statistic it is reported under; with `any_statistic`, any fits."""
    values: tuple[str, ...]
    """The gold value and its alternatives, as written in the labels."""
    unit: str
    any_statistic: bool = False
    page: int | None = None
    """The page the label cites; a matching value elsewhere is left out of training."""


@dataclass(frozen=True)
class LabeledDocument:
    """One document's candidates, their feature rows and labels, and its gold facts."""

    family: str
    source: str
    fields: tuple[FieldSpec, ...]
    candidates: DocumentCandidates
    rows: tuple[tuple[FieldCandidate, tuple[float, ...], int], ...]
    """Each candidate with its features and label: 1 where it is a gold value of its slot
    on the page the label cites, -1 where it is that value elsewhere (a repeat: left out
    of training, neither right nor wrong), else 0."""
    gold: tuple[GoldFact, ...]


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.rsplit(".", 1)[-1].lower())


def family_fields(folder: Path) -> tuple[FieldSpec, ...]:
    """The fields a family folder declares (`fields.txt`)."""
    lines = (folder / "fields.txt").read_text().splitlines()
    return tuple(parse_field_arg(line.strip()) for line in lines if line.strip())


def read_gold(labels: Path, family: str, fields: Sequence[FieldSpec]) -> list[GoldFact]:
    """The gold facts of one family of a labeled folder, keyed by its declared fields."""
    mapping: dict[str, str] = json.loads((labels / "field_map.json").read_text())
    owner: dict[str, tuple[str, Statistic | None, bool]] = {}
    for spec in fields:
        name = _norm(spec.key)
        for slot in slots(spec):
            suffixed = f"{name}_{slot.value}" if slot is not None else name
            gold_id = mapping.get(suffixed)
            if gold_id is not None:
                owner[gold_id] = (spec.key, slot, False)
            elif (gold_id := mapping.get(name)) is not None:
                owner[gold_id] = (spec.key, slot, True)
    out: list[GoldFact] = []
    with open(labels / "gold.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if not row["file"].startswith(family + "/") or not row["value"]:
                continue
            if row["field"] not in owner:
                continue
            key, slot, any_statistic = owner[row["field"]]
            alts = re.findall(r"alt=([^;]+)", row["note"])
            values = (row["value"], *(v.strip() for a in alts for v in a.split("|")))
            page = int(row["page"]) if row.get("page", "").strip().isdigit() else None
            out.append(
                GoldFact(
                    Path(row["file"]).name, key, slot, values, row["unit"], any_statistic, page
                )
            )
    return out


def reported_statistic(candidate: FieldCandidate) -> Statistic | None:
    """The statistic a chosen candidate is reported under: its slot's.

    A field that declares no statistic is reported with none, as the rules report it:
    what the document states (a `Max` column) stays in the quote. Reporting it as stated
    made a right value wrong wherever the labels, like the user, name no statistic.
    """
    return candidate.slot


def _value_matches(value: float | str, text: str, unit: str, gold: GoldFact) -> bool:
    for wanted in gold.values:
        try:
            number = float(wanted)
        except ValueError:
            if wanted.lower() in {str(value).lower(), text.lower()}:
                return True
            continue
        if isinstance(value, str):
            continue
        got = in_unit(value, unit, gold.unit) if gold.unit else value
        if got is not None and abs(got - number) <= _CLOSE * max(abs(number), 1e-9):
            return True
    return False


def matches(candidate: FieldCandidate, gold: GoldFact, *, statistic: bool = True) -> bool:
    """Whether a candidate states a gold fact (its slot's statistic too, with `statistic`).

    `gold` must be in the field's declared unit (`in_declared`), as `scaled` values are.
    """
    if candidate.key != gold.key:
        return False
    if statistic and not (gold.any_statistic or reported_statistic(candidate) == gold.statistic):
        return False
    value = candidate.value if candidate.scaled is None else candidate.scaled
    return value_matches(value, candidate.value_text, gold)


def value_matches(value: float | str, text: str, gold: GoldFact) -> bool:
    """Whether a value (in the declared unit) or its text is one of the gold's values."""
    return _value_matches(value, text, "", gold)


def labeled_document(
    family: str,
    document: ParsedDocument,
    fields: Sequence[FieldSpec],
    gold: Sequence[GoldFact],
) -> LabeledDocument:
    """Candidates of `document` for `fields`, with features and labels from `gold`."""
    return label(family, document_candidates(document, fields), fields, gold)


def label(
    family: str, found: DocumentCandidates, fields: Sequence[FieldSpec], gold: Sequence[GoldFact]
) -> LabeledDocument:
    """Feature rows and labels of a document's candidates, from its gold facts."""
    mine = [g for g in gold if g.source == found.source]
    rows: list[tuple[FieldCandidate, tuple[float, ...], int]] = []
    for spec in fields:
        candidates = found.per_field.get(spec.key, ())
        targets = [in_declared(g, spec) for g in mine if g.key == spec.key]
        for candidate, row in zip(candidates, features(spec, candidates), strict=True):
            hits = [g for g in targets if matches(candidate, g)]
            cited = any(g.page is None or g.page == candidate.page for g in hits)
            tag = 1 if cited else -1 if hits else 0
            rows.append((candidate, tuple(row), tag))
    return LabeledDocument(family, found.source, tuple(fields), found, tuple(rows), tuple(mine))


def in_declared(gold: GoldFact, spec: FieldSpec) -> GoldFact:
    """The gold fact with its values in the field's declared unit (candidates' `scaled`)."""
    if not gold.unit or not spec.unit or gold.unit == spec.unit:
        return replace(gold, unit="")
    values: list[str] = []
    for wanted in gold.values:
        try:
            number = float(wanted)
        except ValueError:
            values.append(wanted)
            continue
        converted = in_unit(number, gold.unit, spec.unit)
        values.append(wanted if converted is None else repr(converted))
    return replace(gold, values=tuple(values), unit="")


def labels_hash(paths: Iterable[Path]) -> str:
    """SHA-256 over the label files (gold, field map, declarations), in sorted order."""
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def labeled_families(
    labels: Path,
    families: Sequence[str] | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> list[LabeledDocument]:
    """Every labeled document of the folder's families (all with a `fields.txt` by default)."""
    chosen = families or sorted(p.name for p in labels.iterdir() if (p / "fields.txt").is_file())
    out: list[LabeledDocument] = []
    for family in chosen:
        folder = labels / family
        fields = family_fields(folder)
        gold = read_gold(labels, family, fields)
        focus = focus_of(names_a_field(fields))
        for path in sorted(folder.glob("*.pdf")) + sorted(folder.glob("*.PDF")):
            document = parse_pdf(path, focus=focus)
            out.append(labeled_document(family, document, fields, gold))
            if progress is not None:
                progress(f"{family}/{path.name}")
    return out


MODELS = ("listwise", "trees")
"""The scorers `fit_documents` fits (`_scorer`): listwise (the default and the shipped
model: leave-one-family-out it generalises best), and pointwise trees."""


def fit_documents(
    documents: Sequence[LabeledDocument], labels_sha256: str = "", model: str = "listwise"
) -> Scorer:
    """Fit the scorer (`model`, one of `MODELS`) on the labeled candidates of `documents`.

    Trees leave a gold value's repeats on other pages out; the listwise model, which
    learns which candidate beats its slot's rivals, counts them right.
    """
    if model == "listwise":
        return fit_listwise(
            [row for d in documents for _, row, _ in d.rows],
            [int(tag != 0) for d in documents for _, _, tag in d.rows],
            [
                (d.source, *group)
                for d in documents
                for group in choice_groups([c for c, _, _ in d.rows], d.source)
            ],
            labels_hash=labels_sha256,
        )
    if model != "trees":
        raise ValueError(f"no model {model!r}: one of {', '.join(MODELS)}")
    rows = [row for d in documents for _, row, tag in d.rows if tag >= 0]
    labels = [tag for d in documents for _, _, tag in d.rows if tag >= 0]
    return fit_scorer(rows, labels, labels_hash=labels_sha256)


def train_extractor(
    labels: Path,
    out: Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    model: str = "listwise",
) -> Scorer:
    """Train the scorer on a labeled folder and write it (to the package's model by default)."""
    documents = labeled_families(labels, progress=progress)
    files = [labels / "gold.csv", labels / "field_map.json", *labels.glob("*/fields.txt")]
    scorer = fit_documents(documents, labels_hash(files), model)
    if out is None:
        scorer.save()
    else:
        scorer.save(out)
    return scorer


def main(argv: Sequence[str] | None = None) -> int:
    """`swarm-ray train-extractor --labels DIR [--out FILE]`."""
    import argparse
    import time

    parser = argparse.ArgumentParser(
        prog="swarm-ray train-extractor",
        description="Train the document extractor's scorer on labeled families (gold.csv, "
        "field_map.json and one folder of PDFs with fields.txt per family).",
    )
    parser.add_argument("--labels", type=Path, required=True, help="the labeled folder")
    parser.add_argument("--out", type=Path, help=f"the model file to write (default: {MODEL_PATH})")
    parser.add_argument(
        "--model", choices=MODELS, default="listwise",
        help="listwise (default): a linear choice among each slot's candidates and 'not "
        "stated'; trees: pointwise boosted trees (see docs/workloads/documents.md)",
    )  # fmt: skip
    parser.add_argument("-q", "--quiet", action="store_true", help="no line per document")
    args = parser.parse_args(argv)
    for name in ("gold.csv", "field_map.json"):
        if not (args.labels / name).is_file():
            print(f"swarm-ray train-extractor: no `{name}` in {args.labels}", file=sys.stderr)
            return 2
    started = time.perf_counter()
    scorer = train_extractor(
        args.labels, args.out, progress=None if args.quiet else print, model=args.model
    )
    info = scorer.info or {}
    print(
        f"trained on {info.get('candidates')} candidates ({info.get('positives')} gold) in "
        f"{time.perf_counter() - started:.1f} s; labels sha256 {scorer.labels_hash[:12]}; "
        f"wrote {args.out or MODEL_PATH}"
    )
    return 0
