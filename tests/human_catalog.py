"""Templates with a person in the loop, over the testing catalog's capabilities.

Loaded by the orchestrators of `tests/test_human.py` (`"tests.human_catalog:human_catalog"`
next to `"swarm_ray.testing:testing_catalog"`), so the actor imports them after a restart.
"""

from __future__ import annotations

from typing import Any

from swarm_ray.core.model._template import TaskTemplate
from swarm_ray.core.planning._catalog import Catalog

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1}},
    "required": ["text"],
    "additionalProperties": False,
}


def branches(name: str, *, timeout_s: float | None, default: dict[str, Any] | None) -> TaskTemplate:
    """Three parallel branches, `ask` waiting for a person, joined by `join`."""
    ask: dict[str, Any] = {"prompt": "Which word goes third?", "schema": ANSWER_SCHEMA}
    ask["timeout_s"] = timeout_s
    if default is not None:
        ask["default"] = default
    return TaskTemplate.model_validate(
        {
            "name": name,
            "aggregate": "join",
            "stages": [
                {
                    "name": "first",
                    "capability": "test.echo.text",
                    "input": {"text": "alpha", "record_dir": "$params.record_dir"},
                },
                {
                    "name": "second",
                    "capability": "test.echo.text",
                    "input": {"text": "beta", "record_dir": "$params.record_dir"},
                },
                {
                    "name": "ask",
                    "capability": "test.echo.text",
                    "await_human": ask,
                    "input": {"text": "$answer.text", "record_dir": "$params.record_dir"},
                },
                {
                    "name": "join",
                    "capability": "test.join.texts",
                    "depends_on": ["first", "second", "ask"],
                    "partial_ok": True,
                    "input": {"parts": ["$from.first.text", "$from.second.text", "$from.ask.text"]},
                },
            ],
        }
    )


def human_catalog() -> Catalog:
    """`human_branches` (waits up to 10 minutes, no default), `human_default` (3 s, then
    the default) and `human_strict` (2 s, then `human_timeout`)."""
    return Catalog(
        templates=(
            branches("human_branches", timeout_s=600, default=None),
            branches("human_default", timeout_s=3, default={"text": "by default"}),
            branches("human_strict", timeout_s=2, default=None),
        )
    )
