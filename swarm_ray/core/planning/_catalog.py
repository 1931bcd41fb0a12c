"""Catalogs: the capabilities and templates an orchestrator knows, found by import path.

The orchestrator is a detached actor that Ray restarts on its own, so it cannot be handed
Python objects once: it is given import paths (`"package.module:function"`) of functions
returning a `Catalog`, and imports them again after every restart.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from swarm_ray.core.guards._limits import FieldCount
from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.core.model._errors import InvalidSpecError
from swarm_ray.core.model._registry import Registry
from swarm_ray.core.model._template import TaskTemplate
from swarm_ray.core.planning._routing import TemplateRouter

__all__ = ["Catalog"]


@dataclass(frozen=True)
class Catalog:
    """Capabilities and templates that belong together (a workload)."""

    capabilities: tuple[CapabilitySpec, ...] = ()
    """Capability specs."""
    templates: tuple[TaskTemplate, ...] = ()
    """Task templates using them."""
    count_fields: FieldCount | None = None
    """How many fields a request asks of each item, for the `max_fields` and `max_fanout`
    limits (`_limits`), where the workload has such a notion."""


@functools.cache
def load_entrypoint(entrypoint: str) -> Callable[..., Any]:
    """Import `package.module:function` (cached per process)."""
    module_name, _, attr = entrypoint.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise InvalidSpecError(f"entrypoint `{entrypoint}` cannot be imported: {exc}") from None
    if not callable(target):
        raise InvalidSpecError(f"entrypoint `{entrypoint}` is not callable")
    return target  # type: ignore[no-any-return]


def read_catalogs(paths: Iterable[str]) -> list[Catalog]:
    """Import every catalog function and call it."""
    catalogs = []
    for path in paths:
        catalog = load_entrypoint(path)()
        if not isinstance(catalog, Catalog):
            raise InvalidSpecError(
                f"catalog `{path}` returned {type(catalog).__name__}, not Catalog"
            )
        catalogs.append(catalog)
    return catalogs


def load_catalogs(paths: Iterable[str]) -> tuple[Registry, TemplateRouter]:
    """Import every catalog function and merge them into one registry and router."""
    return merge_catalogs(read_catalogs(paths))


def merge_catalogs(catalogs: Iterable[Catalog]) -> tuple[Registry, TemplateRouter]:
    """One registry and router of all the catalogs' capabilities and templates."""
    registry, router = Registry(), TemplateRouter()
    for catalog in catalogs:
        for spec in catalog.capabilities:
            registry.register(spec)
        for template in catalog.templates:
            router.add(template)
    registry.check()
    return registry, router
