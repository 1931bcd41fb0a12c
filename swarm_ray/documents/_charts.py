"""Charts of a comparison that stay legible at a hundred entities.

One panel per field (per statistic and qualifier), each of bounded height, two panels a
row, at most `PANELS_PER_CHART` panels a chart (more fields make more charts):

- up to `NAMED_ROWS` entities, a dot per value on a row named by the entity, highest
  first (a ranking; no direction is called better), a bar from minimum to maximum where
  the field declares both, red where the sources disagree;
- more entities, no names (they would not fit): the values sorted, one dot each, the
  lowest and highest entity named, disagreements in red;
- a field with one value in all, or one entity, says nothing a chart could add and has no
  panel: the table shows it.

Drawn on matplotlib's Agg canvas directly, never through `pyplot`, which keeps global state
and wants a display: this runs in worker processes, headless.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from swarm_ray.documents._compare import CellStatus, ComparisonCell
from swarm_ray.documents._facts import Statistic

__all__ = ["NAMED_ROWS", "PANELS_PER_CHART", "Panel", "draw_charts", "panels"]

NAMED_ROWS = 24
"""Entities a panel names row by row; more are drawn as a sorted strip."""
PANELS_PER_CHART = 8
"""Panels in one image: four rows of two."""
_ROW_IN = 0.17
"""Height of a named row, in inches (8-point names)."""
_STRIP_IN = 2.2
"""Height of a sorted strip, in inches."""
_NAME_CHARS = 34
"""Entity names longer than this are shortened on a chart (the tables give them whole)."""
_CHAR_IN = 0.052
"""Width of a 7-point character, in inches, to size the margin for names."""


@dataclass(frozen=True)
class Panel:
    """One field's values across entities (a range field: both ends)."""

    title: str
    entities: tuple[str, ...]
    low: tuple[float | None, ...]
    """Per entity: the minimum (or the lowest value)."""
    high: tuple[float | None, ...]
    """Per entity: the maximum (or the highest value; the same as `low` for one value)."""
    review: tuple[bool, ...]
    """Per entity: sources disagree (every value they state is drawn)."""
    values: tuple[tuple[float, ...], ...] = ()
    """Per entity: every value stated, a dot each."""


def _numbers(cell: ComparisonCell | None) -> list[float]:
    if cell is None:
        return []
    return [float(g.value) for g in cell.values if not isinstance(g.value, str)]


def _number(cell: ComparisonCell) -> float | None:
    values = _numbers(cell)
    return values[0] if values else None


def panels(
    columns: dict[tuple[str, Statistic | None, str | None, str], list[ComparisonCell]],
    label: Any,
) -> list[Panel]:
    """Panels for a dimension's numeric columns; min and max of one field share a panel.

    Args:
        columns: (field, statistic, qualifier, unit) -> cells.
        label: Names a column for a panel title (`label(field, None, qualifier, unit)`).
    """
    grouped: dict[tuple[str, str | None, str], dict[Statistic | None, list[ComparisonCell]]] = {}
    for (field, statistic, qualifier, unit), cells in columns.items():
        if all(c.status is not CellStatus.LIST and _number(c) is not None for c in cells):
            grouped.setdefault((field, qualifier, unit), {})[statistic] = cells
    out: list[Panel] = []
    for (field, qualifier, unit), by_stat in grouped.items():
        parts = [by_stat[s] for s in (Statistic.MIN, Statistic.MAX) if s in by_stat]
        if len(parts) == 2:
            series = [(parts[0], parts[1], f"{label(field, None, qualifier, unit)}: min-max")]
        else:
            series = [
                (cells, cells, label(field, stat, qualifier, unit))
                for stat, cells in by_stat.items()
            ]
        for lows, highs, title in series:
            low_of = {c.entity: c for c in lows}
            high_of = {c.entity: c for c in highs}
            entities = sorted(
                set(low_of) | set(high_of),
                key=lambda e: (-max(_numbers(low_of.get(e)) + _numbers(high_of.get(e))), e),
            )  # a ranking, highest first: who leads reads off the top
            stated = [_numbers(low_of.get(e)) + _numbers(high_of.get(e)) for e in entities]
            low = tuple(min(_numbers(low_of.get(e)), default=None) for e in entities)
            high = tuple(max(_numbers(high_of.get(e)), default=None) for e in entities)
            shapes = {tuple(sorted(set(values))) for values in stated}
            if len(entities) < 2 or len(shapes) < 2:
                continue  # one entity, or the same for all: the table says it all
            review = tuple(
                any(c.needs_review for c in (low_of.get(e), high_of.get(e)) if c is not None)
                for e in entities
            )
            values = tuple(tuple(sorted(set(v))) for v in stated)
            out.append(Panel(title, tuple(entities), low, high, review, values))
    return out


def _height(panel: Panel) -> float:
    if len(panel.entities) <= NAMED_ROWS:
        return _ROW_IN * len(panel.entities) + 0.9
    return _STRIP_IN


