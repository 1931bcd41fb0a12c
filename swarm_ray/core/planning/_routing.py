"""Intent routing: pick a template by explicit name or by keywords in the request text.

Deterministic: the template with the most keyword hits wins, ties go to the name that
sorts first. The LLM planner (a later layer) produces the same `Plan` type and falls
back to this router when its plan is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from swarm_ray.core.model._errors import InvalidSpecError, NoTemplateMatchedError
from swarm_ray.core.model._task import TaskRequest
from swarm_ray.core.model._template import TaskTemplate

__all__: list[str] = []


class TemplateRouter:
    """Templates by name, and keyword routing over them."""

    def __init__(self, templates: Iterable[TaskTemplate] = ()) -> None:
        self._templates: dict[str, TaskTemplate] = {}
        for template in templates:
            self.add(template)

    def add(self, template: TaskTemplate) -> None:
        """Add a template; a second one with the same name is refused."""
        if template.name in self._templates:
            raise InvalidSpecError(f"template `{template.name}` is already registered")
        self._templates[template.name] = template

    def __iter__(self) -> Iterator[TaskTemplate]:
        return iter(sorted(self._templates.values(), key=lambda t: t.name))

    def __contains__(self, name: object) -> bool:
        return name in self._templates

    def get(self, name: str) -> TaskTemplate:
        """The template called `name`, or `NoTemplateMatchedError` listing the known ones."""
        try:
            return self._templates[name]
        except KeyError:
            known = ", ".join(sorted(self._templates)) or "none"
            raise NoTemplateMatchedError(
                f"template `{name}` is not registered (known: {known})", template=name
            ) from None

    def scores(self, request: TaskRequest) -> list[tuple[int, str]]:
        """(hits, name) for every template, best first."""
        words = request.words()
        text = request.query.lower()
        scored = []
        for template in self._templates.values():
            hits = sum(
                1
                for kw in template.keywords
                if (kw.lower() in text if " " in kw else kw.lower() in words)
            )
            scored.append((hits, template.name))
        return sorted(scored, key=lambda s: (-s[0], s[1]))

    def route(self, request: TaskRequest) -> TaskTemplate:
        """The template for `request`: its explicit name, else the best keyword match."""
        if request.template is not None:
            return self.get(request.template)
        scored = self.scores(request)
        if not scored or scored[0][0] == 0:
            known = ", ".join(sorted(self._templates)) or "none"
            raise NoTemplateMatchedError(
                f"no template matches the request {request.query[:80]!r} "
                f"(known templates: {known}); name one with `template`",
                query=request.query[:200],
            )
        return self._templates[scored[0][1]]
