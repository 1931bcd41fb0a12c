"""Expected facts of a set of datasheets, from the YAML product specs they were made from.

The OpenMV corpus (`../shared/corpus/datasheets/openmv/`) pairs each datasheet PDF with a
YAML spec (`_products_yaml/products/*/*.yaml`, `meta.filename` names the PDF). The
expected value of a field is derived from the spec's structured parts only, the same way
for every product, never per file:

- **pairs**: each row of a ratings table (its description and symbol as the name; its
  `Min`/`Typ`/`Max` or `Value` columns with the `Unit` column as the values), each
  mechanical spec (`dimension` -> `value`) and each system component (`name` -> `details`);
- a pair states a field when its name *is* one of the field's labels (case, spacing and
  brackets aside); only when no pair of the document does, pairs whose name *contains*
  a label count: `Effective Focal Length` is the focal length and `Back Focal Length` is
  not, but `VIN supply voltage` is a supply voltage where nothing is named just that;
- a field may also name component groups that state it (`Microcontroller` for a CPU
  clock): each value of the field's kind in those components' details counts;
- values are the numbers of the field's kind in the pair's value (a range's ends as `min`
  and `max`, `up to` as `max`; `8-bit` is a width, not a size), filtered to the
  statistics the field declares as the extractor is asked to (a plain value stands in
  when the pair states no declared statistic). Text fields expect the value text.

When a spec states one field twice with different values (operating temperature in the
ratings and in the mechanical specs), the datasheet printed from it states both: each is
an expected fact, so a complete extraction finds both and the comparison shows the
document as ambiguous. Values only in the marketing parts (description, features) are not
expected; a fact found there counts against precision unless it repeats an expected one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from swarm_ray.documents import FieldSpec, Statistic, parse_field_arg
from swarm_ray.documents._units import COUNT, TEXT, lookup_unit
from swarm_ray.testing.score import FactKey

__all__ = ["BENCH_FIELDS", "BenchField", "expected_facts"]


@dataclass(frozen=True)
class BenchField:
    """A field the benchmark declares (`--field` syntax) and where its truth lives."""

    declaration: str
    """Exactly what is passed to `--field`: name, labels, unit, statistics."""
    groups: tuple[str, ...] = ()
    """Component group titles whose details state the field (lower case)."""

    @property
    def spec(self) -> FieldSpec:
        return parse_field_arg(self.declaration)


BENCH_FIELDS: tuple[BenchField, ...] = (
    BenchField("operating temperature|operating temp|ambient temperature:°C:min,max"),
    BenchField("storage temperature|storage temp:°C:min,max"),
    BenchField("supply voltage|operating voltage|VCC|VDD:V:min,max"),
    BenchField("deep sleep current|sleep current|standby current:µA:max"),
    BenchField("weight|mass:g"),
    BenchField("length:mm"),
    BenchField("width:mm"),
    BenchField("height:mm"),
    BenchField(
        "CPU clock|core clock|clock speed|core:MHz",
        groups=("microcontroller", "system-on-chip", "processor", "mcu", "cpu"),
    ),
    BenchField("RAM|SRAM|SDRAM:MB"),
    BenchField("flash|flash memory:MB"),
    BenchField("frame rate|max frame rate:fps:max"),
    BenchField("resolution:MP"),
    BenchField("focal length|effective focal length|EFL:mm"),
    BenchField("IR cut filter|IR coating filter|IR filter:nm"),
    BenchField("GPIO|GPIO pins|I/O pins:count"),
    BenchField("lens mount|mount"),
)
"""What a datasheet user asks of cameras, lenses, sensors and accessories."""

_NUMBER = r"[-+\u2212\u2013]?\d+(?:\.\d+)?"
_QUANTITY = re.compile(
    rf"(?P<limit>up to|less than|<|max\.?)?\s*(?P<a>{_NUMBER})(?:\s*[x\u00d7]\s*(?P<times>\d+))?"
    rf"(?P<hyphen>-)?\s*"
    rf"(?P<ua>[^\s\d,;()/]+(?:/[^\s\d,;()]+)?)?"
    rf"(?:\s*(?:to|\u2013|~|-)\s*(?P<b>{_NUMBER})\s*(?P<ub>[^\s\d,;()/]+(?:/[^\s\d,;()]+)?))?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Pair:
    name: str
    value: str
    group: str = ""
    stats: tuple[tuple[Statistic | None, str], ...] = ()
    """For ratings rows: (statistic, value text with unit) per column."""


def _pairs(spec: dict[str, Any]) -> list[_Pair]:
    pairs: list[_Pair] = []
    for table in spec.get("ratings") or []:
        headers = [str(h).strip().lower() for h in table.get("headers") or []]
        for row in table.get("rows") or []:
            cells = dict(zip(headers, (str(c).strip() for c in row), strict=False))
            name = cells.get("description") or cells.get("parameter") or str(row[0])
            unit = cells.get("unit", "")
            columns = [
                (stat, cells.get(col, ""))
                for stat, col in (
                    (Statistic.MIN, "min"),
                    (Statistic.TYP, "typ"),
                    (Statistic.MAX, "max"),
                    (None, "value"),
                )
            ]
            stats = tuple((s, f"{v} {unit}".strip()) for s, v in columns if v and v != "—")
            if stats:
                pairs.append(_Pair(name, "", "ratings", stats))
                symbol = cells.get("symbol")
                if symbol:
                    pairs.append(_Pair(symbol, "", "ratings", stats))
            elif len(row) >= 2:
                pairs.append(_Pair(str(row[0]), " ".join(str(c) for c in row[1:]), "ratings"))
    for item in (spec.get("mechanical") or {}).get("specs") or []:
        pairs.append(_Pair(str(item["dimension"]), str(item["value"]), "mechanical"))
    for feature in spec.get("features") or []:
        pairs.append(_Pair(str(feature["label"]), str(feature["detail"]), "features"))
    for group in spec.get("system_components") or []:
        for component in group.get("components") or []:
            pairs.append(
                _Pair(str(component["name"]), str(component["details"]), str(group["title"]))
            )
    return pairs


def _norm(text: str) -> str:
    text = re.sub(r"\([^()]*\)|\[[^\[\]]*\]", " ", text.casefold())
    return " ".join(re.sub(r"[^\w]+", " ", text).split())


def _names(spec: FieldSpec) -> list[str]:
    return [_norm(label) for label in spec.all_labels]


def _label_pattern(label: str) -> str:
    """A label's words, the space between them optional (`deep sleep` is `deepsleep`)."""
    return r"\s?".join(re.escape(word) for word in label.split()) + "s?"


