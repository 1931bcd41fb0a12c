"""Facts from an LLM, grounded in the document: what the LLM fallback and cross-check share.

A small model (SmolLM2-135M on CPU) reads badly and invents numbers, so the LLM is only
asked what rules find hard, *which* number belongs to *which* field, and everything else
comes from the text:

1. **A keyword window, not the whole document.** The lines naming a field (its synonyms,
   strong or weak, from the dimension YAML) with one line either side, in page order, up
   to `WINDOW_CHARS` (about 700 tokens: with the schema in the prompt and room to answer
   it fits a 2,048-token context). The Chroma index is not queried: extraction starts as
   soon as a document is parsed, before its chunks are embedded and written (partial
   rollout), an embedded store has one writer process, and the dimension's own synonyms
   pick a field's lines more precisely than MiniLM similarity does.
2. **Constrained decoding to a facts schema**: one optional key per asked field, a number
   (two for a field with qualifiers, such as DC and AC charging), then validation
   (`generate_structured`); an answer that fails it raises `InvalidOutputError`. Keys, not
   a list of `{field, value, unit}` items: greedy decoding of a small model repeats list
   items up to `maxItems`, and each costs ~30 tokens, so a three-field answer took ~190
   tokens (4.7 s on one thread); keyed, the grammar allows each field once, the same
   answer takes ~50 tokens (1.5 s). No unit is asked: grounding takes it from the text.
3. **Grounding.** An answered value counts only where the window states that very number
   with a unit of the field's kind (a *mention*, found by the rules' own lexicon); the
   fact then takes the mention's value, unit, page and line as written. Anything else is
   dropped and counted, so a made-up number never reaches a report.

Only synonym fields (numbers with units) are asked: pattern and vocabulary fields are
matched exactly by their rules, at fixed confidence.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.core import InvalidOutputError, TokenUsage
from swarm_ray.documents._dimensions import Dimension, FieldSpec
from swarm_ray.documents._extract import _word
from swarm_ray.documents._facts import ExtractionMethod, Fact
from swarm_ray.documents._labels import label_regex
from swarm_ray.documents._mentions import find_mentions
from swarm_ray.documents._parse import ParsedDocument
from swarm_ray.documents._units import COUNT, MONEY, TEXT

if TYPE_CHECKING:
    # Imported when called: `swarm_ray.llm` brings Ray Serve, which parsing and rule
    # extraction never need.
    from swarm_ray.llm import Engine

__all__ = ["LLM_CONFIDENCE", "LLMFacts", "ask_llm", "keyword_window", "unplaced_fields"]

LLM_CONFIDENCE = 0.5
"""Every LLM fact's confidence: under any rule fact that passes the threshold, so a reader
weighs it as the weaker evidence it is."""
WINDOW_CHARS = 2400
"""Characters of document text sent to the model (about 700 tokens)."""
_TOKENS_PER_KEY = 8
"""Cap on the tokens of one answered key (its name, quotes, colon, brackets)."""
_TOKENS_PER_NUMBER = 40
"""Cap on one number: the grammar allows up to 16 digits either side of the point, and
SmolLM2 writes a digit per token. The caps bound a runaway answer; a fitting one stops far
sooner (a one-field answer is about 8 tokens)."""
_QUOTE_CHARS = 200
_INSTRUCTIONS = (
    "You read product brochures. For each field listed in the schema that the text states, "
    "give the number exactly as printed. Leave out fields the text does not state. "
    "Answer with JSON only."
)


class LLMFacts(BaseModel):
    """What one LLM call produced, after grounding."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    facts: tuple[Fact, ...]
    """Grounded facts, `method=llm`, confidence `LLM_CONFIDENCE`."""
    dropped: tuple[str, ...] = ()
    """Answers that named no value the window states (field and value), for warnings."""
    model: str
    """The model that answered."""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    """Tokens and seconds of the call."""


@dataclass(frozen=True)
class TextWindow:
    """One stretch of a page's text sent to the model."""

    page: int
    text: str


