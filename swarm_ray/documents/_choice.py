"""The choice: one value per entity, field and statistic, out of every candidate link.

The readers (`_table`) link each value on a page to a label of a field and grade the
link: how exactly the label names the field, where the value stands (in the label's row,
under it, in a phrase), and in what context (a table of limits the part survives, rather
than the conditions it works in). A datasheet states the same figure many times (the
feature list, the ratings table, a page per variant), so the choice keeps, per entity,
field and statistic, the best-scored candidate, the earliest on a tie: the first pages
summarise, later ones repeat with variants.

A document covering several parts (`1N4001 ... 1N4007` as column headers) gives each
column's value its part. When the file is named after one of those parts, the file is
about that part and the others' values are left out; otherwise every part keeps its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from swarm_ray.documents._facts import Statistic

C = TypeVar("C")

__all__ = ["Scored", "choose", "file_part"]

_FEW = 3
"""More equally good values than this on one page list variants or parts: one is kept."""
_PAGE_COST = 0.02
"""Score lost per page after the first: a tie-breaker, never worth a better label."""
_STATED_EDGE = 0.1
"""How much better a plain value must rank to beat one a column states the statistic of."""


@dataclass(frozen=True)
class Scored:
    """A candidate value, as the choice sees it."""

    score: float
    """How strongly the link ties the value to the field (0 to 1)."""
    statistic: Statistic | None
    entity: str | None
    page: int
    row: int
    value: float | str
    kind: int = 0
    """What kind of link it is (a row's label, a phrase, a symbol's `=`): values of equal
    score are peers (two rails, two memories) only when linked the same way."""
    named: str = ""
    """The words of running text that named the field: a feature list that names it again
    in the same words gives a block's or a variant's value (`64 Kbytes of general-purpose
    SRAM`, then `with 1.25 Kbytes of dedicated SRAM` for a USB controller): not a peer,
    the first is the one. Empty for a table's rows, whose peers are rows alike (two
    lenses' `Focal Length`)."""


