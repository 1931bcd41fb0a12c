"""JSON Schemas a tenant sends, checked against bounds before anything reads them.

A tenant's schema reaches two evaluators that are not built for hostile input: the
engine's grammar builder (llama.cpp, vLLM), which allocates as much as `minLength` or
`maxItems` says and expands every counted repetition of a `pattern`; and the validator
of the answer, whose `pattern` keywords run on Python's backtracking `re` (a `pattern`
under `if` held a shared LLM replica for 28 s). So one checker, `check_schema`, runs
wherever a tenant's schema enters (the tool agent's `output_schema`, wide research's
`row_schema`, `llm.extraction.json`, and any plan a planner drafts with them, since
drafts pass the same input models), and one validator, `schema_validator`, matches
patterns with RE2, in time linear in the text, and never with a backtracking engine.

The bounds (each refusal is a `SchemaBoundsError` naming the keyword and its path):

- size: at most `MAX_NODES` objects, arrays and values, nested at most `MAX_DEPTH` deep;
- `pattern` and `patternProperties` keys: at most `MAX_PATTERN` characters, compiled by
  RE2 (no backreferences or lookaround: a pattern RE2 cannot compile is refused, never
  handed to another engine), counted repetitions at most `MAX_REPEAT`, and a compiled
  program of at most `MAX_PROGRAM` instructions;
- `format`: one of the formats JSON Schema names (`FORMATS`); none is checked by a regex;
- `minLength`, `maxLength`: at most `MAX_LENGTH`; `minItems`, `maxItems`, `minContains`,
  `maxContains`, `minProperties`, `maxProperties`: at most `MAX_COUNT`;
- `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`: finite, within
  ±`MAX_NUMBER`; `multipleOf` positive and at least `MIN_MULTIPLE`;
- `$ref`: inside the schema (`#...`), at most `MAX_REFS` targets, never in a cycle;
- `unevaluatedProperties` beside `patternProperties` is refused (jsonschema evaluates
  that pair with `re`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import jsonschema
import re2
from pydantic import AfterValidator

from swarm_ray.core.guards._access import Bounded

__all__: list[str] = []

MAX_NODES = 2_000
"""Objects, arrays and values in one schema (a 16,000-character schema has fewer)."""
MAX_DEPTH = 24
"""JSON nesting of a schema."""
MAX_PATTERN = 256
"""Characters of one `pattern` or `patternProperties` key."""
MAX_REPEAT = 100
"""Largest count of a counted repetition (`{n}`, `{n,m}`) in a pattern."""
MAX_PROGRAM = 5_000
"""Instructions of a pattern compiled by RE2 (`\\p{L}` alone is about 1,200)."""
MAX_LENGTH = 10_000
"""`minLength` and `maxLength`: characters of one string."""
MAX_COUNT = 1_000
"""`minItems`, `maxItems`, `minContains`, `maxContains`, `minProperties`, `maxProperties`."""
MAX_NUMBER = 1e15
"""`minimum`, `maximum` and their exclusive forms: grammars spell a range digit by digit."""
MIN_MULTIPLE = 1e-9
"""Smallest `multipleOf`."""
MAX_REFS = 100
"""Distinct `$ref`s of one schema (grammar builders resolve each chain recursively)."""
FORMATS = frozenset(
    [
        "date-time", "date", "time", "duration", "email", "idn-email", "hostname",
        "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri", "iri-reference",
        "uuid", "uri-template", "json-pointer", "relative-json-pointer", "regex",
    ]
)  # fmt: skip
"""Formats JSON Schema 2020-12 names. The answer's validator asserts none of them."""

_LENGTHS = ("minLength", "maxLength")
_COUNTS = ("minItems", "maxItems", "minContains", "maxContains", "minProperties", "maxProperties")
_NUMBERS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_REPEAT = re.compile(r"(?<!\\)\{(\d{1,12})(?:,(\d{0,12}))?\}")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
"""Keywords whose value maps names to schemas: their keys are names, not keywords."""


class SchemaBoundsError(ValueError):
    """A schema over a bound (see the module docstring); the message names keyword and path."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = 8 << 20
    return options


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2 (cached); `re2.error` when RE2 cannot compile it."""
    return re2.compile(pattern, _options())


def _pointer(path: tuple[str, ...]) -> str:
    return "/" + "/".join(p.replace("~", "~0").replace("/", "~1") for p in path)


