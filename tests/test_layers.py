"""The package's folders are its layers, and imports go one way (read from the source).

swarm_ray/core/       the pure part: no Ray, no I/O library, nothing outside `core`; its
                      sub-packages in their own order (`_CORE_ORDER`), its `__init__` the
                      face that workloads import
swarm_ray/runtime/    the Ray edge: imports `core`, never a workload or `llm`
gateway/ llm/ documents/ video/   above them, importing downward
swarm_ray/agent.py    the one way in from a workload (llm/ documents/ video/ jobs/) to the
                      runtime: workloads import no private `swarm_ray.runtime._x` module,
                      and no module under `swarm_ray.core` (only `swarm_ray.core` itself)
swarm_ray/testing/    on top: it may import the product; the product imports from it only
                      the sample generators its sample jobs need (`_SAMPLES`)

Every call to an orchestrator actor goes through `AsyncSwarmClient` (`runtime/_aclient.py`):
no other module of the package calls one of the actor's methods with `.remote`.
"""

from __future__ import annotations

import ast
import functools
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
    """A layer's modules, its sub-packages' included (only `core` has any)."""
    return sorted((PACKAGE / folder).rglob("*.py"))


def _where(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def test_the_layers_exist() -> None:
    assert _modules("core") and _modules("runtime")
    loose = [p.name for p in PACKAGE.glob("_*.py") if not p.name.startswith("__")]
    assert loose == [], f"private modules outside a layer: {loose}"


@pytest.mark.parametrize("path", _modules("core"), ids=_where)
def test_core_is_pure(path: Path) -> None:
    for name in _imports(path):
        top = name.split(".")[0]
        assert top not in _IO, f"{_where(path)} imports `{name}`: core does no I/O"
        if name.startswith("swarm_ray"):
            assert name.startswith("swarm_ray.core."), f"{_where(path)} imports `{name}`"


# ---- core's sub-packages -----------------------------------------------------------

_CORE_ORDER: tuple[str, ...] = (
    "swarm_ray.core.model",  # task, sub-task, template, plan, capability, signals, record
    "swarm_ray.core.guards",  # access, limits, sanitizer, schema bounds, watermarks
    "swarm_ray.core.planning",  # the router, the planning API, catalogs
    "swarm_ray.core.scheduling",  # the scheduler, its DAG and its pure policies
    "swarm_ray.core.durability",  # the journal's contract, the task log, the ledger
    "swarm_ray.core.driver",  # the task driver, its commands and mixins
    "swarm_ray.core.views",  # a task as callers see it; a watermark traced back
    "swarm_ray.core",  # the face: what workloads import, re-exported from below
)
"""`core`'s sub-packages from the lowest up: each imports only from those below it."""

_CORE_MOST = 15
"""The most modules a sub-package of `core` holds before it should be cut again."""


def _core_part(module: str) -> str:
    """`swarm_ray.core.driver._driver` -> `swarm_ray.core.driver`; the face as it is."""
    return ".".join(module.split(".")[:3])


def test_every_module_of_core_sits_in_a_placed_sub_package() -> None:
    core = [m for m in _import_graph() if _part(m) == "swarm_ray.core"]
    unplaced = sorted(m for m in core if _core_part(m) not in _CORE_ORDER)
    assert unplaced == [], f"modules of core outside a sub-package of `_CORE_ORDER`: {unplaced}"
    for part in _CORE_ORDER[:-1]:
        modules = [m for m in core if _core_part(m) == part and m != part]
        assert 0 < len(modules) <= _CORE_MOST, f"{part} holds {len(modules)} modules"


def test_imports_inside_core_go_down() -> None:
    graph = _import_graph()
    upward = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if _part(module) == "swarm_ray.core"
        for target in sorted(targets)
        if _part(target) == "swarm_ray.core"
        and _core_part(module) != _core_part(target)
        and _CORE_ORDER.index(_core_part(target)) >= _CORE_ORDER.index(_core_part(module))
    ]
    assert upward == [], f"imports to a sub-package of core at or above the importer's: {upward}"


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


