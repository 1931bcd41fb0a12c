"""What an untrusted task may touch: server paths, URIs and URLs in capability inputs.

A capability input field that names something on the server says so in its type:

    path: ReadPath              a file or URI the agent reads
    out_dir: WritePath          a directory or file the agent writes
    url: FetchURL | None        a URL the agent connects to

Trusted callers (they hold the cluster anyway) may put anything there. For a task of an
untrusted principal (an HTTP caller), an `AccessPolicy` checks every such value, once
when the plan is made (a refused value fails the request with 422 before anything
runs) and again on every dispatch (values that arrive from upstream outputs):

- a read must resolve, symlinks followed, under the principal's own uploads, the
  task's own directory, or a root the operator allow-listed (`SWARM_RAY_INPUT_ROOTS`:
  directories or URI prefixes such as `s3://bucket/shared/`);
- a write must resolve under the task's own directory;
- a fetch is never allowed (servers a task talks to are the operator's configuration);
- a regular expression is never allowed (`Pattern`, or a `Label` written `re:...`): one
  with catastrophic backtracking would hold an agent for as long as it likes. HTTP
  callers name things in plain words.

URIs are compared as text after normalising: no `..` segment, no query string (pyarrow
reads options such as `endpoint_override` from it), no user info.
"""

from __future__ import annotations

import functools
import os
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Union
from urllib.parse import urlsplit

from pydantic import BaseModel

from swarm_ray.core._errors import InputNotAllowedError

if TYPE_CHECKING:
    from swarm_ray.core._plan import Plan
    from swarm_ray.core._registry import Registry

__all__ = ["FetchURL", "Label", "Pattern", "ReadPath", "WritePath"]


class Access(StrEnum):
    """How an input field touches the server."""

    READ = "read"
    WRITE = "write"
    FETCH = "fetch"
    PATTERN = "pattern"
    LABEL = "label"


ReadPath = Annotated[str, Access.READ]
"""A local path or URI the agent reads."""
WritePath = Annotated[str, Access.WRITE]
"""A local directory or file the agent writes."""
FetchURL = Annotated[str, Access.FETCH]
"""A URL the agent connects to."""
Pattern = Annotated[str, Access.PATTERN]
"""A regular expression the agent runs over its input (backtracking can take forever)."""
Label = Annotated[str, Access.LABEL]
"""Plain words, or a regular expression when written `re:...` (a `Pattern` then)."""

_Path = tuple[str, ...]
"""Where a value sits in an input: field names, `*` for every element."""


def input_roots() -> tuple[str, ...]:
    """The operator's allow-listed read roots (`SWARM_RAY_INPUT_ROOTS`, comma-separated)."""
    listed = os.environ.get("SWARM_RAY_INPUT_ROOTS", "")
    return tuple(r.strip() for r in listed.split(",") if r.strip())


def _access_of(annotation: Any) -> Access | None:
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, Access):
            return meta
    return None


def _walk(annotation: Any, prefix: _Path, seen: frozenset[type]) -> Iterator[tuple[_Path, Access]]:
    """Every (path, access) reachable in a type: nested models, optionals, containers."""
    access = _access_of(annotation)
    if access is not None:
        yield prefix, access
        return
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return
        for name, info in annotation.model_fields.items():
            inner = info.annotation
            if info.metadata:  # Annotated[...] metadata lands here for top-level fields
                access = next((m for m in info.metadata if isinstance(m, Access)), None)
                if access is not None:
                    yield (*prefix, name), access
                    continue
            yield from _walk(inner, (*prefix, name), seen | {annotation})
        return
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Annotated:
        yield from _walk(args[0], prefix, seen)
    elif origin in (Union, types.UnionType):
        for arg in args:
            yield from _walk(arg, prefix, seen)
    elif origin in (list, tuple, set, frozenset, Sequence):
        for arg in args:
            if arg is not Ellipsis:
                yield from _walk(arg, (*prefix, "*"), seen)
    elif origin in (dict, Mapping) and len(args) == 2:
        yield from _walk(args[1], (*prefix, "*"), seen)


@functools.cache
def access_fields(model: type[BaseModel]) -> tuple[tuple[_Path, Access], ...]:
    """The fields of `model` that name server resources (cached per model)."""
    return tuple(dict.fromkeys(_walk(model, (), frozenset())))


def _values(data: Any, path: _Path, where: str) -> Iterator[tuple[str, Any]]:
    if isinstance(data, Mapping) and any(str(k).startswith("$") for k in data):
        return  # a dispatch-time marker (`$from`, `$task`): checked once it resolves
    if not path:
        yield where, data
        return
    head, rest = path[0], path[1:]
    if head == "*":
        items = data.items() if isinstance(data, Mapping) else enumerate(data or ())
        for key, value in items:
            yield from _values(value, rest, f"{where}[{key}]")
    elif isinstance(data, Mapping) and head in data:
        yield from _values(data[head], rest, f"{where}.{head}" if where else head)


