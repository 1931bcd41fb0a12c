"""Document comparison on real datasheets: precision, recall and time per page.

Run: python bench/datasheets.py [--corpus DIR] [--in-process]

Runs `compare_documents` (as `swarm-ray compare --input DIR --field ...` does) on the
OpenMV datasheets in `../shared/corpus/datasheets/openmv/` with fields declared only by
name, labels, unit and statistics (`BENCH_FIELDS`, the `--field` syntax), reads the
facts it wrote (`facts.parquet`) and scores them against the facts the products' YAML
specs state (`_datasheet_truth`: how, and how a spec that states one field twice is
treated). Prints precision and recall per field and overall, the facts missed and the
wrong ones, and the time per page against pypdfium2 reading the same pages' text alone.
Goal: recall at least 0.85 and precision at least 0.95 overall.

`--in-process` skips Ray: parse, extract and normalise as plain calls, the quick loop for
working on the rules; it also splits the time per page into parsing and extraction.

Either way it also times a generated user manual of `--manual-pages` pages (prose, with
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
from pathlib import Path

import pyarrow.parquet as pq
import pypdfium2 as pdfium
from _datasheet_truth import BENCH_FIELDS, expected_facts

from swarm_ray.documents import (
    Dimension,
    ExtractionScore,
    Statistic,
    extract_facts,
    normalise_facts,
    parse_pdf,
)
from swarm_ray.documents._job import list_pdfs, main
from swarm_ray.documents._score import FactKey, score_facts
from swarm_ray.documents._table import names_a_field

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
    focus = names_a_field(dimension.fields)
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
        document = parse_pdf(path, focus=names_a_field(dimension.fields))
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
        for line in score.misses:
            print(f"  missed: {line}")
        for line in score.wrong:
            print(f"  wrong:  {line}")


def run(argv: list[str] | None = None) -> ExtractionScore:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--in-process", action="store_true", help="no Ray: plain calls")
    parser.add_argument("--out", type=Path, help="report folder (default: a temporary one)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no list of misses")
    parser.add_argument("--manual-pages", type=int, default=300, help="0: no manual")
    args = parser.parse_args(argv)
    if not args.corpus.is_dir():
        sys.exit(f"no corpus at {args.corpus}")
    paths = list_pdfs(str(args.corpus))
    expected = expected_facts(args.corpus / "_products_yaml" / "products")
    expected = {Path(p).name: expected.get(Path(p).name, []) for p in paths}
    baseline, pages = pdfium_seconds(paths)
    print(f"{len(paths)} datasheets, {pages} pages, {len(BENCH_FIELDS)} fields")
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


if __name__ == "__main__":
    run()