def _is(name: str, label: str) -> bool:
    return re.fullmatch(_label_pattern(label), name) is not None


def _contains(name: str, label: str) -> bool:
    return re.search(rf"(?<!\w){_label_pattern(label)}(?!\w)", name) is not None


def _values(text: str, spec: FieldSpec) -> list[tuple[Statistic | None, float, str]]:
    """Numbers of the field's kind in a spec value, with the statistic the text gives."""
    out: list[tuple[Statistic | None, float, str]] = []
    for match in _QUANTITY.finditer(text.replace("\u2212", "-")):
        if match["hyphen"] and not match["b"]:
            continue  # `8-bit`: an adjective
        unit_b = lookup_unit(match["ub"]) if match["ub"] else None
        unit_a = lookup_unit(match["ua"].rstrip(".")) if match["ua"] else None
        if match["times"]:  # `320x320 pixels` states a pixel count; `2592x1944` alone none
            if unit_a is not None and unit_a.kind == "pixels" and _fits(unit_a.kind, spec):
                out.append((None, float(match["a"]) * float(match["times"]), unit_a.text))
            continue
        if match["b"] and unit_b is not None:
            unit = unit_a or unit_b
            if _fits(unit.kind, spec) and _fits(unit_b.kind, spec) and spec.kind != COUNT:
                low, high = sorted((float(match["a"].replace("\u2013", "-")), float(match["b"])))
                out.append((Statistic.MIN, low, unit.text))
                out.append((Statistic.MAX, high, unit_b.text))
            continue
        if unit_a is not None and _fits(unit_a.kind, spec):
            limit = Statistic.MAX if match["limit"] else None
            unit_text = "" if spec.kind == COUNT else unit_a.text
            out.append((limit, float(match["a"].replace("\u2013", "-")), unit_text))
    return out


