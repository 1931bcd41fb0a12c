"""The built-in catalogs: what `swarm_ray.connect()` loads by default.

The test capabilities (`swarm_ray.testing:testing_catalog`: echoes that sleep, fail on
demand and write files) are not among them: a test asks for them by name.
"""

from __future__ import annotations

from swarm_ray.core.planning._catalog import Catalog
from swarm_ray.documents._capabilities import documents_catalog
from swarm_ray.llm import llm_catalog
from swarm_ray.video import video_catalog

__all__ = ["default_catalog"]


def default_catalog() -> Catalog:
    """Every built-in capability and template of the workloads."""
    parts = [documents_catalog(), video_catalog(), llm_catalog()]
    return Catalog(
        capabilities=tuple(c for p in parts for c in p.capabilities),
        templates=tuple(t for p in parts for t in p.templates),
    )
