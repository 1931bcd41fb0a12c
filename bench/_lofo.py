"""Leave-one-family-out: the extractor judged on families it was not fitted on.

For each labeled family F (the twelve of `multi/` and OpenMV) the learned scorer is fitted
on the candidates of every other family, then F is scored with it: that is F's LOFO
score, what a user's next datasheet family can expect. The in-sample score (fitted on
every family, F included) stands beside it; the gap is the overfit. Today's rule
extractor fits nothing, so its LOFO and in-sample scores are one and the same number.

Every gold fact is also traced to where it was lost, for both extractors:

- **parsing**: its value was never read as a quantity of its field's dimension on any
  page (nor as a linked term or count);
- **linking**: read, but never a candidate of its field (and, for the learned path, of
  its statistic): for the rules, no label link; for the learned path, no candidate;
- **choice**: a candidate existed, and another won (or none cleared the threshold).

Candidate coverage is the share of gold facts with a matching candidate: what a perfect
chooser could reach. The issue's goal counts the facts whose value stands on the cited
page (`on page`: its number, in any decimal multiple, or its term, is in the page's text
layer); a value printed only in a drawing, or spelled only by a part number (`79L05` for
-5 V), is beyond any reader of text, and `cover on page` leaves it out.
"""

from __future__ import annotations

import pickle
import re
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from _datasheet_truth import BENCH_FIELDS, expected_facts
from _multi import MULTI, score_family

from swarm_ray.documents import FieldSpec, normalise_facts
from swarm_ray.documents._candidates import DocumentCandidates, FieldCandidate, document_candidates
from swarm_ray.documents._job import list_pdfs
from swarm_ray.documents._parse import parse_pdf
from swarm_ray.documents._quantities import focus_of
from swarm_ray.documents._scorer import Scorer, choice_groups, choose_scored, load_scorer
from swarm_ray.documents._table import chosen_facts, names_a_field, table_links
from swarm_ray.documents._terms import _HYPHENS
from swarm_ray.documents._training import (
    GoldFact,
    LabeledDocument,
    family_fields,
    fit_documents,
    in_declared,
    label,
    matches,
    read_gold,
    reported_statistic,
    value_matches,
)
from swarm_ray.testing.score import FactKey, score_facts

OPENMV = MULTI.parent / "openmv"


@dataclass(frozen=True)
class Read:
    """One document read once: its candidates and today's rule facts (rows)."""

    family: str
    fields: tuple[FieldSpec, ...]
    candidates: DocumentCandidates
    rule_rows: tuple[dict[str, Any], ...]
    gold: tuple[GoldFact, ...]
    pages: int
    seconds: float
    texts: tuple[str, ...] = ()
    """Each page's text layer, for `on_page`."""


def _row(field: str, source: str, page: int, statistic: str | None, unit: str,
         value_text: str, value: float | str, quote: str = "") -> dict[str, Any]:  # fmt: skip
    return {
        "field": field, "source": source, "page": page, "quote": quote,
        "statistic": statistic, "qualifier": None, "unit": unit, "value_text": value_text,
        "value": value if isinstance(value, float) else None,
        "term": value if isinstance(value, str) else None,
    }  # fmt: skip


def _openmv_gold(paths: Sequence[str]) -> list[GoldFact]:
    expected = expected_facts(OPENMV / "_products_yaml" / "products")
    out: list[GoldFact] = []
    for path in paths:
        name = Path(path).name
        for fact in expected.get(name, []):
            out.append(GoldFact(name, fact.field, fact.statistic, (str(fact.value),), fact.unit))
    return out


def read_family(family: str, cache: Path | None = None) -> list[Read]:
    """Parse and read every document of one family (from `cache` when it holds them)."""
    if family == "openmv":
        paths = list_pdfs(str(OPENMV))
        fields = tuple(f.spec for f in BENCH_FIELDS)
        gold = _openmv_gold(paths)
    else:
        paths = list_pdfs(str(MULTI / family))
        fields = family_fields(MULTI / family)
        gold = read_gold(MULTI, family, fields)
    cached = cache / f"{family}.pkl" if cache is not None else None
    if cached is not None and cached.is_file():
        loaded: list[Read] = pickle.loads(cached.read_bytes())
        # The labels are read afresh: only the documents' reading is cached.
        return [
            replace(r, gold=tuple(g for g in gold if g.source == r.candidates.source))
            for r in loaded
        ]
    names = names_a_field(fields)
    focus = focus_of(names)
    out: list[Read] = []
    for path in paths:
        started = time.perf_counter()
        document = parse_pdf(path, focus=focus)
        found = document_candidates(document, fields)
        base = {"entity": document.file_name, "document_id": document.document_id,
                "source": document.file_name}  # fmt: skip
        # Today's rules read the pages the job lays out (`focus_of`: those naming a field,
        # and tables of parts), as the learned path does: their figures are the job's own.
        chosen = table_links(document, fields, document.file_name).chosen
        facts = normalise_facts(chosen_facts(chosen, fields, base)).facts
        rows = tuple(
            _row(
                f.fact.field,
                f.fact.source,
                f.fact.page,
                f.fact.statistic.value if f.fact.statistic else None,
                f.unit,
                f.fact.value_text,
                f.value,
                f.fact.quote,
            )
            for f in facts
        )
        mine = tuple(g for g in gold if g.source == document.file_name)
        out.append(
            Read(
                family,
                fields,
                found,
                rows,
                mine,
                len(document.pages),
                time.perf_counter() - started,
                tuple(page.text for page in document.pages),
            )
        )
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_bytes(pickle.dumps(out))
    return out


