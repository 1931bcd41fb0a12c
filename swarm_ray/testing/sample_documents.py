"""A generator of realistic EV product brochures with a ground truth, for tests and demos.

`generate_brochures` writes N PDF brochures for invented brands and models (an entity is
brand + model; each has one to three brochures: a spec sheet, a marketing brochure, a
two-column feature overview) plus `ground_truth.json`: every fact each brochure states,
in canonical units, and the contradictions planted between brochures of one entity
(75 kWh in one, 77 kWh in another). Markets decide units and test cycles: EU brochures
use km and WLTP, US ones miles and EPA, Chinese ones CLTC and NEDC. Output is a pure
function of `n` and `seed`, so a failing test can be reproduced file for file.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from swarm_ray.core.model._errors import InvalidInputError
from swarm_ray.testing.sample_plan import Plan, plan_brochures
from swarm_ray.testing.sample_text import (
    Block,
    BrochureContent,
    Layout,
    Style,
    Written,
    prose,
    range_pair,
    table_label,
    write,
)

__all__ = [
    "GroundTruth",
    "GroundTruthConflict",
    "GroundTruthDocument",
    "GroundTruthFact",
    "SampleSet",
    "generate_brochures",
]

_SECTIONS = {
    "battery": "Battery & charging",
    "motor": "Performance",
    "driver_assistance": "Assistance",
    "interior": "Comfort & space",
    "general": "Dimensions & price",
}


class GroundTruthFact(BaseModel):
    """A fact a brochure states, value in canonical units (money: its currency)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    qualifier: str | None
    value: float | str
    unit: str
    written: str
    """The value as printed."""


class GroundTruthDocument(BaseModel):
    """One generated brochure and every fact on it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    file: str
    entity: str
    kind: str
    layout: str
    market: str
    title: str | None
    blank_pages: tuple[int, ...]
    """Pages with no text (a drawn back cover): the parser should warn about them."""
    facts: tuple[GroundTruthFact, ...]


class GroundTruthConflict(BaseModel):
    """A planted contradiction: one field of one entity stated differently."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entity: str
    field: str
    qualifier: str | None
    unit: str
    values: tuple[float, ...]
    """The distinct values stated (within 1 %), ascending, in canonical units."""
    files: tuple[str, ...]
    """Every brochure of the entity that states the field."""


class GroundTruth(BaseModel):
    """What a perfect pipeline would find in the generated brochures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    seed: int
    entities: tuple[str, ...]
    documents: tuple[GroundTruthDocument, ...]
    conflicts: tuple[GroundTruthConflict, ...]


class SampleSet(BaseModel):
    """Where the brochures and their ground truth were written."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    out_dir: str
    pdf_paths: tuple[str, ...]
    ground_truth_path: str
    ground_truth: GroundTruth


def _blocks(
    entity: str, kind: str, written: list[Written], style: Style, rng: random.Random
) -> tuple[Layout, list[Block]]:
    """Lay out a brochure: a spec table, or prose in sections (one or two columns)."""
    noise_sentences, noise_rows = _distractors(entity, style)
    if kind == "spec_sheet":
        unit_in_label = rng.random() < 0.3
        rows = [
            table_label(w, rng, unit_in_label)
            for s in _SECTIONS
            for w in written
            if w.item.field.startswith(s)
        ]
        for label, value in rng.sample(noise_rows, 3):
            rows.insert(rng.randint(0, len(rows)), (label, value))
        intro = f"The {entity} brings together range, comfort and safety. " + noise_sentences[0]
        return "table", [
            Block("header", entity),
            Block("subtitle", "Technical specifications"),
            Block("paragraph", intro),
            Block("table", rows=tuple(rows)),
        ]
    layout: Layout = "two_column" if kind == "overview" else "prose"
    opener = rng.choice(("The all-new {e}", "Meet the {e}", "Introducing the {e}", "{e}"))
    blocks = [Block("header", opener.format(e=entity))]
    for section, heading in _SECTIONS.items():
        mine = [w for w in written if w.item.field.startswith(section)]
        ranges = [w for w in mine if w.item.field == "battery.range" and w.item.qualifier]
        sentences = []
        if len(ranges) == 2 and rng.random() < 0.6:
            sentences.append(range_pair(*ranges))
            mine = [w for w in mine if w not in ranges]
        sentences.extend(prose(w, rng) for w in mine)
        if not sentences:
            continue
        rng.shuffle(sentences)
        if rng.random() < 0.5:
            sentences.insert(rng.randint(0, len(sentences)), rng.choice(noise_sentences))
        if layout == "two_column" or rng.random() < 0.5:
            blocks.append(Block("heading", heading))
        blocks.append(Block("paragraph", " ".join(sentences)))
    return layout, blocks


