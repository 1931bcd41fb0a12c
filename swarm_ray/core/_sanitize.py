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

A refused output fails the attempt with `sanitization_failed`, naming each finding by
field and rule (never quoting a secret), so the usual retry and fallback apply, the task
shows it, and `agent_error_total{error_type="sanitization_failed"}` counts it. This is
a guard against the obvious, not a sandbox: untrusted code belongs under the hard
limits of `Resources` (see `_limits`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import BaseModel, Field

__all__: list[str] = []

CODE_MARK = "x-swarm-code"
CodeField = Annotated[str, Field(json_schema_extra={CODE_MARK: "python"})]
"""A `str` output field holding Python code: the sanitizer parses and checks it."""

_B = r"(?<![A-Za-z0-9_\-])"  # not inside a longer token (a base64 watermark, say)
_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    # (rule, literals one of which a match holds (the cheap test first), pattern)
    (
        "shell: rm -rf on a root or home",
        ("rm",),
        # `rm` first, then "not after a word character": a literal start lets `re` skip ahead
        r"rm(?<!\wrm)\s+(-[a-zA-Z]*[rf][a-zA-Z]*\s+)+(/|~|\$HOME|\*)(\s|$|\*)",
    ),
    ("shell: rm --no-preserve-root", ("--no-preserve-root",), r"--no-preserve-root"),
    ("shell: mkfs on a device", ("mkfs",), r"\bmkfs(\.\w+)?\s+\S*/dev/"),
    (
        "shell: dd onto a device",
        ("of=/dev/",),
        r"\bdd\s+[^\n]*\bof=/dev/(sd|hd|nvme|xvd|vd|mmcblk)",
    ),
    ("shell: write onto a disk device", ("/dev/",), r">\s*/dev/(sd|hd|nvme|xvd|vd)[a-z0-9]*\b"),
    ("shell: fork bomb", (":",), r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:"),
    (
        "shell: download piped to a shell",
        ("curl", "wget"),
        r"\b(curl|wget)\b[^\n|]*\|\s*(sudo\s+)?(ba|z|da)?sh\b",
    ),
    ("shell: chmod 777 on root", ("777",), r"\bchmod\s+(-R\s+)?0?777\s+/(\s|$)"),
    (
        "shell: reverse shell",
        ("/dev/tcp/", "/bin/"),
        r"(/dev/tcp/|\bnc\b[^\n]*\s-e\s+/bin/(ba)?sh)",
    ),
    (
        "secret: private key",
        ("PRIVATE KEY-----",),
        r"-----BEGIN (RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY-----",
    ),
    ("secret: AWS access key", ("AKIA", "ASIA"), _B + r"(AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "secret: GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _B + r"gh[pousr]_[A-Za-z0-9]{36,}",
    ),
    ("secret: API key (sk-)", ("sk-",), _B + r"sk-(proj-|ant-)?[A-Za-z0-9_\-]{20,}"),
    ("secret: Slack token", ("xox",), _B + r"xox[abprs]-[A-Za-z0-9\-]{10,}"),
    ("secret: Google API key", ("AIza",), _B + r"AIza[0-9A-Za-z_\-]{35}"),
    (
        "secret: quoted password or key",
        ("password", "passwd", "secret", "api_key", "api-key", "apikey", "access"),
        # read on the lower-cased text: a case-insensitive alternation is four times slower
        r"(password|passwd|secret|api[_-]?key|access[_-]?token)\s*[:=]\s*['\"][^'\"\s]{8,}['\"]",
    ),
)
_LOWER_RULE = "secret: quoted password or key"
_COMPILED = tuple((name, anchors, re.compile(pattern)) for name, anchors, pattern in _RULES)
_CALLS = frozenset({"eval", "exec", "compile", "__import__", "os.system", "os.popen"})
_PREFIXES = ("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "pty.spawn")


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


def check_python(code: str) -> list[str]:
    """Refused calls in `code` (or why it cannot be checked)."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return [f"code does not parse (line {exc.lineno}): {exc.msg}"]
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func, aliases)
            if name and (name in _CALLS or name.startswith(_PREFIXES)):
                found.append(f"calls `{name}` (line {node.lineno})")
    return found


def sanitize_output(output: dict[str, Any], model: type[BaseModel] | None = None) -> list[str]:
    """Findings in an output (empty when it passes); each names the field and the rule."""
    findings = []
    for path, text in _texts(output, ""):
        lower = text.lower()  # anchors are tried on both: cheap, and no case slips by
        for name, anchors, pattern in _COMPILED:
            where = lower if name == _LOWER_RULE else text
            if any(a in text or a in lower for a in anchors) and pattern.search(where):
                findings.append(f"`{path or '(root)'}`: {name}")
    if model is not None:
        for path, code in _code_paths(model, output, ""):
            findings += [f"`{path}`: {problem}" for problem in check_python(code)]
    return findings
