"""Task templates: declarative stages, fan-out, dynamic rules and feedback loops.

A template is data (YAML or Python) that says which capability each stage runs, how it
fans out over the request, what it depends on, which rules add work at run time
(`business_scope` contains "hazardous chemicals" -> run a safety review) and which
stages are judged and revised in rounds. `expand()` (`core.model._plan`) turns a template and a
request into a `Plan`.

Inputs of a stage may use placeholders, filled in when the plan is expanded:
`"$item"` (the request item), `"$each"` / `"$each_index"` (a `for_each` element and its
position), `"$items"` (all items), `"$query"`,
`"$params.NAME"` (left out when the request has no such parameter, so the input model's
default applies), `"$task_dir"` or `"$task_dir/SUB"` (the task's own directory for
outputs, assigned by the server; an HTTP caller cannot choose it); and some filled in
at dispatch time: from upstream results,
`"$from.STAGE"`, `"$from.STAGE.path.in.output"` or `"$from.STAGE.@watermark"` (the
watermark of the upstream sub-task, for provenance); from the task so far, `"$warnings"`
(every degradation until now) and `"$costs"` (seconds and attempts per settled sub-task);
from a person, in a stage that declares `await_human`, `"$answer"` or `"$answer.FIELD"`
(see `core.model._human`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from enum import StrEnum
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from swarm_ray.core.model._errors import InvalidSpecError
from swarm_ray.core.model._human import HumanAsk

__all__ = [
    "DynamicRule",
    "FanOut",
    "FeedbackLoop",
    "Stage",
    "TaskTemplate",
    "load_template",
    "template_json_schema",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
PARAM_PLACEHOLDER = re.compile(r"^\$params\.([A-Za-z0-9_]+)$")
"""`$params.NAME` in a stage's input or its `when` (group 1: the name)."""
FOR_EACH = re.compile(
    r"^\$(?:from\.(?P<stage>[A-Za-z_][A-Za-z0-9_]*)(?:\.(?P<path>[\w.]+))?"
    r"|params\.(?P<param>[A-Za-z0-9_]+))$"
)
"""A stage's `for_each`: `$from.STAGE[.FIELD...]` (a list in an upstream output, expanded
when that sub-task succeeds) or `$params.NAME` (a list in the request, expanded at once)."""
ANSWER = re.compile(r"^\$answer(?:\.([\w.]+))?$")
"""`$answer` or `$answer.FIELD` in a stage's input (group 1: the path)."""
WORD_PLACEHOLDERS = frozenset(
    (
        "$item",
        "$items",
        "$query",
        "$each",
        "$each_index",
        "$warnings",
        "$costs",
        "$task_dir",
        "$answer",
    )
)
"""The placeholders that are one word: an input string that is one word after a `$` and
none of these is refused, rather than passed on as it is written."""
_WORD = re.compile(r"^\$[A-Za-z_][A-Za-z0-9_]*$")


class FanOut(StrEnum):
    """How many sub-tasks a stage becomes."""

    ONCE = "once"
    """One sub-task."""
    PER_ITEM = "per_item"
    """One per request item (with `for_each: $params.NAME`, one per item and element)."""


class Stage(BaseModel):
    """One step of a template."""

    model_config = _FROZEN

    name: str = Field(pattern=_NAME)
    """Unique within the template; sub-task ids start with it."""
    capability: str
    """Capability id that runs it."""
    fan_out: FanOut = FanOut.ONCE
    """How it fans out over the request."""
    depends_on: tuple[str, ...] = ()
    """Stages whose results it needs. Per-item stages wait only for the same item."""
    input: dict[str, Any] = Field(default_factory=dict)
    """Input template with placeholders (see the module docstring)."""
    required: bool = False
    """A final failure of one of its sub-tasks fails the task (else the task degrades)."""
    partial_ok: bool = False
    """Runs once its dependencies settle even if some failed (aggregators)."""
    triggered: bool = False
    """Not expanded up front: only a dynamic rule adds its sub-tasks."""
    when: str | None = Field(default=None, pattern=PARAM_PLACEHOLDER.pattern)
    """`$params.NAME`: expanded only when the request sets that parameter to a true value.

    Left out, the stage has no sub-tasks: stages depending on it do not wait for it, and
    their `$from.STAGE` inputs get an empty list (one per item or element: none).
    """
    for_each: str | None = Field(default=None, pattern=FOR_EACH.pattern)
    """Fan out over a list computed along the way: one sub-task per element, `$each` in
    the input being the element and `$each_index` its position (ids `STAGE[0]`, ...).

    `$from.STAGE.FIELD` expands when that once-stage's sub-task succeeds (its output's
    FIELD must be a list; a failed source leaves the stage empty); `$params.NAME` expands
    with the plan. Stages depending on a `for_each` stage wait for all of its sub-tasks
    and read them as a list (`$from.THIS` outputs, `$from.THIS.@outcome` each one's
    status, output, error, watermark and attempts). Expansions are decisions like any
    other: written to the task's log and replayed after a restart.
    """
    max_each: int = Field(default=1000, ge=1, le=100_000)
    """Most elements a `for_each` may fan out over; a longer list fails the task, named."""
    await_human: HumanAsk | None = None
    """Ask the task's owner first: each sub-task waits, once its dependencies are done,
    for an answer matching `schema` (the other branches go on), then runs with it as
    `$answer`; at `timeout_s` the `default` applies, or it fails with `human_timeout`."""

    @model_validator(mode="after")
    def _answer_needs_a_question(self) -> Self:
        if self.await_human is None and _names_answer(self.input):
            raise ValueError(f"stage `{self.name}` reads `$answer` but declares no `await_human`")
        return self

    @model_validator(mode="after")
    def _placeholders_are_known(self) -> Self:
        for text in _strings(self.input):
            if _WORD.match(text) and text not in WORD_PLACEHOLDERS:
                known = ", ".join(f"`{p}`" for p in sorted(WORD_PLACEHOLDERS))
                raise ValueError(
                    f"stage `{self.name}` input names the unknown placeholder {text!r}"
                    f" (known: {known}, and `$params.NAME`, `$from.STAGE...`)"
                )
        return self


