"""Dimensions: declarative descriptions of what to extract, loaded from YAML.

A dimension (`battery`, `motor`, ...) names fields, and each field says how the extractor
recognises it. Keeping this as data lets a user compare other products by writing YAML,
without touching the extraction rules. A field uses exactly one of three modes:

- **synonyms**: a number followed by a unit of the field's kind, attributed to the field
  when one of its synonyms is near (`77 kWh battery`, `Range (WLTP) 520 km`);
  `weak_synonyms` count too, at a lower confidence;
- **patterns**: regular expressions with a `value` group (and an optional `unit` group),
  for values without a unit (`5 seats`, `SAE Level 2`) or with a prefixed one (`€49,990`);
- **vocabulary**: named terms with their spellings, for feature lists.

`qualifiers` name labels that split a field into values comparable only among themselves
(test cycles of a range). Every regex is compiled at load time, so a typo fails with the
file and field named instead of at extraction time.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from swarm_ray._errors import InvalidSpecError
from swarm_ray.documents._facts import QuantityKind

__all__ = ["Dimension", "DimensionField", "default_dimensions", "load_dimension", "load_dimensions"]

_NAME = r"^[a-z][a-z0-9_]*$"


def _check_regexes(patterns: Iterable[str]) -> None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"invalid regex {pattern!r}: {error}") from None


class DimensionField(BaseModel):
    """One field of a dimension and the rules that recognise it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_NAME)
    """Identifier; facts name the field `dimension.name`."""
    kind: QuantityKind
    """What the field measures; only units of this kind can fill it."""
    description: str = ""
    """For people reading a comparison."""
    synonyms: tuple[str, ...] = ()
    """Case-insensitive regexes for labels that name the field specifically."""
    weak_synonyms: tuple[str, ...] = ()
    """Regexes for vaguer labels (`battery`); used only when no strong synonym is near."""
    patterns: tuple[str, ...] = ()
    """Case-insensitive regexes with a `value` group and an optional `unit` group."""
    vocabulary: dict[str, tuple[str, ...]] = {}
    """Term name -> case-insensitive regexes, for `category` fields (feature lists)."""
    qualifiers: dict[str, tuple[str, ...]] = {}
    """Qualifier label -> case-insensitive regexes found near a value (`WLTP`: [`WLTP`])."""
    exclusions: tuple[str, ...] = ()
    """Regexes that, near a value, say it is not this field (`adds 200 km of range`)."""

    @field_validator("synonyms", "weak_synonyms", "patterns", "exclusions")
    @classmethod
    def _regexes_compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        _check_regexes(value)
        return value

    @field_validator("vocabulary", "qualifiers")
    @classmethod
    def _mapping_regexes_compile(
        cls, value: dict[str, tuple[str, ...]]
    ) -> dict[str, tuple[str, ...]]:
        for label, patterns in value.items():
            if not patterns:
                raise ValueError(f"label {label!r} has no patterns")
            _check_regexes(patterns)
        return value

    @field_validator("patterns")
    @classmethod
    def _patterns_capture_value(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            if "value" not in re.compile(pattern).groupindex:
                raise ValueError(f"pattern {pattern!r} has no `(?P<value>...)` group")
        return value

    @model_validator(mode="after")
    def _one_mode(self) -> DimensionField:
        modes = [m for m in ("synonyms", "patterns", "vocabulary") if getattr(self, m)]
        if len(modes) != 1:
            raise ValueError(
                f"needs exactly one of `synonyms`, `patterns`, `vocabulary`; got {modes!r}"
            )
        if (self.weak_synonyms or self.exclusions) and not self.synonyms:
            raise ValueError("`weak_synonyms` and `exclusions` need `synonyms`")
        is_category = self.kind is QuantityKind.CATEGORY
        if is_category != bool(self.vocabulary):
            raise ValueError("`vocabulary` goes with, and only with, `kind: category`")
        if self.synonyms and self.kind in (QuantityKind.NUMBER, QuantityKind.MONEY):
            raise ValueError(f"kind {self.kind.value!r} has no units: use `patterns`")
        return self


class Dimension(BaseModel):
    """A named group of fields compared together (`battery`, `motor`, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_NAME)
    """Identifier; the prefix of every field name."""
    description: str = ""
    """For people reading a comparison."""
    fields: tuple[DimensionField, ...] = Field(min_length=1)
    """The fields, each with its recognition rules."""

    @field_validator("fields")
    @classmethod
    def _unique_fields(cls, value: tuple[DimensionField, ...]) -> tuple[DimensionField, ...]:
        names = [f.name for f in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate field names {duplicates!r}")
        return value


def _format_location(loc: tuple[int | str, ...], data: Any) -> str:
    """Render a pydantic error location as `fields[2].synonyms[0]`, naming the field."""
    parts: list[str] = []
    node = data
    for item in loc:
        if isinstance(item, int):
            label = ""
            if isinstance(node, list) and 0 <= item < len(node):
                node = node[item]
                name = node.get("name") if isinstance(node, dict) else None
                label = f"={name!r}" if isinstance(name, str) else ""
            parts.append(f"[{item}{label}]")
        else:
            node = node.get(item) if isinstance(node, dict) else None
            parts.append(f".{item}" if parts else item)
    return "".join(parts) or "<root>"


def _parse_dimension(data: Any, source: str) -> Dimension:
    if not isinstance(data, dict):
        raise InvalidSpecError(
            f"`{source}`: a dimension file must hold a mapping, got {type(data).__name__!r}",
            file=source,
        )
    try:
        return Dimension.model_validate(data)
    except ValidationError as error:
        errors = error.errors()
        # A list whose items failed also reports itself as too short: noise, not news.
        deeper = {tuple(e["loc"][:k]) for e in errors for k in range(1, len(e["loc"]))}
        problems = [
            f"`{_format_location(tuple(e['loc']), data)}`: {e['msg']}"
            for e in errors
            if not (e["type"] == "too_short" and tuple(e["loc"]) in deeper)
        ]
        raise InvalidSpecError(
            f"`{source}`: invalid dimension: " + "; ".join(problems),
            file=source,
            errors=problems,
        ) from None


def load_dimension(path: str | Path) -> Dimension:
    """Load and validate one dimension from a YAML file.

    Raises:
        InvalidSpecError: Naming the file and, for a validation problem, the field path
            (`fields[1='range'].qualifiers`), when the file is unreadable, is not YAML or
            does not describe a valid dimension.
    """
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidSpecError(f"`{source}`: cannot read: {error}", file=source) from None
    except yaml.YAMLError as error:
        raise InvalidSpecError(f"`{source}`: not valid YAML: {error}", file=source) from None
    return _parse_dimension(data, source)


def load_dimensions(paths: Iterable[str | Path]) -> tuple[Dimension, ...]:
    """Load several dimension files (a directory means its `*.yaml` files, sorted).

    Raises:
        InvalidSpecError: For any invalid file, or when two files define the same
            dimension name (field names would collide).
    """
    files: list[Path] = []
    for path in paths:
        path = Path(path)
        files.extend(sorted(path.glob("*.yaml")) if path.is_dir() else [path])
    dimensions: list[Dimension] = []
    seen: dict[str, str] = {}
    for file in files:
        dimension = load_dimension(file)
        if dimension.name in seen:
            raise InvalidSpecError(
                f"`{file}`: dimension `name`={dimension.name!r} is already defined in "
                f"`{seen[dimension.name]}`",
                file=str(file),
            )
        seen[dimension.name] = str(file)
        dimensions.append(dimension)
    return tuple(dimensions)


@functools.cache
def default_dimensions() -> tuple[Dimension, ...]:
    """Return the dimensions shipped with the package (EV brochures and a generic one).

    Cached: the models are frozen, and a worker extracting from thousands of documents
    should parse and validate the YAML once.
    """
    folder = resources.files("swarm_ray.documents") / "dimensions"
    dimensions: list[Dimension] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            source = f"swarm_ray/documents/dimensions/{entry.name}"
            dimensions.append(_parse_dimension(yaml.safe_load(entry.read_text("utf-8")), source))
    return tuple(dimensions)
