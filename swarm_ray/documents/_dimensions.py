"""Field declarations: what to extract, by name and unit, as data.

A field is declared by a **name** and a **unit** (any unit pint parses, plus datasheet
spellings: `Gb/s`, `°C`, `KB`, `dBm`; `count` for a number of things; `currency` for a
price; no unit for text), optionally plain-language **labels** (other names documents
use for it; `re:` makes one a regex) and the **statistics** to take (`min`, `typ`,
`max`, or `min,max` for a range). Its kind comes from the unit: a field only takes
values whose unit converts to its own. That is all a datasheet user needs to know, and
all `--field "case temperature:°C:min,max"` says (`parse_field_arg`).

Richer declarations (dimension YAML files) may instead recognise a field by regexes,
which suit marketing prose better than tables:

- **synonyms**: a number with a unit of the field's kind, attributed to the field when one
  of its synonyms is near (`77 kWh battery`, `Range (WLTP) 520 km`); `weak_synonyms`
  count too, at a lower confidence;
- **patterns**: regular expressions with a `value` group (and an optional `unit` group);
- **vocabulary**: named terms with their spellings, for feature lists.

`qualifiers` name labels that split a field into values comparable only among themselves
(test cycles of a range). Fields are grouped in a `Dimension` (`battery`, `motor`);
fields declared on their own (`--field`) form the group `fields` and keep their plain
names. Declarations travel inline in a task request (`params["fields"]`), never as paths.
Every unit and regex is checked at load time, so a mistake fails naming the field.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from swarm_ray.core import Bounded, InvalidSpecError, Label, Pattern
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._units import COUNT, MONEY, TEXT, lookup_unit, parse_unit

__all__ = [
    "FIELDS_GROUP",
    "Dimension",
    "FieldSpec",
    "default_dimensions",
    "field_groups",
    "load_dimension",
    "load_dimensions",
    "parse_field_arg",
]

_DIMENSION_NAME = r"^[a-z][a-z0-9_]*$"
_FIELD_NAME = r"^[^\s.:|]([^.:|\n\r\t]{0,78}[^\s.:|])?$"
MAX_LABELS = 32
"""Labels of one field: each is matched against every page's text."""
MAX_LABEL_CHARS = 100
"""Characters of one label."""
FIELDS_GROUP = "fields"
"""The group of fields declared on their own (`--field`); their names stay unprefixed."""
_STATISTIC_WORDS = {
    "min": Statistic.MIN,
    "minimum": Statistic.MIN,
    "typ": Statistic.TYP,
    "typical": Statistic.TYP,
    "nom": Statistic.TYP,
    "nominal": Statistic.TYP,
    "max": Statistic.MAX,
    "maximum": Statistic.MAX,
}


def _check_unit(value: Any) -> None:
    """A declared unit read by the unit grammar (`parse_unit`), never evaluated."""
    if not isinstance(value, str):
        raise ValueError(f"a unit is a string, got {type(value).__name__}")
    if value.strip():
        parse_unit(value)  # raises ValueError naming the unit


def _check_regexes(patterns: Iterable[str]) -> None:
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"invalid regex {pattern!r}: {error}") from None


_NAMED_KINDS = {
    "temperature": "temperature",
    "time": "time",
    "delay": "time",
    "duration": "time",
    "period": "time",
}
"""A field name's word -> the kind it measures, for reading a declared unit that has two
readings (`case temperature:C` is in degrees Celsius, not coulombs; `rise time:nS` in
nanoseconds, not nanosiemens)."""
_SHOWN_UNITS = {"degC": "°C", "degF": "°F"}


def _unit_for_name(name: str, unit: str) -> str:
    """`unit` as the field `name` reads it.

    An ambiguous spelling takes the reading of the kind the name says it measures (see
    `_units._READINGS`), and is then written plainly.
    """
    kinds = {_NAMED_KINDS[w] for w in re.findall(r"[a-z]+", name.lower()) if w in _NAMED_KINDS}
    if len(kinds) != 1 or not unit.strip():
        return unit
    [kind] = kinds
    plain = lookup_unit(unit)
    if plain is not None and plain.kind == kind:
        return unit
    reading = lookup_unit(unit, kind)
    if reading is None or reading.kind != kind:
        return unit
    return _SHOWN_UNITS.get(reading.expr, reading.expr)


