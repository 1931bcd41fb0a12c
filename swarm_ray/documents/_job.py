"""Compare product documents across dimensions: the main batch job.

Three ways to run it, one code path:

    python jobs/compare_documents.py                       # 100 generated sample brochures
    swarm-ray compare --input DIR_OR_URI                   # your PDFs
    ray job submit --working-dir . -- python jobs/compare_documents.py --input s3://b/pdfs

Without `--input` it generates sample EV brochures (with a ground truth) and, at the end,
scores the extraction against that ground truth. It joins the cluster in `RAY_ADDRESS` (as
under `ray job submit`) or starts a local one, shows progress while the swarm works, and
prints where the report is.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow.fs as pafs  # type: ignore[import-untyped]

import swarm_ray
from swarm_ray._progress import follow_with_progress
from swarm_ray.documents._capabilities import find_dimensions
from swarm_ray.documents._compare import Comparison
from swarm_ray.documents._report import ReportFiles
from swarm_ray.documents._sample import GroundTruth, generate_brochures
from swarm_ray.documents._score import facts_by_file, in_dimensions, score_extraction

__all__: list[str] = []

DEFAULT_DIMENSIONS = ("battery", "motor", "driver_assistance", "interior")


def list_pdfs(source: str) -> list[str]:
    """PDF paths under a local directory or any URI pyarrow can list."""
    fs, root = pafs.FileSystem.from_uri(source if "://" in source else str(Path(source).resolve()))
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    found = sorted(i.path for i in infos if i.is_file and i.path.lower().endswith(".pdf"))
    if "://" in source:
        scheme = source.split("://", 1)[0]
        return [f"{scheme}://{p}" for p in found]
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the comparison, print the summary; returns the exit code."""
    parser = argparse.ArgumentParser(prog="compare_documents", description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", help="directory or URI of PDFs (default: generate samples)")
    parser.add_argument("--samples", type=int, default=100, help="sample brochures to generate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/compare", help="where the report goes")
    parser.add_argument("--dimensions", nargs="+", default=list(DEFAULT_DIMENSIONS))
    parser.add_argument("--dimension-file", action="append", default=[], help="extra YAML")
    parser.add_argument("--address", help="Ray address (default: RAY_ADDRESS or a local cluster)")
    parser.add_argument("--chroma-url", help="a Chroma server (default: embedded, under --out)")
    args = parser.parse_args(argv)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    known = find_dimensions(tuple(args.dimension_file))
    unknown = [d for d in args.dimensions if d not in known]
    if unknown:
        parser.error(f"unknown dimension(s) {unknown}; known: {', '.join(sorted(known))}")

    truth: GroundTruth | None = None
    if args.input:
        paths = list_pdfs(args.input)
        if not paths:
            parser.error(f"no PDF files under {args.input!r}")
    else:
        sample = generate_brochures(out / "samples", n=args.samples, seed=args.seed)
        paths, truth = list(sample.pdf_paths), sample.ground_truth
        print(f"generated {len(paths)} sample brochures in {out / 'samples'}")

    started = time.perf_counter()
    swarm = swarm_ray.connect(args.address, state_dir=out / "state")
    task_id = swarm.submit(
        template="compare_documents",
        query=f"compare {len(paths)} documents on {', '.join(args.dimensions)}",
        items=tuple(paths),
        dimensions=tuple(args.dimensions),
        params={
            "out_dir": str(out),
            "dimension_files": args.dimension_file,
            **({"chroma_url": args.chroma_url} if args.chroma_url else {}),
        },
    )
    print(f"task {task_id}: {len(paths)} documents x {len(args.dimensions)} dimensions")
    for _event in follow_with_progress(swarm, task_id):  # bars on a terminal, else lines
        pass
    status = swarm.status(task_id)
    elapsed = time.perf_counter() - started
    if status["state"] != "completed":
        print(f"task {task_id} {status['state']}: {status['error']}", file=sys.stderr)
        return 1
    files = ReportFiles.model_validate(swarm.output(task_id))
    comparison = json.loads(Path(files.json_path).read_text())["comparison"]
    print(
        f"done in {elapsed:.1f} s: {len(comparison['entities'])} entities, "
        f"{len(comparison['cells'])} cells, {files.fact_count} facts, "
        f"{files.conflict_count} conflicts flagged for review"
    )
    for warning in status["warnings"][:10]:
        print(f"  warning: {warning}")
    if len(status["warnings"]) > 10:
        print(f"  ... and {len(status['warnings']) - 10} more warnings")
    if truth is not None:
        found = facts_by_file(Comparison.model_validate(comparison))
        s = score_extraction(truth, found, args.dimensions)
        planted = {
            (c.entity, c.field, c.qualifier)
            for c in truth.conflicts
            if in_dimensions(c.field, args.dimensions)
        }
        flagged = {(c["entity"], c["field"], c["qualifier"]) for c in comparison["conflicts"]}
        print(
            f"extraction vs ground truth: precision {s.precision:.3f}, recall {s.recall:.3f}; "
            f"contradictions planted {len(planted)}, found {len(planted & flagged)}, "
            f"flagged but not planted {len(flagged - planted)}"
        )
    print(f"report: {files.markdown_path}")
    print(f"facts:  {files.parquet_path}")
    return 0
