"""The output sanitizer: what an agent says passes a check before the swarm accepts it.

An agent's output is data another agent, a report or an operator may act on, and a
model can be talked into writing anything. So every output of a capability whose spec
has `sanitize=True` (the default) is checked in the agent's process, after it
validated and before it is returned:

- **dangerous shell commands** (`rm -rf /`, `mkfs`, `dd ... of=/dev/sda`, a fork bomb,
  `curl ... | sh`, reverse shells) and **secrets** (private keys, cloud and API tokens,
  quoted passwords) in any text of the output, by regular expressions;
- **code fields** (an output field declared with `CodeField`, or `json_schema_extra`
  `{"x-swarm-code": "python"}`) are parsed as Python, and calls of `os.system`,
  `os.popen`, `os.exec*`, `os.spawn*`, `subprocess.*`, `eval`, `exec`, `compile` and
  `__import__` are refused, through import aliases too. Code that does not parse is
  refused: it cannot be checked.

  A `getattr` whose name is not a literal, a star-import, and any touch of
  `__builtins__`, `__globals__` or `__subclasses__` are refused too: they are how a
  call hides from a check by name.

A refused output fails the attempt with `sanitization_failed`, naming each finding by
field and rule (never quoting a secret), so the usual retry and fallback apply, the task
shows it, and `agent_error_total{error_type="sanitization_failed"}` counts it.

**This is a filter, not a sandbox.** It catches the obvious and the listed evasions; a
determined author of code or text will find spellings it does not know. Anything that
runs untrusted code must run in a subprocess under the hard limits of `Resources`
(`runtime/_rlimits.py`), whatever this filter said.

Every rule runs in time linear in the text (it runs on document text): each pattern
has a literal start and no unbounded run that another start could scan again; a rule
that needs "this, then later on the line that" is two linear searches, from the first
occurrence of "this" only (`_then`), and the download-to-shell rule looks at the text
between pipes once (`_piped`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from pydantic import BaseModel, Field

__all__: list[str] = []

CODE_MARK = "x-swarm-code"
CodeField = Annotated[str, Field(json_schema_extra={CODE_MARK: "python"})]
"""A `str` output field holding Python code: the sanitizer parses and checks it."""

_B = r"(?<![A-Za-z0-9_\-])"  # not inside a longer token (a base64 watermark, say)
Matcher = Callable[[str], bool]


def _regex(pattern: str) -> Matcher:
    return re.compile(pattern).search  # type: ignore[return-value]


def _then(first: str, second: str) -> Matcher:
    """`first`, then `second` later on the same line: linear, from the first `first` only.

    If any occurrence of `first` on a line is followed by `second`, the first one is.
    """
    head, tail = re.compile(first), re.compile(second)

    def matches(text: str) -> bool:
        for line in text.split("\n"):
            found = head.search(line)
            if found is not None and tail.search(line, found.end()):
                return True
        return False

    return matches


_DOWNLOAD = re.compile(r"\b(curl|wget)\b")
_SHELL = re.compile(r"\s*(sudo\s+)?(ba|z|da)?sh\b")


def _piped(text: str) -> bool:
    """A download command, then (through any pipes) a shell: each segment read once."""
    for line in text.split("\n"):
        downloaded = False
        for segment in line.split("|"):
            if downloaded and _SHELL.match(segment):
                return True
            downloaded = downloaded or _DOWNLOAD.search(segment) is not None
    return False


_RM = re.compile(
    # `rm` first, then "not after a word character, `-`, `.` or `/`": a literal start
    # lets `re` skip ahead, and `-rm` can never start a second scan of the same options
    r"rm(?<![\w\-./]rm)\s+(?P<options>(?:-[\-a-zA-Z]*\s+)+)(/|~|\$HOME|\*)(\s|$|\*)"
)
_RECURSIVE = re.compile(r"(?:^|\s)(?:-[a-zA-Z]*[rfRF]|--recursive|--force)")


_NETCAT_SHELL = _then(r"\bnc\b", r"\s-e\s+/bin/(ba)?sh")


def _rm_root(text: str) -> bool:
    return any(_RECURSIVE.search(m.group("options")) for m in _RM.finditer(text))


_RULES: tuple[tuple[str, tuple[str, ...], Matcher], ...] = (
    # (rule, literals one of which a match holds (the cheap test first), matcher)
    ("shell: rm -rf on a root or home", ("rm",), _rm_root),
    ("shell: rm --no-preserve-root", ("--no-preserve-root",), _regex(r"--no-preserve-root")),
    ("shell: mkfs on a device", ("mkfs",), _then(r"\bmkfs\b", r"\s\S*?/dev/")),
    (
        "shell: dd onto a device",
        ("of=/dev/",),
        _then(r"\bdd\s", r"\bof=/dev/(sd|hd|nvme|xvd|vd|mmcblk)"),
    ),
    (
        "shell: write onto a disk device",
        ("/dev/",),
        _regex(r">\s*/dev/(sd|hd|nvme|xvd|vd)"),
    ),
    (
        "shell: fork bomb",
        (":",),
        _regex(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    ),
    ("shell: download piped to a shell", ("curl", "wget"), _piped),
    ("shell: chmod 777 on root", ("777",), _regex(r"\bchmod\s+(-R\s+)?0?777\s+/(\s|$)")),
    (
        "shell: reverse shell",
        ("/dev/tcp/", "/bin/"),
        lambda text: "/dev/tcp/" in text or _NETCAT_SHELL(text),
    ),
    (
        "secret: private key",
        ("PRIVATE KEY-----",),
        _regex(r"-----BEGIN (RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY-----"),
    ),
    ("secret: AWS access key", ("AKIA", "ASIA"), _regex(_B + r"(AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "secret: GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _regex(_B + r"gh[pousr]_[A-Za-z0-9]{36}"),
    ),
    ("secret: API key (sk-)", ("sk-",), _regex(_B + r"sk-(proj-|ant-)?[A-Za-z0-9_\-]{20}")),
    ("secret: Slack token", ("xox",), _regex(_B + r"xox[abprs]-[A-Za-z0-9\-]{10}")),
    ("secret: Google API key", ("AIza",), _regex(_B + r"AIza[0-9A-Za-z_\-]{35}")),
    (
        "secret: quoted password or key",
        ("password", "passwd", "secret", "api_key", "api-key", "apikey", "access"),
        # read on the lower-cased text: a case-insensitive alternation is four times slower
        _regex(
            r"(password|passwd|secret|api[_-]?key|access[_-]?token)\s*[:=]\s*['\"]"
            r"[^'\"\s]{8}[^'\"\s]*['\"]"
        ),
    ),
)
_LOWER_RULE = "secret: quoted password or key"
_CALLS = frozenset(
    {"eval", "exec", "compile", "__import__", "os.system", "os.popen"}
    | {f"builtins.{name}" for name in ("eval", "exec", "compile", "__import__")}
)
_PREFIXES = ("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "pty.spawn")
_DUNDERS = frozenset({"__builtins__", "__globals__", "__subclasses__"})


def _texts(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list | tuple):
        for n, item in enumerate(value):
            yield from _texts(item, f"{path}[{n}]")


def _code_paths(model: type[BaseModel], value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, code) of every code field in `value`, an output of `model`."""
    if not isinstance(value, dict):
        return
    for name, field in model.model_fields.items():
        if name not in value:
            continue
        here = f"{path}.{name}" if path else name
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        for meta in field.metadata:
            if isinstance(getattr(meta, "json_schema_extra", None), dict):
                extra = {**extra, **meta.json_schema_extra}
        if CODE_MARK in extra and isinstance(value[name], str):
            yield here, value[name]
            continue
        inner = field.annotation
        nested = [a for a in getattr(inner, "__args__", (inner,)) if isinstance(a, type)]
        for kind in nested:
            if issubclass(kind, BaseModel):
                items = value[name] if isinstance(value[name], list) else [value[name]]
                for n, item in enumerate(items):
                    where = f"{here}[{n}]" if isinstance(value[name], list) else here
                    yield from _code_paths(kind, item, where)


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