def labeled(reads: Sequence[Read]) -> list[LabeledDocument]:
    return [label(r.family, r.candidates, r.fields, r.gold) for r in reads]


def learned_rows(
    document: LabeledDocument, probabilities: Sequence[float], threshold: float
) -> list[dict[str, Any]]:
    """The facts the learned path reports for one document, as `facts.parquet` rows."""
    candidates = [c for c, _, _ in document.rows]
    units = {f.key: f.unit for f in document.fields}
    rows: list[dict[str, Any]] = []
    groups = choice_groups(candidates, document.source)
    for chosen, _ in choose_scored(candidates, probabilities, threshold, groups):
        statistic = reported_statistic(chosen)
        value: float | str = chosen.scaled if chosen.scaled is not None else chosen.value
        unit = units[chosen.key] if chosen.scaled is not None else chosen.unit
        rows.append(
            _row(
                chosen.key,
                document.source,
                chosen.page,
                statistic.value if statistic else None,
                unit,
                chosen.value_text,
                value,
                chosen.line[:240],
            )
        )
    return rows


def probabilities(documents: Sequence[LabeledDocument], scorer: Scorer) -> list[list[float]]:
    return [
        scorer.probabilities(
            [r for _, r, _ in d.rows], choice_groups([c for c, _, _ in d.rows], d.source)
        ).tolist()
        for d in documents
    ]


@dataclass(frozen=True)
class Score:
    recall: float
    precision: float
    found: int
    gold: int
    correct: int
    facts: int
    misses: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()


def score(family: str, reads: Sequence[Read], rows: list[dict[str, Any]]) -> Score:
    """The family's score on `rows`, as its own scorer computes it."""
    if family == "openmv":
        expected = {Path(p).name: [] for p in (r.candidates.source for r in reads)}
        truth = expected_facts(OPENMV / "_products_yaml" / "products")
        expected = {name: truth.get(name, []) for name in expected}
        found: dict[str, list[FactKey]] = defaultdict(list)
        for row in rows:
            value = row["value"] if row["value"] is not None else row["term"]
            stat = row["statistic"]
            from swarm_ray.documents import Statistic

            found[row["source"]].append(
                FactKey(row["field"], Statistic(stat) if stat else None, None, value, row["unit"])
            )
        s = score_facts(expected, found)
        return Score(s.recall, s.precision, round(s.recall * s.expected), s.expected,
                     round(s.precision * s.extracted), s.extracted)  # fmt: skip
    f = score_family(family, rows)
    return Score(f.recall, f.precision, f.found, f.gold, f.correct, f.facts, f.misses, f.wrong)


@dataclass(frozen=True)
class Trace:
    """Where the gold facts of a family were lost, for one extractor."""

    gold: int
    covered: int
    parsing: int
    linking: int
    choice: int
    on_page: int = 0
    """Gold facts whose value stands on the cited page (`on_page`)."""
    covered_on_page: int = 0


def _row_matches(row: dict[str, Any], gold: GoldFact) -> bool:
    if row["field"] != gold.key:
        return False
    stat = row["statistic"]
    if not gold.any_statistic and stat != (gold.statistic.value if gold.statistic else None):
        return False
    value = row["value"] if row["value"] is not None else row["term"]
    return value_matches(value, row["value_text"] or "", gold)


