"""The document workload's stage inputs, and the judges' output (see `_capabilities`).

What each capability of `compare_documents` is handed, validated before it runs.

Paths are typed `ReadPath` / `WritePath`, so an untrusted task's inputs are checked
against its access policy before dispatch; everything else is data.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import ReadPath, WritePath
from swarm_ray.documents._compare import Comparison
from swarm_ray.documents._dimensions import FieldSpec
from swarm_ray.documents._extract import ExtractionResult
from swarm_ray.documents._judges import JudgeVerdict, SubTaskCost
from swarm_ray.documents._llm_extract import CrossCheck
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._units import NormalisationResult

__all__ = [
    "CompareIn",
    "CrossCheckIn",
    "ExtractIn",
    "JudgeIn",
    "Judgement",
    "NormaliseIn",
    "ParseIn",
    "ReportIn",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ParseIn(BaseModel):
    """Input of `document.parsing.pdf`."""

    model_config = _FROZEN
    path: ReadPath = Field(min_length=1)
    """The PDF file."""
    max_pages: int | None = Field(default=None, ge=1)
    """Read at most this many pages."""
    fields: tuple[FieldSpec, ...] = ()
    """The request's inline field declarations: pages that name none of them are read as
    text only, not laid out or indexed (a manual of hundreds of pages stays cheap)."""


class ExtractIn(BaseModel):
    """Input of `document.extraction.specs`."""

    model_config = _FROZEN
    document: ParsedDocument
    """The parsed document."""
    dimension: str
    """Which group of fields to extract: `fields` (those declared on their own), a group
    declared in `fields`, or a built-in dimension by name (`battery`, ...)."""
    fields: tuple[FieldSpec, ...] = ()
    """The request's field declarations, inline (`params["fields"]`): data, never paths."""
    choice: Literal["rules", "learned"] = "rules"
    """The request's `choice`: how a value is chosen among a field's candidates, by the
    rules (the default) or by the installed learned scorer (`swarm-ray train-extractor`
    writes it; the package ships one fitted on the corpus's labels). A name, never a
    model or a path: a request cannot hand the workers a model to run."""


class CrossCheckIn(BaseModel):
    """Input of `document.extraction.crosscheck`."""

    model_config = _FROZEN
    document: ParsedDocument | None = None
    """The parsed document; None when parsing failed (nothing to check)."""
    extractions: list[ExtractionResult | None] = []
    """The document's extractions, one per dimension; None where one failed."""
    fields: tuple[FieldSpec, ...] = ()
    """The request's field declarations, inline (as for extraction)."""
    enabled: bool = False
    """The request's `llm_cross_check` or `llm_extract` (the template runs the stage only
    when it is set)."""
    every_field: bool = False
    """Ask for every declared unit field, not only those the rules found (`llm_extract`)."""
    dimensions: list[str] = []
    """The request's dimensions (`$params.dimensions`), for `every_field`."""


class NormaliseIn(BaseModel):
    """Input of `analysis.normalize.units`."""

    model_config = _FROZEN
    extractions: list[ExtractionResult | None]
    """A document's extractions, one per dimension, facts as written; None where one failed.

    One sub-task per document rather than per document x dimension: converting units
    is a few milliseconds, less than what running one more sub-task costs.
    """


class CompareIn(BaseModel):
    """Input of `analysis.compare.entities`."""

    model_config = _FROZEN
    results: list[NormalisationResult | None]
    """Normalised facts per document; None where that sub-task failed."""
    rel_tolerance: float = Field(default=0.01, ge=0, le=1)
    """Values closer than this fraction are the same value."""


class JudgeIn(BaseModel):
    """Input of `analysis.judge.quality`."""

    model_config = _FROZEN
    results: list[NormalisationResult]
    """Normalised facts of every document whose normalising succeeded."""
    costs: list[SubTaskCost] = []
    """Seconds and attempts per settled sub-task so far (`$costs`)."""
    rel_tolerance: float = Field(default=0.01, ge=0, le=1)
    """As for the comparison."""
    cross_checks: list[CrossCheck | None] = []
    """The LLM cross-check per document (`enabled` false when not asked for)."""
    llm_readings: list[CrossCheck | None] = []
    """The LLM's reading of every declared field per document (`llm_extract`)."""
    dimensions: list[str] = []
    """The request's dimensions (`$params.dimensions`): their fields are distinct names."""
    fields: list[FieldSpec] = []
    """The request's inline field declarations (`$params.fields`)."""


class Judgement(BaseModel):
    """Output of `analysis.judge.quality`: the three judges' verdicts."""

    model_config = _FROZEN
    factuality: JudgeVerdict
    """Agreement across sources."""
    coherence: JudgeVerdict
    """One name per term."""
    efficiency: JudgeVerdict
    """Time and calls per sub-task."""


class ReportIn(BaseModel):
    """Input of `report.render.markdown`."""

    model_config = _FROZEN
    comparison: Comparison
    """The comparison table and conflicts."""
    results: list[NormalisationResult] = []
    """Normalised facts (one Parquet row each)."""
    document_ids: list[str] = []
    """Parsed documents' ids, in the order of `watermarks`."""
    watermarks: list[str] = []
    """Watermark of the sub-task that parsed each document (`$from.parse.@watermark`)."""
    judgement: Judgement | None = None
    """The judges' verdicts, appended to the report."""
    llm_readings: list[CrossCheck | None] = []
    """The LLM's reading of every declared field per document (`llm_extract`): listed per
    field beside the rules'."""
    warnings: list[str] = []
    """Every degradation of the task so far (`$warnings`)."""
    dimensions: list[str] = []
    """The request's dimensions (`$params.dimensions`): the declared fields, in order."""
    fields: list[FieldSpec] = []
    """The request's inline field declarations (`$params.fields`)."""
    out_dir: WritePath | None = None
    """Where the files go; default a new folder under the state directory's `reports/`."""
