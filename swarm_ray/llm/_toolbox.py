"""An agent's tools: registered capabilities (as child sub-tasks) and MCP servers' tools.

A `Toolbox` is built once per agent run from names only: capability ids and the names
of registered MCP servers (never a URL or a command from the request). It declares the
tools to the model (OpenAI function declarations) and runs a call:

- a **capability** tool becomes a child sub-task of the agent's own sub-task
  (`swarm_ray.run_child`): validated, watermarked, retried, traced and accounted by the
  orchestrator like any sub-task. Only capabilities tagged `tool` are offered: the
  operator decides which capabilities agents may reach.
- an **MCP** tool is called on the server's session (`_mcp`);
- **`ask_human`** (when the request allows it) is checked here and answered by the task's
  owner: the agent pauses for it (`_tool_agent`, `swarm_ray.agent.ask_human`).

Nothing a model writes is trusted: an unknown tool, arguments that are not JSON or that
fail the tool's schema, a tool that fails or times out all come back as an error text
for the model (which may try again), never as an exception out of the loop.

Nothing a tool answers is trusted either: it is shown to the model marked as a tool's
data (`untrusted`), and once any tool has answered, a tool with **side effects** (a
capability declared `side_effects`, an MCP tool its server does not mark `readOnlyHint`)
runs only when the request set `allow_side_effects`: the model's wish to call it may
come from instructions inside that answer rather than from the caller.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from swarm_ray.agent import describe_capabilities, record_call, run_child
from swarm_ray.core import CallRecord, InvalidSpecError, SubTask, SwarmError
from swarm_ray.llm._mcp import mcp_pool
from swarm_ray.llm._settings import McpServer, llm_settings, resolve

__all__ = ["ToolOutcome"]

TOOL_TAG = "tool"
"""Capabilities tagged so may be called by agents."""
_MAX_CONTENT = 4000
"""Characters of a tool's answer shown to the model."""


@dataclass(frozen=True)
class Tool:
    """A tool as the model sees it, and where a call goes."""

    name: str
    description: str
    parameters: dict[str, Any]
    kind: Literal["capability", "mcp", "human"]
    target: str
    """The capability id, or the MCP tool's own name."""
    server: tuple[str, McpServer] | None = None
    """The MCP server (name, registration) of an MCP tool."""
    side_effects: bool = False
    """Calling it changes something outside (see the module docstring)."""

    def declaration(self) -> dict[str, Any]:
        """The OpenAI function declaration."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class ToolOutcome(BaseModel):
    """One tool call's result, as the transcript keeps it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: str
    """The tool the model named."""
    arguments: str
    """The arguments as the model wrote them."""
    ok: bool
    """False for an unknown tool, bad arguments, a failure or a timeout."""
    content: str
    """What the model is told (the output as JSON, or the error)."""
    seconds: float = 0.0
    """Wall time of the call."""
    subtask_id: str | None = None
    """The child sub-task of a capability tool."""
    watermark: str | None = None
    """The child's accepted result's watermark (traces the answer to its agent)."""
    question: str | None = None
    """For `ask_human`: the question put to the task's owner (`content` is the answer)."""


ASK_HUMAN = "ask_human"
"""The tool that asks the task's owner a question (offered when a request allows it)."""
_ASK_HUMAN_TOOL = Tool(
    name=ASK_HUMAN,
    description=(
        "Ask the person who gave you this task one question, when you need their decision "
        "or something only they know. You get their answer back; the task waits for it."
    ),
    parameters={
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1, "maxLength": 2000}},
        "required": ["question"],
        "additionalProperties": False,
    },
    kind="human",
    target="",
)


