"""Test doubles that ship with the library: small real capabilities and templates.

They do real (if tiny) work in real Ray processes, so tests and benchmarks exercise the
runtime without a model: `test.echo.text` echoes after an optional delay, can fail its
first attempts and records every finished execution to a file, which lets a test count
how often each sub-task really ran.

`testing_catalog` registers them; pass `"swarm_ray.testing:testing_catalog"` to
`swarm_ray.connect(catalogs=[...])`.

The package is the one home for test doubles, fakes, samples and sample generators; the
product packages hold none of them (`tests/test_layers.py`), and only the jobs that run
on samples (`make report`, `swarm-ray video --sample`) use the `sample_*` modules:

- `agents`: tool-tagged capabilities, a child-calling agent, scripted tool agents, an
  HTTP adapter on a flaky API (`agents_catalog`);
- `llm_stubs`: a scripted model and an OpenAI-compatible stub server;
- `mcp_demo`: a small MCP server (`python -m swarm_ray.testing.mcp_demo`);
- `sample_documents` (with `sample_text`, `sample_pdf`, `sample_plan`): synthetic
  product brochures with their ground truth; `score`: extraction scored against it;
- `sample_video`: synthetic videos with known cuts and intense scenes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, Field

from swarm_ray.core.guards._access import WritePath
from swarm_ray.core.model._capability import CapabilitySpec, ExecutorKind, Resources, RetryPolicy
from swarm_ray.core.model._template import TaskTemplate
from swarm_ray.core.planning._catalog import Catalog

__all__ = [
    "SICK_FLAG",
    "EchoIn",
    "EchoOut",
    "JoinIn",
    "JoinOut",
    "NoopIn",
    "SplitIn",
    "SplitOut",
    "count_effects",
    "count_executions",
    "echo",
    "echo_with_effect",
    "health_flag_check",
    "join",
    "noop",
    "split",
    "testing_catalog",
]


class EchoIn(BaseModel):
    """Input of `test.echo.*`."""

    text: str
    """What to echo."""
    delay_s: float = Field(default=0.0, ge=0)
    """Sleep this long first (a stand-in for waiting work)."""
    cpu_ms: float = Field(default=0.0, ge=0, le=60_000)
    """Compute for this many milliseconds of CPU first (a stand-in for working work)."""
    record_dir: WritePath | None = None
    """Append one line per finished execution to `executions.log` here."""
    fail_first: int = Field(default=0, ge=0)
    """Raise on this many first executions of this `text` (needs `record_dir`)."""


class EchoOut(BaseModel):
    """Output of `test.echo.*`."""

    text: str
    """The input text, upper-cased."""
    pid: int
    """Process that ran it (tells agents apart)."""


class JoinIn(BaseModel):
    """Input of `test.join.texts`."""

    parts: list[str | None]
    """Texts to join; missing ones (failed upstream) are None."""


class JoinOut(BaseModel):
    """Output of `test.join.texts`."""

    text: str
    """The parts joined by spaces."""
    count: int
    """How many parts were present."""


class SplitIn(BaseModel):
    """Input of `test.split.words`."""

    text: str
    """Words to split on spaces."""


class SplitOut(BaseModel):
    """Output of `test.split.words`: a list later stages fan out over (`for_each`)."""

    parts: list[str]


class NoopIn(BaseModel):
    """Input of `test.noop.run`."""

    n: int = 0
    """Ignored; lets each sub-task have its own input."""


class NoopOut(BaseModel):
    """Output of `test.noop.run`."""


def echo(data: EchoIn) -> EchoOut:
    """Echo upper-cased, after the delay; fail the first `fail_first` times."""
    if data.record_dir and data.fail_first:
        tries = (
            Path(data.record_dir) / f"{hashlib.sha256(data.text.encode()).hexdigest()[:16]}.tries"
        )
        with tries.open("a") as handle:
            handle.write("x")
        if tries.stat().st_size <= data.fail_first:
            raise RuntimeError(f"`{data.text}` fails on purpose (try {tries.stat().st_size})")
    if data.cpu_ms:
        until = time.thread_time() + data.cpu_ms / 1000
        while time.thread_time() < until:
            pass
    if data.delay_s:
        time.sleep(data.delay_s)
    if data.record_dir:
        line = f"{data.text}\t{os.getpid()}\t{time.time():.6f}\n"
        fd = os.open(
            Path(data.record_dir) / "executions.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT
        )
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
    return EchoOut(text=data.text.upper(), pid=os.getpid())


def echo_with_effect(data: EchoIn) -> EchoOut:
    """`echo` with a side effect first: a line in `record_dir/effects.log` as it starts."""
    if data.record_dir:
        fd = os.open(Path(data.record_dir) / "effects.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, f"{data.text}\n".encode())
        finally:
            os.close(fd)
    return echo(data)


def count_effects(record_dir: str | Path) -> list[str]:
    """The texts `echo_with_effect` started on, once per start, in order."""
    path = Path(record_dir) / "effects.log"
    return path.read_text().splitlines() if path.exists() else []


def join(data: JoinIn) -> JoinOut:
    """Join the present parts."""
    present = [p for p in data.parts if p is not None]
    return JoinOut(text=" ".join(present), count=len(present))


def split(data: SplitIn) -> SplitOut:
    """The words of the text."""
    return SplitOut(parts=data.text.split())


def noop(data: NoopIn) -> NoopOut:
    """Do nothing (measures the runtime's own overhead)."""
    return NoopOut()


SICK_FLAG = Path(tempfile.gettempdir()) / "swarm-ray-test-sick"
"""While this file exists, `test.echo.checked` fails its health check."""


def health_flag_check() -> None:
    """Health check of `test.echo.checked`: raises while `SICK_FLAG` exists."""
    if SICK_FLAG.exists():
        raise RuntimeError(f"sick flag `{SICK_FLAG}` is set")


def count_executions(record_dir: str | Path) -> dict[str, list[int]]:
    """Map each echoed text to the pids of the processes that finished it."""
    path = Path(record_dir) / "executions.log"
    runs: dict[str, list[int]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            text, pid, _ = line.split("\t")
            runs.setdefault(text, []).append(int(pid))
    return runs


def _echo_spec(
    cid: str,
    executor: ExecutorKind,
    concurrency: int,
    timeout_s: float = 30,
    attempts: int = 4,
    health_check: str | None = None,
    side_effects: bool = False,
) -> CapabilitySpec:
    return CapabilitySpec(
        id=cid,
        description=f"Echo a text upper-cased ({executor} executor; for tests).",
        input_model=EchoIn,
        output_model=EchoOut,
        entrypoint=f"swarm_ray.testing:{'echo_with_effect' if side_effects else 'echo'}",
        side_effects=side_effects,
        executor=executor,
        resources=Resources(num_cpus=0.25, max_concurrency=concurrency),
        timeout_s=timeout_s,
        retry=RetryPolicy(max_attempts=attempts, backoff_s=0.05),
        health_check=health_check,
    )


def _fanout(name: str, capability: str) -> TaskTemplate:
    return TaskTemplate.model_validate(
        {
            "name": name,
            "description": f"Echo every item with `{capability}`, then join them.",
            "keywords": [name.replace("_", " ")],
            "aggregate": "join",
            "stages": [
                {
                    "name": "echo",
                    "capability": capability,
                    "fan_out": "per_item",
                    "input": {
                        "text": "$item",
                        "delay_s": "$params.delay_s",
                        "record_dir": "$params.record_dir",
                        "fail_first": "$params.fail_first",
                    },
                },
                {
                    "name": "join",
                    "capability": "test.join.texts",
                    "depends_on": ["echo"],
                    "partial_ok": True,
                    "input": {"parts": "$from.echo.text"},
                },
            ],
        }
    )


def _asked() -> TaskTemplate:
    """An echo, and one that waits for the owner's word; then a join (the page's answer form)."""
    return TaskTemplate.model_validate(
        {
            "name": "echo_asked",
            "description": "Echo a word and one the task's owner gives, then join them.",
            "keywords": ["echo asked"],
            "aggregate": "join",
            "stages": [
                {"name": "first", "capability": "test.echo.text", "input": {"text": "first"}},
                {
                    "name": "ask",
                    "capability": "test.echo.text",
                    "await_human": {
                        "prompt": "Which word goes last?",
                        "schema": {
                            "type": "object",
                            "properties": {"text": {"type": "string", "minLength": 1}},
                            "required": ["text"],
                        },
                        "timeout_s": 600,
                    },
                    "input": {"text": "$answer.text"},
                },
                {
                    "name": "join",
                    "capability": "test.join.texts",
                    "depends_on": ["first", "ask"],
                    "input": {"parts": ["$from.first.text", "$from.ask.text"]},
                },
            ],
        }
    )


def _chain() -> TaskTemplate:
    """Ray Data stage, then a per-item actor stage, then a join: shows partial rollout."""
    template = _fanout("echo_data_chain", "test.echo.data")
    echo, join_stage = template.stages
    second = echo.model_copy(
        update={
            "name": "again",
            "capability": "test.echo.text",
            "depends_on": ("echo",),
            "input": {"text": "$from.echo.text", "record_dir": "$params.record_dir"},
        }
    )
    join_stage = join_stage.model_copy(
        update={"depends_on": ("again",), "input": {"parts": "$from.again.text"}}
    )
    return template.model_copy(update={"stages": (echo, second, join_stage)})


def testing_catalog() -> Catalog:
    """Echo (on each executor), join and no-op capabilities, and fan-out templates."""
    noop_template = TaskTemplate.model_validate(
        {
            "name": "noop_fanout",
            "stages": [
                {
                    "name": "noop",
                    "capability": "test.noop.run",
                    "fan_out": "per_item",
                    "input": {"n": "$item"},
                }
            ],
        }
    )
    flat = TaskTemplate.model_validate(
        {
            "name": "echo_flat",
            "description": "Echo every item; no join (the fan-out benchmark's payload case).",
            "stages": [
                {
                    "name": "echo",
                    "capability": "test.echo.text",
                    "fan_out": "per_item",
                    "input": {"text": "$item", "cpu_ms": "$params.cpu_ms"},
                }
            ],
        }
    )
    split_fanout = TaskTemplate.model_validate(
        {
            "name": "split_fanout",
            "description": "Split the query into words, echo each (for_each), join them.",
            "aggregate": "join",
            "stages": [
                {"name": "split", "capability": "test.split.words", "input": {"text": "$query"}},
                {
                    "name": "echo",
                    "capability": "test.echo.text",
                    "depends_on": ["split"],
                    "for_each": "$from.split.parts",
                    "input": {
                        "text": "$each",
                        "delay_s": "$params.delay_s",
                        "record_dir": "$params.record_dir",
                    },
                },
                {
                    "name": "join",
                    "capability": "test.join.texts",
                    "depends_on": ["split", "echo"],
                    "partial_ok": True,
                    "input": {"parts": "$from.echo.text"},
                },
            ],
        }
    )
    return Catalog(
        capabilities=(
            CapabilitySpec(
                id="test.split.words",
                description="Split a text into words (for tests).",
                input_model=SplitIn,
                output_model=SplitOut,
                entrypoint="swarm_ray.testing:split",
                resources=Resources(num_cpus=0.25),
            ),
            _echo_spec("test.echo.text", ExecutorKind.ACTOR, 4),
            _echo_spec("test.echo.serve", ExecutorKind.SERVE, 2),
            _echo_spec("test.echo.data", ExecutorKind.DATA, 2),
            _echo_spec("test.echo.quick", ExecutorKind.ACTOR, 2, timeout_s=1, attempts=2),
            _echo_spec("test.echo.effect", ExecutorKind.ACTOR, 2, attempts=1, side_effects=True),
            _echo_spec(
                "test.echo.checked",
                ExecutorKind.SERVE,
                1,
                attempts=1,
                health_check="swarm_ray.testing:health_flag_check",
            ),
            CapabilitySpec(
                id="test.join.texts",
                description="Join texts (for tests).",
                input_model=JoinIn,
                output_model=JoinOut,
                entrypoint="swarm_ray.testing:join",
                resources=Resources(num_cpus=0.25),
            ),
            CapabilitySpec(
                id="test.noop.run",
                description="Do nothing (measures overhead).",
                input_model=NoopIn,
                output_model=NoopOut,
                entrypoint="swarm_ray.testing:noop",
                resources=Resources(num_cpus=0.25, max_concurrency=4),
            ),
        ),
        templates=(
            _fanout("echo_fanout", "test.echo.text"),
            _fanout("echo_serve", "test.echo.serve"),
            _fanout("echo_data", "test.echo.data"),
            _fanout("echo_quick", "test.echo.quick"),
            _fanout("echo_checked", "test.echo.checked"),
            _fanout("echo_effect", "test.echo.effect"),
            _asked(),
            _chain(),
            noop_template,
            flat,
            split_fanout,
        ),
    )
