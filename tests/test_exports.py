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
    """Whatever a layer's private module lists in its `__all__` is re-exported, and only
    that: the public surface stays small (internals stay importable from their modules)."""
    listed = []
    for layer in ("core", "runtime"):
        package = importlib.import_module(f"swarm_ray.{layer}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"swarm_ray.{layer}.{info.name}")
            listed += list(getattr(module, "__all__", ()))
    assert sorted(set(listed) - set(swarm_ray.__all__)) == []
    assert sorted(set(swarm_ray.__all__) - set(listed) - {"__version__"}) == []
    assert len(swarm_ray.__all__) <= 70