def tool_name(text: str) -> str:
    """A function name providers accept (`^[a-zA-Z0-9_-]{1,64}$`): dots become `__`."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text.replace(".", "__"))[:64]


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_CONTENT else text[: _MAX_CONTENT - 20] + " ...(cut)"


def _schema_problems(arguments: Any, schema: Mapping[str, Any]) -> list[str]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(dict(schema))
    return [
        f"`{'.'.join(str(p) for p in err.absolute_path) or '(root)'}`: {err.message}"
        for err in validator.iter_errors(arguments)
    ][:5]


class Toolbox:
    """The tools of one agent run."""

    def __init__(
        self,
        tools: Sequence[Tool],
        *,
        parent: SubTask | None,
        timeout_s: float,
        allow_side_effects: bool = False,
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self._parent = parent
        self._timeout_s = timeout_s
        self._allow_side_effects = allow_side_effects
        self.answered = False
        """A tool has answered: its text is in the conversation from here on."""

    @classmethod
    def build(
        cls,
        *,
        capabilities: Sequence[str],
        mcp_servers: Sequence[str],
        declared_servers: Mapping[str, McpServer],
        parent: SubTask | None,
        own_capability: str | None,
        timeout_s: float,
        allow_side_effects: bool = False,
        ask_human: bool = False,
    ) -> Toolbox:
        """Tools from capability ids and registered MCP server names (and `ask_human`).

        Raises:
            InvalidSpecError: a capability not tagged `tool`, the agent's own, an MCP
                server nobody registered, or two tools with one name.
            UnknownCapabilityError: a capability id that is not registered.
            AgentUnavailableError: an MCP server could not be reached.
        """
        tools: list[Tool] = []
        if capabilities:
            if parent is None:
                raise InvalidSpecError("capability tools need a running sub-task")
            for line in describe_capabilities(capabilities, parent=parent):
                cid = line["id"]
                if cid == own_capability or TOOL_TAG not in line.get("tags", ()):
                    raise InvalidSpecError(
                        f"capability `{cid}` is not offered to agents as a tool "
                        f"(tools are capabilities tagged `{TOOL_TAG}`, other than the agent's own)"
                    )
                tools.append(
                    Tool(
                        name=tool_name(cid),
                        description=line["description"],
                        parameters=line["input_schema"],
                        kind="capability",
                        target=cid,
                        side_effects=bool(line.get("side_effects")),
                    )
                )
        registered = llm_settings().mcp_servers
        pool = mcp_pool() if mcp_servers else None
        for server_name in mcp_servers:
            owner = None if parent is None else parent.owner
            server = resolve("MCP server", server_name, declared_servers, registered, owner)
            assert pool is not None
            for mcp_tool in pool.tools(server_name, server, owner):
                tools.append(
                    Tool(
                        name=tool_name(f"{server_name}.{mcp_tool.name}"),
                        description=mcp_tool.description,
                        parameters=mcp_tool.input_schema or {"type": "object"},
                        kind="mcp",
                        target=mcp_tool.name,
                        server=(server_name, server),
                        side_effects=not mcp_tool.read_only,
                    )
                )
        if ask_human:
            tools.append(_ASK_HUMAN_TOOL)
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise InvalidSpecError(f"two tools are called {', '.join(twice)}")
        return cls(tools, parent=parent, timeout_s=timeout_s, allow_side_effects=allow_side_effects)

    def declarations(self) -> list[dict[str, Any]]:
        """Every tool's OpenAI function declaration."""
        return [tool.declaration() for tool in self.tools.values()]

    def call(self, name: str, arguments: str) -> ToolOutcome:
        """Run one call the model asked for; every problem becomes an error for the model."""
        started = time.perf_counter()

        def refuse(message: str) -> ToolOutcome:
            return ToolOutcome(
                tool=name,
                arguments=arguments,
                ok=False,
                content=f"error: {message}",
                seconds=time.perf_counter() - started,
            )

        tool = self.tools.get(name)
        if tool is None:
            known = ", ".join(self.tools) or "none"
            return refuse(f"unknown tool `{name}`; the tools are: {known}")
        try:
            parsed = json.loads(arguments or "{}")
        except json.JSONDecodeError as exc:
            return refuse(f"the arguments of `{name}` are not JSON ({exc.msg}): {arguments!r:.200}")
        if not isinstance(parsed, dict):
            return refuse(f"the arguments of `{name}` must be a JSON object, got {parsed!r:.200}")
        problems = _schema_problems(parsed, tool.parameters)
        if problems:
            return refuse(f"the arguments of `{name}` do not fit its schema: {'; '.join(problems)}")
        if tool.kind == "human":  # the owner answers it: the agent's loop pauses for that
            return ToolOutcome(
                tool=name, arguments=arguments, ok=True, content="", question=parsed["question"]
            )
        if tool.side_effects and self.answered and not self._allow_side_effects:
            return refuse(
                f"`{name}` has side effects and a tool's answer is in this conversation; "
                "it runs after one only when the request sets `allow_side_effects`"
            )
        self.answered = True
        began = time.time()
        try:
            if tool.kind == "capability":
                outcome = self._capability(tool, arguments, parsed, started)
            else:
                outcome = self._mcp(tool, arguments, parsed, started)
        except SwarmError as exc:
            outcome = refuse(f"`{name}` failed ({exc.code}): {exc.message}")
        record_call(  # an `execute_tool` span of the trace
            CallRecord(
                kind="tool",
                name=name,
                provider="mcp" if tool.kind == "mcp" else "swarm",
                started_at=began,
                finished_at=time.time(),
                error=None if outcome.ok else outcome.content[:200],
            )
        )
        return outcome

    def _capability(
        self, tool: Tool, arguments: str, parsed: dict[str, Any], started: float
    ) -> ToolOutcome:
        outcome = run_child(tool.target, parsed, parent=self._parent, timeout_s=self._timeout_s)
        if outcome.ok:
            content = json.dumps(outcome.output, default=str)
        else:
            assert outcome.error is not None
            content = f"error: `{tool.name}` {outcome.status} ({outcome.error.code}): "
            content += outcome.error.message
        return ToolOutcome(
            tool=tool.name,
            arguments=arguments,
            ok=outcome.ok,
            content=_clip(content),
            seconds=time.perf_counter() - started,
            subtask_id=outcome.subtask_id,
            watermark=outcome.watermark or None,
        )

    def _mcp(
        self, tool: Tool, arguments: str, parsed: dict[str, Any], started: float
    ) -> ToolOutcome:
        assert tool.server is not None
        server_name, server = tool.server
        owner = None if self._parent is None else self._parent.owner
        answer = mcp_pool().call(
            server_name, server, tool.target, parsed, self._timeout_s, principal=owner
        )
        content = f"error: {answer.text}" if answer.is_error else answer.text
        return ToolOutcome(
            tool=tool.name,
            arguments=arguments,
            ok=not answer.is_error,
            content=_clip(content),
            seconds=time.perf_counter() - started,
        )