def trace(
    reads: Sequence[Read],
    documents: Sequence[LabeledDocument],
    rows_of: Sequence[list[dict[str, Any]]],
    *,
    rules: bool,
) -> Trace:
    """Per gold fact: read, a candidate, found; counted by the first stage that lost it."""
    gold = covered = parsing = linking = choice = printed = printed_covered = 0
    for index, (read, _document) in enumerate(zip(reads, documents, strict=True)):
        specs = {f.key: f for f in read.fields}
        rows = rows_of[index]
        for fact in read.gold:
            spec = specs[fact.key]
            target = in_declared(fact, spec)
            mine: tuple[FieldCandidate, ...] = read.candidates.per_field.get(fact.key, ())
            gold += 1
            was_read = any(value_matches(v, "", target) for v in read.candidates.read[fact.key])
            was_read = was_read or any(matches(c, target, statistic=False) for c in mine)
            if rules:
                candidate = any(c.tier >= 0 and matches(c, target, statistic=False) for c in mine)
            else:
                candidate = any(matches(c, target) for c in mine)
            covered += candidate
            if on_page(fact, read.texts):
                printed += 1
                printed_covered += candidate
            # Found: the gold's own unit, as the rows carry the declared unit or normalised.
            found = any(_row_matches(r, _in_unit_of_rows(target, r)) for r in rows)
            if found:
                continue
            if not was_read:
                parsing += 1
            elif not candidate:
                linking += 1
            else:
                choice += 1
    return Trace(gold, covered, parsing, linking, choice, printed, printed_covered)


_NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
"""A number standing on its own: not the `05` of `79L05`, which names a part."""


def on_page(fact: GoldFact, texts: Sequence[str]) -> bool:
    """Whether the page `fact` cites states one of its values in its text layer.

    A number counts standing on its own (a table's `5`, not the `05` of `79L05`), in
    any decimal multiple (`1 W` as `1000 mW`) and either sign; a term counts anywhere in
    the page, case and dashes aside. A fact citing no page looks at every page.
    """
    pages = [texts[fact.page - 1]] if fact.page and fact.page <= len(texts) else list(texts)
    text = " ".join(pages).translate(_HYPHENS)
    numbers: set[float] = set()
    for token in _NUMBER.findall(text):
        for reading in {token.replace(",", ""), token.replace(",", ".")}:
            try:
                numbers.add(float(reading))
            except ValueError:
                continue
    folded = " ".join(text.casefold().split())
    for value in fact.values:
        try:
            number = abs(float(value))
        except ValueError:
            if " ".join(value.translate(_HYPHENS).casefold().split()) in folded:
                return True
            continue
        if any(
            abs(n - number * 10.0**k) <= 1e-6 * max(abs(n), 1e-12)
            for n in numbers
            for k in (-9, -6, -3, 0, 3, 6, 9)
        ):
            return True
    return False


def _in_unit_of_rows(target: GoldFact, row: dict[str, Any]) -> GoldFact:
    return target  # rows carry values in the declared unit (normalised or scaled)