def _letters(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def file_part(file_name: str, entities: Sequence[str]) -> str | None:
    """The part among `entities` that the file is named after (`1n4007_fairchild.pdf`).

    A part matches when its letters and digits appear in the file's stem, or the stem's
    first word (before `_`, `-`, space) is a prefix of the part (`uf5408` for `UF5408-E3`).
    A part the stem names whole comes first, the longest of them (`1N4742A` before
    `1N4742`); otherwise the part that adds the fewest characters to the stem's word: an
    ordering table's grades and packages extend the base part (`CA3306E` before
    `CA3306CE` for `ca3306.pdf`), and the file is named after the base.
    """
    stem = re.sub(r"\.[A-Za-z0-9]{2,4}$", "", file_name)
    flat = _letters(stem)
    first = _letters(re.split(r"[_\s-]", stem, maxsplit=1)[0])
    named: list[tuple[int, str]] = []
    extended: list[tuple[int, str]] = []
    for entity in entities:
        letters = _letters(entity)
        if len(letters) < 4:
            continue
        if letters in flat:
            named.append((-len(letters), entity))
        elif len(first) >= 4 and letters.startswith(first):
            extended.append((len(letters), entity))
    for found in (named, extended):
        if found:
            return min(found, key=lambda pair: pair[0])[1]
    # a column for a run of parts: `UF4005-4007` covers `uf4007`
    return next((e for e in entities if _in_run(e, first)), None)


_RUN = re.compile(
    r"^(?P<prefix>\d?[A-Za-z]{1,4})(?P<low>\d{2,6})\s*(?:-|~|\u2013|to|thru)\s*"
    r"(?:(?P=prefix))?(?P<high>\d{2,6})$",
    re.IGNORECASE,
)
"""A run of part numbers a column header names at once: `UF4005-4007`, `1N4001~1N4007`."""


def _in_run(entity: str, part: str) -> bool:
    """Whether `part` (letters and digits, lower case) lies in the run `entity` names."""
    run = _RUN.match(entity.strip())
    if run is None:
        return False
    prefix, low, high = run["prefix"].lower(), run["low"], run["high"]
    if len(high) < len(low):  # `UF4005-07`: the run's last digits only
        high = low[: len(low) - len(high)] + high
    found = re.fullmatch(rf"{re.escape(prefix)}(\d{{{len(low)}}})[a-z]*", part)
    return found is not None and int(low) <= int(found.group(1)) <= int(high)


def choose(
    candidates: Sequence[C],
    view: Callable[[C], Scored],
    *,
    statistics: Sequence[Statistic],
    file_name: str,
) -> list[C]:
    """The chosen candidates of one field, each with the statistic it is reported under.

    Args:
        candidates: Every link found for the field in one document.
        view: How to read a candidate's score, statistic, entity and position.
        statistics: What the field declares (`min`, `max`, ...); empty for the value as
            stated: the typical one of a `Min / Typ / Max` row, else a range's two ends.
        file_name: The document's file name, to pick its part among several.

    Returns:
        At most one candidate per entity and statistic, in the order found.
    """
    if not candidates:
        return []
    views = [view(c) for c in candidates]
    parts = sorted({v.entity for v in views if v.entity})
    named = file_part(file_name, parts) if parts else None
    keep = [i for i, v in enumerate(views) if named is None or v.entity in (None, named)]
    wanted = set(statistics)
    usable = [i for i in keep if not wanted or views[i].statistic in (*wanted, None)]
    if named is not None and any(views[i].entity == named for i in usable):
        # The part's own values, where it has one of a statistic asked for (its `typ` alone
        # does not hide the family's `1.5A Output Current` for a `max` field).
        keep = [i for i in keep if views[i].entity == named]
    if wanted:
        stated = [i for i in keep if views[i].statistic in wanted]
        if {Statistic.MIN, Statistic.MAX} <= wanted:
            stated = _paired(views, stated)
        pool = [i for i in keep if views[i].statistic is None]
        if stated and (len(wanted) > 1 or not _outranked(views, stated, pool)):
            return _best(candidates, views, stated, lambda v: v.statistic)
        chosen = _best(candidates, views, pool, lambda v: v.statistic)
        if len(wanted) == 1:
            # One statistic asked for, one value stated (`VF 1.1 V` in a ratings table):
            # that value is the one a reader would put in the `max` column.
            (only,) = wanted
            return [_restated(c, only) for c in _in_order(chosen, view, only)]
        return chosen
    return _as_stated(candidates, views, keep)


_ORDER = (Statistic.MIN, Statistic.TYP, Statistic.MAX)


def _in_order(chosen: list[C], view: Callable[[C], Scored], wanted: Statistic) -> list[C]:
    """One row's plain values read as its columns in order, for the one statistic asked.

    A row whose header the reader did not place (`Current transfer ratio CTR 50 - 600 %`,
    a table continued without its header) states two or three values of one field with
    no statistic. They are one parameter's `Min`, `Typ`, `Max` in that order, never two
    values of one statistic: a `max` field takes the highest, a `min` field the lowest, a
    `typ` field the middle of three (of two, which columns they are is unknown: none).
    A field asking for several statistics keeps the plain values, unscored, as before:
    two columns of conditions (`VDD = 5 V`, `VDD = 10 V`) are no range.
    """
    rows: dict[tuple[str | None, int, int], list[tuple[float | str, C]]] = {}
    for candidate in chosen:  # per row, in the order found
        v = view(candidate)
        rows.setdefault((v.entity, v.page, v.row), []).append((v.value, candidate))
    out: list[C] = []
    for members in rows.values():
        by_value: dict[float | str, C] = {}
        for value, candidate in members:
            by_value.setdefault(value, candidate)
        numbers = sorted(v for v in by_value if isinstance(v, float))
        if not 2 <= len(numbers) == len(by_value) <= len(_ORDER):
            out.extend(candidate for _, candidate in members)
            continue
        ranks = (
            dict(zip(_ORDER, numbers, strict=True))
            if len(numbers) == len(_ORDER)
            else {Statistic.MIN: numbers[0], Statistic.MAX: numbers[-1]}
        )
        if wanted in ranks:
            out.append(by_value[ranks[wanted]])
    return out


def _outranked(views: Sequence[Scored], stated: list[int], pool: list[int]) -> bool:
    """Whether a value stated with no statistic is far better evidence than any stated one.

    A statistic a table's column states (`Max`) is strong evidence, so such a value wins
    over a plain one unless the plain one's label is much better or much earlier: the
    first page's `72 MHz maximum frequency` over page 37's `Internal APB1 clock
    frequency` row, a sub-system's limit. Only for one statistic: a field asking for
    both ends of a range wants them stated, not one plain value.
    """
    if not pool:
        return False
    best = max(_rank(views[i])[0] for i in stated)
    return max(_rank(views[i])[0] for i in pool) > best + _STATED_EDGE


def _as_stated(candidates: Sequence[C], views: Sequence[Scored], keep: list[int]) -> list[C]:
    """The value as stated, for a field that asks for no statistic, from its best rows.

    Per entity the best-ranked rows (the top one and its peers on its page) each give their
    plain or typical value; a row with none gives a range's two ends, or its lone limit as
    the value (`VDS ... - - 30 V`, `up to 82 I/Os`).
    """
    by_entity: dict[str | None, list[int]] = {}
    for index in keep:
        by_entity.setdefault(views[index].entity, []).append(index)
    out: list[C] = []
    for members in by_entity.values():
        top = views[max(members, key=lambda i: _rank(views[i]))]
        rows: dict[tuple[int, int], list[int]] = {}
        for index in members:
            v = views[index]
            if _peer(v, top):
                rows.setdefault((v.page, v.row), []).append(index)
        if len({views[i].value for row in rows.values() for i in row}) > _FEW:
            rows = {(top.page, top.row): rows[(top.page, top.row)]}
        for row in rows.values():
            plain = [i for i in row if views[i].statistic in (None, Statistic.TYP)]
            stats = {views[i].statistic for i in row}
            if plain:
                out.extend(_as_plain(candidates[i]) for i in plain[:1])
            elif {Statistic.MIN, Statistic.MAX} <= stats:
                out.extend(_best(candidates, views, row, lambda v: v.statistic))
            else:
                out.extend(_as_plain(candidates[i]) for i in row[:1])
    return out


def _paired(views: Sequence[Scored], pool: list[int]) -> list[int]:
    """A range's two ends from one link: the best row stating both, per entity.

    `2.7V to 3.6V power supply` beats `VCC -0.6 to 4.6 V` in a limits table as a whole; its
    ends must not be mixed with the other row's. Entities with no such row keep every
    candidate, each end then chosen on its own.
    """
    rows: dict[tuple[str | None, int, int], dict[Statistic | None, float]] = {}
    kinds: dict[tuple[str | None, int, int], int] = {}
    for index in pool:
        v = views[index]
        kinds[(v.entity, v.page, v.row)] = v.kind
        ends = rows.setdefault((v.entity, v.page, v.row), {})
        ends[v.statistic] = max(ends.get(v.statistic, 0.0), v.score - _PAGE_COST * (v.page - 1))
    best: dict[str | None, tuple[float, int, int]] = {}
    for (entity, page, row), ends in rows.items():
        if Statistic.MIN in ends and Statistic.MAX in ends:
            rank = (min(ends[Statistic.MIN], ends[Statistic.MAX]), -page, -row)
            if entity not in best or rank > best[entity]:
                best[entity] = rank
    tied = {
        (entity, page, row)
        for (entity, page, row), ends in rows.items()
        if entity in best
        and Statistic.MIN in ends
        and Statistic.MAX in ends
        and -best[entity][1] == page
        and min(ends[Statistic.MIN], ends[Statistic.MAX]) == best[entity][0]
        and kinds[(entity, page, row)] == kinds[(entity, -best[entity][1], -best[entity][2])]
    }  # rows as good on the same page, and linked alike: a board's two rails (`VUSB`, `VIN`)
    return [
        i
        for i in pool
        if views[i].entity not in best or (views[i].entity, views[i].page, views[i].row) in tied
    ]


def _as_plain(candidate: C) -> C:
    return _restated(candidate, None)


def _restated(candidate: C, statistic: Statistic | None) -> C:
    if getattr(candidate, "statistic", None) == statistic:
        return candidate
    return replace(candidate, statistic=statistic)  # type: ignore[type-var]


def _best(
    candidates: Sequence[C],
    views: Sequence[Scored],
    pool: Sequence[int],
    key: Callable[[Scored], Statistic | None],
) -> list[C]:
    """Per entity and statistic: the best-ranked candidate, and its peers.

    Peers score the same on the same page: a spec table's two rails (`VUSB`, `VIN`), a
    board's two memories (`1 MB SRAM`, `32 MB SDRAM`), two cores' clocks. More than a few
    distinct peers are a list of variants or parts (a series table): then the best alone.
    """
    groups: dict[tuple[str | None, Statistic | None], list[int]] = {}
    for index in pool:
        groups.setdefault((views[index].entity, key(views[index])), []).append(index)
    kept: list[int] = []
    for group in groups.values():
        best = max(group, key=lambda i: _rank(views[i]))
        top = views[best]
        peers = [i for i in group if _peer(views[i], top)]
        if len({views[i].value for i in peers}) <= _FEW:
            kept.extend(peers)
        else:
            kept.append(best)
    return [candidates[i] for i in sorted(set(kept))]


def _peer(v: Scored, top: Scored) -> bool:
    if v is not top and v.named and v.named == top.named and v.row != top.row:
        return False
    return v.page == top.page and v.score == top.score and v.kind == top.kind


def _rank(v: Scored) -> tuple[float, int, int]:
    return (round(v.score - _PAGE_COST * (v.page - 1), 6), -v.page, -v.row)
