"""Limits on what one request may ask for, checked before anything is planned.

A request's size decides how much work the orchestrator's one event loop does for it
(expanding items x fields into sub-tasks, storing and reloading its record), so a caller
must not be able to ask for an unbounded amount. Two kinds of limit:

- **structural**, for every caller: JSON nesting depth (a record nested a few hundred deep
  is written but cannot be read back, which used to break recovery for every task);
- **size**, for untrusted callers (HTTP): items, fields, items x fields, string lengths,
  parameter bytes, open tasks per principal. Trusted callers (jobs, the Python client)
  run what their cluster can hold.

What a field is, is the workload's to say: each catalog may count the fields a request
asks of every item (`Catalog.count_fields`; the document workload counts its dimensions
and inline fields), and the limits take the largest count.

Each limit is configurable (`SWARM_RAY_LIMIT_<NAME>`, e.g. `SWARM_RAY_LIMIT_MAX_ITEMS`)
and a breach raises `LimitExceededError` naming the limit, the value and the maximum.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from swarm_ray.core.model._errors import InvalidSpecError, LimitExceededError
from swarm_ray.core.model._task import TaskRequest

__all__: list[str] = []

FieldCount = Callable[[TaskRequest], int]
"""How many fields a request asks of each item, as one workload counts them."""


@dataclass(frozen=True)
class RequestLimits:
    """The limits (see the module docstring); `from_env()` reads overrides."""

    max_depth: int = 32
    """JSON nesting of `params`, `items` and `metadata` (every caller)."""
    max_items: int = 1000
    """Items of one request."""
    max_fields: int = 64
    """Fields a request asks of each item, as its workloads count them (`count_fields`)."""
    max_fanout: int = 20_000
    """Items x fields: the sub-tasks a per-item-and-field stage becomes."""
    max_string: int = 10_000
    """Characters of any one string (the query, an item, a parameter value)."""
    max_params_bytes: int = 256 * 1024
    """Bytes of the request's `params` and `items` as JSON."""
    max_open_tasks: int = 100
    """Tasks one principal may have running at once."""
    count_fields: tuple[FieldCount, ...] = ()
    """The workloads' counts of a request's fields (`Catalog.count_fields`): the largest
    is the request's (none: no fields)."""

    @classmethod
    def from_env(cls, *, count_fields: tuple[FieldCount, ...] = ()) -> RequestLimits:
        """Defaults, each overridden by `SWARM_RAY_LIMIT_<NAME>` when set."""
        values: dict[str, int] = {}
        for f in dataclasses.fields(cls):
            if not f.name.startswith("max_"):
                continue
            name = f"SWARM_RAY_LIMIT_{f.name.upper()}"
            if (raw := os.environ.get(name)) is not None:
                try:
                    values[f.name] = int(raw)
                except ValueError:
                    raise InvalidSpecError(f"`{name}` must be an integer, got {raw!r}") from None
        return cls(**values, count_fields=count_fields)

    def check(self, request: TaskRequest, *, untrusted: bool) -> None:
        """Raise `LimitExceededError` for the first limit `request` breaks."""
        for name, value in (
            ("params", request.params),
            ("items", request.items),
            ("metadata", request.metadata),
        ):
            depth = json_depth(value)
            if depth > self.max_depth:
                _breach("max_depth", f"`{name}` is nested {depth} deep", depth, self.max_depth)
        if not untrusted:
            return
        items = len(request.items)
        if items > self.max_items:
            _breach("max_items", f"{items} items", items, self.max_items)
        fields = max((count(request) for count in self.count_fields), default=0)
        if fields > self.max_fields:
            _breach("max_fields", f"{fields} fields", fields, self.max_fields)
        fanout = max(items, 1) * max(fields, 1)
        if fanout > self.max_fanout:
            _breach("max_fanout", f"{items} items x {fields} fields", fanout, self.max_fanout)
        longest = max(_longest_string(request.model_dump(mode="json")), 0)
        if longest > self.max_string:
            _breach("max_string", f"a string of {longest} characters", longest, self.max_string)
        size = len(json.dumps([request.params, request.items], default=str))
        if size > self.max_params_bytes:
            _breach(
                "max_params_bytes", f"{size} bytes of params and items", size, self.max_params_bytes
            )

    def check_open(self, open_tasks: int) -> None:
        """Refuse one more task for a principal that already has `open_tasks` running."""
        if open_tasks >= self.max_open_tasks:
            _breach(
                "max_open_tasks",
                f"{open_tasks} tasks still running for this caller",
                open_tasks + 1,
                self.max_open_tasks,
            )


def _breach(limit: str, what: str, value: int, maximum: int) -> None:
    raise LimitExceededError(
        f"request over the `{limit}` limit: {what}, at most {maximum} allowed",
        limit=limit,
        value=value,
        maximum=maximum,
    )


def json_depth(value: Any) -> int:
    """Nesting depth of a JSON-like value (a scalar is 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def _longest_string(value: Any) -> int:
    longest = 0
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            longest = max(longest, len(node))
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return longest
