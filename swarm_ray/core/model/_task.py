"""What a user asks for (`TaskRequest`) and what they are told as it runs (`TaskEvent`)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from swarm_ray.core.model._traceparent import checked_traceparent

__all__ = ["Budget", "TaskEvent", "TaskRequest"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_PLANNER = r"^(template|auto|[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)$"


class Budget(BaseModel):
    """The most a task may spend; past either, it stops with `budget_exceeded`.

    Counted over every attempt's `TokenUsage` (failed ones and the planner's included),
    as results arrive: the running sub-tasks are stopped, and what they spend until then
    is counted too, so a task ends a little over its budget, never far. With
    `on_exceeded: finish`, only what spends stops (see `on_exceeded`) and the task ends
    with what it has.
    """

    model_config = _FROZEN

    max_tokens: int | None = Field(default=None, ge=1)
    """Model tokens, prompt and completion together."""
    max_cost: float | None = Field(default=None, gt=0)
    """Money, in the unit of the endpoints' `prices`."""
    on_exceeded: Literal["fail", "finish"] = "fail"
    """`fail`: the task fails `budget_exceeded`. `finish`: its spending sub-tasks (of
    capabilities tagged `llm`, or that spent tokens or money in this task) stop and fail
    `budget_exceeded`, none starts again, and the rest of the plan runs on, so the task
    ends with what it has (its `partial_ok` stages, as when any sub-task fails)."""

    def breach(
        self, tokens: int, cost: float, scope: str, *, new: bool = False
    ) -> tuple[str, float, float, str] | None:
        """The first bound `tokens` and `cost` went past, else None.

        As (`{scope}.max_...`, value, maximum, what it counts); with `new` (work about to
        start), reaching a bound is enough.
        """
        for name, value, maximum, unit in (
            ("max_tokens", tokens, self.max_tokens, "tokens"),
            ("max_cost", cost, self.max_cost, "in cost"),
        ):
            if maximum is not None and (value > maximum or (new and value >= maximum)):
                return f"{scope}.{name}", value, maximum, unit
        return None


class TaskRequest(BaseModel):
    """A job handed to the swarm."""

    model_config = _FROZEN

    query: str = ""
    """The request in words; routes to a template when `template` is not given."""
    template: str | None = None
    """Template name to use, skipping intent routing."""
    items: tuple[Any, ...] = ()
    """What per-item stages fan out over (file paths, URLs, records, upload ids)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Free parameters, reachable from templates as `$params.NAME`."""
    task_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    """Caller-chosen id (idempotent submit); generated when absent."""
    parent_task_id: str | None = None
    """The task that spawned this one, for nested swarms (its watermarks name it). An
    HTTP caller names only one of its own tasks (`runtime._intake.own_names`)."""
    priority: int = Field(default=0, ge=-1000, le=1000)
    """When agents are scarce, sub-tasks of higher-priority tasks get them first."""
    metadata: dict[str, str] = Field(default_factory=dict)
    """Labels of the caller's (a team, a batch): kept with the task and shown in its
    status and rollout."""
    planner: str = Field(default="template", pattern=_PLANNER)
    """How the plan is made: `template` (the named template, else keyword routing),
    `auto` (a template when one matches, else the LLM planner `llm.planning.plan`), or the
    id of a planning capability to ask. A planner's plan is checked like a template's;
    when it is refused, the template router plans instead and the task says why."""
    budget: Budget | None = None
    """The most the task may spend in tokens or money (None: no bound)."""
    free_uploads: bool = False
    """When the task ends (completed, failed or cancelled), delete the caller's uploads
    it names by file id (`file-...` among `items` and top-level `params`), so they stop
    counting against the upload quota."""
    traceparent: Annotated[str | None, AfterValidator(checked_traceparent)] = None
    """The caller's W3C trace context (`00-TRACE_ID-SPAN_ID-FLAGS`): the task takes its
    trace id, and its exported root span is a child of that span. The gateway fills it
    from a valid `traceparent` header. It places the task in a trace and is no part of
    what is asked: a retried submit with another one is the same request. An HTTP
    caller's starts a trace of its own instead (`runtime._otel.tenant_traceparent`)."""

    @model_validator(mode="after")
    def _query_or_template(self) -> Self:
        if not self.query.strip() and self.template is None:
            raise ValueError("a request needs a `query` or a `template`")
        if self.template is not None and self.planner not in ("template", "auto"):
            raise ValueError(
                f"give `template` or a planning capability as `planner`, not both "
                f"(template {self.template!r}, planner {self.planner!r})"
            )
        return self

    def words(self) -> set[str]:
        """Lower-case words of the query, for keyword routing."""
        return set(re.findall(r"[a-z0-9]+", self.query.lower()))


class TaskEvent(BaseModel):
    """Something that happened to a task: a transition or a sub-task status change."""

    model_config = _FROZEN

    task_id: str
    """The task."""
    seq: int = Field(ge=1)
    """1, 2, 3 ... per task; a reconnecting client asks for events after its last seq."""
    at: float
    """When, in seconds since the epoch."""
    trace_id: str
    """The task's trace id."""
    kind: str
    """`state`, `subtask`, `warning`, `breaker`, `rule`, `feedback`, `result`."""
    status: str
    """The new task state or sub-task status."""
    subtask_id: str | None = None
    """The sub-task, for sub-task events."""
    agent: str | None = None
    """The capability or agent concerned."""
    progress: float = Field(default=0.0, ge=0.0, le=1.0)
    """Fraction of the task's sub-tasks settled."""
    summary: str = ""
    """One line for people: an output summary or an error message."""