def _refuse(where: str, keyword: str, path: tuple[str, ...], why: str) -> SchemaBoundsError:
    prefix = f"`{where}`: " if where else ""
    return SchemaBoundsError(f"{prefix}`{keyword}` at `{_pointer(path)}` {why}")


def _named(where: str) -> str:
    return f"`{where}`" if where else "the schema"


def _check_pattern(pattern: Any, where: str, keyword: str, path: tuple[str, ...]) -> None:
    if not isinstance(pattern, str):
        raise _refuse(where, keyword, path, f"must be a string, got {type(pattern).__name__}")
    if len(pattern) > MAX_PATTERN:
        raise _refuse(
            where, keyword, path, f"is {len(pattern)} characters long; at most {MAX_PATTERN}"
        )
    for match in _REPEAT.finditer(pattern):
        count = max(int(match[1]), int(match[2] or 0))
        if count > MAX_REPEAT:
            raise _refuse(
                where,
                keyword,
                path,
                f"repeats {count} times ({pattern!r:.80}); at most {MAX_REPEAT}",
            )
    try:
        compiled = _compiled(pattern)
    except re2.error as error:
        said = error.args[0] if error.args else ""
        said = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
        raise _refuse(
            where,
            keyword,
            path,
            f"{pattern!r:.80} is not a pattern the linear-time engine (RE2) reads "
            f"({said}); backreferences and lookaround are not allowed",
        ) from None
    if compiled.programsize > MAX_PROGRAM:
        raise _refuse(
            where, keyword, path, f"{pattern!r:.80} compiles to {compiled.programsize} "
            f"instructions; at most {MAX_PROGRAM}"
        )  # fmt: skip


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _check_keyword(key: str, value: Any, where: str, path: tuple[str, ...]) -> None:
    """Bounds of one keyword of a schema object at `path`."""
    if key == "pattern":
        _check_pattern(value, where, key, path)
    elif key == "patternProperties" and isinstance(value, Mapping):
        for pattern in value:
            _check_pattern(pattern, where, key, (*path, str(pattern)))
    elif key == "format":
        if value not in FORMATS:
            raise _refuse(where, key, path, f"is {value!r:.40}; use one of {sorted(FORMATS)}")
    elif key in _LENGTHS or key in _COUNTS:
        limit = MAX_LENGTH if key in _LENGTHS else MAX_COUNT
        number = _number(value)
        if number is None or not 0 <= number <= limit:
            raise _refuse(where, key, path, f"is {value!r:.40}; at most {limit}")
    elif key in _NUMBERS:
        number = _number(value)
        if number is None or not math.isfinite(number) or abs(number) > MAX_NUMBER:
            raise _refuse(where, key, path, f"is {value!r:.40}; within ±{MAX_NUMBER:g}")
    elif key == "multipleOf":
        number = _number(value)
        if number is None or not MIN_MULTIPLE <= number <= MAX_NUMBER:
            raise _refuse(
                where, key, path, f"is {value!r:.40}; from {MIN_MULTIPLE:g} to {MAX_NUMBER:g}"
            )
    elif key == "$ref" and not (isinstance(value, str) and value.startswith("#")):
        raise _refuse(where, key, path, f"is {value!r:.80}; only `#...` inside the schema")


def _walk(
    node: Any, path: tuple[str, ...], depth: int, keywords: bool
) -> Iterator[tuple[Any, tuple[str, ...], int, bool]]:
    """Every node with its path and depth; `keywords`: a schema object's keys are keywords."""
    yield node, path, depth, keywords
    if isinstance(node, Mapping):
        for key, value in node.items():
            # `properties` and its kin map names to schemas; `enum`, `const`, `default`
            # and `examples` hold data, whose keys are never keywords.
            names = keywords and key in _SCHEMA_MAPS
            data = keywords and key in ("enum", "const", "default", "examples")
            if names and isinstance(value, Mapping):
                yield value, (*path, str(key)), depth + 1, False
                for name, sub in value.items():
                    yield from _walk(sub, (*path, str(key), str(name)), depth + 2, True)
            else:
                yield from _walk(value, (*path, str(key)), depth + 1, keywords and not data)
    elif isinstance(node, list | tuple):
        for index, value in enumerate(node):
            yield from _walk(value, (*path, str(index)), depth + 1, keywords)