class DynamicRule(BaseModel):
    """When an output field of one stage matches, run another stage on that output."""

    model_config = _FROZEN

    name: str = Field(pattern=_NAME)
    """Names the rule in warnings and events."""
    when_stage: str
    """Stage whose outputs are inspected."""
    field: str
    """Dotted path into the output (`license.business_scope`)."""
    contains: str | None = None
    """Fires when the field (text, or any element of a list) contains this, ignoring case."""
    equals: Any = None
    """Fires when the field equals this value."""
    trigger: str
    """A `triggered` stage to add, depending on the matching sub-task."""

    @model_validator(mode="after")
    def _one_condition(self) -> Self:
        if (self.contains is None) == (self.equals is None):
            raise ValueError(f"rule `{self.name}` needs exactly one of `contains` or `equals`")
        return self


class FeedbackLoop(BaseModel):
    """Generate, judge, revise: rerun `stage` with the judge's feedback while it finds fault."""

    model_config = _FROZEN

    stage: str
    """The generating stage."""
    judge: str
    """The judging stage; it must depend on `stage`."""
    max_rounds: int = Field(default=3, ge=1)
    """Rounds in all, the first included."""
    verdict_field: str = "passed"
    """Boolean output field of the judge: true ends the loop."""
    feedback_field: str = "feedback"
    """Judge output field passed back to the generator."""
    feedback_input: str = "feedback"
    """Input field of the generator that receives it."""


