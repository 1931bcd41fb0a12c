"""The document workload as capabilities and a template (`compare_documents`).

    parse (Ray Data, per file) -> embed (per file, parallel) -> index (one Chroma writer)
                               -> extract (per file x dimension) -> normalise (per file)
                                  (rules; LLM fallback where unsure)
                               -> crosscheck (per file; LLM, only when asked)
        -> compare (once, all) -> judge (factuality, coherence, efficiency)
        -> report (once: Markdown, charts, facts.parquet, report.json)

Extraction of a file starts as soon as that file is parsed: the Ray Data stage streams
rows back one by one and the scheduler has no stage barrier (partial rollout). A file
that cannot be parsed fails alone with a named error; the rest of the batch completes.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path

from swarm_ray.agent import AgentReply, declared_limits, state_dir
from swarm_ray.core import (
    CapabilitySpec,
    Catalog,
    ErrorCode,
    ExecutorKind,
    InvalidInputError,
    Resources,
    RetryPolicy,
    TaskTemplate,
    capability_maker,
)
from swarm_ray.documents._compare import Comparison, compare_facts
from swarm_ray.documents._dimensions import Dimension, declared_dimensions, find_dimensions
from swarm_ray.documents._extract import ExtractionResult, extract_facts
from swarm_ray.documents._facts import NormalisedFact
from swarm_ray.documents._index import (
    ChunkEmbeddings,
    IndexRequest,
    IndexResult,
    embed_chunks,
    index_document,
)
from swarm_ray.documents._judges import (
    judge_coherence,
    judge_efficiency,
    judge_factuality,
)
from swarm_ray.documents._llm_extract import (
    RULES_CONFIDENCE_THRESHOLD,
    CrossCheck,
    cross_check_facts,
    llm_fallback,
)
from swarm_ray.documents._llm_facts import asked_fields, unplaced_fields
from swarm_ray.documents._parse import ParsedDocument, parse_pdf
from swarm_ray.documents._quantities import focus_of
from swarm_ray.documents._report import ReportFiles
from swarm_ray.documents._request_limits import count_fields
from swarm_ray.documents._scorer import Scorer, load_scorer
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
from swarm_ray.documents._table import names_a_field
from swarm_ray.documents._units import NormalisationResult, normalise_facts

__all__ = ["documents_catalog"]


def parse_document(data: ParseIn) -> ParsedDocument:
    """Parse one PDF (raises `DocumentParseError` naming the file and the reason)."""
    return parse_pdf(
        data.path, max_pages=data.max_pages, focus=focus_of(names_a_field(data.fields))
    )


def _dimension(data: ExtractIn) -> Dimension:
    dimensions = find_dimensions(data.fields)
    if data.dimension not in dimensions:
        raise InvalidInputError(
            f"dimension `{data.dimension}` is not declared "
            f"(known: {', '.join(sorted(dimensions))})",
            field="dimension",
        )
    return dimensions[data.dimension]


UNPLACED_CONFIDENCE = 0.5
"""A sub-task's confidence when a declared field is named next to a value of its kind
that the rules could not place: under the threshold, so the LLM fallback is asked."""


@functools.cache
def _installed_scorer() -> Scorer:
    scorer = load_scorer()
    if scorer is None:
        raise InvalidInputError(
            "`choice: learned` needs the extractor's model, and none is installed: "
            "`swarm-ray train-extractor --labels DIR` writes it",
            field="choice",
        )
    return scorer


def _scorer(data: ExtractIn) -> Scorer | None:
    """The learned scorer where the request asks for it (`choice: learned`), else `None`."""
    return _installed_scorer() if data.choice == "learned" else None


def extract_specs(data: ExtractIn) -> AgentReply:
    """Extraction of one dimension from one document: the rules' choice, or the model's.

    The sub-task's confidence is its least confident fact, or `UNPLACED_CONFIDENCE` when a
    field the rules found nothing for is named next to a value of its kind: under the
    spec's threshold, the scheduler hands the sub-task to the LLM fallback.
    """
    dimension = _dimension(data)
    result = extract_facts(data.document, [dimension], scorer=_scorer(data))
    confidence = min((f.confidence for f in result.facts), default=1.0)
    unplaced = unplaced_fields(data.document, asked_fields(dimension), result.facts)
    if unplaced:
        confidence = min(confidence, UNPLACED_CONFIDENCE)
    return AgentReply(output=result, confidence=confidence, warnings=result.warnings)


def extract_llm(data: ExtractIn) -> AgentReply:
    """The LLM fallback: rules first, then their unsure and missing fields asked of the LLM.

    Runs in an `LLMAgent` replica and calls its engine (see `llm_fallback`).
    """
    from swarm_ray.llm import current_engine

    dimension = _dimension(data)
    rules = extract_facts(data.document, [dimension], scorer=_scorer(data))
    result, usage = llm_fallback(current_engine(), data.document, dimension, rules)
    confidence = min((f.confidence for f in result.facts), default=1.0)
    return AgentReply(output=result, confidence=confidence, usage=usage, warnings=result.warnings)


def cross_check(data: CrossCheckIn) -> AgentReply:
    """The LLM's reading of a document's unit fields against the rules' (when enabled).

    The template leaves the stage out unless the request sets `llm_cross_check`; called
    with `enabled` false it returns at once without loading a model. Enabled, it calls
    this process's engine (`current_engine()`: llama.cpp on CPU unless
    `SWARM_RAY_LLM_ENGINE` says otherwise), not the `LLMAgent` deployment the fallback
    uses: it was written when the stage ran in every plan, where a Serve capability
    would have started a replica in every run.
    """
    document = data.document
    if not data.enabled or document is None:
        source = "" if document is None else document.file_name
        doc_id = "" if document is None else document.document_id
        return AgentReply(output=CrossCheck(document_id=doc_id, source=source))
    from swarm_ray.llm import current_engine

    extractions = [e for e in data.extractions if e is not None]
    if data.every_field:
        dimensions = declared_dimensions(data.dimensions, data.fields)
    else:
        known = find_dimensions(data.fields)
        found = {f.field for e in extractions for f in e.facts}
        dimensions = [d for d in known.values() if any(f.key in found for f in d.fields)]
    check = cross_check_facts(
        current_engine(), document, dimensions, extractions, every_field=data.every_field
    )
    return AgentReply(output=check, usage=check.usage, warnings=check.notes)


def normalise_units(data: NormaliseIn) -> NormalisationResult:
    """Each field's declared unit for a document's extractions, conversions recorded.

    A document covering several part numbers gets a note saying which.
    """
    extractions = [e for e in data.extractions if e is not None]
    result = normalise_facts(f for e in extractions for f in e.facts)
    notes = {
        e.document_id: f"covers {len(e.parts)} part numbers: {', '.join(e.parts)}"
        for e in extractions
        if e.parts
    }
    return result.model_copy(update={"notes": notes}) if notes else result


def compare_entities(data: CompareIn) -> Comparison:
    """Group every normalised fact by entity and flag conflicts between sources."""
    facts: list[NormalisedFact] = [f for r in data.results if r is not None for f in r.facts]
    return compare_facts(facts, rel_tolerance=data.rel_tolerance)


def embed_document(data: IndexRequest) -> ChunkEmbeddings:
    """Chunk and embed one document (many agents in parallel; nothing written)."""
    return embed_chunks(data)


def index_chunks(data: IndexRequest) -> IndexResult:
    """Chunk one parsed document into Chroma (replacing its previous chunks atomically).

    A relative store path would land in whatever directory the agent's worker runs in,
    so it is taken relative to the state directory instead.
    """
    if data.store.url is None and not Path(data.store.path).is_absolute():
        store = data.store.model_copy(update={"path": str(state_dir() / data.store.path)})
        data = data.model_copy(update={"store": store})
    return index_document(data)


def judge_quality(data: JudgeIn) -> AgentReply:
    """Factuality, coherence and efficiency of the run; confidence is the lowest score."""
    facts = [f for r in data.results for f in r.facts]
    readings = [*data.cross_checks, *data.llm_readings]
    checks = [c for c in readings if c is not None and c.enabled]
    declared = declared_dimensions(data.dimensions, data.fields)
    judgement = Judgement(
        factuality=judge_factuality(facts, rel_tolerance=data.rel_tolerance, cross_checks=checks),
        coherence=judge_coherence(facts, dimensions=declared or None),
        efficiency=judge_efficiency(data.costs),
    )
    lowest = min(judgement.factuality.score, judgement.coherence.score, judgement.efficiency.score)
    return AgentReply(output=judgement, confidence=lowest)


_spec = capability_maker(__name__)
_render_spec = capability_maker("swarm_ray.documents._render")


def _llm_resources() -> Resources:
    """Those of the `llm.*` capabilities: a CPU, or `SWARM_RAY_LLM_NUM_GPUS` of a GPU."""
    gpus = float(os.environ.get("SWARM_RAY_LLM_NUM_GPUS", "0") or 0)
    return Resources(num_cpus=1.0, num_gpus=gpus, max_concurrency=1)


def _capabilities() -> Sequence[CapabilitySpec]:
    no_retry_on_bad_files = RetryPolicy(
        max_attempts=2, retry_on=frozenset({ErrorCode.TIMEOUT, ErrorCode.AGENT_UNAVAILABLE})
    )
    return (
        _spec(
            "document.parsing.pdf",
            "Text per page, metadata and warnings of a PDF (pypdfium2); "
            "a named error per bad file.",
            "parse_document",
            ParseIn,
            ParsedDocument,
            executor=ExecutorKind.DATA,
            # pdfium reads tenants' files: a PDF bomb fails its own row (`_rlimits`)
            resources=Resources(
                num_cpus=0.5,
                max_concurrency=2,
                **declared_limits("DOCUMENT", memory_bytes=1 << 30, cpu_s=120),
            ),
            timeout_s=120,
            retry=no_retry_on_bad_files,
        ),
        _spec(
            "document.extraction.specs",
            "Facts {entity, field, value, unit, page, quote, confidence} of one dimension, "
            "by rules; unsure results go to the LLM fallback.",
            "extract_specs",
            ExtractIn,
            ExtractionResult,
            # the rules read a tenant's text: a pathological one fails its own sub-task
            resources=Resources(
                num_cpus=0.5,
                max_concurrency=2,
                **declared_limits("EXTRACT", memory_bytes=1 << 30, cpu_s=50),
            ),
            timeout_s=60,
            fallback="document.extraction.llm",
            confidence_threshold=RULES_CONFIDENCE_THRESHOLD,
        ),
        _spec(
            "document.extraction.llm",
            "The rules' facts of one dimension, with the fields they were unsure of or "
            "missed asked of an LLM (grounded in the text, marked `llm`).",
            "extract_llm",
            ExtractIn,
            ExtractionResult,
            executor=ExecutorKind.SERVE,
            deployment="swarm_ray.llm._deployment:capability_llm_app",
            resources=_llm_resources(),
            timeout_s=120,
            retry=RetryPolicy(max_attempts=2, backoff_s=0.5),
            tags=("llm",),
        ),
        _spec(
            "document.extraction.crosscheck",
            "An LLM's reading of a document's unit fields against the rules' facts "
            "(when the request sets `llm_cross_check`, or `llm_extract` for every field).",
            "cross_check",
            CrossCheckIn,
            CrossCheck,
            resources=Resources(num_cpus=0.5, max_concurrency=1),
            timeout_s=600,
            retry=no_retry_on_bad_files,
            tags=("llm",),
        ),
        _spec(
            "analysis.normalize.units",
            "Facts in canonical units (pint), each conversion recorded, test cycles kept apart.",
            "normalise_units",
            NormaliseIn,
            NormalisationResult,
            resources=Resources(num_cpus=0.25, max_concurrency=2),
            timeout_s=60,
        ),
        _spec(
            "analysis.compare.entities",
            "Comparison table entity x field; conflicting sources kept side by side for review.",
            "compare_entities",
            CompareIn,
            Comparison,
            resources=Resources(num_cpus=0.5),
            timeout_s=300,
        ),
        _spec(
            "document.embedding.chunks",
            "Chunks of a parsed document embedded with all-MiniLM-L6-v2 (packaged on PyPI; "
            "no download), for the indexer to write.",
            "embed_document",
            IndexRequest,
            ChunkEmbeddings,
            # Embedding is the heavy part of indexing: spread it over agents, one
            # intra-op thread each, and leave the single Chroma writer only the writes.
            # Nothing in the report waits for it, so the extraction path (the LLM
            # fallback above all) goes first when they share a core.
            # A tenant's text is chunked and embedded in a limited child (`_rlimits`),
            # which loads the model in each attempt (numpy, `_bert`: about 0.2 s).
            resources=Resources(
                num_cpus=0.5,
                max_concurrency=2,
                background=True,
                **declared_limits("EMBED", memory_bytes=3 << 30, cpu_s=300),
            ),
            timeout_s=600,
        ),
        _spec(
            "document.indexing.chroma",
            "Chunks of a parsed document, embedded (all-MiniLM-L6-v2) into Chroma with page "
            "and watermark; re-indexing replaces a document's chunks atomically.",
            "index_chunks",
            IndexRequest,
            IndexResult,
            # One writer: an embedded Chroma store takes one process at a time (a limited
            # child of the one agent, for a tenant's document).
            resources=Resources(
                num_cpus=0.5,
                max_concurrency=1,
                **declared_limits("INDEX", memory_bytes=3 << 30, cpu_s=300),
            ),
            timeout_s=600,
        ),
        _spec(
            "analysis.judge.quality",
            "Judges: factuality (agreement across sources), coherence (one name per term), "
            "efficiency (time and calls per sub-task).",
            "judge_quality",
            JudgeIn,
            Judgement,
            resources=Resources(num_cpus=0.5),
            timeout_s=300,
        ),
        _render_spec(
            "report.render.markdown",
            "Markdown report with tables, conflicts, warnings and a chart per dimension, "
            "plus facts.parquet (with watermarks) and report.json.",
            "render_markdown",
            ReportIn,
            ReportFiles,
            resources=Resources(num_cpus=0.5),
            timeout_s=300,
        ),
    )


COMPARE_TEMPLATE = """
name: compare_documents
description: Compare product documents across dimensions; flag conflicting sources.
keywords: [compare, brochures, brochure, documents, datasheets, pdf]
aggregate: report
stages:
  - name: parse
    capability: document.parsing.pdf
    fan_out: per_item
    input: {path: $item, fields: $params.fields}
  - name: extract
    capability: document.extraction.specs
    fan_out: per_item
    for_each: $params.dimensions
    depends_on: [parse]
    input:
      document: $from.parse
      dimension: $each
      fields: $params.fields
      choice: $params.choice
  - name: normalize
    capability: analysis.normalize.units
    fan_out: per_item
    depends_on: [extract]
    partial_ok: true
    input: {extractions: $from.extract}
  - name: embed
    capability: document.embedding.chunks
    fan_out: per_item
    depends_on: [parse]
    input:
      document: $from.parse
      watermark: $from.parse.@watermark
      store: {path: $task_dir/index, url: $params.chroma_url}
  - name: index
    capability: document.indexing.chroma
    fan_out: per_item
    depends_on: [parse, embed]
    input:
      document: $from.parse
      watermark: $from.parse.@watermark
      embeddings: $from.embed.embeddings
      store: {path: $task_dir/index, url: $params.chroma_url}
  - &llm_reading
    name: crosscheck
    capability: document.extraction.crosscheck
    fan_out: per_item
    when: $params.llm_cross_check
    depends_on: [parse, extract]
    partial_ok: true
    input: &llm_input
      document: $from.parse
      extractions: $from.extract
      fields: $params.fields
      enabled: $params.llm_cross_check
  - <<: *llm_reading
    name: llmextract
    when: $params.llm_extract
    input:
      <<: *llm_input
      dimensions: $params.dimensions
      enabled: $params.llm_extract
      every_field: true
  - name: compare
    capability: analysis.compare.entities
    depends_on: [normalize]
    partial_ok: true
    input: {results: $from.normalize, rel_tolerance: $params.rel_tolerance}
  - name: judge
    capability: analysis.judge.quality
    depends_on: [normalize, compare, crosscheck, llmextract]
    partial_ok: true
    input:
      results: $from.normalize
      costs: $costs
      rel_tolerance: $params.rel_tolerance
      cross_checks: $from.crosscheck
      llm_readings: $from.llmextract
      dimensions: $params.dimensions
      fields: $params.fields
  - name: report
    capability: report.render.markdown
    depends_on: [compare, judge, normalize, parse, llmextract]
    partial_ok: true
    input:
      comparison: $from.compare
      results: $from.normalize
      document_ids: $from.parse.document_id
      watermarks: $from.parse.@watermark
      judgement: $from.judge
      llm_readings: $from.llmextract
      warnings: $warnings
      dimensions: $params.dimensions
      fields: $params.fields
      out_dir: $task_dir
"""


def documents_catalog() -> Catalog:
    """Capabilities and the `compare_documents` template."""
    return Catalog(
        capabilities=tuple(_capabilities()),
        templates=(TaskTemplate.from_yaml(COMPARE_TEMPLATE, source="compare_documents"),),
        count_fields=count_fields,
    )
