"""Structured output: constrained decoding first, then validation, then a structured error.

The caller names what it wants as a Pydantic model or a JSON Schema. The engine decodes
under that schema (llama.cpp grammars, vLLM structured outputs), which makes the answer
parse, but not always validate: a length cut leaves JSON unfinished, and grammars do not
enforce every keyword (`minimum`, `pattern`, ...). So every answer is validated again
here, and one that fails comes back as an `InvalidOutputError` naming each field, with
the raw text and the tokens it cost kept in the error's details.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from swarm_ray.core import (
    InvalidOutputError,
    InvalidSpecError,
    SchemaBoundsError,
    SubTaskError,
    check_schema,
    field_errors,
    schema_validator,
)
from swarm_ray.llm._engine import Completion, Engine, GenerationParams, Message

__all__ = ["StructuredReply", "generate_structured", "json_schema_of"]

Target = type[BaseModel] | Mapping[str, Any]
"""A Pydantic model class or a JSON Schema."""


def json_schema_of(target: Target) -> dict[str, Any]:
    """The JSON Schema to constrain decoding with.

    A schema given as data is held to the bounds of `_schema_bounds` (patterns RE2
    reads, capped lengths and counts): the engine's grammar builder and the validator
    below read it.

    Raises:
        InvalidSpecError: `target` is neither a model class nor a JSON Schema within bounds.
    """
    if isinstance(target, type) and issubclass(target, BaseModel):
        return target.model_json_schema()
    if not isinstance(target, Mapping):
        raise InvalidSpecError(
            f"structured output needs a Pydantic model or a JSON Schema, got {target!r:.80}"
        )
    try:
        return check_schema(target)
    except SchemaBoundsError as exc:
        raise InvalidSpecError(f"JSON Schema is invalid: {exc}") from None


class StructuredReply(BaseModel):
    """A structured answer: a validated value, or the error explaining why there is none."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: dict[str, Any] | None
    """The validated JSON object (None when validation failed)."""
    error: SubTaskError | None = None
    """`invalid_output` with the field errors when the answer failed validation."""
    completion: Completion
    """The raw completion: text, model, tokens and seconds."""

    @property
    def ok(self) -> bool:
        """True when `value` holds a validated answer."""
        return self.error is None


def _problems(text: str, target: Target) -> list[dict[str, Any]]:
    """Field errors of `text` against `target` (empty when it validates)."""
    if isinstance(target, type):
        try:
            target.model_validate_json(text)
        except ValidationError as exc:
            return field_errors(exc)
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [{"field": "(root)", "problem": f"not JSON: {exc.msg}", "value": text[:200]}]
    validator = schema_validator(target)  # patterns on RE2: linear in the answer's length
    return [
        {
            "field": ".".join(str(p) for p in err.absolute_path) or "(root)",
            "problem": err.message,
            "value": repr(err.instance)[:200],
        }
        for err in validator.iter_errors(data)
    ]


def generate_structured(
    engine: Engine,
    messages: Sequence[Message],
    target: Target,
    params: GenerationParams,
) -> StructuredReply:
    """Ask `engine` for JSON matching `target`, then validate what it wrote.

    Returns:
        A reply whose `value` is the parsed object, or whose `error` is an
        `invalid_output` error listing every field at fault. A model class
        `target` is also validated (its defaults filled in) when it passes.
    """
    schema = json_schema_of(target)
    completion = engine.complete(messages, params, json_schema=schema)
    problems = _problems(completion.text, target)
    if not problems:
        data = json.loads(completion.text)
        if isinstance(target, type):
            data = target.model_validate(data).model_dump(mode="json")
        return StructuredReply(value=data, completion=completion)
    summary = "; ".join(f"`{p['field']}`: {p['problem']}" for p in problems[:5])
    cut = " (cut at `max_tokens`)" if completion.finish_reason == "length" else ""
    error = InvalidOutputError(
        f"model `{completion.model}` answered JSON failing its schema{cut}: {summary}",
        errors=problems,
        raw=completion.text[:2000],
        finish_reason=completion.finish_reason,
        usage=completion.usage.model_dump(),
    )
    return StructuredReply(
        value=None, error=SubTaskError.from_exception(error), completion=completion
    )