def asked_fields(dimension: Dimension, names: Sequence[str] | None = None) -> list[FieldSpec]:
    """The unit fields of `dimension` found by synonyms or labels (keys in `names`, if given).

    Pattern and vocabulary fields are left out: their rules match exactly.
    """
    wanted = None if names is None else set(names)
    return [
        f
        for f in dimension.fields
        if f.kind not in (TEXT, COUNT, MONEY)
        and not (f.patterns or f.vocabulary)
        and (wanted is None or f.key in wanted)
    ]


def field_patterns(field: FieldSpec) -> list[re.Pattern[str]]:
    """The regexes that find where a document names `field` (synonyms, else labels)."""
    if field.synonyms:
        return [_word(p) for p in (*field.synonyms, *field.weak_synonyms)]
    return [label_regex(label) for label in field.all_labels]


def unplaced_fields(
    document: ParsedDocument, fields: Sequence[FieldSpec], found: Sequence[Fact]
) -> list[FieldSpec]:
    """Label fields the rules missed though a line names them next to a value of their kind.

    There the LLM may place what the rules could not.
    """
    have = {f.field for f in found}
    out: list[FieldSpec] = []
    for field in fields:
        if field.key in have or field.synonyms:
            continue
        patterns = field_patterns(field)
        lines = (
            line
            for page in document.pages
            for line in page.text.split("\n")
            if any(p.search(line) for p in patterns)
        )
        if any(m.kind == field.kind for line in lines for m in find_mentions(line)):
            out.append(field)
    return out


def keyword_window(
    document: ParsedDocument, fields: Sequence[FieldSpec], budget: int = WINDOW_CHARS
) -> list[TextWindow]:
    """Lines naming any of `fields`, each with a line of context either side.

    Returns:
        Stretches in page order, at most `budget` characters in all; the document's first
        `budget` characters when no line names a field.
    """
    patterns = [p for f in fields for p in field_patterns(f)]
    windows: list[TextWindow] = []
    used = 0
    for page in document.pages:
        lines = page.text.split("\n")
        keep = sorted(
            {
                j
                for i, line in enumerate(lines)
                if any(p.search(line) for p in patterns)
                for j in (i - 1, i, i + 1)
                if 0 <= j < len(lines)
            }
        )
        runs: list[list[int]] = []
        for j in keep:
            if runs and j == runs[-1][-1] + 1:
                runs[-1].append(j)
            else:
                runs.append([j])
        for run in runs:
            text = "\n".join(lines[j] for j in run).strip()
            if not text:
                continue
            text = text[: budget - used]
            windows.append(TextWindow(page=page.number, text=text))
            used += len(text) + 1
            if used >= budget:
                return windows
    if not windows:
        for page in document.pages:
            text = page.text[: budget - used]
            if text.strip():
                windows.append(TextWindow(page=page.number, text=text))
                used += len(text)
            if used >= budget:
                break
    return windows


def _numbers(field: FieldSpec) -> int:
    """Values a field may take in one answer.

    Two where qualifiers tell them apart, or as many as the statistics it asks for (the
    ends of a range).
    """
    return max(2 if field.qualifiers else 1, len(field.statistics))


def facts_schema(fields: Sequence[FieldSpec]) -> dict[str, Any]:
    """The JSON Schema the model's answer is constrained to: an optional key per field."""
    number: dict[str, Any] = {"type": "number"}
    properties = {
        _key_name(f): {"type": "array", "items": number, "minItems": 1, "maxItems": _numbers(f)}
        if _numbers(f) > 1
        else number
        for f in fields
    }
    return {"type": "object", "properties": properties, "additionalProperties": False}


def answer_tokens(fields: Sequence[FieldSpec]) -> int:
    """`max_tokens` for an answer about `fields`: what the longest schema-valid one needs."""
    return 2 + sum(_TOKENS_PER_KEY + _TOKENS_PER_NUMBER * _numbers(f) for f in fields)


