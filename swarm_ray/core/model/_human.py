"""A person in the loop: a stage that waits for its task's owner to answer.

A stage declaring `await_human` holds each of its sub-tasks, once its dependencies are
done, until the task's owner answers (or the deadline passes); the other branches go on
meanwhile. The answer is a JSON object checked against the declared JSON Schema and
reaches the stage's input through `$answer` (the whole answer) or `$answer.FIELD`; the
capability then runs as usual. At the deadline the `default` applies, or the sub-task
fails with `human_timeout`.

The wait is a fact of the task's log like any other: the scheduler derives it from the
events that made the sub-task ready, the answer is an event of its own (with the
principal who gave it), and the deadline is a timer, so a waiting task costs a running
orchestrator nothing and survives its restart.
"""

from __future__ import annotations

from typing import Any, Self

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, model_validator

from swarm_ray.core.model._errors import InvalidInputError

__all__ = ["HumanAsk"]

ANSWER_MARKER = "$answer"
"""Key of the marker dict that an `$answer[.FIELD]` input placeholder becomes."""


class HumanAsk(BaseModel):
    """What a stage asks a person before it runs (`Stage.await_human`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    prompt: str = Field(min_length=1, max_length=4000)
    """The question, as the person reads it."""
    answer_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object"}, alias="schema"
    )
    """JSON Schema (draft 2020-12) the answer, a JSON object, must match."""
    timeout_s: float | None = Field(default=86_400.0, gt=0)
    """How long to wait from when the sub-task became ready (None: until answered)."""
    default: dict[str, Any] | None = None
    """The answer at the deadline; None fails the sub-task with `human_timeout` instead."""

    @model_validator(mode="after")
    def _schema_and_default(self) -> Self:
        try:
            jsonschema.Draft202012Validator.check_schema(self.answer_schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"`await_human.schema` is not a JSON Schema: {exc.message}") from None
        if self.default is not None:
            problems = answer_problems(self.answer_schema, self.default)
            if problems:
                raise ValueError(
                    f"`await_human.default` does not match its schema: {problems[0]['problem']}"
                )
        return self


class HumanWait(BaseModel):
    """A sub-task held for a person: what is asked, of whom, and until when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subtask_id: str
    """The sub-task held."""
    prompt: str
    """The question."""
    answer_schema: dict[str, Any]
    """JSON Schema of the answer."""
    since: float
    """When it began waiting (seconds since the epoch)."""
    deadline: float | None
    """When the default applies or the sub-task fails (None: no deadline)."""
    has_default: bool
    """Whether a default answer applies at the deadline (else `human_timeout`)."""
    owner: str | None = None
    """Who may answer: the task's owner (None: a trusted caller's task)."""
    review_of: int | None = None
    """The attempt whose side effects are in doubt, for a `needs_review` wait (the answer
    is `{"rerun": true}` to run it again, `{"rerun": false}` to fail it)."""
    asked_in: int | None = None
    """The attempt that asked, when an agent asked mid-run (`swarm_ray.agent.ask_human`);
    None when its stage declared `await_human`."""


REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"rerun": {"type": "boolean"}},
    "required": ["rerun"],
    "additionalProperties": False,
}
"""The answer a `needs_review` wait takes."""


def answer_problems(schema: dict[str, Any], answer: Any) -> list[dict[str, Any]]:
    """Field errors of `answer` against `schema` (empty when it matches)."""
    if not isinstance(answer, dict):
        return [
            {
                "field": "(root)",
                "problem": f"an answer is a JSON object, got {type(answer).__name__}",
                "value": repr(answer)[:200],
            }
        ]
    validator = jsonschema.Draft202012Validator(schema)
    return [
        {
            "field": ".".join(str(p) for p in err.absolute_path) or "(root)",
            "problem": err.message,
            "value": repr(err.instance)[:200],
        }
        for err in validator.iter_errors(answer)
    ]


def check_answer(wait: HumanWait, answer: Any) -> dict[str, Any]:
    """`answer` when it matches the wait's schema; else `InvalidInputError` with the fields."""
    problems = answer_problems(wait.answer_schema, answer)
    if problems:
        raise InvalidInputError(
            f"the answer to sub-task `{wait.subtask_id}` does not match its schema: "
            f"`{problems[0]['field']}`: {problems[0]['problem']}",
            subtask_id=wait.subtask_id,
            errors=problems,
        )
    assert isinstance(answer, dict)
    return answer
