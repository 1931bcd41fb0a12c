"""Issue 40, "nothing a tenant sends is evaluated without a bound" (no Ray).

A field's unit is read by a grammar and never evaluated (a unit `9**(3*9**7)` made pint
compute a number of millions of digits on the orchestrator's event loop); a tenant's JSON
Schema is held to bounds and its patterns run on RE2 (a `pattern` under `if` held a
shared LLM replica for 28 s); many labels are matched in time linear in the text.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from swarm_ray.core.guards._access import AccessPolicy
from swarm_ray.core.guards._schema_bounds import (
    MAX_COUNT,
    MAX_LENGTH,
    SchemaBoundsError,
    check_schema,
    schema_validator,
)
from swarm_ray.core.model._errors import InputNotAllowedError, InvalidSpecError
from swarm_ray.documents._dimensions import FieldSpec, parse_field_arg
from swarm_ray.documents._labels import _plain, labels_regex
from swarm_ray.documents._stage_inputs import ExtractIn
from swarm_ray.documents._unit_grammar import (
    MAX_CHARS,
    MAX_POWER,
    Factor,
    UnitSyntaxError,
    parse_factors,
)
from swarm_ray.documents._units import _registry, lookup_unit, parse_unit
from swarm_ray.llm._capabilities import ExtractIn as LlmExtractIn
from swarm_ray.llm._structured import json_schema_of
from swarm_ray.llm._tool_agent import ToolAgentIn
from swarm_ray.llm._wide import RowIn

BOMB = "9**(3*9**7)"
"""Probe 1's unit: pint computed 9 to the power 14 million on the event loop."""
EVIL_PATTERN = "^(a+)+$"
"""Catastrophic backtracking on a long run of `a` followed by anything else."""


@contextlib.contextmanager
def _pint_parser_forbidden() -> Iterator[None]:
    """Fail if pint's expression parser sees any text while the block runs."""
    registry = _registry()

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"pint's parser was handed {args!r:.80}")

    names = ("parse_expression", "parse_units", "parse_units_as_container")
    saved = {name: getattr(registry, name) for name in names}
    for name in names:
        setattr(registry, name, refuse)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(registry, name, value)


# ---- units by grammar ----------------------------------------------------------------------


def test_an_arithmetic_unit_is_refused_at_once_naming_it() -> None:
    started = time.perf_counter()
    with pytest.raises(ValueError, match=re.escape(repr(BOMB))):
        parse_unit(BOMB)
    with pytest.raises(ValidationError, match="never an expression"):
        FieldSpec(name="reach", unit=BOMB)
    with pytest.raises(InvalidSpecError, match=re.escape(repr(BOMB))):
        parse_field_arg(f"reach:{BOMB}")
    assert lookup_unit(BOMB) is None  # a document's token of that shape is no unit either
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("m**5", "power 5"),
        ("s**-9", "power -9"),
        ("m/s/s", "divides twice"),
        ("(m/s)", "'('"),
        ("2*m", "'2'"),
        ("m" * (MAX_CHARS + 1), "characters long"),
        ("*".join(["m"] * 7), "factors"),
        ("m**(2)", "'*'"),
        ("kg m", "'m' at 3"),
    ],
)
def test_the_grammar_refuses_what_is_not_names_products_and_small_powers(
    text: str, why: str
) -> None:
    with pytest.raises(UnitSyntaxError, match=re.escape(why)):
        parse_factors(text)


@pytest.mark.parametrize(
    ("text", "factors"),
    [
        ("m/s**2", (Factor("m", 1), Factor("s", -2))),
        ("kg*m**2/s**3", (Factor("kg", 1), Factor("m", 2), Factor("s", -3))),
        ("1/s", (Factor("s", -1),)),
        ("m²", (Factor("m", 2),)),
        ("s⁻¹", (Factor("s", -1),)),
        ("force_pound * foot", (Factor("force_pound", 1), Factor("foot", 1))),
        ("ppm/delta_degC", (Factor("ppm", 1), Factor("delta_degC", -1))),
        (f"m^{MAX_POWER}", (Factor("m", MAX_POWER),)),
    ],
)
def test_the_grammar_reads_units_as_factors(text: str, factors: tuple[Factor, ...]) -> None:
    assert parse_factors(text) == factors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.sampled_from([*"9*()^/.-+ eE_xmskgVAWµ°%²⁻1<>[]'\"", "**", "e9", "9**9", "kWh"]),
        max_size=40,
    ).map("".join)
)
def test_any_text_is_read_or_refused_quickly_and_never_evaluated(text: str) -> None:
    parse_unit("m")  # pint's registry is built once per process (~0.3 s): not timed
    started = time.perf_counter()
    with _pint_parser_forbidden():
        try:
            unit = parse_unit(text)
        except ValueError as error:
            named = text if len(text.strip()) <= MAX_CHARS else text[:MAX_CHARS]
            assert repr(named) in str(error)  # named as sent
        else:
            assert unit.kind
        lookup_unit(text[:40], "time")
    assert time.perf_counter() - started < 0.2


