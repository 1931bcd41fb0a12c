"""W3C trace context (`traceparent`) read strictly, for a task's place in a caller's trace.

A `traceparent` names the caller's span: `00-TRACE_ID-PARENT_ID-FLAGS`, lower-case hex,
32, 16 and 2 digits (https://www.w3.org/TR/trace-context/#traceparent-header). A task
submitted with one takes its trace id, and its root span (see `runtime._otel`) becomes a
child of that span. HTTP callers are untrusted, so only version `00` in exactly that form
is read; anything else (another version, upper case, an all-zero id, extra fields) is not
a trace context at all and is ignored, never half-read.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__: list[str] = []

_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


class TraceParent(NamedTuple):
    """The caller's span, as its `traceparent` names it."""

    trace_id: str
    """32 lower-case hex digits, not all zero."""
    span_id: str
    """16 lower-case hex digits, not all zero: the span the task's root is a child of."""
    flags: int
    """Trace flags (bit 0: the caller sampled its span)."""


def parse_traceparent(value: str | None) -> TraceParent | None:
    """The span a `traceparent` value names, or None when it is not a valid one."""
    if value is None:
        return None
    match = _TRACEPARENT.fullmatch(value)
    if match is None:
        return None
    trace_id, span_id, flags = match.groups()
    if trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return TraceParent(trace_id, span_id, int(flags, 16))


def checked_traceparent(value: str | None) -> str | None:
    """`value` when it is a valid `traceparent` (for a model field); raises otherwise."""
    if value is not None and parse_traceparent(value) is None:
        raise ValueError(
            f"`traceparent` must be a W3C trace context `00-<32 hex>-<16 hex>-<2 hex>` "
            f"(lower case, ids not all zero), got {value[:80]!r}"
        )
    return value
