"""Document comparison building blocks: parse PDFs, extract facts, normalise, compare.

Functions over frozen, JSON-serialisable Pydantic models, so each step can become a
capability (`document.parsing.pdf`, ...) whose input and output models are these::

    parse_pdf(path) -> ParsedDocument                      (or raises DocumentParseError)
    parse_field_arg("data rate:Gb/s") -> FieldSpec         (fields by name, unit, labels)
    extract_facts(document, default_dimensions()) -> ExtractionResult
    normalise_facts(result.facts) -> NormalisationResult   (each field's declared unit)
    compare_facts(normalised.facts) -> Comparison          (entity x field, conflicts)
    index_document(IndexRequest) / query_chunks(ChunkQuery)  (Chroma, atomic re-index)
    render_report(ReportRequest) -> ReportFiles            (Markdown, charts, Parquet, JSON)
    judge_factuality / judge_coherence / judge_efficiency -> JudgeVerdict

`generate_brochures` writes sample EV brochures with a ground truth, for tests and demos;
it is the only part that needs reportlab, imported when it runs. Chroma, the embedding
model and matplotlib are likewise imported on first use, not with the package.
"""

from __future__ import annotations

from swarm_ray.documents._accuracy import (
    ExtractionScore,
    FactKey,
    facts_by_file,
    in_dimensions,
    same_value,
    score_extraction,
)
from swarm_ray.documents._bert import BertEncoder
from swarm_ray.documents._capabilities import documents_catalog
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
    FieldSpec,
    default_dimensions,
    load_dimension,
    load_dimensions,
    parse_field_arg,
)
from swarm_ray.documents._entity import EntitySource, detect_entity
from swarm_ray.documents._extract import ExtractionResult, extract_facts
from swarm_ray.documents._facts import (
    Conversion,
    ExtractionMethod,
    Fact,
    NormalisedFact,
    Statistic,
)
from swarm_ray.documents._index import (
    ChromaStore,
    Chunk,
    ChunkEmbeddings,
    ChunkHit,
    ChunkQuery,
    ChunkQueryResult,
    IndexRequest,
    IndexResult,
    chunk_document,
    close_index_clients,
    embed_chunks,
    index_document,
    load_embedding_model,
    query_chunks,
)
from swarm_ray.documents._judges import (
    JudgeFinding,
    JudgeName,
    JudgeVerdict,
    SubTaskCost,
    judge_coherence,
    judge_efficiency,
    judge_factuality,
)
from swarm_ray.documents._llm_extract import (
    RULES_CONFIDENCE_THRESHOLD,
    CrossCheck,
    Disagreement,
    FieldReading,
    cross_check_facts,
    llm_fallback,
)
from swarm_ray.documents._llm_facts import LLM_CONFIDENCE, LLMFacts, ask_llm, keyword_window
from swarm_ray.documents._parse import (
    DocumentMetadata,
    DocumentParseError,
    PageText,
    ParsedDocument,
    ParseFailureReason,
    ParseWarning,
    parse_pdf,
)
from swarm_ray.documents._report import ReportFiles, ReportRequest, render_report
from swarm_ray.documents._stage_inputs import (
    CompareIn,
    CrossCheckIn,
    ExtractIn,
    JudgeIn,
    Judgement,
    NormaliseIn,
    ParseIn,
    ReportIn,
)
from swarm_ray.documents._units import (
    NormalisationResult,
    Unit,
    convert,
    normalise_facts,
    parse_unit,
)
from swarm_ray.testing.sample_documents import (
    GroundTruth,
    GroundTruthConflict,
    GroundTruthDocument,
    GroundTruthFact,
    SampleSet,
    generate_brochures,
)

__all__ = [
    "LLM_CONFIDENCE",
    "RULES_CONFIDENCE_THRESHOLD",
    "BertEncoder",
    "CellStatus",
    "ChromaStore",
    "Chunk",
    "ChunkEmbeddings",
    "ChunkHit",
    "ChunkQuery",
    "ChunkQueryResult",
    "CompareIn",
    "Comparison",
    "ComparisonCell",
    "Conversion",
    "CrossCheck",
    "CrossCheckIn",
    "Dimension",
    "Disagreement",
    "DocumentMetadata",
    "DocumentParseError",
    "EntitySource",
    "ExtractIn",
    "ExtractionMethod",
    "ExtractionResult",
    "ExtractionScore",
    "Fact",
    "FactKey",
    "FactSource",
    "FieldReading",
    "FieldSpec",
    "GroundTruth",
    "GroundTruthConflict",
    "GroundTruthDocument",
    "GroundTruthFact",
    "IndexRequest",
    "IndexResult",
    "JudgeFinding",
    "JudgeIn",
    "JudgeName",
    "JudgeVerdict",
    "Judgement",
    "LLMFacts",
    "NormalisationResult",
    "NormaliseIn",
    "NormalisedFact",
    "PageText",
    "ParseFailureReason",
    "ParseIn",
    "ParseWarning",
    "ParsedDocument",
    "ReportFiles",
    "ReportIn",
    "ReportRequest",
    "SampleSet",
    "Statistic",
    "SubTaskCost",
    "Unit",
    "ValueGroup",
    "ask_llm",
    "chunk_document",
    "close_index_clients",
    "compare_facts",
    "convert",
    "cross_check_facts",
    "default_dimensions",
    "detect_entity",
    "documents_catalog",
    "embed_chunks",
    "extract_facts",
    "facts_by_file",
    "generate_brochures",
    "in_dimensions",
    "index_document",
    "judge_coherence",
    "judge_efficiency",
    "judge_factuality",
    "keyword_window",
    "llm_fallback",
    "load_dimension",
    "load_dimensions",
    "load_embedding_model",
    "normalise_facts",
    "parse_field_arg",
    "parse_pdf",
    "parse_unit",
    "query_chunks",
    "render_report",
    "same_value",
    "score_extraction",
]