@pytest.mark.parametrize(
    "path", [*_agent_code(), *_modules("gateway")], ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_workloads_import_the_core_through_its_face(path: Path) -> None:
    # `swarm_ray.core` exports what a workload needs (the signals a stage emits, the
    # planning API, report views, the guards); its sub-packages are the runtime's to use.
    tree = ast.parse(path.read_text(), filename=str(path))
    private = [name for name in _imports(path) if name.startswith("swarm_ray.core.")] + [
        f"swarm_ray.core.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "swarm_ray.core"
        for alias in node.names
        if (PACKAGE / "core" / alias.name).exists() or alias.name.startswith("_")
    ]
    assert private == [], (
        f"{path.parent.name}/{path.name} imports {private}: import from `swarm_ray.core`"
    )


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


_ORDER: tuple[tuple[str, ...], ...] = (
    ("swarm_ray.core",),
    ("swarm_ray.runtime",),
    ("swarm_ray", "swarm_ray.agent"),  # the public API; the one way in for workloads
    ("swarm_ray.llm",),
    ("swarm_ray.documents", "swarm_ray.video"),
    ("swarm_ray.gateway", "swarm_ray.catalog"),
    ("swarm_ray.cli", "swarm_ray.testing"),
)
"""The package's parts from the lowest up: a part imports only from parts below its own."""

_SAMPLES = {
    "swarm_ray.testing.sample_documents": "brochures and their ground truth (`make report`)",
    "swarm_ray.testing.sample_video": "a video with known cuts (`swarm-ray video --sample`)",
}
"""What the product may import from `swarm_ray.testing`: its sample jobs' generators."""

_SAMPLE_USERS = {
    "swarm_ray.documents",  # re-exports the brochure samples
    "swarm_ray.documents._job",  # `make report` / `swarm-ray compare --samples`
    "swarm_ray.documents._accuracy",  # scores a run against the samples' ground truth
    "swarm_ray.video",
    "swarm_ray.video._job",  # `swarm-ray video --sample`
}
"""The product modules that may import `_SAMPLES`: the jobs that run on samples."""


def _part(module: str) -> str:
    """`swarm_ray.documents._job` -> `swarm_ray.documents`; `swarm_ray.agent` as it is."""
    return ".".join(module.split(".")[:2])


def _level(part: str) -> int:
    [level] = [i for i, parts in enumerate(_ORDER) if part in parts]
    return level


def test_every_part_of_the_package_has_its_place_in_the_order() -> None:
    placed = {part for parts in _ORDER for part in parts}
    parts = {_part(module) for module in _import_graph()}
    assert parts == placed, f"unplaced: {sorted(parts - placed)}, gone: {sorted(placed - parts)}"


def test_imports_go_from_a_higher_part_to_a_lower_one() -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in sorted(_import_graph().items())
        for target in sorted(targets)
        if _part(module) != _part(target)
        and _level(_part(target)) >= _level(_part(module))
        and not (module in _SAMPLE_USERS and target in _SAMPLES)
    ]
    assert upward == [], f"imports to a part at or above the importer's: {upward}"


def test_test_doubles_live_in_swarm_ray_testing_and_the_product_uses_only_samples() -> None:
    graph = _import_graph()
    product = {m for m in graph if _part(m) != "swarm_ray.testing"}
    uses = {
        f"{module} -> {target}"
        for module in product
        for target in graph[module]
        if _part(target) == "swarm_ray.testing"
        and not (module in _SAMPLE_USERS and target in _SAMPLES)
    }
    assert uses == set(), f"product modules using test doubles: {sorted(uses)}"
    for folder in ("llm", "documents", "video", "gateway", "runtime", "core"):
        for path in _modules(folder):
            text = path.read_text()
            assert "scripted_brain" not in text and "flaky_api_app" not in text, (
                f"{folder}/{path.name} holds a test double"
            )