def _is_uri(value: str) -> bool:
    scheme = urlsplit(value).scheme
    return "://" in value and len(scheme) > 1  # `C:\...` is a path, not a URI


def _normal_uri(value: str, field_name: str) -> str:
    parts = urlsplit(value)
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise InputNotAllowedError(
            f"`{field_name}`: URI {value!r:.120} may not carry a query, fragment or user "
            "info; HTTP callers name their files by upload id (`POST /v1/files`)",
            field=field_name,
            reason="uri_options",
        )
    if ".." in parts.path.split("/"):
        raise InputNotAllowedError(
            f"`{field_name}`: URI {value!r:.120} may not hold a `..` segment; HTTP callers "
            "name their files by upload id (`POST /v1/files`)",
            field=field_name,
            reason="traversal",
        )
    return f"{parts.scheme.lower()}://{parts.netloc}{parts.path}"


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class AccessPolicy:
    """What one untrusted task may read and write (see the module docstring)."""

    read_roots: tuple[str, ...] = ()
    """Directories and URI prefixes readable (uploads, allow-listed roots, the task dir)."""
    write_roots: tuple[str, ...] = ()
    """Directories writable (the task's own)."""
    _resolved: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def _resolve_root(self, root: str) -> str:
        if root not in self._resolved:
            self._resolved[root] = (
                _normal_uri(root, "root") if _is_uri(root) else os.path.realpath(root)
            )
        return self._resolved[root]

    def allows(self, access: Access, value: Any, field_name: str) -> None:
        """Raise `InputNotAllowedError` unless `value` may be used for `access`."""
        if value is None:
            return
        if not isinstance(value, str):
            raise InputNotAllowedError(
                f"`{field_name}` must be a string, got {type(value).__name__}",
                field=field_name,
                reason="type",
            )
        if access is Access.LABEL and not value.startswith("re:"):
            return
        if access in (Access.PATTERN, Access.LABEL):
            raise InputNotAllowedError(
                f"`{field_name}`: an HTTP request may not carry a regular expression "
                f"({value!r:.60}); name it in plain words",
                field=field_name,
                reason="pattern",
            )
        if access is Access.FETCH:
            raise InputNotAllowedError(
                f"`{field_name}`: an HTTP request may not name a URL for the server to "
                f"contact ({value!r:.80}); servers are the operator's configuration",
                field=field_name,
                reason="fetch",
            )
        roots = self.read_roots if access is Access.READ else self.write_roots
        if "\x00" in value:
            raise InputNotAllowedError(
                f"`{field_name}` holds a NUL character", field=field_name, reason="nul"
            )
        if _is_uri(value) and not value.lower().startswith("file://"):
            target = _normal_uri(value, field_name)
            allowed = any(_is_uri(r) and _under(target, self._resolve_root(r)) for r in roots)
        else:
            local = urlsplit(value).path if value.lower().startswith("file://") else value
            if not os.path.isabs(local):
                raise InputNotAllowedError(
                    f"`{field_name}`: {value!r:.80} is not an absolute path; HTTP callers "
                    "name their files by upload id",
                    field=field_name,
                    reason="relative",
                )
            target = os.path.realpath(local)
            allowed = any(not _is_uri(r) and _under(target, self._resolve_root(r)) for r in roots)
        if not allowed:
            verb = "read" if access is Access.READ else "write"
            raise InputNotAllowedError(
                f"`{field_name}`: this caller may not {verb} {value!r:.120}; HTTP callers "
                "name their files by upload id (`POST /v1/files`), and an operator "
                "allow-lists other roots in `SWARM_RAY_INPUT_ROOTS`",
                field=field_name,
                reason=verb,
            )

    def check_plan(self, plan: Plan, registry: Registry) -> None:
        """Refuse a plan whose literal inputs name what the task may not use."""
        for spec in plan.subtasks:
            model = registry.get(spec.capability_id).input_model
            try:
                self.check(model, spec.input, where=f"{spec.id}.input")
            except InputNotAllowedError as exc:
                raise InputNotAllowedError(
                    f"sub-task `{spec.id}` ({spec.capability_id}): {exc.message}", **exc.details
                ) from None

    def check(self, model: type[BaseModel], data: Mapping[str, Any], *, where: str = "") -> None:
        """Check every server-resource field of an input of `model` (raises on the first)."""
        for path, access in access_fields(model):
            for name, value in _values(data, path, where):
                self.allows(access, value, name)
