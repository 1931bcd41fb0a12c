"""A caller sees its files by the names it uses, never by where the server keeps them.

Outputs and errors of a task name the files it read and wrote: a parse error names its
file, a report lists its sources and says where its Markdown, JSON and Parquet went.
Those are server paths (`<results>/uploads/<principal tag>/<file id>/<name>`,
`<state>/tasks/<task id>/report.md`), and knowing one is the first step of climbing out
of it. The gateway shows an HTTP caller its uploads as `<file id>/<name>` and its tasks'
files as `<task id>/<path in the task's directory>` instead, in task status, reports
(JSON and Markdown) and events. Trusted callers (the Python client, jobs, the CLI) do
not come through here and keep the real paths.
"""

from __future__ import annotations

import os
from typing import TypeVar

from pydantic import BaseModel

from swarm_ray.core._principal import Principal
from swarm_ray.runtime._uploads import Uploads

__all__ = ["CallerNames"]

M = TypeVar("M", bound=BaseModel)


def _forms(root: str) -> set[str]:
    """`root` as written and, for a local path, as dispatched (symlinks resolved, `_access`)."""
    root = root.rstrip("/")
    forms = {root}
    if "://" not in root:
        forms.add(os.path.realpath(root))
    return forms


class CallerNames:
    """Rewrites server paths to the names a caller uses, in what it is shown.

    Args:
        uploads: The uploads area: a caller's uploads become `<file id>/<name>`.
        tasks_dir: Where tasks' own directories lie (`<state>/tasks`): a file in one
            becomes `<task id>/<path>`.
    """

    def __init__(self, uploads: Uploads, tasks_dir: str) -> None:
        self._uploads = uploads
        self._tasks = _forms(tasks_dir)

    def _prefixes(self, principal: Principal) -> tuple[str, ...]:
        forms = _forms(self._uploads.root_for(principal)) | self._tasks
        return tuple(f"{form}/" for form in sorted(forms, key=len, reverse=True))

    def text(self, principal: Principal, text: str) -> str:
        """`text` with the server paths shortened."""
        for prefix in self._prefixes(principal):
            if prefix in text:
                text = text.replace(prefix, "")
        return text

    def model(self, principal: Principal, model: M) -> M:
        """`model` with the server paths shortened (unchanged when it has none)."""
        dumped = model.model_dump_json()
        shown = self.text(principal, dumped)
        return model if shown == dumped else type(model).model_validate_json(shown)