class FieldSpec(BaseModel):
    """One field to extract, and how documents name it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_FIELD_NAME)
    """What the field is called (`data rate`); reports and facts use it."""
    unit: Annotated[str, Bounded(_check_unit)] = ""
    """The unit values are reported in (`Gb/s`, `°C`); `count`, `currency`, or empty for
    text. Its dimensionality decides which values the field accepts."""
    labels: tuple[Label, ...] = Field(default=(), max_length=MAX_LABELS)
    """Other names documents use (`VCC`, `supply`); plain words matched as words, case
    and hyphens aside. A label starting with `re:` is a regular expression."""
    statistics: tuple[Statistic, ...] = ()
    """Which statistic(s) to report: `min`, `typ`, `max`, or several (`min`, `max` for
    a range). Empty: the value as stated (the typical one where a table gives several)."""
    description: str = ""
    """For people reading a comparison."""
    dimension: str = ""
    """The group the field belongs to (set by its `Dimension`); empty for `--field`."""
    synonyms: tuple[Pattern, ...] = ()
    """Case-insensitive regexes for labels in prose (the synonym rule, see module doc)."""
    weak_synonyms: tuple[Pattern, ...] = ()
    """Regexes for vaguer labels (`battery`); used only when no strong synonym is near."""
    patterns: tuple[Pattern, ...] = ()
    """Case-insensitive regexes with a `value` group and an optional `unit` group."""
    vocabulary: dict[str, tuple[Pattern, ...]] = {}
    """Term name -> case-insensitive regexes, for text fields that list features."""
    qualifiers: dict[str, tuple[Pattern, ...]] = {}
    """Qualifier label -> case-insensitive regexes found near a value (`WLTP`: [`WLTP`])."""
    exclusions: tuple[Pattern, ...] = ()
    """Regexes that, near a value, say it is not this field (`adds 200 km of range`)."""

    @model_validator(mode="before")
    @classmethod
    def _unit_read_by_name(cls, data: Any) -> Any:
        named = isinstance(data, dict) and isinstance(data.get("name"), str)
        if named and isinstance(unit := data.get("unit"), str):
            return {**data, "unit": _unit_for_name(data["name"], unit)}
        return data

    @field_validator("unit")
    @classmethod
    def _unit_parses(cls, value: str) -> str:
        _check_unit(value)
        return value.strip()

    @field_validator("labels")
    @classmethod
    def _labels_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(" ".join(label.split()) for label in value)
        if any(not label for label in cleaned):
            raise ValueError("a label is empty")
        for label in cleaned:
            if len(label) > MAX_LABEL_CHARS:
                raise ValueError(
                    f"label {label[:40]!r}... is {len(label)} characters; at most {MAX_LABEL_CHARS}"
                )
        _check_regexes(label[3:] for label in cleaned if label.startswith("re:"))
        return cleaned

    @field_validator("statistics")
    @classmethod
    def _unique_statistics(cls, value: tuple[Statistic, ...]) -> tuple[Statistic, ...]:
        if len(set(value)) != len(value):
            raise ValueError(f"a statistic is repeated in {[s.value for s in value]!r}")
        order = list(Statistic)
        return tuple(sorted(value, key=order.index))

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
    def _consistent(self) -> FieldSpec:
        modes = [m for m in ("synonyms", "patterns", "vocabulary") if getattr(self, m)]
        if len(modes) > 1:
            raise ValueError(f"give at most one of `synonyms`, `patterns`, `vocabulary`: {modes}")
        if (self.weak_synonyms or self.exclusions) and not self.synonyms:
            raise ValueError("`weak_synonyms` and `exclusions` need `synonyms`")
        kind = self.kind
        if self.vocabulary and kind != TEXT:
            raise ValueError("`vocabulary` is for text fields: leave `unit` empty")
        if self.synonyms and kind in (TEXT, COUNT, MONEY):
            raise ValueError(f"a {kind} field cannot use `synonyms`: use `patterns` or `labels`")
        if self.statistics and kind in (TEXT, MONEY):
            raise ValueError(f"a {kind} field has no statistics")
        return self

    @property
    def kind(self) -> str:
        """What the field measures, from its unit (`text` without one)."""
        return parse_unit(self.unit).kind if self.unit else TEXT

    @property
    def key(self) -> str:
        """The field's id in facts: `dimension.name`, or the bare name for `--field`."""
        return f"{self.dimension}.{self.name}" if self.dimension else self.name

    @property
    def group(self) -> str:
        """The dimension an extraction sub-task handles this field in."""
        return self.dimension or FIELDS_GROUP

    @property
    def all_labels(self) -> tuple[str, ...]:
        """The name and the labels: everything that names the field in a document."""
        return (self.name, *(label for label in self.labels if label != self.name))


