"""Analyse a long video: where are the intense parts, and how are they paced.

Three ways to run it, one code path:

    python jobs/analyze_video.py                          # a generated sample video
    python jobs/analyze_video.py --input game.mp4 --out out/video
    ray job submit --working-dir . -- python jobs/analyze_video.py --input s3://b/game.mp4

The input must be readable from every node (shared path or object-store URI): each
worker opens it and reads only its own segment. Without `--input` a synthetic video with
known cuts and active spans is generated, and at the end the cuts and spans found are
scored against that truth. It joins the cluster in `RAY_ADDRESS` (as under `ray job
submit`) or starts a local one, and prints where the report is.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import swarm_ray
from swarm_ray.testing.sample_video import SampleVideo, generate_sample_video
from swarm_ray.video._models import AnalysisSettings
from swarm_ray.video._pipeline import VideoRun, analyze_video

__all__ = ["main", "score_against_truth"]

CATALOGS = ("swarm_ray.video:video_catalog",)
"""What the job's orchestrator loads (the video workload alone)."""


def score_against_truth(run: VideoRun, truth: SampleVideo, tolerance_s: float) -> dict[str, Any]:
    """Cuts and active spans found versus planted, within `tolerance_s`."""
    found = [c.t_s for c in run.report.timeline.cuts if c.kind != "fade"]
    hits = sum(1 for t in truth.cut_times_s if any(abs(t - f) <= tolerance_s for f in found))
    spans = run.report.timeline.active_spans
    matched = sum(
        1
        for a, b in truth.active_spans_s
        if any(abs(a - s.start_s) <= tolerance_s and abs(b - s.end_s) <= tolerance_s for s in spans)
    )
    return {
        "cuts_planted": len(truth.cut_times_s),
        "cuts_found": len(found),
        "cuts_matched": hits,
        "spans_planted": len(truth.active_spans_s),
        "spans_found": len(spans),
        "spans_matched": matched,
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the analysis, print the summary; returns the exit code."""
    parser = argparse.ArgumentParser(prog="analyze_video", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="video path or URI (default: generate a sample)")
    parser.add_argument("--out", default="out/video", help="where the report goes")
    parser.add_argument("--sample-seconds", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--segments", type=int, help="target segment count (default: cluster)")
    parser.add_argument("--min-segment", type=float, help="shortest segment, s (default 10)")
    parser.add_argument("--max-segment", type=float, help="longest segment, s (default 1800)")
    parser.add_argument("--decode-threads", type=int, default=1)
    parser.add_argument("--address", help="Ray address (default: RAY_ADDRESS or a local cluster)")
    parser.add_argument("--timeout", type=float, default=None, help="for the task, seconds")
    args = parser.parse_args(argv)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    truth: SampleVideo | None = None
    if args.input:
        path = args.input if "://" in args.input else str(Path(args.input).resolve())
    else:
        truth = generate_sample_video(
            out / "sample.mp4", duration_s=args.sample_seconds, seed=args.seed
        )
        path = truth.path
        print(f"generated a {truth.duration_s:.0f} s sample video: {path}")

    swarm = swarm_ray.connect(
        args.address, catalogs=CATALOGS, state_dir=out / "state", name="swarm-video-job"
    )

    def progress(stage: str, facts: dict[str, Any]) -> None:
        print(f"  {stage}: " + ", ".join(f"{k} {v}" for k, v in facts.items()))

    try:
        run = analyze_video(
            swarm,
            path,
            str(out),
            target_segments=args.segments,
            min_segment_s=args.min_segment,
            max_segment_s=args.max_segment,
            settings=AnalysisSettings(decode_threads=args.decode_threads),
            timeout_s=args.timeout,
            on_stage=progress,
            progress=True,
        )
    except swarm_ray.SwarmError as exc:
        print(f"analysis failed: {exc.message}", file=sys.stderr)
        return 1
    finally:
        swarm.shutdown()
    meta, report = run.plan.metadata, run.report
    print(
        f"done in {run.seconds['total']:.1f} s ({meta.duration_s / run.seconds['total']:.1f} s "
        f"of video per second): {len(run.outcomes)} segments, {report.segments_failed} failed, "
        f"{len(report.timeline.cuts)} scene changes, "
        f"{len(report.timeline.active_spans)} active spans"
    )
    for warning in report.warnings[:10]:
        print(f"  warning: {warning}")
    if truth is not None:
        print(f"against the planted truth (1 s tolerance): {score_against_truth(run, truth, 1.0)}")
    print(f"report: {report.markdown_path}")
    return 0
