"""Video analysis throughput vs raw PyAV decoding, and a projection for a 40 GB file.

Run: python bench/video.py [--input FILE] [--seconds 60] [--cpus N] [--file-gb 40]

Same run, same machine:

1. raw: PyAV decodes the whole file on one thread, nothing else (the ceiling per core);
2. swarm: the full workload (probe, first pass, one Ray Data row per segment, timeline)
   on a local cluster of `--cpus` CPUs, one decoding thread per segment.

Prints the analysis stage's throughput (seconds of video per wall second, from the first
segment's start to the last one's end as the orchestrator recorded them) against raw
decoding x cores used (goal: at least 0.8 on the decode-bound path), the per-worker
efficiency (each segment's own decoding loop against raw decoding), and the projected
time for a `--file-gb` file on N nodes from the measured per-segment figures.

Without `--input` it remuxes copies (no re-encoding) of the corpus clip
`../shared/corpus/video/pyscenedetect/testvideo.mp4` (real 720p footage) into a
`--seconds` file, or of a painted 720p clip when the corpus is absent.
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import av
import ray

import swarm_ray
from swarm_ray import SubTaskDone
from swarm_ray.video import (
    VideoRun,
    analyze_video,
    generate_sample_video,
    probe_video,
    remux_repeat,
)

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "video"
CORPUS_CLIP = CORPUS / "pyscenedetect" / "testvideo.mp4"
"""Real 720p footage (24 s, H.264): decoding costs what real footage costs."""


def make_input(folder: Path, seconds: float) -> str:
    if CORPUS_CLIP.exists():
        clip, length = str(CORPUS_CLIP), probe_video(str(CORPUS_CLIP)).duration_s
    else:  # painted pictures decode faster than footage: the ratio comes out lower
        sample = generate_sample_video(
            folder / "clip.mp4", duration_s=15, fps=30, width=1280, height=720, gop=60, seed=3
        )
        clip, length = sample.path, sample.duration_s
    copies = max(1, math.ceil(seconds / length))
    return str(remux_repeat(clip, folder / "input.mp4", copies))


def decode_range(job: tuple[str, float, float]) -> int:
    """Decode the frames of `[start, end)` on one thread, nothing else; return how many."""
    path, start, end = job
    frames = 0
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.codec_context.thread_count = 1
        assert stream.time_base is not None
        container.seek(int(start / stream.time_base), stream=stream, backward=True)
        for frame in container.decode(stream):
            if frame.time is not None and frame.time >= end:
                break
            frames += frame.time is not None and frame.time >= start
    return frames


def raw_decode(path: str, duration: float, processes: int) -> float:
    """Wall seconds for `processes` processes to decode the file's disjoint slices."""
    started = time.perf_counter()
    slices = [
        (path, duration * i / processes, duration * (i + 1) / processes) for i in range(processes)
    ]
    with ProcessPoolExecutor(processes) as pool:
        list(pool.map(decode_range, slices))
    return time.perf_counter() - started


def stage_window(client: swarm_ray.SwarmClient, run: VideoRun) -> float:
    """Wall time of the analysis stage: first segment started to last segment finished."""
    record = client.record(run.segments_task)
    spans = [
        (e.result.timings.started_at, e.result.timings.finished_at)
        for e in record.log
        if isinstance(e, SubTaskDone)
        and e.result.timings.started_at is not None
        and e.result.timings.finished_at is not None
    ]
    return max(b for _, b in spans) - min(a for a, _ in spans)  # type: ignore[type-var]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="video file (default: a generated 720p file)")
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the generated file")
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--segments", type=int, help="target segments (default: 4 x CPUs)")
    parser.add_argument("--file-gb", type=float, default=40.0)
    parser.add_argument("--bitrate-mbps", type=float, help="of the big file (default: measured)")
    parser.add_argument("--cores-per-node", type=int, default=16)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4, 16, 64])
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="bench-video-"))
    path = args.input or make_input(folder, args.seconds)
    meta = probe_video(path)
    print(
        f"input: {meta.duration_s:.0f} s of {meta.codec} {meta.width}x{meta.height} "
        f"at {meta.frame_rate:.0f} fps, {(meta.size_bytes or 0) / 1e6:.0f} MB"
    )
    raw_rate = meta.duration_s / raw_decode(path, meta.duration_s, 1)
    parallel_rate = meta.duration_s / raw_decode(path, meta.duration_s, args.cpus)
    print(
        f"raw PyAV decode: 1 thread {raw_rate:.1f} s of video/s; {args.cpus} processes on "
        f"disjoint slices {parallel_rate:.1f} s/s ({parallel_rate / raw_rate:.2f}x, what this "
        "machine gives right now)"
    )

    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    client = swarm_ray.connect(
        catalogs=["swarm_ray.video:video_catalog"], state_dir=folder / "state", name="bench-video"
    )
    try:
        segments = args.segments or 4 * args.cpus
        run = analyze_video(
            client, path, str(folder / "out"), target_segments=segments, min_segment_s=2
        )
        window = stage_window(client, run)
    finally:
        client.shutdown()
        ray.shutdown()
    done = [o.analysis for o in run.outcomes if o.analysis is not None]
    cores = min(args.cpus, len(done))
    throughput = meta.duration_s / window
    worker_rate = sum(a.end_s - a.start_s for a in done) / sum(a.decode_seconds for a in done)
    print(
        f"swarm: {len(done)} segments on {cores} cores; analysis stage {window:.1f} s = "
        f"{throughput:.1f} s/s; end to end {run.seconds['total']:.1f} s "
        f"(plan {run.seconds['plan']:.1f}, timeline {run.seconds['timeline']:.1f})"
    )
    print(
        f"ratio to raw decoding x cores: {throughput / (raw_rate * cores):.2f} (goal >= 0.8); "
        f"to raw decoding in {args.cpus} processes, same run: {throughput / parallel_rate:.2f}; "
        f"per worker, own decoding loop vs raw: {worker_rate / raw_rate:.2f}"
    )
    preroll = sum(a.preroll_frames for a in done) / sum(a.frames_in_range for a in done)
    print(
        f"seek pre-roll (frames decoded before a segment's start, keyframes up to "
        f"{meta.max_keyframe_gap_s:.0f} s apart): {preroll:.0%} of the frames analysed"
    )
    bitrate = (args.bitrate_mbps or (meta.size_bytes or 0) * 8 / meta.duration_s / 1e6) * 1e6
    length = args.file_gb * 1e9 * 8 / bitrate
    per_segment_overhead = max(
        0.0, window * cores / len(done) - (meta.duration_s / len(done)) / worker_rate
    )
    print(
        f"projection for {args.file_gb:.0f} GB at {bitrate / 1e6:.1f} Mbit/s "
        f"({length / 3600:.1f} h of this footage), {args.cores_per_node} cores per node, "
        f"measured {worker_rate:.1f} s/s per core, {per_segment_overhead:.2f} s overhead per "
        f"segment, first pass {run.seconds['plan']:.1f} s:"
    )
    for nodes in args.nodes:
        total_cores = nodes * args.cores_per_node
        n_segments = max(32, 2 * total_cores)
        waves = math.ceil(n_segments / total_cores)
        analysis = length / (worker_rate * total_cores) + waves * per_segment_overhead
        print(f"  {nodes:3d} node(s): {(run.seconds['plan'] + analysis) / 60:7.1f} min")


if __name__ == "__main__":
    main()