def _ref_target(schema: Mapping[str, Any], ref: str) -> Any:
    node: Any = schema
    for part in (p for p in ref[1:].split("/") if p):
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _refs_of(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs_of(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs_of(value)


def _check_refs(schema: Mapping[str, Any], where: str) -> None:
    """Every `$ref` names a place in the schema, and no chain of them comes back."""
    refs = sorted(set(_refs_of(schema)))
    if len(refs) > MAX_REFS:
        raise _refuse(where, "$ref", (), f"appears with {len(refs)} targets; at most {MAX_REFS}")
    edges: dict[str, set[str]] = {}
    for ref in refs:
        target = _ref_target(schema, ref)
        if target is None:
            raise _refuse(where, "$ref", (), f"{ref!r:.80} names nothing in the schema")
        edges[ref] = set(_refs_of(target))
    # Kahn's order: what is left once every ref no other ref reaches is taken away is a cycle.
    pointed = dict.fromkeys(refs, 0)
    for targets in edges.values():
        for target in targets:
            pointed[target] += 1
    free = [ref for ref, count in pointed.items() if count == 0]
    while free:
        for nxt in edges[free.pop()]:
            pointed[nxt] -= 1
            if pointed[nxt] == 0:
                free.append(nxt)
    cycle = sorted(ref for ref, count in pointed.items() if count > 0)
    if cycle:
        raise _refuse(where, "$ref", (), f"{cycle[0]!r:.80} refers back to itself")


def check_schema(schema: Any, *, where: str = "schema") -> dict[str, Any]:
    """`schema` when it is a JSON Schema within every bound; else `SchemaBoundsError`.

    `where` names the schema in the error (`output_schema`; empty: the error names only
    the keyword and its path). The check itself is
    bounded: it reads at most `MAX_NODES` nodes before it refuses.
    """
    if not isinstance(schema, Mapping):
        raise SchemaBoundsError(
            f"{_named(where)} must be a JSON Schema object, got {type(schema).__name__}"
        )
    has_patterns = unevaluated = False
    for nodes, (node, path, depth, keywords) in enumerate(_walk(schema, (), 0, True), 1):
        if nodes > MAX_NODES:
            raise SchemaBoundsError(
                f"{_named(where)} has more than {MAX_NODES} nodes; make it smaller"
            )
        if depth > MAX_DEPTH:
            raise _refuse(where, path[-1], path, f"is nested {depth} deep; at most {MAX_DEPTH}")
        if isinstance(node, str) and len(node) > MAX_LENGTH:
            raise _refuse(
                where, path[-1], path, f"holds {len(node)} characters; at most {MAX_LENGTH}"
            )
        if keywords and isinstance(node, Mapping):
            for key, value in node.items():
                _check_keyword(str(key), value, where, path)
            has_patterns = has_patterns or "patternProperties" in node
            unevaluated = unevaluated or "unevaluatedProperties" in node
    if has_patterns and unevaluated:
        raise SchemaBoundsError(
            f"{_named(where)}: `unevaluatedProperties` beside `patternProperties` is not allowed"
        )
    _check_refs(schema, where)
    try:
        # No format checker: the meta-schema's `format: regex` would compile with `re`.
        jsonschema.Draft202012Validator.check_schema(dict(schema), format_checker=None)
    except jsonschema.SchemaError as error:
        raise SchemaBoundsError(
            f"{_named(where)} is not a JSON Schema: {error.message:.300}"
        ) from None
    return dict(schema)


def _search(pattern: str, text: str) -> bool:
    try:
        return _compiled(pattern).search(text) is not None
    except re2.error:
        return False  # never handed to a backtracking engine: a pattern RE2 cannot read fails


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield jsonschema.ValidationError(f"{instance!r:.200} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in properties and not any(_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(e) for e in sorted(extras, key=str)[:10])
        yield jsonschema.ValidationError(f"Additional properties are not allowed ({listed})")


_Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
    },
)


def schema_validator(schema: Mapping[str, Any]) -> Any:
    """A draft 2020-12 validator of `schema` whose patterns run on RE2, never on `re`."""
    return _Validator(dict(schema))


def bounded_schema(value: Any) -> None:
    """`check_schema` for `Bounded`: an input field's JSON Schema (None: no schema)."""
    if value is not None:
        check_schema(value, where="")


def _validated(value: dict[str, Any]) -> dict[str, Any]:
    return check_schema(value, where="")


TenantSchema = Annotated[dict[str, Any], Bounded(bounded_schema), AfterValidator(_validated)]
"""A JSON Schema a tenant sends in an input: checked with an untrusted caller's plan
(422, `Bounded`) and by the input model wherever it is validated."""