def _distractors(entity: str, style: Style) -> tuple[list[str], list[tuple[str, str]]]:
    """Numbers with units that are not facts of any field: warranty, consumption, ..."""
    imperial = style.market in ("US", "UK")
    warranty = "8-year / 100,000-mile" if imperial else "8-year / 160,000 km"
    top_up = (
        "Level 2 home charging adds up to 30 miles of range per hour."
        if imperial
        else "A 15-minute top-up adds up to 200 km of range."
    )
    sentences = [
        f"Every {entity} is backed by an {warranty} battery warranty.",
        "More than 500,000 public charge points are available across the network.",
        "A 60 L frunk adds extra space.",
        "The 2,900 mm wheelbase frees up legroom.",
        top_up,
    ]
    rows = [
        ("Wheelbase", "2,900 mm" if not style.decimal_comma else "2900 mm"),
        ("Ground clearance", "160 mm"),
        ("Battery warranty", warranty.replace("-year", " years")),
        ("Towing capacity (braked)", "1,500 kg" if not style.decimal_comma else "1500 kg"),
        ("Drive", "All-wheel drive"),
        ("Energy consumption", "3.6 mi/kWh" if imperial else "16.5 kWh/100 km"),
    ]
    return sentences, rows


def generate_brochures(out_dir: str | Path, n: int = 100, seed: int = 0) -> SampleSet:
    """Write `n` sample brochures and `ground_truth.json` into `out_dir`.

    Args:
        out_dir: Created if missing; existing files of the same names are overwritten.
        n: Number of PDFs, 1 to 480.
        seed: Everything (entities, values, wording, layouts, conflicts) follows from it.

    Returns:
        The paths written and the ground truth.

    Raises:
        InvalidInputError: When `n` is out of range.
    """
    if not 1 <= n <= 480:
        raise InvalidInputError(f"`n`={n!r} must be between 1 and 480")
    # reportlab is imported only here: the pipeline itself never needs it.
    from swarm_ray.testing.sample_pdf import render

    rng = random.Random(seed)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    plans, entities = plan_brochures(rng, n)
    documents: list[GroundTruthDocument] = []
    for number, plan in enumerate(plans):
        document, content = _brochure(f"brochure_{number:03d}.pdf", plan, rng)
        render(str(folder / document.file), content)
        documents.append(document)
    truth = GroundTruth(
        seed=seed,
        entities=tuple(entities),
        documents=tuple(documents),
        conflicts=_conflicts(plans, documents),
    )
    truth_path = folder / "ground_truth.json"
    truth_path.write_text(truth.model_dump_json(indent=2), encoding="utf-8")
    return SampleSet(
        out_dir=str(folder),
        pdf_paths=tuple(str(folder / d.file) for d in documents),
        ground_truth_path=str(truth_path),
        ground_truth=truth,
    )


def _brochure(
    file: str, plan: Plan, rng: random.Random
) -> tuple[GroundTruthDocument, BrochureContent]:
    """Word one planned brochure: its content to render and its ground truth."""
    entity, kind, market = plan.entity, plan.kind, plan.market
    style = Style(market, decimal_comma=market == "EU" and rng.random() < 0.3)
    written = [write(item, style, rng) for item in plan.items]
    layout, blocks = _blocks(entity, kind, written, style, rng)
    title = _title(entity, kind, rng)
    back_cover = kind == "marketing" and rng.random() < 0.3
    created = datetime(2023, 1, 1) + timedelta(
        days=rng.randint(0, 900), minutes=rng.randint(0, 1439)
    )
    content = BrochureContent(
        layout=layout,
        blocks=tuple(blocks),
        title=title,
        author=f"{entity.split()[0]} Marketing",
        subject=f"{entity} {kind.replace('_', ' ')}",
        created=created,
        back_cover=back_cover,
    )
    facts = tuple(
        GroundTruthFact(
            field=w.item.field, qualifier=w.item.qualifier, value=value, unit=unit, written=w.text
        )
        for w in written
        for value, unit in w.truth
    )
    document = GroundTruthDocument(
        file=file,
        entity=entity,
        kind=kind,
        layout=layout,
        market=market,
        title=title,
        blank_pages=(2,) if back_cover else (),
        facts=facts,
    )
    return document, content


def _distinct(values: Iterable[float]) -> tuple[float, ...]:
    """Sorted values, one per group within 1 % (310 miles and 499 km are one range)."""
    kept: list[float] = []
    for value in sorted(values):
        if not kept or value - kept[-1] > 0.01 * value:
            kept.append(value)
    return tuple(kept)


def _title(entity: str, kind: str, rng: random.Random) -> str | None:
    if rng.random() < 0.35:
        return None  # the entity must then come from the header line
    suffix = {
        "spec_sheet": " — Technical Specifications",
        "marketing": ": the brochure",
        "overview": " | Feature Overview",
    }[kind]
    return entity + suffix


def _conflicts(
    plans: list[Plan], documents: list[GroundTruthDocument]
) -> tuple[GroundTruthConflict, ...]:
    conflicts = []
    for key in sorted({(p.entity, *p.conflict) for p in plans if p.conflict is not None}, key=str):
        entity, field, qualifier = key
        stated = [
            (d.file, f)
            for d in documents
            if d.entity == entity
            for f in d.facts
            if (f.field, f.qualifier) == (field, qualifier) and isinstance(f.value, float)
        ]
        conflicts.append(
            GroundTruthConflict(
                entity=entity,
                field=field,
                qualifier=qualifier,
                unit=stated[0][1].unit,
                values=_distinct(float(f.value) for _, f in stated),
                files=tuple(sorted(file for file, _ in stated)),
            )
        )
    return tuple(conflicts)
