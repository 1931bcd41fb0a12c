"""A caller sees its files by the names it uses, never by where the server keeps them.

Outputs and errors of a task name the files it read and wrote: a parse error names its
file, a report lists its sources and says where its Markdown, JSON and Parquet went,
a large output's `output_ref` says where the result store keeps it. Those are server
paths (`<results>/uploads/<principal tag>/<file id>/<name>`,
`<state>/tasks/<task id>/report.md`, `file://<results>/<task id>/output.json`), and
knowing one is the first step of climbing out of it. The gateway rewrites every path
under the state directory and the result store's root, in everything it answers (task
status, listings, reports in JSON and Markdown, events, provenance and errors):

    <results>/uploads/<tag>/<file id>/<name>   ->  <file id>/<name>
    <state>/tasks/<task id>/<path>             ->  <task id>/<path>
    <results>/<key>                            ->  <key>
    <state>/<path>                             ->  <path>
    any of those roots on its own              ->  <server>

Each root is matched as written, with symlinks resolved (what `_access` dispatches) and
as a `file://` URI, in one pass over the text, longest form first. Trusted callers (the
Python client, jobs, the CLI) do not come through here and keep the real paths.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from swarm_ray.core import Principal
from swarm_ray.runtime._uploads import Uploads

__all__ = ["CallerNames"]

M = TypeVar("M", bound=BaseModel)

SERVER = "<server>"
"""What a root named on its own (no path under it) is shown as."""


def _forms(root: str) -> set[str]:
    """`root` as written, resolved (symlinks, as `_access` dispatches) and as a `file://` URI.

    A `file://` URI also gives its plain path; another URI (`s3://...`) is kept as it is.
    """
    if root.startswith("file://"):
        root = root.removeprefix("file://")
    elif "://" in root:
        return {root.rstrip("/")}
    root = root.rstrip("/")
    if not root:  # `/` itself: every path is under it, and none is rewritten
        return set()
    forms: set[str] = set()
    for path in {root, os.path.realpath(root)}:
        forms.add(path)
        if path.startswith("/"):
            forms.update({f"file://{path}", Path(path).as_uri()})
    return {form.rstrip("/") for form in forms if form.rstrip("/")}


class CallerNames:
    """Rewrites server paths to the names a caller uses, in what it is shown.

    Args:
        uploads: The uploads area: an upload becomes `<file id>/<name>`.
        tasks_dir: Where tasks' own directories lie (`<state>/tasks`): a file in one
            becomes `<task id>/<path>`.
        state_dir: The state directory (default: the parent of `tasks_dir`): any other
            path under it loses the prefix.
    """

    def __init__(self, uploads: Uploads, tasks_dir: str, state_dir: str | None = None) -> None:
        self._uploads = uploads
        state = state_dir or str(Path(tasks_dir).parent)
        uploads_root = uploads.root_for(Principal(id="-")).rsplit("/", 1)[0]
        prefixes: list[tuple[str, str]] = []  # (regex, replacement)
        for form in _forms(uploads_root):
            # every principal's folder: an upload is named by its file id alone
            prefixes.append((re.escape(form) + r"/[A-Za-z0-9_.\-]+/", ""))
        roots = (tasks_dir, uploads.store.root_uri, state)
        for form in set().union(*(_forms(r) for r in roots)):
            prefixes.append((re.escape(form) + "/", ""))
        bare = [re.escape(f) for f in set().union(*(_forms(r) for r in (uploads_root, *roots)))]
        # Longest first: the alternation takes the first that matches at a position.
        alternatives = sorted(prefixes, key=lambda p: len(p[0]), reverse=True)
        groups = [f"(?P<p{n}>{regex})" for n, (regex, _) in enumerate(alternatives)]
        if bare:
            groups.append(f"(?P<bare>{'|'.join(sorted(bare, key=len, reverse=True))})")
        self._pattern = re.compile("|".join(groups)) if groups else None
        self._replacements = {f"p{n}": new for n, (_, new) in enumerate(alternatives)}

    def _replace(self, match: re.Match[str]) -> str:
        group = match.lastgroup
        return SERVER if group == "bare" or group is None else self._replacements[group]

    def shown(self, text: str) -> str:
        """`text` with every server path under the state and results roots rewritten."""
        return text if self._pattern is None else self._pattern.sub(self._replace, text)

    def text(self, principal: Principal, text: str) -> str:
        """`text` with the server paths rewritten (see the module docstring)."""
        del principal  # every principal's uploads are shortened alike: by file id
        return self.shown(text)

    def model(self, principal: Principal, model: M) -> M:
        """`model` with the server paths rewritten (unchanged when it has none)."""
        dumped = model.model_dump_json()
        shown = self.text(principal, dumped)
        return model if shown == dumped else type(model).model_validate_json(shown)

    def data(self, value: Any) -> Any:
        """JSON data (an error's detail, a provenance trace) with server paths rewritten."""
        dumped = json.dumps(value, ensure_ascii=False)
        shown = self.shown(dumped)
        return value if shown == dumped else json.loads(shown)