class Dimension(BaseModel):
    """A named group of fields compared together (`battery`, `motor`, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_DIMENSION_NAME)
    """Identifier; the prefix of every field name (except the `fields` group's)."""
    description: str = ""
    """For people reading a comparison."""
    fields: tuple[FieldSpec, ...] = Field(min_length=1)
    """The fields, each with its recognition rules."""

    @field_validator("fields")
    @classmethod
    def _unique_fields(cls, value: tuple[FieldSpec, ...]) -> tuple[FieldSpec, ...]:
        names = [f.name.casefold() for f in value]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate field names {duplicates!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _fields_know_their_group(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("fields"), list | tuple):
            return data
        dimension = "" if data.get("name") == FIELDS_GROUP else data.get("name", "")
        fields = [
            {**f, "dimension": dimension}
            if isinstance(f, dict)
            else f.model_copy(update={"dimension": dimension})
            if isinstance(f, FieldSpec)
            else f
            for f in data["fields"]
        ]
        return {**data, "fields": fields}


def parse_field_arg(text: str) -> FieldSpec:
    """Read one `--field` declaration: `NAME[|LABEL...][:UNIT[:STATISTICS]]`.

    Examples: `data rate:Gb/s`, `case temperature:°C:min,max`, `form factor` (text),
    `supply voltage|VCC|VDD:V:min,max` (two more labels), `GPIO:count`.

    Raises:
        InvalidSpecError: Naming the declaration and what is wrong with it.
    """
    parts = [p.strip() for p in text.split(":")]
    if len(parts) > 3:
        raise InvalidSpecError(
            f"`--field` {text!r}: expected NAME[:UNIT[:STATISTICS]], got {len(parts)} parts"
        )
    names = [n.strip() for n in parts[0].split("|")]
    if not names[0]:
        raise InvalidSpecError(f"`--field` {text!r}: the field has no name")
    unit = parts[1] if len(parts) > 1 else ""
    statistics: list[Statistic] = []
    for word in (parts[2] if len(parts) > 2 else "").replace("/", ",").split(","):
        word = word.strip().lower()
        if not word:
            continue
        if word not in _STATISTIC_WORDS:
            raise InvalidSpecError(
                f"`--field` {text!r}: unknown statistic {word!r} (use min, typ, max or "
                "a list such as min,max)"
            )
        statistics.append(_STATISTIC_WORDS[word])
    try:
        return FieldSpec(
            name=names[0], unit=unit, labels=tuple(n for n in names[1:] if n),
            statistics=tuple(statistics),
        )  # fmt: skip
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in e['loc']) or 'field'}: {e['msg']}" for e in error.errors()
        )
        raise InvalidSpecError(f"`--field` {text!r}: {problems}", field=text) from None


def field_groups(fields: Sequence[FieldSpec]) -> dict[str, Dimension]:
    """Inline field declarations grouped into dimensions by their `group`."""
    grouped: dict[str, list[FieldSpec]] = {}
    for spec in fields:
        grouped.setdefault(spec.group, []).append(spec)
    return {name: Dimension(name=name, fields=tuple(specs)) for name, specs in grouped.items()}


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
        if not data.get("fields"):
            problems = [f"`fields`: the dimension declares no fields (got {data.get('fields')!r})"]
        raise InvalidSpecError(
            f"`{source}`: invalid dimension: " + "; ".join(problems),
            file=source,
            errors=problems,
        ) from None


def load_dimension(path: str | Path) -> Dimension:
    """Load and validate one dimension from a YAML file (read where the caller runs).

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
    should parse and validate the YAML once. Requests name them; they never send paths.
    """
    folder = resources.files("swarm_ray.documents") / "dimensions"
    dimensions: list[Dimension] = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            source = f"swarm_ray/documents/dimensions/{entry.name}"
            dimensions.append(_parse_dimension(yaml.safe_load(entry.read_text("utf-8")), source))
    return tuple(dimensions)


def find_dimensions(fields: Sequence[FieldSpec] = ()) -> dict[str, Dimension]:
    """Built-in dimensions plus the groups of inline `fields`, by name.

    Not cached: declarations hold dicts (vocabularies), and grouping a few fields costs
    microseconds next to reading a document.
    """
    found = {d.name: d for d in default_dimensions()}
    found.update(field_groups(fields))
    return found


def declared_dimensions(names: Sequence[str], fields: Sequence[FieldSpec]) -> list[Dimension]:
    """The dimensions a request names, built-in or declared inline, in its order."""
    known = find_dimensions(fields)
    return [known[name] for name in names if name in known]
