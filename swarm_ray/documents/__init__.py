"""Document comparison building blocks: parse PDFs, extract facts, normalise, compare.

Pure functions over frozen, JSON-serialisable Pydantic models, so each step can become a
capability (`document.parsing.pdf`, ...) whose input and output models are these::

    parse_pdf(path) -> ParsedDocument                      (or raises DocumentParseError)
    extract_facts(document, default_dimensions()) -> ExtractionResult
    normalise_facts(result.facts) -> NormalisationResult   (canonical units per kind)
    compare_facts(normalised.facts) -> Comparison          (entity x field, conflicts)

`generate_brochures` writes sample EV brochures with a ground truth, for tests and demos;
it is the only part that needs reportlab, imported when it runs.
"""

from __future__ import annotations

from swarm_ray.documents._compare import (
    CellStatus,
    Comparison,
    ComparisonCell,
    FactSource,
    ValueGroup,
    compare_facts,
)
from swarm_ray.documents._dimensions import (
    Dimension,
    DimensionField,
    default_dimensions,
    load_dimension,
    load_dimensions,
)
from swarm_ray.documents._entity import EntitySource, detect_entity
from swarm_ray.documents._extract import ExtractionResult, extract_facts
from swarm_ray.documents._facts import (
    Conversion,
    ExtractionMethod,
    Fact,
    NormalisedFact,
    QuantityKind,
)
from swarm_ray.documents._parse import (
    DocumentMetadata,
    DocumentParseError,
    PageText,
    ParsedDocument,
    ParseFailureReason,
    ParseWarning,
    parse_pdf,
)
from swarm_ray.documents._sample import (
    GroundTruth,
    GroundTruthConflict,
    GroundTruthDocument,
    GroundTruthFact,
    SampleSet,
    generate_brochures,
)
from swarm_ray.documents._units import (
    CANONICAL_UNITS,
    NormalisationResult,
    canonical_unit,
    convert_value,
    normalise_facts,
)

__all__ = [
    "CANONICAL_UNITS",
    "CellStatus",
    "Comparison",
    "ComparisonCell",
    "Conversion",
    "Dimension",
    "DimensionField",
    "DocumentMetadata",
    "DocumentParseError",
    "EntitySource",
    "ExtractionMethod",
    "ExtractionResult",
    "Fact",
    "FactSource",
    "GroundTruth",
    "GroundTruthConflict",
    "GroundTruthDocument",
    "GroundTruthFact",
    "NormalisationResult",
    "NormalisedFact",
    "PageText",
    "ParseFailureReason",
    "ParseWarning",
    "ParsedDocument",
    "QuantityKind",
    "SampleSet",
    "ValueGroup",
    "canonical_unit",
    "compare_facts",
    "convert_value",
    "default_dimensions",
    "detect_entity",
    "extract_facts",
    "generate_brochures",
    "load_dimension",
    "load_dimensions",
    "normalise_facts",
    "parse_pdf",
]
