"""Judges: scores from 0 to 1 for a finished comparison, with the findings behind them.

Each judge scores the whole run and each sub-task, so that a low score points at the agent
to look at, not only at the run:

- **factuality**: do the sources agree? For every entity and field stated more than once,
  the share of facts that agree with the majority value (within the comparison's
  tolerance). Scored per extraction sub-task by the share of its checked facts that agree.
  When the request asked for an LLM cross-check, each field the LLM read differently from
  the rules is a finding too (`cross_check=True`), and counts as a checked fact that
  does not agree.
- **coherence**: is every term spelled one way? Entity and field names that differ only in
  case, spacing, punctuation or one letter of a longer word (`Solenne` and `Solene`) are
  one term spelled twice, unless both are fields the dimensions declare; the score is the
  share of terms with a single spelling.
- **efficiency**: what did each sub-task cost? Time against a budget (by default the
  median sub-task) and calls against a budget (by default 1: retries and fallbacks cost).

Judges are rules, not models: a verdict must be reproducible and cheap enough to run on
every task, and each finding says exactly what lowered the score.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from swarm_ray.documents._compare import CellStatus, compare_facts
from swarm_ray.documents._dimensions import Dimension, default_dimensions
from swarm_ray.documents._facts import Fact, NormalisedFact

if TYPE_CHECKING:
    from swarm_ray.documents._llm_extract import CrossCheck

__all__ = [
    "JudgeFinding",
    "JudgeName",
    "JudgeVerdict",
    "SubTaskCost",
    "judge_coherence",
    "judge_efficiency",
    "judge_factuality",
]

_WORD = re.compile(r"[^\W_]+")
_MIN_TYPO_WORD = 4
"""Words shorter than this differ for a reason (`Model S`, `Model X`), not by a typo."""
_MIN_SECONDS = 0.001
"""Durations under a millisecond are timer noise; no budget is smaller."""


class JudgeName(StrEnum):
    """Which judge gave a verdict."""

    FACTUALITY = "factuality"
    COHERENCE = "coherence"
    EFFICIENCY = "efficiency"


class JudgeFinding(BaseModel):
    """One thing that lowered a score."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    subject: str
    """What the finding is about: a cell (`entity: field`), a term or a sub-task."""
    message: str
    score: float = Field(ge=0.0, le=1.0)
    """The subject's own score."""
    sub_tasks: tuple[str, ...] = ()
    """The sub-tasks (or source documents) to look at."""
    cross_check: bool = False
    """The LLM, reading the same text, disagreed with the rules (not two sources)."""


class JudgeVerdict(BaseModel):
    """A judge's score for a run, per sub-task, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    judge: JudgeName
    score: float = Field(ge=0.0, le=1.0)
    scores: dict[str, float]
    """Score per sub-task id (or per source document id when no mapping was given)."""
    findings: tuple[JudgeFinding, ...]
    """Worst first."""


class SubTaskCost(BaseModel):
    """What one sub-task cost; several records of one sub-task add up (one per attempt)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sub_task_id: str
    seconds: float = Field(ge=0.0)
    calls: int = Field(ge=0)


def _show(value: float | str) -> str:
    return value if isinstance(value, str) else f"{value:.6g}"


def _verdict(
    judge: JudgeName, score: float, scores: dict[str, float], findings: list[JudgeFinding]
) -> JudgeVerdict:
    findings.sort(key=lambda f: (f.score, f.subject))
    return JudgeVerdict(
        judge=judge, score=score, scores=dict(sorted(scores.items())), findings=tuple(findings)
    )


