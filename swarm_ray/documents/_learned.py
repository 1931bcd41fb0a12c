"""The learned extraction, top to bottom: quantities, candidates, features, scorer, choice.

Each stage is one module with a typed output and reads only the one before it:

    ParsedDocument -> DocumentQuantities (`_quantities`) -> DocumentCandidates
    (`_candidates`) -> feature rows (`_features`) -> probabilities (`_scorer.Scorer`) ->
    one candidate per entity, field and statistic (`_scorer.choose_scored`) -> `Fact`s

Hand-written code reads and describes; the choice among candidates is the model's,
fitted on labeled families (`_training`, `swarm-ray train-extractor`).
"""

from __future__ import annotations

from collections.abc import Sequence

from swarm_ray.documents._candidates import FieldCandidate, document_candidates
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._facts import ExtractionMethod, Fact
from swarm_ray.documents._features import features
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._quantities import read_quantities
from swarm_ray.documents._scorer import Scorer, choice_groups, choose_scored

__all__ = ["learned_facts"]


def learned_facts(
    document: ParsedDocument,
    fields: Sequence[FieldSpec],
    scorer: Scorer,
    base: dict[str, str],
) -> list[Fact]:
    """One fact per entity, field and statistic of `fields` (label fields) that the model finds.

    The value is reported in the field's declared unit; its confidence is the model's
    probability.
    """
    quantities = read_quantities(document)
    found = document_candidates(document, fields, quantities)
    candidates: list[FieldCandidate] = []
    rows: list[list[float]] = []
    for spec in fields:
        mine = found.per_field.get(spec.key, ())
        candidates.extend(mine)
        rows.extend(features(spec, mine))
    if not candidates:
        return []
    groups = choice_groups(candidates, document.file_name)
    p = scorer.probabilities(rows, groups)
    specs = {spec.key: spec for spec in fields}
    facts: list[Fact] = []
    for chosen, probability in choose_scored(candidates, p.tolist(), scorer.threshold, groups):
        spec = specs[chosen.key]
        numeric = chosen.scaled is not None
        facts.append(
            Fact(
                field=spec.key,
                kind=spec.kind,
                value=chosen.scaled if chosen.scaled is not None else chosen.value,
                unit=spec.unit if numeric else chosen.unit,
                field_unit=spec.unit,
                statistic=chosen.slot,
                value_text=chosen.value_text or str(chosen.value),
                page=chosen.page,
                quote=" ".join(chosen.line.split())[:240],
                confidence=round(min(max(probability, 0.0), 1.0), 3),
                method=ExtractionMethod.LEARNED,
                **{**base, "entity": chosen.entity or base["entity"]},
            )
        )
    return facts
