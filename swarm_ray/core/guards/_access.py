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

Check what is opened, open what was checked: each value is resolved once to a canonical
form, that form is checked, and that form is what is dispatched (`check` returns the
input with every such value replaced by it). From an untrusted caller:

- a local path must be absolute, plain ASCII-compatible text (no percent-escape, no
  backslash, no control character, nothing NFKC folds to something else, such as
  fullwidth dots) and becomes its `realpath` (`..` and symlinks resolved);
- a `file://` URL is refused: readers would percent-decode it (pyarrow's `from_uri`)
  after the check; a local file is named by its plain path;
- a URI's scheme must be one an operator root uses (`s3://bucket/shared/` allow-lists
  `s3`); its path may hold no percent-escape, backslash, `.`, `..` or empty segment,
  and no query string (pyarrow reads options such as `endpoint_override` from it),
  fragment or user info.

A value is a URI when it contains `://` (what the readers test too).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import types
import typing
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Union, cast
from urllib.parse import urlsplit

from pydantic import BaseModel

from swarm_ray.core.model._errors import InputNotAllowedError

if TYPE_CHECKING:
    from swarm_ray.core.model._plan import Plan
    from swarm_ray.core.model._registry import Registry

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


@dataclass(frozen=True)
class Bounded:
    """Marks an input field whose value a bounded check must pass before anything reads it.

    `Annotated[str, Bounded(check)]`: a unit read by a grammar, a JSON Schema within its
    bounds. `check(value)` raises `ValueError` naming what is wrong. An untrusted
    caller's value is checked with the plan, like a path, so a value over a bound is
    refused (422) before any sub-task runs; every caller's value is checked again by its
    input model at dispatch.
    """

    check: Callable[[Any], object]
    """Raises `ValueError` for a value over a bound."""


_Path = tuple[str, ...]
"""Where a value sits in an input: field names, `*` for every element."""


def input_roots() -> tuple[str, ...]:
    """The operator's allow-listed read roots (`SWARM_RAY_INPUT_ROOTS`, comma-separated)."""
    listed = os.environ.get("SWARM_RAY_INPUT_ROOTS", "")
    return tuple(r.strip() for r in listed.split(",") if r.strip())


def _access_of(annotation: Any) -> Access | Bounded | None:
    for meta in getattr(annotation, "__metadata__", ()):
        if isinstance(meta, Access | Bounded):
            return meta
    return None


def _walk(
    annotation: Any, prefix: _Path, seen: frozenset[type]
) -> Iterator[tuple[_Path, Access | Bounded]]:
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
                access = next((m for m in info.metadata if isinstance(m, Access | Bounded)), None)
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
def access_fields(model: type[BaseModel]) -> tuple[tuple[_Path, Access | Bounded], ...]:
    """The fields of `model` that name server resources (cached per model)."""
    return tuple(dict.fromkeys(_walk(model, (), frozenset())))


def read_paths(model: type[BaseModel], data: Mapping[str, Any]) -> list[str]:
    """The files and URIs an input of `model` reads (its `ReadPath` values), in field order.

    What a failure names when the error it caught cannot say (a `MemoryError` in a bomb).
    """
    found: list[str] = []

    def keep(value: Any, _where: str) -> Any:
        if isinstance(value, str) and value and value not in found:
            found.append(value)
        return value

    for path, access in access_fields(model):
        if access is Access.READ:
            with contextlib.suppress(InputNotAllowedError):  # a malformed input names none
                _apply(data, path, "", keep)
    return found


_MARKERS = ("$from", "$task", "$answer")
"""Keys of the dispatch-time markers (`_plan.FROM_MARKER`, `TASK_MARKER`,
`_human.ANSWER_MARKER`): the scheduler replaces such a mapping whole, and the value it
becomes is checked then. Only a template puts them there (`refuse_markers`)."""


def refuse_markers(data: Any, where: str) -> None:
    """Refuse a marker key (`_MARKERS`) anywhere in what a caller sent (`params`, `items`).

    The scheduler reads a mapping holding `$from`, `$task` or `$answer` as a marker and
    replaces it at dispatch, so a caller's `{"$answer": 5}` would be read as one (and
    fail the task with a Python error). Only a template puts markers in an input. Other
    `$`-keys are data (a JSON Schema's `$ref`, a vocabulary's `$`). Walks without
    recursion (the depth limit is checked before, but a walk must not depend on it).

    Raises:
        InputNotAllowedError: A marker key, named by where it was
            (`params.fields[0].$answer`).
    """
    stack: list[tuple[Any, str]] = [(data, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, Mapping):
            for key, inner in value.items():
                name = f"{at}.{key}"
                if key in _MARKERS:
                    raise InputNotAllowedError(
                        f"`{name}`: {key!r} is a key the swarm reserves for its markers "
                        f"({', '.join(f'`{m}`' for m in _MARKERS)}); a request may not hold it",
                        field=name,
                        reason="reserved_key",
                    )
                stack.append((inner, name))
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{at}[{n}]") for n, item in enumerate(value))


_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]+$")
_UNSAFE = re.compile(r"[%\\\x00-\x1f\x7f]")


def _apply(data: Any, path: _Path, where: str, check: Callable[[Any, str], Any]) -> Any:
    """`data` with `check(value, where)` put in place of each value at `path`.

    Every key is walked, `$`-prefixed ones included; only a dispatch-time marker is left
    for the dispatch-time check. A container expected where a scalar is (`fields: 7`)
    is refused with the field named, never a `TypeError`.
    """
    if isinstance(data, Mapping) and any(m in data for m in _MARKERS):
        return data
    if not path:
        return check(data, where)
    head, rest = path[0], path[1:]
    if head == "*":
        if data is None:
            return None
        if isinstance(data, Mapping):
            return {k: _apply(v, rest, f"{where}[{k}]", check) for k, v in data.items()}
        if isinstance(data, list | tuple):
            return [_apply(v, rest, f"{where}[{n}]", check) for n, v in enumerate(data)]
        raise InputNotAllowedError(
            f"`{where}` must be a list or a mapping, got {type(data).__name__}",
            field=where,
            reason="type",
        )
    if isinstance(data, Mapping) and head in data:
        name = f"{where}.{head}" if where else head
        return {**data, head: _apply(data[head], rest, name, check)}
    return data  # absent, or another arm of a union: nothing to check there