def test_declared_units_and_conversions_never_reach_pints_parser() -> None:
    from swarm_ray.documents._units import convert

    with _pint_parser_forbidden():
        for text in ("Gb/s", "°C", "kW·h", "Kbytes", "lbf·ft", "cu ft", "ppm/°C", "V/µs"):
            assert parse_unit(text).kind
        assert convert(1, "mi", "km") == pytest.approx(1.609344)
        assert convert(0, "°C", "K") == pytest.approx(273.15)


def test_a_tenants_unit_is_refused_with_the_plan_naming_the_field() -> None:
    """The access policy checks a field's unit when the plan is made (HTTP 422)."""
    policy = AccessPolicy()
    good = {"dimension": "fields", "fields": [{"name": "reach", "unit": "km"}]}
    policy.check(ExtractIn, good, where="extract.input")
    bad = {"dimension": "fields", "fields": [{"name": "reach", "unit": BOMB}]}
    with pytest.raises(InputNotAllowedError, match=r"`extract\.input\.fields\[0\]\.unit`"):
        policy.check(ExtractIn, bad, where="extract.input")


def test_a_fields_labels_are_capped_in_number_and_length() -> None:
    with pytest.raises(ValidationError, match="at most 32"):
        FieldSpec(name="reach", unit="km", labels=tuple(f"label {i}" for i in range(33)))
    with pytest.raises(ValidationError, match="at most 100"):
        FieldSpec(name="reach", unit="km", labels=("x" * 101,))


# ---- JSON Schemas from tenants ---------------------------------------------------------------


def _if_pattern(pattern: str) -> dict[str, Any]:
    """Probe 6: a pattern under `if`, which the answer's validator evaluates."""
    return {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "if": {"properties": {"a": {"pattern": pattern}}},
        "then": {"required": ["a"]},
    }


def test_a_pattern_under_if_is_matched_in_linear_time() -> None:
    validator = schema_validator(check_schema(_if_pattern(EVIL_PATTERN)))
    started = time.perf_counter()
    assert list(validator.iter_errors({"a": "a" * 200_000 + "!"})) == []
    assert time.perf_counter() - started < 0.5
    strict = schema_validator({"type": "string", "pattern": "^[a-z]+$"})
    assert [e.message for e in strict.iter_errors("ABC")] == ["'ABC' does not match '^[a-z]+$'"]
    keyed = {"type": "object", "patternProperties": {"^x": {"type": "integer"}}}
    assert len(list(schema_validator(keyed).iter_errors({"x1": "no", "y": "free"}))) == 1
    closed = {**keyed, "additionalProperties": False}
    assert len(list(schema_validator(closed).iter_errors({"x1": 1, "y": 2}))) == 1


@pytest.mark.parametrize(
    ("schema", "keyword", "path"),
    [
        (_if_pattern("(a)\\1"), "pattern", "/if/properties/a"),
        ({"type": "string", "pattern": "(?=a)b"}, "pattern", "/"),
        ({"patternProperties": {"(?<!x)y": {}}}, "patternProperties", "/(?<!x)y"),
        ({"type": "string", "pattern": "a{5000}"}, "pattern", "/"),
        ({"type": "string", "pattern": "x" * 300}, "pattern", "/"),
        ({"type": "string", "minLength": 10**9}, "minLength", "/"),
        ({"properties": {"s": {"maxLength": MAX_LENGTH + 1}}}, "maxLength", "/properties/s"),
        ({"type": "array", "maxItems": 10**7}, "maxItems", "/"),
        ({"type": "object", "minProperties": MAX_COUNT + 1}, "minProperties", "/"),
        ({"type": "integer", "maximum": 1e300}, "maximum", "/"),
        ({"type": "number", "multipleOf": 1e-30}, "multipleOf", "/"),
        ({"type": "string", "format": "x-anything"}, "format", "/"),
        ({"$ref": "https://example.com/schema"}, "$ref", "/"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "$ref", "/"),
        (
            {"$defs": {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(150)}},
            "$ref",
            "/",
        ),
    ],
)
def test_a_schema_over_a_bound_is_refused_naming_keyword_and_path(
    schema: dict[str, Any], keyword: str, path: str
) -> None:
    started = time.perf_counter()
    with pytest.raises(SchemaBoundsError) as caught:
        check_schema(schema, where="output_schema")
    message = str(caught.value)
    assert message.startswith("`output_schema`: ") and f"`{keyword}` at `{path}`" in message
    assert time.perf_counter() - started < 0.5


