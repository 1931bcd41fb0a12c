import importlib
import pkgutil

import swarm_ray


def test_all_is_sorted_and_unique() -> None:
    def isort_style(name: str) -> tuple[int, str]:
        kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
        return kind, name

    assert list(swarm_ray.__all__) == sorted(set(swarm_ray.__all__), key=isort_style)


def test_every_name_in_all_exists() -> None:
    for name in swarm_ray.__all__:
        assert hasattr(swarm_ray, name), name


def test_private_modules_public_names_are_exported() -> None:
    """Whatever a private top-level module lists in its `__all__` is re-exported."""
    missing = []
    for info in pkgutil.iter_modules(swarm_ray.__path__):
        if not info.name.startswith("_") or info.ispkg:
            continue
        module = importlib.import_module(f"swarm_ray.{info.name}")
        for name in getattr(module, "__all__", ()):
            if name not in swarm_ray.__all__:
                missing.append(f"{info.name}.{name}")
    assert missing == []
