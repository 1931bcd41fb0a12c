"""Accuracy and robustness on real clips from ../shared/corpus/video (skipped without it)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from swarm_ray.video import (
    AnalysisSettings,
    SegmentAnalysisRequest,
    SegmentDecodeError,
    SegmentJob,
    SegmentOutcome,
    Timeline,
    VideoProbeError,
    analyze_segment,
    build_timeline,
    probe_video,
)

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "video"
GOLDENS = CORPUS / "pyscenedetect" / "goldens"
FADE_TOLERANCE_FRAMES = 6
"""Fades are placed mid-way through the black run; where the run starts and ends depends
on the black level, so a fade may sit a few frames from another tool's (0.2 s here)."""


def corpus(relative: str) -> str:
    path = CORPUS / relative
    if not path.exists():
        pytest.skip(f"no corpus file {path}")
    return str(path)


def golden(name: str) -> list[int]:
    cuts: list[int] = json.loads((GOLDENS / name).read_text())["cuts"]
    return cuts


def analyse(path: str, pieces: int = 3) -> Timeline:
    """Split into equal pieces (boundaries off keyframes, the hard case) and stitch."""
    meta = probe_video(path)
    edges = [meta.start_time_s + meta.duration_s * i / pieces for i in range(pieces + 1)]
    found = []
    for i, (a, b) in enumerate(itertools.pairwise(edges)):
        job = SegmentJob(path=path, index=i, start_s=a, end_s=b, frame_rate=meta.frame_rate)
        result = analyze_segment(SegmentAnalysisRequest(job=job))
        found.append(
            SegmentOutcome(index=i, start_s=a, end_s=b, subtask_id=f"s{i}", analysis=result)
        )
    return build_timeline(meta, found, AnalysisSettings())


def test_testvideo_cuts_and_fades() -> None:
    timeline = analyse(corpus("pyscenedetect/testvideo.mp4"))
    cuts = [c.frame for c in timeline.cuts if c.kind != "fade"]
    fades = [c.frame for c in timeline.cuts if c.kind == "fade"]
    content = golden("testvideo.mp4.ContentDetector.default.json")
    threshold = golden("testvideo.mp4.ThresholdDetector.default.json")
    print(
        f"\ntestvideo.mp4: hard cuts at frames {cuts} (PySceneDetect ContentDetector {content});"
        f" fades at {fades} (ThresholdDetector {threshold}; corpus README: 201, 382)"
    )
    assert cuts == [30, 180]  # ContentDetector's third, 394, is the end of a fade-in
    scene_splits = [f for f in fades if f > 30]
    assert len(scene_splits) == 2
    for found, expected in zip(scene_splits, (201, 382), strict=True):
        assert abs(found - expected) <= FADE_TOLERANCE_FRAMES


def test_variable_frame_rate_clip() -> None:
    # Every third frame dropped: frames are numbered by time x nominal rate, as
    # PySceneDetect numbers them, so the cuts land on the goldens' frames.
    timeline = analyse(corpus("pyscenedetect/goldeneye-vfr-drop3.mp4"))
    cuts = [c.frame for c in timeline.cuts if c.kind != "fade"]
    expected = golden("goldeneye-vfr-drop3.mp4.ContentDetector.default.json")
    print(f"\ngoldeneye-vfr-drop3.mp4: cuts at frames {cuts}, golden {expected}")
    assert len(cuts) == len(expected)
    assert all(abs(a - b) <= 1 for a, b in zip(cuts, expected, strict=True))


@pytest.mark.parametrize("name", ["fades.mp4", "counter.mp4"])
def test_no_false_cuts(name: str) -> None:
    timeline = analyse(corpus(f"pyscenedetect/{name}"))
    assert [c for c in timeline.cuts if c.kind != "fade"] == []
    assert golden(f"{name}.ContentDetector.default.json") == []


def test_every_corpus_clip_is_analysed_or_fails_by_name() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"no corpus at {CORPUS}")
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in {".mp4", ".mov", ".mkv", ".webm"})
    outcome: dict[str, str] = {}
    for path in files:
        try:
            meta = probe_video(str(path))
        except VideoProbeError as exc:
            outcome[path.name] = f"probe: {exc.reason}"
            continue
        half = meta.start_time_s + meta.duration_s / 2
        ends = [(meta.start_time_s, half), (half, meta.start_time_s + meta.duration_s)]
        states = []
        for i, (a, b) in enumerate(ends):
            job = SegmentJob(
                path=str(path), index=i, start_s=a, end_s=b, frame_rate=meta.frame_rate
            )
            try:
                result = analyze_segment(SegmentAnalysisRequest(job=job))
            except SegmentDecodeError as exc:
                assert path.name in exc.message and exc.segment == i
                states.append(f"error {exc.reason}")
            else:
                states.append(f"{result.frames_in_range} frames")
                if result.decode_errors:
                    states[-1] += f" ({result.decode_errors} bad packets)"
        outcome[path.name] = ", ".join(states)
    print("\n" + "\n".join(f"  {name}: {state}" for name, state in outcome.items()))
    assert outcome["test_data_corrupted.mp4"].count("bad packets") >= 1
