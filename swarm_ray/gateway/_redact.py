"""A caller's uploads are named by file id and name, never by where the server keeps them.

Outputs and errors of a task name the files it read: a parse error names its file, a
report lists its sources. For an upload that is a server path
(`<results>/uploads/<principal tag>/<file id>/<name>`), and knowing it is the first
step of climbing out of it. The gateway shows a caller its own uploads as
`<file id>/<name>` instead, in task status, reports (JSON and Markdown) and events.
"""

from __future__ import annotations

import os
from typing import TypeVar

from pydantic import BaseModel

from swarm_ray.core._principal import Principal
from swarm_ray.runtime._uploads import Uploads

__all__ = ["UploadNames"]

M = TypeVar("M", bound=BaseModel)


class UploadNames:
    """Rewrites a caller's upload paths to `<file id>/<name>` in what it is shown."""

    def __init__(self, uploads: Uploads) -> None:
        self._uploads = uploads

    def _prefixes(self, principal: Principal) -> tuple[str, ...]:
        root = self._uploads.root_for(principal).rstrip("/")
        forms = {root}
        if "://" not in root:
            forms.add(os.path.realpath(root))  # the canonical form dispatched (`_access`)
        return tuple(f"{form}/" for form in sorted(forms, key=len, reverse=True))

    def text(self, principal: Principal, text: str) -> str:
        """`text` with the caller's upload paths shortened."""
        for prefix in self._prefixes(principal):
            if prefix in text:
                text = text.replace(prefix, "")
        return text

    def model(self, principal: Principal, model: M) -> M:
        """`model` with the caller's upload paths shortened (unchanged when it has none)."""
        dumped = model.model_dump_json()
        shown = self.text(principal, dumped)
        return model if shown == dumped else type(model).model_validate_json(shown)
