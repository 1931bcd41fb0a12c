"""Compare product documents across fields: the main batch job.

Three ways to run it, one code path:

    python jobs/compare_documents.py                       # 100 generated sample brochures
    swarm-ray compare --input DIR_OR_URI --field "data rate:Gb/s" \
        --field "case temperature:°C:min,max" --field "form factor"
    ray job submit --working-dir . -- python jobs/compare_documents.py --input s3://b/pdfs ...

A `--field` is `NAME[|LABEL...][:UNIT[:STATISTICS]]`: the name, other names documents use,
any unit pint knows or a datasheet spelling (`Gb/s`, `°C`, `KB`, `dBm`; `count` for a
number of things; none for text), and `min`, `typ`, `max` or `min,max`. Richer
declarations go in a `--dimension-file` (YAML). Both are read here and sent inline with
the request; the built-in dimensions (`battery`, `motor`, ...) are named by `--dimensions`.

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
from swarm_ray.agent import follow_with_progress
from swarm_ray.core import InvalidSpecError
from swarm_ray.documents._accuracy import facts_by_file, in_dimensions, score_extraction
from swarm_ray.documents._compare import Comparison
from swarm_ray.documents._dimensions import (
    FIELDS_GROUP,
    FieldSpec,
    default_dimensions,
    field_groups,
    load_dimensions,
    parse_field_arg,
)
from swarm_ray.documents._report import ReportFiles
from swarm_ray.testing.sample_documents import GroundTruth, generate_brochures

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


def _declarations(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[list[FieldSpec], list[str]]:
    """The inline field declarations and the dimensions to extract, or a parser error."""
    try:
        fields = [parse_field_arg(text) for text in args.field]
        files = load_dimensions(args.dimension_file)
        inline = fields + [f for d in files for f in d.fields]
        groups = field_groups(inline)
    except InvalidSpecError as error:
        parser.error(error.message)
    except ValueError as error:  # two `--field`s with one name
        parser.error(f"`--field`: {' '.join(str(error).split())}")
    declared = ([FIELDS_GROUP] if fields else []) + [d.name for d in files]
    dimensions = list(args.dimensions or declared or DEFAULT_DIMENSIONS)
    known = {d.name for d in default_dimensions()} | set(groups)
    unknown = [d for d in dimensions if d not in known]
    if unknown:
        parser.error(f"unknown dimension(s) {unknown}; known: {', '.join(sorted(known))}")
    return inline, dimensions


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments, run the comparison, print the summary; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="swarm-ray compare", description=__doc__.split("\n\n")[0],
        epilog='example: swarm-ray compare --input DIR --field "data rate:Gb/s" '
        '--field "case temperature:°C:min,max" --field "form factor"',
    )  # fmt: skip
    parser.add_argument("--input", help="directory or URI of PDFs (default: generate samples)")
    parser.add_argument(
        "--field", action="append", default=[], metavar="NAME[|LABEL...][:UNIT[:STATS]]",
        help="a field to extract, e.g. 'supply voltage|VCC:V:min,max' (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--dimension-file", action="append", default=[], metavar="YAML",
        help="a dimension declared in YAML (read here, sent inline; repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--dimensions", nargs="+", default=None,
        help="dimensions to extract: built-in ones by name, `fields` for --field ones "
        f"(default: those declared, else {' '.join(DEFAULT_DIMENSIONS)})",
    )  # fmt: skip
    parser.add_argument("--samples", type=int, default=100, help="sample brochures to generate")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="out/compare", help="where the report goes")
    parser.add_argument("--address", help="Ray address (default: RAY_ADDRESS or a local cluster)")
    parser.add_argument("--chroma-url", help="a Chroma server (default: embedded, under --out)")
    parser.add_argument(
        "--choice", choices=("rules", "learned"), default="rules",
        help="how each field's value is chosen among its candidates: by the rules "
        "(default) or by the installed learned scorer (`swarm-ray train-extractor`)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    inline, dimensions = _declarations(parser, args)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)

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
    task = swarm.start(
        template="compare_documents",
        query=f"compare {len(paths)} documents on {', '.join(dimensions)}",
        items=tuple(paths),
        params={
            "dimensions": list(dimensions),
            "out_dir": str(out),
            **({"fields": [f.model_dump(mode="json") for f in inline]} if inline else {}),
            **({"chroma_url": args.chroma_url} if args.chroma_url else {}),
            **({"choice": args.choice} if args.choice != "rules" else {}),
        },
    )
    named = len(inline) if inline else len(dimensions)
    print(
        f"task {task.id}: {len(paths)} documents x {named} {'fields' if inline else 'dimensions'}"
    )
    for _event in follow_with_progress(task):  # bars on a terminal, else lines
        pass
    status = task.status()
    elapsed = time.perf_counter() - started
    if status.state != "completed":
        print(f"task {task.id} {status.state}: {status.error}", file=sys.stderr)
        return 1
    files = task.output(ReportFiles)
    summary = json.loads(Path(files.json_path).read_text())
    comparison = summary["comparison"]
    print(
        f"done in {elapsed:.1f} s: {len(comparison['entities'])} entities, "
        f"{len(comparison['cells'])} cells, {files.fact_count} facts, "
        f"{files.conflict_count} conflicts flagged for review"
    )
    for warning in status.warnings[:10]:
        print(f"  warning: {warning}")
    if len(status.warnings) > 10:
        print(f"  ... and {len(status.warnings) - 10} more warnings")
    for field in summary.get("unstated_fields", []):
        print(f"  no document states `{field}` (the report lists it)")
    if truth is not None:
        found = facts_by_file(Comparison.model_validate(comparison))
        s = score_extraction(truth, found, dimensions)
        planted = {
            (c.entity, c.field, c.qualifier)
            for c in truth.conflicts
            if in_dimensions(c.field, dimensions)
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