def _draw_named(ax: Any, panel: Panel) -> None:
    rows = range(len(panel.entities))
    for review, color in ((False, "C0"), (True, "red")):
        idx = [i for i in rows if panel.review[i] is review]
        bars = [i for i in idx if panel.low[i] is not None and panel.high[i] is not None]
        if bars:
            ax.hlines(
                bars, [panel.low[i] for i in bars], [panel.high[i] for i in bars],
                color=color, linewidth=3, alpha=0.45,
            )  # fmt: skip
        dots = [(v, i) for i in idx for v in panel.values[i]]
        if dots:
            xs, ys = zip(*dots, strict=True)
            ax.plot(xs, ys, "o", color=color, markersize=4)
    names = [_short(name) for name in panel.entities]
    ax.set_yticks(list(rows), names)
    ax.set_ylim(len(panel.entities) - 0.5, -0.5)
    ax.tick_params(axis="y", labelsize=7)


def _short(name: str) -> str:
    return name if len(name) <= _NAME_CHARS else name[: _NAME_CHARS - 1] + "…"


def _margin(panel: Panel) -> float:
    """Inches left of a named panel for its longest (shortened) entity name."""
    longest = max(len(_short(name)) for name in panel.entities)
    return min(2.2, 0.25 + _CHAR_IN * longest)


def _draw_strip(ax: Any, panel: Panel) -> None:
    order = sorted(
        (i for i in range(len(panel.entities)) if panel.values[i]),
        key=lambda i: (max(panel.values[i]), min(panel.values[i]), i),
    )
    dots: dict[str, list[tuple[int, float]]] = {"C0": [], "red": []}
    for rank, i in enumerate(order):
        color = "red" if panel.review[i] else "C0"
        low, high = panel.low[i], panel.high[i]
        if low is not None and high is not None and low != high:
            ax.vlines(rank, low, high, color=color, linewidth=2, alpha=0.45)
        dots[color].extend((rank, value) for value in panel.values[i])
    for color, points in dots.items():  # one artist a colour, not one a value
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, "o", color=color, markersize=3)
    for rank, align in ((0, "left"), (len(order) - 1, "right")):
        i = order[rank]
        top = max(panel.values[i])
        ax.annotate(
            _short(panel.entities[i]), (rank, top), fontsize=7, ha=align, va="bottom",
            xytext=(0, 4), textcoords="offset points",
        )  # fmt: skip
    ax.set_xticks([])
    ax.margins(y=0.18)  # room for the names at the ends
    ax.set_xlabel(f"{len(order)} entities, sorted", fontsize=7)


def draw_charts(title: str, all_panels: Sequence[Panel], folder: Path, stem: str) -> list[str]:
    """Draw the panels into PNGs under `folder` (`stem.png`, `stem-2.png`, ...).

    Every text is drawn as written: a `$` in a name from a document or a request would
    start matplotlib's math text, and a symbol it does not know failed the whole report.

    Returns:
        The file names written, in order.
    """
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False}):
        return _draw_charts(title, all_panels, folder, stem)


def _draw_charts(title: str, all_panels: Sequence[Panel], folder: Path, stem: str) -> list[str]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    names: list[str] = []
    for start in range(0, len(all_panels), PANELS_PER_CHART):
        chunk = list(all_panels[start : start + PANELS_PER_CHART])
        rows = [chunk[i : i + 2] for i in range(0, len(chunk), 2)]
        heights = [max(_height(p) for p in row) for row in rows]
        width, height = 11.0, sum(heights) + 0.5
        fig = Figure(figsize=(width, height))
        FigureCanvasAgg(fig)
        top = height - 0.45
        for row, row_height in zip(rows, heights, strict=True):
            top -= row_height
            for column, panel in enumerate(row):
                named = len(panel.entities) <= NAMED_ROWS
                left = (0.2 + 5.5 * column + (_margin(panel) if named else 0.3)) / width
                right = (0.3 + 5.5 * column + 5.1) / width
                ax = fig.add_axes(
                    (left, (top + 0.4) / height, right - left, (row_height - 0.75) / height)
                )
                (_draw_named if named else _draw_strip)(ax, panel)
                if all(float(v).is_integer() for vs in panel.values for v in vs):
                    # seats, levels, pins: no 2.2 or 2.4 between whole values
                    axis = ax.xaxis if named else ax.yaxis
                    axis.set_major_locator(MaxNLocator(integer=True, steps=[1, 2, 5, 10]))
                ax.set_title(panel.title, loc="left", fontsize=9)
                ax.tick_params(axis="x", labelsize=7)
                ax.grid(axis="x" if named else "y", alpha=0.3)
        part = f" ({start // PANELS_PER_CHART + 1})" if len(all_panels) > PANELS_PER_CHART else ""
        fig.suptitle(title + part, y=1 - 0.12 / height, va="top", fontsize=11)
        name = f"{stem}.png" if start == 0 else f"{stem}-{start // PANELS_PER_CHART + 1}.png"
        # zlib's fastest level: the default spent about a tenth of a chart's time compressing.
        fig.savefig(folder / name, format="png", dpi=100, pil_kwargs={"compress_level": 1})
        names.append(name)
    return names
