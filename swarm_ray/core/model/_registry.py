"""The capability registry: one catalogue, one JSON Schema, one place that validates.

The gateway, the planner and the orchestrator all validate against the models held
here, so an input refused at the HTTP edge is refused for the same reason everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from swarm_ray.core.model._capability import CapabilitySpec
from swarm_ray.core.model._errors import (
    DuplicateCapabilityError,
    InvalidInputError,
    InvalidOutputError,
    InvalidSpecError,
    UnknownCapabilityError,
)

__all__: list[str] = []


def field_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors as `{"field", "problem", "value"}` dicts (dotted field paths)."""
    return [
        {
            "field": ".".join(str(part) for part in err["loc"]) or "(root)",
            "problem": err["msg"],
            "value": repr(err.get("input"))[:200],
        }
        for err in exc.errors()
    ]


def _describe(errors: list[dict[str, Any]]) -> str:
    return "; ".join(f"field `{e['field']}`: {e['problem']} (got {e['value']})" for e in errors)


class Registry:
    """Capabilities by id. Duplicate ids are refused; fallbacks must resolve."""

    def __init__(self, specs: Iterable[CapabilitySpec] = ()) -> None:
        self._specs: dict[str, CapabilitySpec] = {}
        for spec in specs:
            self.register(spec)

    def register(self, spec: CapabilitySpec) -> CapabilitySpec:
        """Add `spec`; raise `DuplicateCapabilityError` if its id is taken."""
        if spec.id in self._specs:
            raise DuplicateCapabilityError(
                f"capability `{spec.id}` is already registered "
                f"(version {self._specs[spec.id].version!r})",
                capability_id=spec.id,
            )
        self._specs[spec.id] = spec
        return spec

    def get(self, capability_id: str) -> CapabilitySpec:
        """Return the spec, or raise `UnknownCapabilityError` listing close ids."""
        try:
            return self._specs[capability_id]
        except KeyError:
            domain = capability_id.split(".", 1)[0]
            near = sorted(i for i in self._specs if i.startswith(domain + "."))
            hint = f"; known in `{domain}`: {', '.join(near)}" if near else ""
            raise UnknownCapabilityError(
                f"capability `{capability_id}` is not registered{hint}",
                capability_id=capability_id,
            ) from None

    def __contains__(self, capability_id: object) -> bool:
        return capability_id in self._specs

    def __iter__(self) -> Iterator[CapabilitySpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.id))

    def __len__(self) -> int:
        return len(self._specs)

    def ids(self) -> list[str]:
        """Registered ids, sorted."""
        return sorted(self._specs)

    def check(self) -> None:
        """Raise `InvalidSpecError` if a fallback names an unknown capability or loops."""
        for spec in self._specs.values():
            seen = [spec.id]
            current = spec
            while current.fallback is not None:
                if current.fallback not in self._specs:
                    raise InvalidSpecError(
                        f"capability `{current.id}` falls back to `{current.fallback}`, "
                        "which is not registered",
                        capability_id=current.id,
                    )
                if current.fallback in seen:
                    raise InvalidSpecError(
                        f"fallbacks loop: {' -> '.join([*seen, current.fallback])}",
                        capability_id=spec.id,
                    )
                seen.append(current.fallback)
                current = self._specs[current.fallback]

    def validate_input(self, capability_id: str, data: Mapping[str, Any]) -> BaseModel:
        """Validate `data` against the capability's input model.

        Raises:
            UnknownCapabilityError: no such capability.
            InvalidInputError: naming the capability, each field and its problem.
        """
        spec = self.get(capability_id)
        try:
            return spec.input_model.model_validate(dict(data))
        except ValidationError as exc:
            errors = field_errors(exc)
            raise InvalidInputError(
                f"input for capability `{capability_id}` is invalid: {_describe(errors)}",
                capability_id=capability_id,
                errors=errors,
            ) from None

    def validate_output(self, capability_id: str, data: Any) -> BaseModel:
        """Validate an agent's output; raise `InvalidOutputError` naming fields."""
        spec = self.get(capability_id)
        try:
            if isinstance(data, spec.output_model):
                return data
            if isinstance(data, BaseModel):
                data = data.model_dump()
            return spec.output_model.model_validate(data)
        except ValidationError as exc:
            errors = field_errors(exc)
            raise InvalidOutputError(
                f"output of capability `{capability_id}` is invalid: {_describe(errors)}",
                capability_id=capability_id,
                errors=errors,
            ) from None

    def catalogue(self, *, schemas: bool = False) -> list[dict[str, Any]]:
        """One JSON-ready line per capability (for the planner and `GET /v1/capabilities`).

        With `schemas`, each line also holds its input and output JSON Schemas.
        """
        return [self.describe(spec.id) if schemas else spec.summary() for spec in self]

    def describe(self, capability_id: str) -> dict[str, Any]:
        """A capability's summary with its input and output JSON Schemas."""
        spec = self.get(capability_id)
        return {
            **spec.summary(),
            "input_schema": spec.input_model.model_json_schema(),
            "output_schema": spec.output_model.model_json_schema(mode="serialization"),
        }

    def json_schema(self) -> dict[str, Any]:
        """One JSON Schema covering every capability's input and output.

        A document `{"capability": id, "input": {...}}` validates against it exactly when
        the input is valid for that capability; `x-capabilities` maps each id to its
        metadata and the `$ref`s of its input and output models.
        """
        specs = list(self)
        models: list[tuple[type[BaseModel], Any]] = []
        for spec in specs:
            models.append((spec.input_model, "validation"))
            models.append((spec.output_model, "serialization"))
        refs, defs = models_json_schema(models, ref_template="#/$defs/{model}")
        one_of: list[dict[str, Any]] = []
        meta: dict[str, Any] = {}
        for spec in specs:
            in_ref = refs[(spec.input_model, "validation")]
            out_ref = refs[(spec.output_model, "serialization")]
            one_of.append(
                {
                    "type": "object",
                    "properties": {"capability": {"const": spec.id}, "input": in_ref},
                    "required": ["capability", "input"],
                }
            )
            meta[spec.id] = {**spec.summary(), "input": in_ref, "output": out_ref}
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "swarm-ray capabilities",
            "oneOf": one_of,
            "$defs": defs.get("$defs", {}),
            "x-capabilities": meta,
        }