def _fits(kind: str, spec: FieldSpec) -> bool:
    return kind == spec.kind


def _select(spec: FieldSpec, found: list[FactKey]) -> list[FactKey]:
    wanted = set(spec.statistics)
    if wanted:
        stated = [f for f in found if f.statistic in wanted]
        return stated or [f for f in found if f.statistic is None]
    plain = [f for f in found if f.statistic in (None, Statistic.TYP)]
    return plain or found


def _phrases(spec: FieldSpec, pairs: Sequence[_Pair]) -> list[FactKey]:
    """`2.8 mm focal length lens`, `18 GPIO pins`: a value right before a label, in prose."""
    facts: list[FactKey] = []
    for pair in pairs:
        if pair.group in ("ratings", "mechanical"):
            continue
        for label in spec.all_labels:
            pattern = rf"(?P<value>{_NUMBER})\s*(?P<unit>[^\s\d,;()]*)\s+" + (
                r"\s?".join(re.escape(w) for w in label.split())
            )
            for match in re.finditer(pattern + r"(?!\w)", pair.value, re.IGNORECASE):
                unit = lookup_unit(match["unit"]) if match["unit"] else None
                if spec.kind == COUNT and (unit is None or unit.kind == COUNT):
                    facts.append(FactKey(spec.key, None, None, float(match["value"]), ""))
                elif unit is not None and unit.kind == spec.kind:
                    facts.append(FactKey(spec.key, None, None, float(match["value"]), unit.text))
    return facts


def _field_facts(field: BenchField, pairs: Sequence[_Pair]) -> list[FactKey]:
    spec = field.spec
    labels = _names(spec)
    named = [p for p in pairs if p.group != "features"]
    exact = [p for p in named if any(_is(_norm(p.name), lb) for lb in labels)]
    matched = exact or [p for p in named if any(_contains(_norm(p.name), lb) for lb in labels)]
    groups = {_norm(g) for g in field.groups}
    matched += [p for p in named if _norm(p.group) in groups and p not in matched]
    facts: list[FactKey] = []
    for pair in matched:
        if spec.kind == TEXT:
            value = pair.value.strip().rstrip(".")
            if value:
                facts.append(FactKey(spec.key, None, None, value, ""))
            continue
        if pair.stats:
            for stat, text in pair.stats:
                for _, number, unit in _values(text, spec):
                    facts.append(FactKey(spec.key, stat, None, number, unit))
            continue
        if spec.kind == COUNT:
            for number in re.findall(r"\b(\d+)\b", pair.value)[:1]:
                facts.append(FactKey(spec.key, None, None, float(number), ""))
            continue
        values = _values(pair.value, spec)
        if pair.group not in ("ratings", "mechanical") and _norm(pair.group) not in groups:
            values = values[:1]  # a component's prose: its first value of the kind
        facts.extend(FactKey(spec.key, s, None, v, u) for s, v, u in values)
    if not facts and spec.kind != TEXT:
        facts = _phrases(spec, pairs)
    unique = list(dict.fromkeys(facts))
    return _select(spec, unique)


def expected_facts(
    specs_dir: str | Path, fields: Iterable[BenchField] = BENCH_FIELDS
) -> dict[str, list[FactKey]]:
    """File name -> the facts its datasheet states for `fields` (see the module doc)."""
    fields = list(fields)
    out: dict[str, list[FactKey]] = {}
    for path in sorted(Path(specs_dir).rglob("*.yaml")):
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
        file = spec["meta"]["filename"]
        pairs = _pairs(spec)
        out[file] = [fact for field in fields for fact in _field_facts(field, pairs)]
    return out