def test_size_and_depth_are_bounded() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(200):
        node["items"] = {}
        node = node["items"]
    with pytest.raises(SchemaBoundsError, match="nested 25 deep"):
        check_schema(deep)
    wide = {"properties": {f"p{i}": {"type": "string"} for i in range(3000)}}
    with pytest.raises(SchemaBoundsError, match="more than 2000 nodes"):
        check_schema(wide)
    data = {"enum": [{"pattern": "(a)\\1"}], "default": {"minLength": 10**9}}
    assert check_schema(data) == data  # data inside `enum` or `default` is not a keyword


def test_every_input_a_tenant_schema_reaches_is_bounded() -> None:
    """Tool agent, wide research's row and table, `llm.extraction.json` (a planner's
    draft passes the same input models): validation and the plan's access check."""
    bomb = _if_pattern("(a)\\1")
    for model, data in (
        (ToolAgentIn, {"task": "x", "output_schema": bomb}),
        (RowIn, {"task": "x", "item": "a", "output_schema": bomb}),
        (LlmExtractIn, {"text": "x", "json_schema": bomb}),
    ):
        with pytest.raises(ValidationError, match="linear-time engine"):
            model.model_validate(data)
        with pytest.raises(InputNotAllowedError, match="`t.input.[a-z_]+`: `pattern` at"):
            AccessPolicy().check(model, data, where="t.input")
    with pytest.raises(InvalidSpecError, match="minLength"):
        json_schema_of({"type": "string", "minLength": 10**9})
    fine = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Z]"}}}
    assert ToolAgentIn(task="x", output_schema=fine).output_schema == fine


# ---- labels in linear time -------------------------------------------------------------------


def _reference(labels: tuple[str, ...]) -> re.Pattern[str]:
    """What `labels_regex` used to be: one alternation on `re`."""
    bodies = sorted((_plain(label) for label in labels), key=len, reverse=True)
    alternation = "|".join(f"(?:{b})" for b in bodies)
    return re.compile(r"(?<![^\W\d_])(?:" + alternation + r")(?![^\W\d_])", re.IGNORECASE)


_WORD = st.text(alphabet="abcxyzé中5", min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(_WORD, min_size=1, max_size=2).map(" ".join), min_size=1, max_size=4),
    st.text(alphabet="abcxyzé中5 -_/.,(Aµ𝜇±", max_size=60),  # 1- to 4-byte characters
)
def test_labels_are_found_where_the_alternation_found_them(labels: list[str], text: str) -> None:
    wanted = tuple(dict.fromkeys(labels))
    found = [m.span() for m in labels_regex(wanted).finditer(text)]
    expected = [m.span() for m in _reference(wanted).finditer(text)]
    assert [s[0] for s in found] == [s[0] for s in expected]
    for got, want in zip(found, expected, strict=True):  # a tie may take the longer label
        assert got[1] >= want[1]


def test_many_labels_over_a_long_text_take_linear_time() -> None:
    labels = tuple(f"parameter number {i} of this field" for i in range(2000))
    text = "parameter number of this field " * 20_000  # every word a near miss
    pattern = labels_regex(labels)
    started = time.perf_counter()
    assert pattern.search(text) is None
    assert pattern.search(text + "Parameter-Number 1999 of this fields") is not None
    assert time.perf_counter() - started < 2.0


