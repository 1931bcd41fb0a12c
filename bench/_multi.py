"""The labeled families of `../shared/corpus/datasheets/multi/`, scored as its `score.py` does.

Each folder is one product family: PDFs, `fields.txt` (one `--field` declaration a line),
and rows of the shared `gold.csv`; `field_map.json` maps a declared field to its gold id.
`score_family` applies the corpus's own scorer (`score.py`, imported from the corpus, so
the figures are the ones it prints) to one family's gold rows alone.
"""

from __future__ import annotations

import csv
import functools
import importlib.util
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MULTI = ROOT.parent / "shared" / "corpus" / "datasheets" / "multi"


@dataclass(frozen=True)
class FamilyScore:
    family: str
    gold: int
    found: int
    facts: int
    correct: int
    misses: tuple[str, ...]
    wrong: tuple[str, ...]

    @property
    def recall(self) -> float:
        return self.found / max(self.gold, 1)

    @property
    def precision(self) -> float:
        return self.correct / max(self.facts, 1)


def families(corpus: Path = MULTI) -> list[str]:
    return sorted(p.name for p in corpus.iterdir() if (p / "fields.txt").is_file())


def declarations(family: str, corpus: Path = MULTI) -> list[str]:
    lines = (corpus / family / "fields.txt").read_text().splitlines()
    return [line.strip() for line in lines if line.strip()]


@functools.cache
def _scorer(corpus: Path) -> ModuleType:
    """The corpus's `score.py`, loaded once (it builds a pint registry)."""
    spec = importlib.util.spec_from_file_location("multi_score", corpus / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def score_family(family: str, facts: list[dict[str, Any]], corpus: Path = MULTI) -> FamilyScore:
    """Recall and precision of `facts` (rows as in `facts.parquet`) on one family's gold."""
    score = _scorer(corpus)
    mapping = json.loads((corpus / "field_map.json").read_text())
    gold: dict[tuple[str, str], list[tuple[list[str], str, dict[str, str]]]] = defaultdict(list)
    wanted = 0
    with open(corpus / "gold.csv", newline="") as handle:
        for row in csv.DictReader(handle):
            if not row["file"].startswith(family + "/") or not row["value"]:
                continue
            wanted += 1
            alts = re.findall(r"alt=([^;]+)", row["note"])
            values = [row["value"]] + [v.strip() for a in alts for v in a.split("|")]
            gold[(Path(row["file"]).name, row["field"])].append((values, row["unit"], row))
    files = {f for f, _ in gold}
    found: set[tuple[str, str, int]] = set()
    correct = considered = 0
    wrong: list[str] = []
    for fact in facts:
        key = score.norm(fact)
        gfield = mapping.get(key, mapping.get(key.rsplit("_", 1)[0]))
        src = Path(fact["source"] or "").name
        if gfield is None or src not in files:
            continue
        considered += 1
        ok = False
        for i, (values, unit, _) in enumerate(gold.get((src, gfield), [])):
            for v in values:
                try:
                    number = float(v)
                except ValueError:
                    said = {(fact.get(k) or "").lower() for k in ("term", "value_text")}
                    if v.lower() in said:
                        ok = True
                        found.add((src, gfield, i))
                    continue
                got = fact.get("value")
                if got is None and fact.get("value_text"):
                    m = re.search(r"-?\d+(?:\.\d+)?", fact["value_text"])
                    got = float(m.group()) if m else None
                if got is not None and score.close(
                    score.to_unit(got, fact.get("unit") or "", unit), number
                ):
                    ok = True
                    found.add((src, gfield, i))
        correct += ok
        if not ok:
            shown = fact["value"] if fact.get("value") is not None else fact.get("term")
            quote = (fact.get("quote") or "")[:90]
            wrong.append(
                f"{src} {gfield}: {shown} {fact.get('unit') or ''} "
                f"[{fact.get('statistic') or '-'}] p{fact.get('page')} | {quote}"
            )
    misses = [
        f"{src} {gfield} = {'|'.join(values)} {unit} p{row['page']} | {row['quote'][:90]}"
        for (src, gfield), rows in sorted(gold.items())
        for i, (values, unit, row) in enumerate(rows)
        if (src, gfield, i) not in found
    ]
    return FamilyScore(family, wanted, len(found), considered, correct, tuple(misses), tuple(wrong))
