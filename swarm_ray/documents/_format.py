"""How a value, a field and a name read in the report's Markdown.

Shared by the report's tables and its per-field summary: one spelling of a number (`3.465`,
`4,207,680`), of a column (`case temperature min [°C]`), and of a table cell.
"""

from __future__ import annotations

from swarm_ray.documents._dimensions import FIELDS_GROUP
from swarm_ray.documents._facts import Statistic
from swarm_ray.documents._units import COUNT, lookup_unit

__all__ = ["dimension_of", "escape", "label", "number"]


def dimension_of(field: str) -> str:
    """`battery` for `battery.capacity`; a `--field` field's group for a plain name."""
    return field.split(".", 1)[0] if "." in field else FIELDS_GROUP


def label(field: str, statistic: Statistic | None, qualifier: str | None, unit: str) -> str:
    """A column's heading: `capacity [kWh]`, `case temperature max [°C]`, `range (WLTP) [km]`."""
    name = field.split(".", 1)[-1]
    return (
        name
        + (f" {statistic.value}" if statistic else "")
        + (f" ({qualifier})" if qualifier else "")
        + (f" [{unit}]" if unit and not _is_count(unit) else "")
    )


def _is_count(unit: str) -> bool:
    """A count's unit (`count`, `pins`) says nothing a column of whole numbers does not."""
    found = lookup_unit(unit)
    return found is not None and found.kind == COUNT


def number(value: float | str) -> str:
    """A value as a table shows it: thousands separated, no float noise."""
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 1000:
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    return f"{value:.6g}"  # 3.465 V stays 3.465 V, 10.3125 Gb/s stays 10.3125


def escape(text: str) -> str:
    """One line, and no `|` to break a table row."""
    return " ".join(text.split()).replace("|", "\\|")
