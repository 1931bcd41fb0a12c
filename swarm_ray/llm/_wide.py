"""Wide research (the shape of Kimi's WideSearch): one tool-using sub-agent per item, one table.

A request gives the items (entities, documents, questions), a question, and the row it
wants back as an inline JSON Schema (`params.row_schema`: data, not a path). The
template fans out one `llm.research.row` sub-agent per item: a tool agent
(`swarm_ray.llm._tool_agent`) whose answer must validate against the row schema, with
the tools the request names (registered capabilities, registered MCP servers). The
aggregate `llm.research.table` puts the rows in item order, one column per schema
property, and traces every cell to the sub-agent that wrote it: each row keeps its
sub-task id and watermark (`/v1/debug/watermark/extract` turns it back into the agent,
the input and the time), and the child sub-tasks and watermarks of the tools it
consulted. Items whose sub-agent failed are listed as missing, and the task says why.

Parameters (`params`): `question` and `row_schema` (required), `tools` (capability
ids), `mcp_servers` and `endpoint` (registered names), `max_steps`, `protocol`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from swarm_ray.agent import AgentReply
from swarm_ray.core import (
    CapabilitySpec,
    ExecutorKind,
    Resources,
    RetryPolicy,
    TaskTemplate,
    TenantSchema,
)
from swarm_ray.llm._settings import llm_resources
from swarm_ray.llm._tool_agent import AgentUsage, ToolAgentIn, run_tool_agent

__all__ = [
    "ResearchRow",
    "RowIn",
    "RowOut",
    "TableIn",
    "TableOut",
    "research_row",
    "research_table",
]


class RowIn(ToolAgentIn):
    """Input of `llm.research.row`: a tool agent's input plus the item it researches."""

    item: Any
    """The item (a name, a record): shown to the agent after the task."""
    output_schema: TenantSchema
    """The row's JSON Schema (an object with `properties`): required here."""

    @field_validator("output_schema")
    @classmethod
    def _row_shape(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object" or not isinstance(value.get("properties"), dict):
            raise ValueError("`row_schema` must be a JSON Schema object with `properties`")
        return value


class Source(BaseModel):
    """A tool call a row relied on: the child sub-task behind it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """The tool the agent called."""
    subtask_id: str | None = None
    """The child sub-task (capability tools)."""
    watermark: str | None = None
    """The child's watermark."""


class RowOut(BaseModel):
    """Output of `llm.research.row`: one row and where it came from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item: Any
    """The item researched."""
    row: dict[str, Any]
    """The answer, valid against the row schema."""
    finished: bool
    """False when the agent ran out of steps (the row is its best answer so far)."""
    steps: int
    """Model turns taken."""
    sources: tuple[Source, ...] = ()
    """Successful tool calls, with their child sub-tasks."""
    usage: AgentUsage
    """Tokens, tool calls and time."""


def research_row(data: RowIn) -> AgentReply:
    """One sub-agent: research `data.item` and answer a row (the `llm.research.row` entrypoint)."""
    item_text = data.item if isinstance(data.item, str) else json.dumps(data.item)
    agent_in = data.model_copy(update={"task": f"{data.task}\n\nItem: {item_text}"})
    reply = run_tool_agent(agent_in)
    out = reply.output
    assert out.data is not None  # type: ignore[attr-defined]
    sources = tuple(
        Source(tool=e.outcome.tool, subtask_id=e.outcome.subtask_id, watermark=e.outcome.watermark)
        for e in out.transcript  # type: ignore[attr-defined]
        if e.outcome is not None and e.outcome.ok
    )
    row = RowOut(
        item=data.item,
        row=out.data,  # type: ignore[attr-defined]
        finished=out.finished,  # type: ignore[attr-defined]
        steps=out.steps,  # type: ignore[attr-defined]
        sources=sources,
        usage=out.usage,  # type: ignore[attr-defined]
    )
    return AgentReply(output=row, usage=reply.usage, warnings=reply.warnings)


class TableIn(BaseModel):
    """Input of `llm.research.table` (the template fills it from the rows)."""

    items: list[Any]
    """Every item of the request, in order."""
    row_schema: TenantSchema
    """The rows' schema; its properties are the columns, in order."""
    rows: list[RowOut | None] = Field(default_factory=list)
    """The rows that came back (failed sub-agents' are absent)."""
    subtasks: list[str] = Field(default_factory=list)
    """The sub-task of each row."""
    watermarks: list[str] = Field(default_factory=list)
    """The watermark of each row."""


class ResearchRow(BaseModel):
    """A row of the table: the cells and the sub-agent that wrote them."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    item: Any
    """The item."""
    cells: dict[str, Any]
    """Column -> value (None where the agent gave none)."""
    subtask_id: str
    """The sub-agent's sub-task."""
    watermark: str
    """The sub-agent's watermark: every cell of the row traces back through it."""
    finished: bool
    """False when the agent ran out of steps."""
    sources: tuple[Source, ...] = ()
    """The tool calls the row relied on."""


class TableOut(BaseModel):
    """Output of `llm.research.table`: the wide-research result."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    columns: tuple[str, ...]
    """Column names, from the row schema."""
    rows: tuple[ResearchRow, ...]
    """One per item that got an answer, in item order."""
    missing: tuple[Any, ...] = ()
    """Items whose sub-agent failed."""
    usage: AgentUsage
    """Summed over the rows."""
    markdown: str
    """The table in Markdown, each row ending in the start of its watermark."""


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("|", "\\|").replace("\n", " ")


def research_table(data: TableIn) -> AgentReply:
    """Rows in item order under the schema's columns, each traced (the aggregate)."""
    columns = tuple(data.row_schema.get("properties", {}))
    by_item: dict[str, ResearchRow] = {}
    total = AgentUsage()
    for row, subtask_id, watermark in zip(data.rows, data.subtasks, data.watermarks, strict=False):
        if row is None:
            continue
        by_item[json.dumps(row.item, sort_keys=True)] = ResearchRow(
            item=row.item,
            cells={c: row.row.get(c) for c in columns},
            subtask_id=subtask_id,
            watermark=watermark,
            finished=row.finished,
            sources=row.sources,
        )
        total = AgentUsage(
            **{k: getattr(total, k) + getattr(row.usage, k) for k in AgentUsage.model_fields}
        )
    rows: list[ResearchRow] = []
    missing: list[Any] = []
    for item in data.items:
        found = by_item.get(json.dumps(item, sort_keys=True))
        if found is None:
            missing.append(item)
        else:
            rows.append(found)
    lines = [
        "| item | " + " | ".join(columns) + " | watermark |",
        "|" + " --- |" * (len(columns) + 2),
    ]
    for done in rows:
        cells = " | ".join(_cell(done.cells[c]) for c in columns)
        lines.append(f"| {_cell(done.item)} | {cells} | `{done.watermark[:16]}...` |")
    for item in missing:
        lines.append(f"| {_cell(item)} | " + " | ".join("" for _ in columns) + " | missing |")
    warnings = tuple(f"no row for item {item!r}: its sub-agent failed" for item in missing)
    output = TableOut(
        columns=columns,
        rows=tuple(rows),
        missing=tuple(missing),
        usage=total,
        markdown="\n".join(lines) + "\n",
    )
    return AgentReply(output=output, warnings=warnings)


def wide_capabilities() -> tuple[CapabilitySpec, ...]:
    """`llm.research.row` (a tool agent per item) and `llm.research.table` (the aggregate)."""
    return (
        CapabilitySpec(
            id="llm.research.row",
            description="Research one item with tools and answer one row of a given JSON Schema.",
            input_model=RowIn,
            output_model=RowOut,
            entrypoint="swarm_ray.llm._wide:research_row",
            executor=ExecutorKind.SERVE,
            deployment="swarm_ray.llm._deployment:capability_llm_app",
            resources=llm_resources("llm.research.row"),
            timeout_s=600.0,
            retry=RetryPolicy(max_attempts=2, backoff_s=1.0),
            tags=("llm", "agent"),
        ),
        CapabilitySpec(
            id="llm.research.table",
            description="Put research rows in one table, each cell traced to its sub-agent.",
            input_model=TableIn,
            output_model=TableOut,
            entrypoint="swarm_ray.llm._wide:research_table",
            resources=Resources(num_cpus=0.1),
            timeout_s=60.0,
        ),
    )


def wide_template(
    name: str = "wide_research", row_capability: str = "llm.research.row"
) -> TaskTemplate:
    """`wide_research`: a row sub-agent per item (`row_capability`), then the traced table."""
    return TaskTemplate.model_validate(
        {
            "name": name,
            "description": "Research every item with a tool-using sub-agent; one row each, "
            "one table, every cell traced to its sub-agent.",
            "keywords": ["wide research", "widesearch"] if name == "wide_research" else [],
            "aggregate": "table",
            "stages": [
                {
                    "name": "research",
                    "capability": row_capability,
                    "fan_out": "per_item",
                    "input": {
                        "item": "$item",
                        "task": "$params.question",
                        "output_schema": "$params.row_schema",
                        "tools": "$params.tools",
                        "mcp_servers": "$params.mcp_servers",
                        "endpoint": "$params.endpoint",
                        "max_steps": "$params.max_steps",
                        "protocol": "$params.protocol",
                    },
                },
                {
                    "name": "table",
                    "capability": "llm.research.table",
                    "depends_on": ["research"],
                    "partial_ok": True,
                    "input": {
                        "items": "$items",
                        "row_schema": "$params.row_schema",
                        "rows": "$from.research",
                        "subtasks": "$from.research.@subtask_id",
                        "watermarks": "$from.research.@watermark",
                    },
                },
            ],
        }
    )