def _prompt(windows: Sequence[TextWindow], fields: Sequence[FieldSpec]) -> str:
    described = "\n".join(
        f"- {_key_name(f)} ({f.kind}, in {f.unit}): {f.description or f.name}" for f in fields
    )
    text = "\n...\n".join(w.text for w in windows)
    return f"Fields:\n{described}\n\nText:\n{text}"


def _key_name(field: FieldSpec) -> str:
    """The JSON key a field is asked under: its name with spaces as underscores."""
    return re.sub(r"\W+", "_", field.name).strip("_") or "field"


def _line(text: str, start: int, end: int) -> str:
    left = text.rfind("\n", 0, start) + 1
    right = text.find("\n", end)
    line = text[left : right if right != -1 else len(text)]
    return " ".join(line.split())[:_QUOTE_CHARS]


def _ground(
    field: FieldSpec,
    value: float,
    windows: Sequence[TextWindow],
    base: dict[str, str],
) -> Fact | None:
    for window in windows:
        for mention in find_mentions(window.text):
            if mention.kind != field.kind or abs(mention.value - value) > 1e-9 * max(
                1.0, abs(value)
            ):
                continue
            quote = _line(window.text, mention.start, mention.end)
            qualifier = next(
                (
                    label
                    for label, patterns in field.qualifiers.items()
                    if any(_word(p).search(quote) for p in patterns)
                ),
                None,
            )
            return Fact(
                field=field.key,
                kind=field.kind,
                value=mention.value,
                unit=mention.unit,
                field_unit=field.unit,
                qualifier=qualifier,
                value_text=mention.value_text,
                page=window.page,
                quote=quote,
                confidence=LLM_CONFIDENCE,
                method=ExtractionMethod.LLM,
                **base,
            )
    return None


def _with_statistics(facts: list[Fact], fields: Sequence[FieldSpec]) -> list[Fact]:
    """A field asking for a range gets its answered values as its ends, low to high."""
    out = list(facts)
    for field in fields:
        if len(field.statistics) < 2:
            continue
        mine = sorted((f for f in out if f.field == field.key), key=lambda f: float(f.value))
        if len(mine) == len(field.statistics):
            for fact, statistic in zip(mine, field.statistics, strict=True):
                out[out.index(fact)] = fact.model_copy(update={"statistic": statistic})
    return out


def ask_llm(
    engine: Engine,
    document: ParsedDocument,
    dimension: Dimension,
    fields: Sequence[FieldSpec],
    *,
    entity: str,
) -> LLMFacts:
    """Ask `engine` for `fields` of `dimension` in `document`, and ground its answer.

    Raises:
        InvalidOutputError: The answer failed the facts schema even after constrained
            decoding (cut short, or an engine without grammar support).
    """
    from swarm_ray.llm import GenerationParams, Message, generate_structured

    windows = keyword_window(document, fields)
    messages = [
        Message(role="system", content=_INSTRUCTIONS),
        Message(role="user", content=_prompt(windows, fields)),
    ]
    reply = generate_structured(
        engine, messages, facts_schema(fields), GenerationParams(max_tokens=answer_tokens(fields))
    )
    if reply.error is not None:
        raise InvalidOutputError(
            f"LLM extraction of `{dimension.name}` from `{document.file_name}`: "
            f"{reply.error.message}",
            **reply.error.details,
        )
    assert reply.value is not None
    by_name = {_key_name(f): f for f in fields}
    base = {"entity": entity, "document_id": document.document_id, "source": document.file_name}
    facts: list[Fact] = []
    dropped: list[str] = []
    for name, given in reply.value.items():
        for value in given if isinstance(given, list) else [given]:
            fact = _ground(by_name[name], float(value), windows, base)
            if fact is None:
                dropped.append(f"`{by_name[name].key}`={value!r}")
            elif not any(f.field == fact.field and f.value_text == fact.value_text for f in facts):
                facts.append(fact)
    facts = _with_statistics(facts, fields)
    return LLMFacts(
        facts=tuple(facts),
        dropped=tuple(dropped),
        model=reply.completion.model,
        usage=reply.completion.usage,
    )
