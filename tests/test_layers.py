"""The package's folders are its layers, and imports go one way (read from the source).

swarm_ray/core/       the pure part: no Ray, no I/O library, nothing outside `core`
swarm_ray/runtime/    the Ray edge: imports `core`, never a workload or `llm`
gateway/ llm/ documents/ video/   beside them, importing downward
swarm_ray/agent.py    the one way in from a workload (llm/ documents/ video/ jobs/) to the
                      runtime: workloads import no private `swarm_ray.runtime._x` module
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "swarm_ray"
_IO = ("ray", "sqlite3", "redis", "pyarrow", "fastapi", "starlette", "httpx", "chromadb")
_WORKLOADS = ("swarm_ray.documents", "swarm_ray.video", "swarm_ray.llm", "swarm_ray.gateway")


def _imports(path: Path) -> list[str]:
    """Absolute module names a file imports (relative imports resolved), anywhere in it."""
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.append(".".join([*base, node.module or ""]).rstrip("."))
            elif node.module:
                found.append(node.module)
    return found


def _modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).glob("*.py"))


def test_the_layers_exist() -> None:
    assert _modules("core") and _modules("runtime")
    loose = [p.name for p in PACKAGE.glob("_*.py") if not p.name.startswith("__")]
    assert loose == [], f"private modules outside a layer: {loose}"


@pytest.mark.parametrize("path", _modules("core"), ids=lambda p: p.name)
def test_core_is_pure(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in _IO, f"{path.name} imports `{name}`: core does no I/O"
        if name.startswith("swarm_ray"):
            assert name.startswith("swarm_ray.core"), f"{path.name} imports `{name}`"


@pytest.mark.parametrize("path", _modules("runtime"), ids=lambda p: p.name)
def test_runtime_imports_no_workload_and_no_llm(path: Path) -> None:
    for name in _imports(path):
        assert not name.startswith(_WORKLOADS), f"{path.name} imports `{name}`"


_AGENT_CODE = ("llm", "documents", "video")
_JOBS = PACKAGE.parent / "jobs"


def _agent_code() -> list[Path]:
    return [p for folder in _AGENT_CODE for p in _modules(folder)] + sorted(_JOBS.glob("*.py"))


@pytest.mark.parametrize("path", _agent_code(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_workloads_enter_the_runtime_through_swarm_ray_agent(path: Path) -> None:
    # The gateway is the interface layer that owns uploads, results and the client, so it
    # may still use the runtime's private modules; the workloads may not.
    for name in _imports(path):
        assert not name.startswith("swarm_ray.runtime."), (
            f"{path.parent.name}/{path.name} imports `{name}`: use `swarm_ray.agent`"
        )
