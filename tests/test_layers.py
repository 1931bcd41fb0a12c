"""The package's folders are its layers, and imports go one way (read from the source).

swarm_ray/core/       the pure part: no Ray, no I/O library, nothing outside `core`
swarm_ray/runtime/    the Ray edge: imports `core`, never a workload or `llm`
gateway/ llm/ documents/ video/   beside them, importing downward; the gateway calls
                      the orchestrator only through `AsyncSwarmClient`
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


@pytest.mark.parametrize("path", _modules("gateway"), ids=lambda p: p.name)
def test_the_gateway_calls_the_orchestrator_through_the_async_client(path: Path) -> None:
    # `AsyncSwarmClient` is the one place that knows the actor's methods and Ray's errors.
    tree = ast.parse(path.read_text(), filename=str(path))
    remote = [
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "remote"
    ]
    assert remote == [], f"gateway/{path.name} calls `.remote` on lines {remote}: use the client"


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


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports, anywhere in it.

    Function-level imports count: they hide a circle, they do not break it. An import of a
    package counts as an edge to its `__init__`, and `from pkg import mod` as one to `mod`.
    Imports under `TYPE_CHECKING` count as well: none closes a circle today, and a type-only
    import that did would be the first step of a real one, so none is excluded.
    """
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found = set(_imports(path))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
        graph[name] = {target for target in found if target in paths} - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles() -> None:
    circles = _circles(_import_graph())
    assert circles == [], f"import circles (function-level imports included): {circles}"


_SAMPLE_USERS = {
    "swarm_ray.documents",  # re-exports the brochure samples and their scoring
    "swarm_ray.documents._job",  # `make report` / `swarm-ray compare --samples`
    "swarm_ray.video",
    "swarm_ray.video._job",  # `swarm-ray video --sample`
}
"""The product modules that may use `swarm_ray.testing`: the jobs that run on samples."""


def test_test_doubles_live_in_swarm_ray_testing_and_the_product_does_not_use_them() -> None:
    graph = _import_graph()
    product = {
        m for m in graph if m != "swarm_ray.testing" and not m.startswith("swarm_ray.testing.")
    }
    users = {
        module
        for module in product
        if any(
            t == "swarm_ray.testing" or t.startswith("swarm_ray.testing.") for t in graph[module]
        )
    }
    assert users <= _SAMPLE_USERS, f"product modules using test doubles: {users - _SAMPLE_USERS}"
    for module in users:
        samples = {t for t in graph[module] if t.startswith("swarm_ray.testing")}
        assert all(t.split(".")[2].startswith(("sample_", "score")) for t in samples), (
            f"{module} imports {samples}: a job may use samples, never test doubles"
        )
    for folder in ("llm", "documents", "video", "gateway", "runtime", "core"):
        for path in _modules(folder):
            text = path.read_text()
            assert "scripted_brain" not in text and "flaky_api_app" not in text, (
                f"{folder}/{path.name} holds a test double"
            )