def lofo(
    families: Sequence[str], *, cache: Path | None, details: bool = False, model: str = "listwise"
) -> dict[str, dict[str, Any]]:
    """Read every family, fit per fold, print the tables; return the figures per family."""
    reads: dict[str, list[Read]] = {}
    started = time.perf_counter()
    for family in families:
        reads[family] = read_family(family, cache)
        pages = sum(r.pages for r in reads[family])
        print(f"  read {family:18s} {len(reads[family]):3d} files {pages:4d} pages "
              f"({time.perf_counter() - started:.0f} s)", flush=True)  # fmt: skip
    docs = {f: labeled(rs) for f, rs in reads.items()}
    every = [d for f in families for d in docs[f]]
    t0 = time.perf_counter()
    in_sample = fit_documents(every, model=model)
    fit_s = time.perf_counter() - t0
    figures: dict[str, dict[str, Any]] = {}
    fold_p: dict[str, list[list[float]]] = {}
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    print(
        f"\n{'family':18s} {'LOFO R':>7s} {'LOFO P':>7s} {'in R':>6s} {'in P':>6s} "
        f"{'rules R':>7s} {'rules P':>7s} {'gold':>5s} {'cover':>6s} {'on pg':>6s}  "
        f"lost parse/link/choice: learned | rules"
    )
    for family in families:
        others = [d for f in families if f != family for d in docs[f]]
        fold = fit_documents(others, model=model) if others else in_sample
        mine = docs[family]
        fold_p[family] = probabilities(mine, fold)
        lofo_rows = [
            learned_rows(d, p, fold.threshold) for d, p in zip(mine, fold_p[family], strict=True)
        ]
        in_p = probabilities(mine, in_sample)
        in_rows = [learned_rows(d, p, fold.threshold) for d, p in zip(mine, in_p, strict=True)]
        rule_rows = [list(r.rule_rows) for r in reads[family]]
        flat = lambda rs: [row for part in rs for row in part]  # noqa: E731
        s_lofo = score(family, reads[family], flat(lofo_rows))
        s_in = score(family, reads[family], flat(in_rows))
        s_rules = score(family, reads[family], flat(rule_rows))
        t_learned = trace(reads[family], mine, lofo_rows, rules=False)
        t_rules = trace(reads[family], mine, rule_rows, rules=True)
        cover = t_learned.covered / max(t_learned.gold, 1)
        cover_on_page = t_learned.covered_on_page / max(t_learned.on_page, 1)
        print(
            f"{family:18s} {s_lofo.recall:7.3f} {s_lofo.precision:7.3f} {s_in.recall:6.3f} "
            f"{s_in.precision:6.3f} {s_rules.recall:7.3f} {s_rules.precision:7.3f} "
            f"{t_learned.gold:5d} {cover:6.3f} {cover_on_page:6.3f}  "
            f"{t_learned.parsing}/{t_learned.linking}/{t_learned.choice} | "
            f"{t_rules.parsing}/{t_rules.linking}/{t_rules.choice} "
            f"(rules cover {t_rules.covered / max(t_rules.gold, 1):.3f})",
            flush=True,
        )
        scores = (("lofo", s_lofo), ("in", s_in), ("rules", s_rules))
        if family != "openmv":
            scores += (("multi lofo", s_lofo), ("multi in", s_in), ("multi rules", s_rules))
        if details:
            for line in s_lofo.misses:
                print(f"    missed: {line}")
            for line in s_lofo.wrong:
                print(f"    wrong:  {line}")
            for read in reads[family]:
                for fact in read.gold:
                    if not on_page(fact, read.texts):
                        print(f"    not on its page: {fact.source} {fact.key} = "
                              f"{'|'.join(fact.values)} {fact.unit} p{fact.page}")  # fmt: skip
        for name, s in scores:
            totals[name] = [a + b for a, b in zip(totals[name],
                            (s.found, s.gold, s.correct, s.facts), strict=True)]  # fmt: skip
        figures[family] = {"lofo": s_lofo, "in": s_in, "rules": s_rules,
                           "trace": t_learned, "rules_trace": t_rules}  # fmt: skip
    print()
    for name, label_ in (
        ("multi lofo", "multi/ LOFO (learned)"), ("multi in", "multi/ in-sample (learned)"),
        ("multi rules", "multi/ rules (LOFO = in-sample)"), ("lofo", "all LOFO (learned)"),
        ("in", "all in-sample (learned)"), ("rules", "all rules (LOFO = in-sample)"),
    ):  # fmt: skip
        if name not in totals:
            continue
        found, gold, correct, facts = totals[name]
        print(f"overall {label_:34s} recall {found / max(gold, 1):.3f} ({found}/{gold}) "
              f"precision {correct / max(facts, 1):.3f} ({correct}/{facts})")  # fmt: skip
    print("LOFO per threshold (multi/ | all):")
    for threshold in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7):
        sums: dict[bool, list[int]] = {True: [0, 0, 0, 0], False: [0, 0, 0, 0]}
        for family in families:
            rows = [
                row
                for d, p in zip(docs[family], fold_p[family], strict=True)
                for row in learned_rows(d, p, threshold)
            ]
            s = score(family, reads[family], rows)
            for multi in {False, family != "openmv"}:
                sums[multi] = [a + b for a, b in zip(sums[multi],
                               (s.found, s.gold, s.correct, s.facts), strict=True)]  # fmt: skip
        shown = " | ".join(
            f"R {f / max(g, 1):.3f} P {c / max(n, 1):.3f}"
            for f, g, c, n in (sums[True], sums[False])
        )
        print(f"  {threshold:.1f}: {shown}")
    print(f"fit on every family: {fit_s:.1f} s ({len(every)} documents, "
          f"{sum(len(d.rows) for d in every)} candidates)")  # fmt: skip
    print(shipped_model_line(families, docs))
    return figures


def shipped_model_line(families: Sequence[str], docs: dict[str, list[Any]]) -> str:
    """Whether the package's model was fitted on what this code reads from `multi/`.

    `make model` fits it on every family of `multi/`. A reading change since then changes
    the candidates, and nothing else would say that the shipped file is stale.
    """
    shipped = load_scorer()
    if shipped is None:
        return "shipped model: none in the package (`make model` writes it)"
    fitted = int((shipped.info or {}).get("candidates", 0))
    multi = [f for f in families if f != "openmv"]
    if sorted(multi) != sorted(p.name for p in MULTI.iterdir() if (p / "fields.txt").is_file()):
        return f"shipped model: fitted on {fitted} candidates of every family of multi/"
    read = sum(len(d.rows) for f in multi for d in docs[f])
    verdict = "current" if read == fitted else "STALE: retrain it with `make model`"
    return f"shipped model: fitted on {fitted} candidates; this code reads {read}: {verdict}"