class TaskTemplate(BaseModel):
    """A reusable plan shape, matched by name or by keywords in the request."""

    model_config = _FROZEN

    name: str = Field(pattern=r"^[a-z][a-z0-9_\-]*$")
    """Template name (`compare_documents`)."""
    description: str = ""
    """What it is for; shown to the LLM planner."""
    keywords: tuple[str, ...] = ()
    """Words in a request's text that route to this template."""
    stages: tuple[Stage, ...] = Field(min_length=1)
    """The stages, in any order (dependencies decide the order)."""
    rules: tuple[DynamicRule, ...] = ()
    """Dynamic rules that add triggered stages at run time."""
    loops: tuple[FeedbackLoop, ...] = ()
    """Generate-judge-revise loops."""
    aggregate: str | None = None
    """The stage whose output is the task's result; it is required."""
    max_depth: int = Field(default=3, ge=0)
    """How deep rule-triggered work may nest below the first sub-tasks."""

    @model_validator(mode="after")
    def _references(self) -> Self:
        names = [s.name for s in self.stages]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"stage names must be unique; repeated: {', '.join(dupes)}")
        by_name = {s.name: s for s in self.stages}
        for stage in self.stages:
            for dep in stage.depends_on:
                if dep not in by_name:
                    raise ValueError(f"stage `{stage.name}` depends on unknown stage `{dep}`")
                if by_name[dep].triggered:
                    raise ValueError(
                        f"stage `{stage.name}` cannot depend on triggered stage `{dep}`: "
                        "triggered sub-tasks join the aggregator when they fire"
                    )
        _check_acyclic({s.name: s.depends_on for s in self.stages})
        if self.aggregate is not None and self.aggregate not in by_name:
            raise ValueError(f"aggregate stage `{self.aggregate}` is not a stage")
        for stage in self.stages:
            _check_for_each(stage, by_name, self.stages)
        in_loops = {n for loop in self.loops for n in (loop.stage, loop.judge)}
        for stage in self.stages:
            if stage.when is None:
                continue
            role = (
                "the aggregate stage"
                if stage.name == self.aggregate
                else "a triggered stage"
                if stage.triggered
                else "a stage of a feedback loop"
                if stage.name in in_loops
                else None
            )
            if role:
                raise ValueError(f"stage `{stage.name}` is {role} and cannot be conditional")
        for rule in self.rules:
            for ref in (rule.when_stage, rule.trigger):
                if ref not in by_name:
                    raise ValueError(f"rule `{rule.name}` names unknown stage `{ref}`")
            if not by_name[rule.trigger].triggered:
                raise ValueError(
                    f"rule `{rule.name}` triggers `{rule.trigger}`, "
                    "which must be declared with `triggered: true`"
                )
        for loop in self.loops:
            for ref in (loop.stage, loop.judge):
                if ref not in by_name:
                    raise ValueError(f"feedback loop names unknown stage `{ref}`")
            if loop.stage not in by_name[loop.judge].depends_on:
                raise ValueError(
                    f"feedback loop judge `{loop.judge}` must depend on `{loop.stage}`"
                )
            for stage in self.stages:
                source = _each_source(stage)
                if source in (loop.stage, loop.judge):
                    raise ValueError(
                        f"stage `{stage.name}` fans out over `{source}`, which its feedback "
                        "loop runs again each round: each round would add the same sub-tasks "
                        "again; fan out over a stage after the loop"
                    )
        return self

    def stage(self, name: str) -> Stage:
        """The stage called `name` (KeyError if none)."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(name)

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "<string>") -> TaskTemplate:
        """Parse and validate a template from YAML text, naming `source` in errors."""
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InvalidSpecError(f"template {source!r} is not valid YAML: {exc}") from None
        if not isinstance(data, Mapping):
            raise InvalidSpecError(f"template {source!r} must be a mapping, got {data!r:.80}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"`{'.'.join(str(p) for p in e['loc']) or '(root)'}`: {e['msg']}"
                for e in exc.errors()
            )
            raise InvalidSpecError(
                f"template {source!r} is invalid: {problems}", source=source
            ) from None


def _strings(value: Any) -> Iterator[str]:
    """Every string value in an input template (the keys left out)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def _names_answer(value: Any) -> bool:
    """Whether an input template uses `$answer` anywhere."""
    return any(ANSWER.match(text) is not None for text in _strings(value))


def _each_source(stage: Stage) -> str | None:
    """The stage whose output `stage` fans out over (None: none, or a parameter)."""
    if stage.for_each is None:
        return None
    found = FOR_EACH.match(stage.for_each)
    assert found is not None  # the field's pattern
    source: str | None = found.group("stage")
    return source


def _check_for_each(stage: Stage, by_name: Mapping[str, Stage], stages: tuple[Stage, ...]) -> None:
    """Refuse a `for_each` stage the scheduler could not expand (ValueError naming it)."""
    if stage.for_each is None:
        return
    source = _each_source(stage)
    if stage.fan_out is not FanOut.ONCE and source is not None:
        raise ValueError(
            f"stage `{stage.name}` fans out over `{source}`'s output, so its `fan_out` must "
            "be `once` (per item, fan out over `$params.NAME`)"
        )
    if stage.triggered or (stage.when is not None and source is not None):
        raise ValueError(
            f"stage `{stage.name}` fans out over an output and cannot also be triggered "
            "or conditional"
        )
    if source is not None:
        if source not in stage.depends_on:
            raise ValueError(
                f"stage `{stage.name}` fans out over `{source}`, so it must depend on it"
            )
        if by_name[source].fan_out is not FanOut.ONCE or by_name[source].for_each:
            raise ValueError(
                f"stage `{stage.name}` fans out over `{source}`, which must be "
                "a once-stage (one sub-task)"
            )
    for other in stages:
        if source is None:
            break
        if stage.name in other.depends_on and other.fan_out is not FanOut.ONCE:
            raise ValueError(
                f"stage `{other.name}` depends on `for_each` stage "
                f"`{stage.name}`, so its `fan_out` must be `once`"
            )


def _check_acyclic(graph: Mapping[str, tuple[str, ...]]) -> None:
    """Raise ValueError naming a cycle in `graph` (node -> dependencies), if any."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in graph.get(node, ()):
            if state.get(dep) == 1:
                cycle = [*path[path.index(dep) :], dep]
                raise ValueError(f"dependency cycle: {' -> '.join(cycle)}")
            if dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)


def load_template(path: str | Path) -> TaskTemplate:
    """Load a template from a YAML file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidSpecError(f"cannot read template file `{path}`: {exc.strerror}") from None
    return TaskTemplate.from_yaml(text, source=str(path))


def template_json_schema() -> dict[str, Any]:
    """JSON Schema of the template format, for editors (YAML language servers)."""
    schema = TaskTemplate.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    return json.loads(json.dumps(schema))  # type: ignore[no-any-return]