def is_uri(value: str) -> bool:
    """Whether readers treat `value` as a URI (they test for `://` too)."""
    return "://" in value


def _normal_uri(value: str, field_name: str) -> str:
    """An operator root's URI, lower-cased scheme, no options (roots are trusted)."""
    parts = urlsplit(value)
    if parts.query or parts.fragment or "@" in parts.netloc:
        raise InputNotAllowedError(
            f"`{field_name}`: URI {value!r:.120} may not carry a query, fragment or user info",
            field=field_name,
            reason="uri_options",
        )
    return f"{parts.scheme.lower()}://{parts.netloc}{parts.path}"


def _refuse(field_name: str, value: str, why: str, reason: str) -> InputNotAllowedError:
    return InputNotAllowedError(
        f"`{field_name}`: {value!r:.120} {why}; HTTP callers name their files by upload "
        "id (`POST /v1/files`)",
        field=field_name,
        reason=reason,
    )


def _plain(value: str, field_name: str) -> None:
    """Refuse what decodes, folds or escapes into something other than it reads."""
    if "\x00" in value:
        raise InputNotAllowedError(
            f"`{field_name}` holds a NUL character", field=field_name, reason="nul"
        )
    if _UNSAFE.search(value):
        raise _refuse(
            field_name,
            value,
            "holds a percent-escape, backslash or control character",
            "escape",
        )
    if unicodedata.normalize("NFKC", value) != value:
        raise _refuse(field_name, value, "holds characters that fold to others", "unicode")


def canonical(value: str, field_name: str, uri_schemes: frozenset[str]) -> str:
    """The one form of an untrusted path or URI that is checked and then opened.

    Raises `InputNotAllowedError` for what has no single meaning (see the module
    docstring) or a scheme not in `uri_schemes`.
    """
    if is_uri(value) and value.partition("://")[0].lower() == "file":
        raise _refuse(field_name, value, "is a `file://` URL", "file_uri")
    _plain(value, field_name)
    if is_uri(value):
        scheme, _, rest = value.partition("://")
        scheme = scheme.lower()
        if not _SCHEME.match(scheme) or scheme not in uri_schemes:
            raise _refuse(
                field_name,
                value,
                f"uses a scheme (`{scheme:.20}`) no operator root allows",
                "scheme",
            )
        netloc, slash, inner = rest.partition("/")
        if any(c in rest for c in "?#") or "@" in netloc:
            raise _refuse(
                field_name,
                value,
                "may not carry a query, fragment or user info",
                "uri_options",
            )
        segments = inner.split("/")
        if any(s in ("", ".", "..") for s in segments[:-1]) or segments[-1] in (".", ".."):
            raise _refuse(
                field_name, value, "may not hold a `.`, `..` or empty segment", "traversal"
            )
        return f"{scheme}://{netloc}{slash}{inner}"
    if not os.path.isabs(value):
        raise _refuse(field_name, value, "is not an absolute path", "relative")
    return os.path.realpath("/" + value.lstrip("/"))


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
                _normal_uri(root, "root") if is_uri(root) else os.path.realpath(root)
            )
        return self._resolved[root]

    def _schemes(self, roots: tuple[str, ...]) -> frozenset[str]:
        schemes = {self._resolve_root(r).split("://", 1)[0] for r in roots if is_uri(r)}
        return frozenset(schemes - {"file"})

    def allows(self, access: Access | Bounded, value: Any, field_name: str) -> Any:
        """`value` as it must be used for `access` (canonical), or `InputNotAllowedError`."""
        if value is None:
            return None
        if isinstance(access, Bounded):
            try:
                access.check(value)
            except ValueError as exc:
                raise InputNotAllowedError(
                    f"`{field_name}`: {exc}", field=field_name, reason="bounds"
                ) from None
            return value
        if not isinstance(value, str):
            raise InputNotAllowedError(
                f"`{field_name}` must be a string, got {type(value).__name__}",
                field=field_name,
                reason="type",
            )
        if access is Access.LABEL and not value.startswith("re:"):
            return value
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
        target = canonical(value, field_name, self._schemes(roots))
        if not any(
            is_uri(r) == is_uri(target) and _under(target, self._resolve_root(r)) for r in roots
        ):
            verb = "read" if access is Access.READ else "write"
            raise InputNotAllowedError(
                f"`{field_name}`: this caller may not {verb} {value!r:.120}; HTTP callers "
                "name their files by upload id (`POST /v1/files`), and an operator "
                "allow-lists other roots in `SWARM_RAY_INPUT_ROOTS`",
                field=field_name,
                reason=verb,
            )
        return target

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

    def check(
        self, model: type[BaseModel], data: Mapping[str, Any], *, where: str = ""
    ) -> dict[str, Any]:
        """Check every server-resource field of an input of `model` (raises on the first).

        Returns the input with each such value in its canonical form: what is dispatched.
        """
        checked: Any = dict(data)
        for path, access in access_fields(model):

            def allowed(value: Any, name: str, access: Access | Bounded = access) -> Any:
                return self.allows(access, value, name)

            checked = _apply(checked, path, where, allowed)
        return cast("dict[str, Any]", checked)
