"""Scoring extracted facts against expected ones, for the tests and the benchmarks.

The scorer lives with the document workload (`swarm_ray.documents._accuracy`), whose job
prints it after a run on samples; this module names it where test and bench code look.
"""

from __future__ import annotations

from swarm_ray.documents._accuracy import (
    ExtractionScore,
    FactKey,
    facts_by_file,
    in_dimensions,
    same_value,
    score_extraction,
    score_facts,
)

__all__ = [
    "ExtractionScore",
    "FactKey",
    "facts_by_file",
    "in_dimensions",
    "same_value",
    "score_extraction",
    "score_facts",
]
