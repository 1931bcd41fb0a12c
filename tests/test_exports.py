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
        for info in pkgutil.walk_packages(package.__path__, f"swarm_ray.{layer}."):
            if info.name.rsplit(".", 1)[-1].startswith("_"):  # a private module
                module = importlib.import_module(info.name)
                listed += list(getattr(module, "__all__", ()))
    assert sorted(set(listed) - set(swarm_ray.__all__)) == []
    assert sorted(set(swarm_ray.__all__) - set(listed) - {"__version__"}) == []
    assert len(swarm_ray.__all__) <= 70


def test_the_core_face_is_sorted_and_every_name_exists() -> None:
    # `swarm_ray.core` is what workloads import instead of core's private modules.
    import swarm_ray.core

    names = list(swarm_ray.core.__all__)
    assert names == sorted(set(names), key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    assert [n for n in names if not hasattr(swarm_ray.core, n)] == []
