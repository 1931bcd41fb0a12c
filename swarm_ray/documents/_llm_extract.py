"""The LLM in the document workload: fallback where rules are unsure, and cross-check.

**Fallback** (`document.extraction.llm`, declared as the `fallback` of the rules
extractor, whose `confidence_threshold` is `RULES_CONFIDENCE_THRESHOLD`): the scheduler
switches a document x dimension sub-task to it when the rules' lowest fact confidence is
under the threshold, or when a field declared by labels is named next to a value of its
kind that the rules could not place (`unplaced_fields`). It re-runs the rules
(milliseconds, deterministic), asks the LLM for the unit fields whose rule facts are
under the threshold and for those the rules found nothing for (a synonym field always, a
label field where it is named next to such a value: the LLM never guesses a field the
document does not name), and merges: a rule fact the LLM contradicts with a grounded value is
replaced, one it confirms is kept, fields it fills are added. Every LLM fact is marked
`method=llm` at `LLM_CONFIDENCE`, and the result carries a warning saying what changed.
Rule facts at or above the threshold are never touched.

**Cross-check** (request parameter `llm_cross_check`, default off): the LLM extracts the
fields the rules found, and each rule field for which the LLM states a grounded value
that matches none of the rules' values is a `Disagreement`, which the factuality judge
lists and scores.

**LLM extraction** (request parameter `llm_extract`, default off; meant for a real model
behind `SWARM_RAY_LLM_URL`): the same reading, asked for every declared unit field, found
by the rules or not. Each field gets a `FieldReading`: where rules and LLM agree, differ,
or only one states it; the report lists them per field. The LLM's facts stay out of
`facts.parquet`: they are a second opinion, not facts the rules missed (the fallback adds
those).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import TokenUsage
from swarm_ray.documents._dimensions import Dimension
from swarm_ray.documents._extract import ExtractionResult
from swarm_ray.documents._facts import ExtractionMethod, Fact
from swarm_ray.documents._llm_facts import (
    LLM_CONFIDENCE,
    ask_llm,
    asked_fields,
    unplaced_fields,
)
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._units import convert

if TYPE_CHECKING:
    from swarm_ray.llm import Engine

__all__ = [
    "RULES_CONFIDENCE_THRESHOLD",
    "CrossCheck",
    "Disagreement",
    "FieldReading",
    "cross_check_facts",
    "llm_fallback",
]

RULES_CONFIDENCE_THRESHOLD = 0.6
"""Rule facts under this send their sub-task to the LLM fallback. A weak synonym far from
its value (0.55) is under it; a weak synonym near its value (0.7), a strong synonym without
its test cycle (0.82) and every pattern or vocabulary fact are not. On generated brochures
about 2 % of document x dimension sub-tasks fall under it."""


class Disagreement(BaseModel):
    """A rule fact the LLM, reading the same text, attributes a different value to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rules: Fact
    """What the rules extracted."""
    llm: Fact
    """What the LLM attributed to the same field (grounded in the text)."""


class FieldReading(BaseModel):
    """One declared field of one document as the rules and the LLM read it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    field: str
    rules: tuple[str, ...] = ()
    """The rules' values as written (`58 kWh`), none where they found nothing."""
    llm: tuple[str, ...] = ()
    """The LLM's grounded values as written, none where it stated nothing grounded."""
    status: Literal["agree", "differ", "rules only", "llm only", "neither"]