def judge_factuality(
    facts: Iterable[NormalisedFact],
    *,
    rel_tolerance: float = 0.01,
    sub_tasks: Mapping[str, str] | None = None,
    cross_checks: Iterable[CrossCheck] = (),
) -> JudgeVerdict:
    """Score agreement between sources: the share of checked facts agreeing with the majority.

    Args:
        facts: Normalised facts of every document of the run.
        rel_tolerance: Values this close are one value, as in `compare_facts`.
        sub_tasks: Source document id -> id of the sub-task that extracted it, to key
            `scores` by sub-task; documents not in it are keyed by their own id.
        cross_checks: The LLM's readings of documents (when the request asked for them):
            each field it checked counts, and each disagreement is a finding.

    Returns:
        Score 1.0 when nothing was stated twice (nothing contradicts). A tie has no
        majority: the smallest value counts as the majority, so a 1-1 split scores 0.5.
        Only sub-tasks with a checked fact (one whose field another source also states)
        appear in `scores`. List fields (features) accumulate and are never checked.
    """
    names = dict(sub_tasks or {})
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    findings = []
    for cell in compare_facts(facts, rel_tolerance=rel_tolerance).cells:
        count = sum(len(group.sources) for group in cell.values)
        if cell.status is CellStatus.LIST or count < 2:
            continue
        majority = max(cell.values, key=lambda group: len(group.sources))
        for group in cell.values:
            for source in group.sources:
                key = names.get(source.document_id, source.document_id)
                total[key] += 1
                agree[key] += group is majority
        if len(cell.values) > 1:
            stated = "; ".join(
                f"{_show(group.value)} {cell.unit} by "
                + ", ".join(f"{s.source} p. {s.page}" for s in group.sources)
                for group in cell.values
            )
            # Without a strict majority nobody is vouched for: every source is to look at.
            tie = len(majority.sources) * 2 <= count
            doubted = [g for g in cell.values if tie or g is not majority]
            dissent = sorted(
                {names.get(s.document_id, s.document_id) for g in doubted for s in g.sources}
            )
            qualifier = f" ({cell.qualifier})" if cell.qualifier else ""
            findings.append(
                JudgeFinding(
                    subject=f"{cell.entity}: {cell.field}{qualifier}",
                    message=f"{len(majority.sources)} of {count} sources agree: {stated}",
                    score=len(majority.sources) / count,
                    sub_tasks=tuple(dissent),
                )
            )
    for check in cross_checks:
        key = names.get(check.document_id, check.document_id)
        total[key] += check.checked
        agree[key] += check.agreed
        for item in check.disagreements:
            rules, llm = item.rules, item.llm
            findings.append(
                JudgeFinding(
                    subject=f"{rules.entity}: {rules.field}",
                    message=f"LLM cross-check disagrees in `{rules.source}`: rules read "
                    f"{rules.value_text!r} (p. {rules.page}, confidence {rules.confidence:.2f}),"
                    f" the LLM {llm.value_text!r} (p. {llm.page}: “{llm.quote}”)",
                    score=0.5,
                    sub_tasks=(key,),
                    cross_check=True,
                )
            )
    scores = {key: agree[key] / total[key] for key in total if total[key]}
    score = sum(agree.values()) / sum(total.values()) if sum(total.values()) else 1.0
    return _verdict(JudgeName.FACTUALITY, score, scores, findings)


