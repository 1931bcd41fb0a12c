"""Document comparison on real datasheets: precision and recall per family, time per page.

Run: python bench/datasheets.py [--family NAME ...] [--in-process] [--quick]
     python bench/datasheets.py --lofo [--quick] [--family NAME ...] [--cache DIR]
                                [--model listwise|trees]

Every labeled family is scored on its own: `openmv` (the OpenMV datasheets in
`../shared/corpus/datasheets/openmv/`, scored against the facts the products' YAML specs
state, `_datasheet_truth`) and each folder of `../shared/corpus/datasheets/multi/` (nine
product families of 30 vendors: fields from the folder's `fields.txt`, scored with the
corpus's own `score.py` on that family's rows of `gold.csv`, `_multi`). Fields are declared
only by name, unit and statistics (the `--field` syntax), as a new user would. It runs
`compare_documents` (as `swarm-ray compare --input DIR --field ...` does) and reads the
facts it wrote (`facts.parquet`); prints recall and precision per family and overall, the
goal line, the facts missed and the wrong ones, and the time per page against pypdfium2
reading the same pages' text alone. Goal: recall at least 0.85 and precision at least
0.95 on every family.

`--in-process` skips Ray: parse, extract and normalise as plain calls, the quick loop for
working on the rules; it also splits the time per page into parsing and extraction.
`--quick` (CI) runs one small family (`rectifier_diodes`) through the real job on Ray.

`--lofo` is the number to read first (`_lofo`): for each labeled family, the learned
scorer fitted on every other family scores it (leave-one-family-out), with the in-sample
score and today's rule extractor beside it, and per family where each gold fact was lost
(parsing, linking, choice) and the candidate coverage. It runs in process (no Ray);
`--lofo --quick` does three small families (CI). `--model trees` fits pointwise trees per
fold instead of the shipped listwise scorer.

The OpenMV run also times a generated user manual of `--manual-pages` pages (prose, with
one spec table in the middle) the same way: parsing for the declared fields lays out and
reads only the pages that name one, so such a manual must cost little more per page than
pypdfium2 reading its text.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq
import pypdfium2 as pdfium
from _datasheet_truth import BENCH_FIELDS, expected_facts
from _lofo import lofo
from _multi import MULTI, FamilyScore, declarations, families, score_family

from swarm_ray.documents import (
    Dimension,
    ExtractionScore,
    Statistic,
    extract_facts,
    normalise_facts,
    parse_field_arg,
    parse_pdf,
)
from swarm_ray.documents._job import list_pdfs, main
from swarm_ray.documents._quantities import focus_of
from swarm_ray.documents._table import names_a_field
from swarm_ray.testing.score import FactKey, score_facts

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "datasheets" / "openmv"


def pdfium_seconds(paths: list[str]) -> tuple[float, int]:
    """pypdfium2 alone: open each file and read every page's text (best of three)."""
    best = float("inf")
    pages = 0
    for _ in range(3):
        started = time.perf_counter()
        pages = 0
        for path in paths:
            pdf = pdfium.PdfDocument(Path(path).read_bytes())
            for index in range(len(pdf)):
                page = pdf[index]
                textpage = page.get_textpage()
                textpage.get_text_range()
                textpage.close()
                page.close()
                pages += 1
            pdf.close()
        best = min(best, time.perf_counter() - started)
    return best, pages


def in_process(paths: list[str]) -> tuple[dict[str, list[FactKey]], float, float]:
    """Parse, extract and normalise as plain calls; facts per file and the two times."""
    dimension = Dimension(name="fields", fields=tuple(f.spec for f in BENCH_FIELDS))
    found: dict[str, list[FactKey]] = defaultdict(list)
    parse_s = extract_s = 0.0
    focus = focus_of(names_a_field(dimension.fields))
    for path in paths:
        started = time.perf_counter()
        document = parse_pdf(path, focus=focus)
        parsed = time.perf_counter()
        result = extract_facts(document, [dimension])
        normalised = normalise_facts(result.facts)
        extract_s += time.perf_counter() - parsed
        parse_s += parsed - started
        for fact in normalised.facts:
            f = fact.fact
            found[f.source].append(
                FactKey(f.field, f.statistic, f.qualifier, fact.value, fact.unit)
            )
    return found, parse_s, extract_s


def with_swarm(paths_dir: Path, out: Path) -> tuple[dict[str, list[FactKey]], float]:
    """The job itself, as a user runs it; facts read back from its `facts.parquet`."""
    argv = ["--input", str(paths_dir), "--out", str(out)]
    for field in BENCH_FIELDS:
        argv += ["--field", field.declaration]
    started = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - started
    if code != 0:
        sys.exit(f"the job failed with exit code {code}")
    found: dict[str, list[FactKey]] = defaultdict(list)
    for row in pq.read_table(out / "facts.parquet").to_pylist():
        value = row["value"] if row["value"] is not None else row["term"]
        statistic = Statistic(row["statistic"]) if row["statistic"] else None
        found[row["source"]].append(
            FactKey(row["field"], statistic, row["qualifier"], value, row["unit"] or "")
        )
    return found, elapsed