class CrossCheck(BaseModel):
    """The LLM's reading of one document against the rules' facts."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    document_id: str = ""
    source: str = ""
    enabled: bool = False
    """False when the request did not ask for a cross-check (nothing was run)."""
    checked: int = Field(default=0, ge=0)
    """Rule fields the LLM also gave a grounded value for."""
    agreed: int = Field(default=0, ge=0)
    """Of those, the fields where an LLM value matches a rule value."""
    disagreements: tuple[Disagreement, ...] = ()
    readings: tuple[FieldReading, ...] = ()
    """Per field asked: where rules and LLM agree (`llm_extract`: every declared field)."""
    notes: tuple[str, ...] = ()
    """Answers dropped as ungrounded, dimensions the LLM failed on."""
    model: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)


def _same(a: Fact, b: Fact, rel_tolerance: float) -> bool:
    if isinstance(a.value, str) or isinstance(b.value, str):
        return a.value == b.value
    try:
        x = convert(a.value, a.unit, a.field_unit or a.unit)
        y = convert(b.value, b.unit, a.field_unit or a.unit)
    except ValueError:
        return a.value == b.value and a.unit == b.unit
    return abs(x - y) <= rel_tolerance * max(abs(x), abs(y), 1e-12)


def llm_fallback(
    engine: Engine,
    document: ParsedDocument,
    dimension: Dimension,
    rules: ExtractionResult,
    *,
    threshold: float = RULES_CONFIDENCE_THRESHOLD,
) -> tuple[ExtractionResult, TokenUsage]:
    """The rules' facts with the unsure and missing synonym fields asked of the LLM.

    Returns:
        The merged result (with one warning saying what the LLM changed) and the LLM's
        token usage.

    Raises:
        InvalidOutputError: The LLM's answer failed the facts schema; the scheduler then
            keeps the rules' result with a warning.
    """
    found = {f.field for f in rules.facts}
    weak = {f.field for f in rules.facts if f.confidence < threshold}
    fields = asked_fields(dimension)
    unplaced = {f.key for f in unplaced_fields(document, fields, rules.facts)}
    ask = [
        f
        for f in fields
        if f.key in weak or (f.key not in found and (f.synonyms or f.key in unplaced))
    ]
    label = f"`{rules.source}` `{dimension.name}`"
    if not ask:
        note = f"{label}: LLM fallback had no unit field to ask; kept the rules' facts"
        return rules.model_copy(update={"warnings": (*rules.warnings, note)}), TokenUsage()
    answer = ask_llm(engine, document, dimension, ask, entity=rules.entity)
    by_field: dict[str, list[Fact]] = defaultdict(list)
    for fact in answer.facts:
        by_field[fact.field].append(fact)
    kept: list[Fact] = []
    replaced = confirmed = 0
    for fact in rules.facts:
        llm = by_field.get(fact.field, [])
        if fact.confidence < threshold and llm:
            if not any(_same(fact, other, 1e-9) for other in llm):
                replaced += 1
                continue
            confirmed += 1
        kept.append(fact)
    added = [
        f for f in answer.facts if not any(k.field == f.field and _same(k, f, 1e-9) for k in kept)
    ]
    listed = ", ".join(f"`{f.field}`={f.value_text!r} p. {f.page}" for f in added) or "none"
    note = (
        f"{label}: rule facts under confidence {threshold:.2f}; asked LLM `{answer.model}` "
        f"for {', '.join(f'`{f.name}`' for f in ask)}: added {len(added)} fact(s) marked "
        f"`llm` at confidence {LLM_CONFIDENCE:.2f} ({listed}), replaced {replaced} and "
        f"confirmed {confirmed} rule fact(s), dropped {len(answer.dropped)} ungrounded answer(s)"
    )
    merged = rules.model_copy(
        update={"facts": (*kept, *added), "warnings": (*rules.warnings, note)}
    )
    return merged, answer.usage


def cross_check_facts(
    engine: Engine,
    document: ParsedDocument,
    dimensions: Sequence[Dimension],
    extractions: Sequence[ExtractionResult],
    *,
    rel_tolerance: float = 0.01,
    every_field: bool = False,
) -> CrossCheck:
    """Ask the LLM for the unit fields the rules found, one call per dimension.

    With `every_field` (`llm_extract`), for every unit field of `dimensions`, found by the
    rules or not. Facts an earlier LLM fallback produced are not checked against the LLM
    again. A dimension whose answer fails the schema is noted and skipped, not fatal: the
    cross-check is advisory.
    """
    from swarm_ray.core import InvalidOutputError

    rule_facts = [f for r in extractions for f in r.facts if f.method is not ExtractionMethod.LLM]
    entity = extractions[0].entity if extractions else document.file_name
    checked = agreed = 0
    disagreements: list[Disagreement] = []
    readings: list[FieldReading] = []
    notes: list[str] = []
    usage = TokenUsage()
    model: str | None = None
    for dimension in dimensions:
        keys = {f.key for f in dimension.fields}
        mine = [f for f in rule_facts if f.field in keys]
        fields = asked_fields(dimension, None if every_field else [f.field for f in mine])
        if not fields:
            continue
        try:
            answer = ask_llm(engine, document, dimension, fields, entity=entity)
        except InvalidOutputError as exc:
            notes.append(f"`{dimension.name}`: {exc.message}")
            continue
        usage, model = usage + answer.usage, answer.model
        notes += [f"`{document.file_name}`: ungrounded LLM answer {d}" for d in answer.dropped]
        for field in fields:
            llm = [f for f in answer.facts if f.field == field.key]
            rules = [f for f in mine if f.field == field.key]
            same = any(_same(a, b, rel_tolerance) for a in llm for b in rules)
            readings.append(_reading(field.key, rules, llm, same))
            if not llm or not rules:
                continue
            checked += 1
            if same:
                agreed += 1
                continue
            best = max(rules, key=lambda f: f.confidence)
            disagreements.append(Disagreement(rules=best, llm=llm[0]))
    return CrossCheck(
        document_id=document.document_id,
        source=document.file_name,
        enabled=True,
        checked=checked,
        agreed=agreed,
        disagreements=tuple(disagreements),
        readings=tuple(readings),
        notes=tuple(notes),
        model=model,
        usage=usage,
    )


def _reading(field: str, rules: Sequence[Fact], llm: Sequence[Fact], same: bool) -> FieldReading:
    status: Literal["agree", "differ", "rules only", "llm only", "neither"]
    if rules and llm:
        status = "agree" if same else "differ"
    else:
        status = "rules only" if rules else "llm only" if llm else "neither"
    return FieldReading(
        field=field,
        rules=tuple(dict.fromkeys(f.value_text for f in rules)),
        llm=tuple(dict.fromkeys(f.value_text for f in llm)),
        status=status,
    )