def _one_edit(a: str, b: str) -> bool:
    """Whether one insertion, deletion, substitution or swap of neighbours turns a into b."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y]
        swapped = len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]]
        return len(diff) <= 1 or (swapped and a[diff[1]] == b[diff[0]])
    short, long = sorted((a, b), key=len)
    i = next((i for i, (x, y) in enumerate(zip(short, long, strict=False)) if x != y), len(short))
    return short[i:] == long[i + 1 :]


def _same_term(a: str, b: str) -> bool:
    words_a, words_b = _WORD.findall(a.casefold()), _WORD.findall(b.casefold())
    if "".join(words_a) == "".join(words_b):
        return True  # case, spacing and punctuation: `Solenne Nova`, `solenne-nova`
    if len(words_a) != len(words_b):
        return False
    diff = [(x, y) for x, y in zip(words_a, words_b, strict=True) if x != y]
    if len(diff) != 1:
        return False
    x, y = diff[0]
    long_words = min(len(x), len(y)) >= _MIN_TYPO_WORD
    return long_words and x.isalpha() and y.isalpha() and _one_edit(x, y)


_MOST_TYPO_WORDS = 12
"""Words of a name past which a one-letter slip in one of them is not looked for (each
word's variants are keyed by all the others)."""
_LONGEST_TYPO_WORD = 40
"""Letters of a word past which a slip in it is not looked for (a key per letter)."""


def _keys(spelling: str) -> set[tuple[object, ...]]:
    """Keys two spellings `_same_term` joins always share (some that it does not, too).

    The words run together; and for each long word, with the other words in place, the
    word and each one-letter deletion of it: an insertion, deletion, substitution or swap
    of neighbours leaves one deletion of each side equal.
    """
    words = _WORD.findall(spelling.casefold())
    keys: set[tuple[object, ...]] = {("joined", "".join(words))}
    if len(words) > _MOST_TYPO_WORDS:
        return keys
    for at, word in enumerate(words):
        if not _MIN_TYPO_WORD <= len(word) <= _LONGEST_TYPO_WORD or not word.isalpha():
            continue
        rest = (len(words), at, tuple(words[:at]), tuple(words[at + 1 :]))
        keys.add((*rest, word))
        keys.update((*rest, word[:i] + word[i + 1 :]) for i in range(len(word)))
    return keys


def _terms(spellings: Iterable[str], declared: frozenset[str]) -> list[list[str]]:
    """Group spellings into terms; a spelling joins the first term it matches a member of.

    Declared names (fields of the dimensions) are distinct terms by definition, however
    close: `general.height` and `general.weight` are one letter apart. A spelling is
    compared only with the members of terms it shares a key with (`_keys`): compared with
    every member of every term, a thousand documents' entities cost their square. A slip
    is not looked for in a name of over 12 words, nor in a word of over 40 letters.
    """
    groups: list[list[str]] = []
    holding: dict[tuple[object, ...], set[int]] = {}  # key -> the terms with a member of it
    for spelling in sorted(spellings):
        keys = _keys(spelling)
        near = sorted(set().union(*(holding.get(key, ()) for key in keys)))
        home = next(
            (
                index
                for index in near
                if not (spelling in declared and any(s in declared for s in groups[index]))
                and any(_same_term(spelling, s) for s in groups[index])
            ),
            None,
        )
        if home is None:
            home = len(groups)
            groups.append([spelling])
        else:
            groups[home].append(spelling)
        for key in keys:
            holding.setdefault(key, set()).add(home)
    return groups


def judge_coherence(
    facts: Iterable[Fact | NormalisedFact],
    *,
    dimensions: Iterable[Dimension] | None = None,
    sub_tasks: Mapping[str, str] | None = None,
) -> JudgeVerdict:
    """Score naming: the share of terms (entities, fields) spelled one way across the run.

    Args:
        facts: Facts of every document, as extracted or normalised: the names the report
            and its facts table will show.
        dimensions: The dimensions the facts were extracted with (default: the packaged
            ones); their fields are distinct terms, never typos of each other.
        sub_tasks: Source document id -> sub-task id, as for `judge_factuality`.

    Returns:
        Score 1.0 when every term has one spelling. `scores` gives each sub-task the share
        of its names that use the term's most frequent spelling; each finding lists a
        term's spellings with their counts and the sub-tasks that used a rarer one.
    """
    names = dict(sub_tasks or {})
    declared = frozenset(f.key for d in (dimensions or default_dimensions()) for f in d.fields)
    uses: dict[str, Counter[str]] = {"entity": Counter(), "field": Counter()}
    by_source: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for item in facts:
        fact = item.fact if isinstance(item, NormalisedFact) else item
        key = names.get(fact.document_id, fact.document_id)
        for kind, name in (("entity", fact.entity), ("field", fact.field)):
            uses[kind][name] += 1
            by_source[(kind, name)][key] += 1
    canonical: dict[tuple[str, str], bool] = {}
    findings, term_count, coherent = [], 0, 0
    for kind, counts in uses.items():
        for term in _terms(counts, declared if kind == "field" else frozenset()):
            best = min(term, key=lambda s: (-counts[s], s))
            canonical.update({(kind, s): s == best for s in term})
            term_count += 1
            if len(term) == 1:
                coherent += 1
                continue
            spelled = ", ".join(
                f"{s!r} ({counts[s]})" for s in sorted(term, key=lambda s: (-counts[s], s))
            )
            rare = sorted({k for s in term if s != best for k in by_source[(kind, s)]})
            findings.append(
                JudgeFinding(
                    subject=f"{kind} {best!r}",
                    message=f"spelled {len(term)} ways: {spelled}",
                    score=counts[best] / sum(counts[s] for s in term),
                    sub_tasks=tuple(rare),
                )
            )
    good: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    for (kind, name), per_key in by_source.items():
        for key, n in per_key.items():
            seen[key] += n
            good[key] += n if canonical[(kind, name)] else 0
    scores = {key: good[key] / seen[key] for key in seen}
    score = coherent / term_count if term_count else 1.0
    return _verdict(JudgeName.COHERENCE, score, scores, findings)


def judge_efficiency(
    records: Iterable[SubTaskCost | tuple[str, float, int]],
    *,
    seconds_budget: float | None = None,
    calls_budget: int = 1,
) -> JudgeVerdict:
    """Score what sub-tasks cost against a time budget and a call budget.

    Args:
        records: `(sub-task id, seconds, calls)` per sub-task or per attempt (summed).
        seconds_budget: Time a sub-task may take at full score; by default the median of
            the sub-tasks, so the score says which ones are slow relative to their peers.
        calls_budget: Calls a sub-task may make at full score; beyond it, retries and
            fallbacks show.

    Returns:
        Each sub-task scores the mean of min(1, budget / seconds) and
        min(1, calls budget / calls); the run scores the mean over sub-tasks, 1.0 when
        there are none.
    """
    seconds: dict[str, float] = defaultdict(float)
    calls: Counter[str] = Counter()
    for record in records:
        cost = (
            record
            if isinstance(record, SubTaskCost)
            else SubTaskCost(sub_task_id=record[0], seconds=record[1], calls=record[2])
        )
        seconds[cost.sub_task_id] += cost.seconds
        calls[cost.sub_task_id] += cost.calls
    if not seconds:
        return _verdict(JudgeName.EFFICIENCY, 1.0, {}, [])
    budget = seconds_budget if seconds_budget is not None else statistics.median(seconds.values())
    budget = max(budget, _MIN_SECONDS)
    allowed = max(calls_budget, 1)
    scores, findings = {}, []
    for task, took in seconds.items():
        time_score = min(1.0, budget / took) if took > 0 else 1.0
        call_score = min(1.0, allowed / calls[task]) if calls[task] else 1.0
        scores[task] = (time_score + call_score) / 2
        if scores[task] < 1.0:
            findings.append(
                JudgeFinding(
                    subject=task,
                    message=f"{took:.3f} s ({took / budget:.1f}x the {budget:.3f} s budget), "
                    f"{calls[task]} calls (budget {allowed})",
                    score=scores[task],
                    sub_tasks=(task,),
                )
            )
    score = sum(scores.values()) / len(scores)
    return _verdict(JudgeName.EFFICIENCY, score, scores, findings)