def write_manual(path: Path, pages: int) -> None:
    """A long user manual: pages of prose, one page with a spec table in the middle."""
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen.canvas import Canvas

    canvas = Canvas(str(path), pagesize=A4, invariant=1)
    canvas.setTitle("ZX-900 Industrial Camera User Manual")
    prose = (
        "Mount the unit on a rigid bracket and tighten the four screws to 0.5 N m. Route "
        "the cable away from motors; a 2 m cable is supplied. Chapter {n} explains the "
        "settings menu, the calibration wizard and the 12 presets stored on the device."
    )
    for number in range(1, pages + 1):
        canvas.setFont("Helvetica-Bold", 14)
        canvas.drawString(50, 790, f"Chapter {number}" if number > 1 else "ZX-900")
        canvas.setFont("Helvetica", 10)
        if number == pages // 2:
            for i, (label, value) in enumerate(
                [("Operating temperature", "-10 to 50 °C"), ("Weight", "310 g"),
                 ("Supply voltage", "12 V to 24 V"), ("Frame rate", "up to 60 FPS")]
            ):  # fmt: skip
                canvas.drawString(50, 750 - 16 * i, label)
                canvas.drawString(220, 750 - 16 * i, value)
        for line in range(40):
            canvas.drawString(50, 700 - 15 * line, prose.format(n=number)[line % 3 * 60 :][:95])
        canvas.showPage()
    canvas.save()


def time_manual(pages: int) -> None:
    """Time per page of a long manual: pypdfium2's text against parse and extract."""
    dimension = Dimension(name="fields", fields=tuple(f.spec for f in BENCH_FIELDS))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "manual.pdf"
        write_manual(path, pages)
        baseline, count = pdfium_seconds([str(path)])
        started = time.perf_counter()
        document = parse_pdf(path, focus=focus_of(names_a_field(dimension.fields)))
        parsed = time.perf_counter()
        result = extract_facts(document, [dimension])
        done = time.perf_counter()
    ms = 1000 / count
    found = sorted({f.field for f in result.facts})
    print(
        f"a {count}-page manual: pypdfium2 text {baseline * ms:.2f} ms per page; parse "
        f"{(parsed - started) * ms:.2f} ms (laid out: {len(document.focus_pages)} pages that "
        f"name a field), extract {(done - parsed) * ms:.2f} ms: "
        f"{(done - started) / baseline:.1f}x pypdfium2; found {', '.join(found)}"
    )


def print_misses(misses: Sequence[str], wrong: Sequence[str], *, indent: str) -> None:
    for line in misses:
        print(f"{indent}missed: {line}")
    for line in wrong:
        print(f"{indent}wrong:  {line}")


def report(score: ExtractionScore, *, verbose: bool) -> None:
    print(f"{'field':26s} {'expected':>8s} {'recall':>7s} {'precision':>9s}")
    for field, recall in score.per_field.items():
        precision = score.per_field_precision.get(field)
        shown = "-" if precision is None else f"{precision:.3f}"
        expected = score.per_field_expected.get(field, 0)
        print(f"{field:26s} {expected:8d} {recall:7.3f} {shown:>9s}")
    for field, precision in score.per_field_precision.items():
        if field not in score.per_field:
            print(f"{field:26s} {'(none)':>8s} {'-':>7s} {precision:9.3f}")
    print(
        f"overall: precision {score.precision:.3f}, recall {score.recall:.3f} "
        f"({score.extracted} facts extracted, {score.expected} expected)"
    )
    if verbose:
        print_misses(score.misses, score.wrong, indent="  ")


def family_rows(paths: list[str], fields: list[str]) -> tuple[list[dict[str, object]], float]:
    """In process: the rows `facts.parquet` would hold for `paths`, and the seconds taken."""
    dimension = Dimension(name="fields", fields=tuple(parse_field_arg(f) for f in fields))
    focus = focus_of(names_a_field(dimension.fields))
    rows: list[dict[str, object]] = []
    started = time.perf_counter()
    for path in paths:
        result = extract_facts(parse_pdf(path, focus=focus), [dimension])
        for fact in normalise_facts(result.facts).facts:
            f = fact.fact
            rows.append(
                {
                    "field": f.field, "source": f.source, "page": f.page, "quote": f.quote,
                    "statistic": f.statistic.value if f.statistic else None,
                    "qualifier": f.qualifier, "unit": fact.unit, "value_text": f.value_text,
                    "value": fact.value if isinstance(fact.value, float) else None,
                    "term": fact.value if isinstance(fact.value, str) else None,
                }
            )  # fmt: skip
    return rows, time.perf_counter() - started


def swarm_rows(folder: Path, fields: list[str], out: Path) -> tuple[list[dict[str, object]], float]:
    """The job itself, as `swarm-ray compare` runs it; rows read back from `facts.parquet`."""
    argv = ["--input", str(folder), "--out", str(out)]
    for field in fields:
        argv += ["--field", field]
    started = time.perf_counter()
    code = main(argv)
    elapsed = time.perf_counter() - started
    if code != 0:
        sys.exit(f"the job failed on {folder} with exit code {code}")
    return pq.read_table(out / "facts.parquet").to_pylist(), elapsed