def test_the_samples_reach_nothing_of_the_product_above_the_core() -> None:
    # Importing a sample runs `swarm_ray/testing/__init__.py` first: neither may lead back
    # into a workload, or the sample jobs would close a circle the graph does not show.
    graph = _import_graph()
    seen: set[str] = set()
    todo = [*_SAMPLES, "swarm_ray.testing"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module]
    beyond = sorted(m for m in seen if _part(m) not in ("swarm_ray.core", "swarm_ray.testing"))
    assert beyond == [], f"the samples import {beyond}"
    assert seen & set(graph) >= set(_SAMPLES), "a sample module named in `_SAMPLES` is gone"


# ---- one way to the orchestrator ---------------------------------------------------

_CLIENT = PACKAGE / "runtime" / "_aclient.py"


@functools.cache
def _orchestrator_methods() -> frozenset[str]:
    """The orchestrator actor's public methods, read from its class."""
    tree = ast.parse((PACKAGE / "runtime" / "_orchestrator.py").read_text())
    [actor] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Orchestrator"]
    return frozenset(
        n.name
        for n in actor.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.name.startswith("_")
    )


_OTHER_ACTORS = {
    ("runtime/_executors.py", "health"): "a Serve capability's replica",
    ("llm/_handle.py", "health"): "an `LLMAgent` replica",
    ("runtime/_orchestrator.py", "recover"): "the actor asking itself in `__init__`, before "
    "its event loop runs (no client exists yet; nothing else calls `recover`)",
}
"""`X.METHOD.remote` calls whose actor is not an orchestrator but has a method of its name."""

_NAMED_LOOKUPS = {
    "runtime/_upkeep.py": "the `swarm-metrics/` reporters whose state `/metrics` gathers",
    "llm/_budget.py": "the LLM endpoints' budget actors",
}
"""Modules besides the client that look actors up by name (`ray.get_actor`): none of them
an orchestrator."""


def _remote_calls(tree: ast.AST) -> list[tuple[str, int]]:
    """`(METHOD, line)` of each `X.METHOD.remote` and `X.METHOD.options(...).remote`."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == "remote"):
            continue
        target = node.value
        if (
            isinstance(target, ast.Call)
            and isinstance(target.func, ast.Attribute)
            and target.func.attr == "options"
        ):
            target = target.func.value
        if isinstance(target, ast.Attribute):
            found.append((target.attr, node.lineno))
    return found


def _package_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != _CLIENT)


@pytest.mark.parametrize("path", _package_files(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_only_the_async_client_calls_the_orchestrator(path: Path) -> None:
    where = path.relative_to(PACKAGE).as_posix()
    tree = ast.parse(path.read_text(), filename=str(path))
    methods = _orchestrator_methods()
    raw = [
        f"`.{method}.remote` on line {line}"
        for method, line in _remote_calls(tree)
        if method in methods and (where, method) not in _OTHER_ACTORS
    ]
    assert raw == [], f"{where} calls the orchestrator raw: {raw}; use `AsyncSwarmClient`"
    lookups = [
        n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "get_actor"
    ]
    assert where in _NAMED_LOOKUPS or lookups == [], (
        f"{where} looks an actor up by name on lines {lookups}: "
        "`AsyncSwarmClient.at(address)` finds an orchestrator"
    )


def test_the_exceptions_to_the_one_way_are_still_there() -> None:
    # An entry nothing needs any more would let a raw call back in unseen.
    for (where, method), why in _OTHER_ACTORS.items():
        calls = _remote_calls(ast.parse((PACKAGE / where).read_text()))
        assert method in {m for m, _ in calls}, f"{where}: no `.{method}.remote` ({why})"
    for where, why in _NAMED_LOOKUPS.items():
        assert "get_actor" in (PACKAGE / where).read_text(), f"{where}: no lookup ({why})"
