"""Document comparison: the swarm against a sequential loop doing the same work.

Run: python bench/documents.py [--samples 100] [--dimensions battery motor ...]

Both sides, in the same run, on the same generated brochures: parse (pypdfium2), embed
and index (Chroma + MiniLM), extract per dimension, normalise, compare, judge, render.
The sequential side is plain function calls in one process; the swarm side is one
`compare_documents` task on a warm local cluster (Ray started, agents created and the
embedding model loaded by a warm-up task before the clock starts; the cold start is
printed on its own line). Also printed: time to the first extracted fact over the total,
and where the swarm's time goes (run time per stage, summed over its sub-tasks).
Goals: at least 1.8x faster than the loop on 2 cores; first fact within 10 % of the total.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import swarm_ray
from swarm_ray import SubTaskDone
from swarm_ray.documents import (
    ChromaStore,
    IndexRequest,
    ReportRequest,
    compare_facts,
    default_dimensions,
    extract_facts,
    generate_brochures,
    index_document,
    judge_coherence,
    judge_factuality,
    normalise_facts,
    parse_pdf,
    render_report,
)


def sequential(paths: list[str], dimensions: list[str], out: Path) -> tuple[float, float]:
    """Same work with plain calls in one process; returns (total s, first fact s)."""
    dims = [d for d in default_dimensions() if d.name in dimensions]
    store = ChromaStore(path=str(out / "index"), collection="bench-sequential")
    start = time.perf_counter()
    first = 0.0
    facts = []
    for path in paths:
        try:
            document = parse_pdf(path)
        except swarm_ray.SwarmUserError:
            continue
        index_document(IndexRequest(document=document, watermark="sequential", store=store))
        for dim in dims:
            result = extract_facts(document, [dim])
            if not first and result.facts:
                first = time.perf_counter() - start
            facts.extend(normalise_facts(result.facts).facts)
    comparison = compare_facts(facts)
    judge_factuality(facts)
    judge_coherence(facts)
    render_report(
        ReportRequest(comparison=comparison, facts=tuple(facts), out_dir=str(out / "seq"))
    )
    return time.perf_counter() - start, first


def swarm_run(
    client: swarm_ray.SwarmClient, paths: list[str], dimensions: list[str], out: Path
) -> tuple[float, float, dict[str, float]]:
    """One compare_documents task; returns (total s, first fact s, run time per stage)."""
    start = time.perf_counter()
    task_id = client.submit(
        template="compare_documents",
        items=tuple(paths),
        dimensions=tuple(dimensions),
        params={"out_dir": str(out / "swarm"), "index_path": str(out / "swarm-index")},
    )
    first = 0.0
    for event in client.follow(task_id):
        if (
            not first
            and event.status == "succeeded"
            and (event.subtask_id or "").startswith("extract")
        ):
            first = time.perf_counter() - start
    total = time.perf_counter() - start
    record = client.record(task_id)
    assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
    stages: dict[str, float] = defaultdict(float)
    for event in record.log:
        if isinstance(event, SubTaskDone):
            stage = event.result.subtask_id.split("[")[0].split("@")[0]
            stages[stage] += event.result.timings.duration_s
    return total, first, dict(stages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument(
        "--dimensions", nargs="+", default=["battery", "motor", "driver_assistance", "interior"]
    )
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="swarm-bench-docs-"))
    paths = list(generate_brochures(out / "pdf", n=args.samples, seed=11).pdf_paths)

    cold = time.perf_counter()
    client = swarm_ray.connect(state_dir=out / "state", name="swarm-bench-docs")
    warm_paths = list(generate_brochures(out / "warm", n=4, seed=12).pdf_paths)
    swarm_run(client, warm_paths, args.dimensions, out / "warm-run")
    cold_s = time.perf_counter() - cold
    print(f"cold start (ray.init, agents, embedding model, first task): {cold_s:.1f} s")

    seq_total, seq_first = sequential(paths, args.dimensions, out)
    total, first, stages = swarm_run(client, paths, args.dimensions, out)
    print(f"{len(paths)} brochures x {len(args.dimensions)} dimensions")
    print(f"sequential loop : {seq_total:7.2f} s   first fact after {seq_first:6.2f} s")
    print(
        f"swarm           : {total:7.2f} s   first fact after {first:6.2f} s "
        f"({first / total:.1%} of the total)"
    )
    print(f"speed-up        : {seq_total / total:.2f}x (goal >= 1.8x on 2 cores)")
    print("swarm run time per stage (summed over sub-tasks):")
    for stage, seconds in sorted(stages.items(), key=lambda s: -s[1]):
        print(f"  {stage:10} {seconds:7.2f} s")
    client.shutdown()


if __name__ == "__main__":
    main()
