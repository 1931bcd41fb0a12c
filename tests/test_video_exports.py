"""The public surface of `swarm_ray.video`: sorted, complete; its errors survive Ray."""

from __future__ import annotations

import importlib
import pickle
import pkgutil
import subprocess
import sys

import swarm_ray
import swarm_ray.video as video
from swarm_ray.video import SegmentDecodeError, VideoFailureReason, VideoProbeError

INTERNAL = {"_curves", "_features", "_io", "_sampling", "_job"}
"""Helpers behind the public functions (frame signatures, opening files, the first-pass
reader, the job's command line)."""


def test_all_is_sorted_and_resolves() -> None:
    def isort_style(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2), name

    assert video.__all__ == sorted(set(video.__all__), key=isort_style)
    for name in video.__all__:
        assert hasattr(video, name), name


def test_every_private_module_export_is_public() -> None:
    exported = set(video.__all__)
    for info in pkgutil.iter_modules(video.__path__):
        if info.name in INTERNAL:
            continue
        module = importlib.import_module(f"swarm_ray.video.{info.name}")
        missing = [n for n in getattr(module, "__all__", ()) if n not in exported]
        internal_entrypoints = {
            "analyze_video_segment",
            "probe_metadata",
            "render_video_timeline",
            "segment_adaptive",
        }
        assert set(missing) <= internal_entrypoints, (info.name, missing)


def test_errors_are_named_and_pickle() -> None:
    probe = VideoProbeError("video `a.mp4` is empty", path="a.mp4", reason=VideoFailureReason.EMPTY)
    segment = SegmentDecodeError(
        "segment 3 of `a.mp4` is corrupted",
        path="a.mp4",
        segment=3,
        reason=VideoFailureReason.CORRUPT_DATA,
        start_s=1.0,
    )
    assert isinstance(probe, swarm_ray.InvalidInputError)  # the caller's file: not retried
    assert isinstance(segment, swarm_ray.AgentExecutionError)  # one region: retried alone
    for error in (probe, segment):
        again = pickle.loads(pickle.dumps(error))
        assert again == error and again.reason == error.reason and again.path == "a.mp4"
    assert pickle.loads(pickle.dumps(segment)).segment == 3


def test_catalog_registers_the_capabilities_and_templates() -> None:
    catalog = video.video_catalog()
    assert {c.id for c in catalog.capabilities} == {
        "video.probe.metadata",
        "video.segmentation.adaptive",
        "video.analysis.segment",
        "report.render.timeline",
    }
    data = {c.id: c for c in catalog.capabilities}["video.analysis.segment"]
    assert data.executor is swarm_ray.ExecutorKind.DATA
    assert {t.name for t in catalog.templates} == {"analyze_video"}
    for spec in catalog.capabilities:  # entrypoints import and are callable
        module, _, name = (spec.entrypoint or "").partition(":")
        assert callable(getattr(importlib.import_module(module), name))


def test_agents_idle_during_the_analysis_reserve_no_cpu() -> None:
    """Pooled agents keep their reservation while idle: any fraction the probe, first pass
    or timeline held would cost a small node a whole `num_cpus=1` decoder."""
    resources = {c.id: c.resources for c in video.video_catalog().capabilities}
    assert resources.pop("video.analysis.segment").num_cpus == 1.0
    assert {cid: r.num_cpus for cid, r in resources.items()} == dict.fromkeys(resources, 0.0)


def test_importing_the_package_does_not_import_matplotlib() -> None:
    code = "import sys, swarm_ray.video; print('matplotlib' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