def run_family(family: str, *, in_process: bool, verbose: bool) -> FamilyScore:
    folder = MULTI / family
    paths = list_pdfs(str(folder))
    fields = declarations(family)
    baseline, pages = pdfium_seconds(paths)
    if in_process:
        rows, elapsed = family_rows(paths, fields)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            rows, elapsed = swarm_rows(folder, fields, Path(tmp) / "report")
    score = score_family(family, rows)
    print(
        f"{family:18s} {len(paths):3d} files {pages:4d} pages  recall {score.recall:.3f} "
        f"({score.found}/{score.gold})  precision {score.precision:.3f} "
        f"({score.correct}/{score.facts})  {elapsed / pages * 1000:.1f} ms/page "
        f"({elapsed / baseline:.1f}x pypdfium2 text)"
    )
    if verbose:
        print_misses(score.misses, score.wrong, indent="    ")
    return score


def run_openmv(args: argparse.Namespace) -> ExtractionScore:
    paths = list_pdfs(str(args.corpus))
    expected = expected_facts(args.corpus / "_products_yaml" / "products")
    expected = {Path(p).name: expected.get(Path(p).name, []) for p in paths}
    baseline, pages = pdfium_seconds(paths)
    print(f"openmv: {len(paths)} datasheets, {pages} pages, {len(BENCH_FIELDS)} fields")
    if args.in_process:
        found, parse_s, extract_s = in_process(paths)
        ms = 1000 / pages
        ours = (parse_s + extract_s) * ms
        print(
            f"time per page: pypdfium2 text {baseline * ms:.2f} ms; ours {ours:.2f} ms "
            f"(parse with boxes {parse_s * ms:.2f}, extract {extract_s * ms:.2f}): "
            f"{(parse_s + extract_s) / baseline:.1f}x pypdfium2"
        )
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out or Path(tmp) / "report"
            found, elapsed = with_swarm(args.corpus, out)
        print(
            f"job wall time {elapsed:.1f} s, {elapsed / pages * 1000:.1f} ms per page "
            f"(pypdfium2 text alone: {baseline / pages * 1000:.2f} ms per page)"
        )
    score = score_facts(expected, found)
    report(score, verbose=not args.quiet)
    if args.manual_pages:
        time_manual(args.manual_pages)
    return score


def run(argv: list[str] | None = None) -> dict[str, tuple[float, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the OpenMV corpus")
    parser.add_argument(
        "--family", action="append", default=[],
        help="openmv or a folder of datasheets/multi (repeatable; default: every family)",
    )  # fmt: skip
    parser.add_argument("--in-process", action="store_true", help="no Ray: plain calls")
    parser.add_argument("--quick", action="store_true", help="CI: one small family, on Ray")
    parser.add_argument("--out", type=Path, help="OpenMV report folder (default: a temporary one)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no list of misses")
    parser.add_argument("--manual-pages", type=int, default=300, help="0: no manual")
    parser.add_argument(
        "--lofo", action="store_true",
        help="leave-one-family-out, in process: the learned scorer fitted on the other "
        "families, the in-sample and rule scores beside it, and where each fact was lost",
    )  # fmt: skip
    parser.add_argument(
        "--cache", type=Path, help="--lofo: keep each family's read documents here (pickles)"
    )
    parser.add_argument(
        "--model", choices=("listwise", "trees"), default="listwise",
        help="--lofo: the learned scorer fitted per fold (listwise: the shipped one)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.lofo:
        chosen = args.family or (
            ["rectifier_diodes", "zener_diodes", "bjts"] if args.quick
            else [*families(), "openmv"]
        )  # fmt: skip
        lofo(chosen, cache=args.cache, details=not args.quiet, model=args.model)
        return {}
    if args.quick:
        args.family, args.in_process, args.manual_pages = ["rectifier_diodes"], False, 0
    chosen = args.family or ["openmv", *families()]
    figures: dict[str, tuple[float, float]] = {}
    gold = found = facts = correct = 0
    for family in chosen:
        if family == "openmv":
            if not args.corpus.is_dir():
                sys.exit(f"no corpus at {args.corpus}")
            openmv = run_openmv(args)
            figures[family] = (openmv.recall, openmv.precision)
            continue
        if not (MULTI / family / "fields.txt").is_file():
            sys.exit(f"no labeled family {family!r} under {MULTI}")
        score = run_family(family, in_process=args.in_process, verbose=not args.quiet)
        figures[family] = (score.recall, score.precision)
        gold, found = gold + score.gold, found + score.found
        facts, correct = facts + score.facts, correct + score.correct
    if gold:
        print(
            f"multi overall: recall {found / gold:.3f} ({found}/{gold}), precision "
            f"{correct / max(facts, 1):.3f} ({correct}/{facts})"
        )
    below = [f for f, (r, p) in figures.items() if r < 0.85 or p < 0.95]
    print(
        "goal (recall >= 0.85 and precision >= 0.95 on every family): "
        + ("met" if not below else f"not met on {len(below)} of {len(figures)}: {', '.join(below)}")
    )
    return figures


if __name__ == "__main__":
    run()