def _refused(name: str | None) -> bool:
    return bool(name) and (name in _CALLS or name.startswith(_PREFIXES))  # type: ignore[union-attr]


def check_python(code: str) -> list[str]:
    """Refused calls in `code` (or why it cannot be checked)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"code does not parse (line {exc.lineno}): {exc.msg}"]
    aliases: dict[str, str] = {}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    found.append(f"star-imports `{node.module}` (line {node.lineno})")
                elif node.module:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    called: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called.add(id(node.func))
            name = _dotted(node.func, aliases)
            if name == "getattr" and len(node.args) >= 2:
                attr = node.args[1]
                if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
                    found.append(f"calls `getattr` with a computed name (line {node.lineno})")
                elif (owner := _dotted(node.args[0], aliases)) and _refused(
                    f"{owner}.{attr.value}"
                ):
                    found.append(f"reaches `{owner}.{attr.value}` (line {node.lineno})")
                elif attr.value in _DUNDERS:
                    found.append(f"touches `{attr.value}` (line {node.lineno})")
            elif _refused(name):
                found.append(f"calls `{name}` (line {node.lineno})")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in _DUNDERS:
            found.append(f"touches `{node.id}` (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr in _DUNDERS:
            found.append(f"touches `{node.attr}` (line {node.lineno})")
        elif (
            isinstance(node, ast.Attribute | ast.Name)
            and id(node) not in called
            and isinstance(node.ctx, ast.Load)
            and _refused(name := _dotted(node, aliases))
        ):
            found.append(f"refers to `{name}` (line {node.lineno})")
    return found


def sanitize_output(output: dict[str, Any], model: type[BaseModel] | None = None) -> list[str]:
    """Findings in an output (empty when it passes); each names the field and the rule."""
    findings = []
    for path, text in _texts(output, ""):
        lower = text.lower()  # anchors are tried on both: cheap, and no case slips by
        for name, anchors, matches in _RULES:
            where = lower if name == _LOWER_RULE else text
            if any(a in text or a in lower for a in anchors) and matches(where):
                findings.append(f"`{path or '(root)'}`: {name}")
    if model is not None:
        for path, code in _code_paths(model, output, ""):
            findings += [f"`{path}`: {problem}" for problem in check_python(code)]
    return findings