def test_a_long_text_full_of_labels_is_read_in_linear_time() -> None:
    """RE2's wrapper, given a `str`, encodes the whole text and counts its characters from
    the start at each search: label after label, 16,000 labels in 320 KB took 23 s."""
    pattern = labels_regex(("supply current", "VDD"))

    def took(repeats: int) -> float:
        text = "supply current 5 µA, VDD 3 V; " * repeats  # not ASCII: offsets differ
        started = time.perf_counter()
        found = [m.group() for m in pattern.finditer(text)]
        assert found == ["supply current", "VDD"] * repeats
        return time.perf_counter() - started

    took(100)
    short, long = took(1_500), took(6_000)
    assert long < 8 * short + 0.2, (short, long)


@settings(max_examples=100, deadline=None)
@given(st.text(alphabet="aµ中𝜇 5", max_size=40), st.lists(st.integers(0, 40), max_size=20))
def test_offsets_convert_both_ways_in_any_order(text: str, moves: list[int]) -> None:
    from swarm_ray.documents._labels import _Encoded

    encoded = _Encoded(text)
    for char in (min(m, len(text)) for m in moves):  # forward and back, as a pass steps
        byte = encoded.byte(char)
        assert byte == len(text[:char].encode("utf-8"))
        assert encoded.char(byte) == char


def _column_by_scan(header: Any, cell: Any) -> Any:
    """What `column_of` was: every header cell looked at."""
    best = None
    for head in header.cells:
        overlap = min(head.x1, cell.x1) - max(head.x0, cell.x0)
        if best is None or overlap > best[0]:
            best = (overlap, head)
    if best is not None and best[0] > 0:
        return best[1]
    centre = (cell.x0 + cell.x1) / 2
    nearest = min(header.cells, key=lambda h: abs((h.x0 + h.x1) / 2 - centre))
    width = max(nearest.x1 - nearest.x0, cell.x1 - cell.x0)
    return nearest if abs((nearest.x0 + nearest.x1) / 2 - centre) <= width else None


_EDGE = st.one_of(st.integers(0, 20).map(lambda n: n * 10.0), st.floats(0, 200))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_EDGE, st.sampled_from([0.0, 10.0, 25.0])), min_size=1, max_size=8),
    st.tuples(_EDGE, st.sampled_from([0.0, 10.0, 60.0])),
)
@example([(0.0, 0.0), (1.5472418789960115e-21, 0.0)], (0.0, 10.0))  # centres a rounding apart
def test_a_cells_column_is_the_one_every_header_cell_would_give(
    heads: list[tuple[float, float]], cell: tuple[float, float]
) -> None:
    from swarm_ray.documents._grid import column_of
    from swarm_ray.documents._layout import Row, TextBox

    def box(x0: float, width: float, text: str) -> TextBox:
        return TextBox(x0=x0, top=0, x1=x0 + width, bottom=10, size=10.0, text=text)

    cells = tuple(box(x, w, str(i)) for i, (x, w) in enumerate(sorted(heads)))  # duplicates too
    header = Row(top=0, bottom=10, cells=cells)
    target = box(*cell, "v")
    assert column_of(header, target) is _column_by_scan(header, target)


def _terms_by_scan(spellings: Any, declared: frozenset[str]) -> list[list[str]]:
    """What `_terms` was: each spelling compared with every member of every term."""
    from swarm_ray.documents._judges import _same_term

    groups: list[list[str]] = []
    for spelling in sorted(spellings):
        home = next(
            (
                group
                for group in groups
                if not (spelling in declared and any(s in declared for s in group))
                and any(_same_term(spelling, s) for s in group)
            ),
            None,
        )
        if home is None:
            groups.append([spelling])
        else:
            home.append(spelling)
    return groups


_NAME_WORDS = ["nova", "novaa", "nvoa", "solenne", "solene", "soleen", "pro", "Nova", "x1"]


@settings(max_examples=300, deadline=None)
@given(
    st.sets(
        st.tuples(
            st.lists(st.sampled_from(_NAME_WORDS), min_size=1, max_size=3),
            st.sampled_from([" ", "-", "", "."]),
        ).map(lambda p: p[1].join(p[0])),
        max_size=10,
    ),
    st.randoms(use_true_random=False),
)
def test_terms_group_as_comparing_every_pair_grouped_them(names: set[str], rng: Any) -> None:
    from swarm_ray.documents._judges import _terms

    declared = frozenset(n for n in names if rng.random() < 0.3)
    assert _terms(names, declared) == _terms_by_scan(names, declared)
