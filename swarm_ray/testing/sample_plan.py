"""Planning sample brochures: which cars exist, and what each brochure of a car states.

Kept apart from wording and rendering so the facts of the ground truth are decided in one
place: a car's true specifications, the subset each brochure kind states in its market's
test cycles, and the contradictions planted between brochures of the same car.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field

from swarm_ray.core.model._errors import InvalidInputError
from swarm_ray.testing.sample_text import FEATURE_TEXT, Item

__all__ = ["Plan", "plan_brochures"]

_BRANDS = ("Voltara", "Nordwind", "Kestrel", "Auron", "Solenne", "Tessaro", "Bravik", "Lumeo")
_MODELS = ("Aero", "Vista", "Strada", "K4", "Nova", "Terra", "Pulse", "Orbit", "Zephyr", "X7")
_TRIMS = ("", " Pro", " GT", " Max", " Sport", " Touring")
_MARKETS = ("EU", "EU", "US", "UK", "CN")
_CYCLES = {"EU": ("WLTP",), "UK": ("WLTP",), "US": ("EPA",), "CN": ("CLTC", "NEDC")}
_CYCLE_FACTOR = {"WLTP": 1.0, "EPA": 0.86, "CLTC": 1.18, "NEDC": 1.1}
_CONFLICT_FIELDS = (
    "battery.capacity",
    "battery.range",
    "battery.charging_power",
    "motor.power",
    "motor.torque",
    "motor.top_speed",
    "interior.cargo_volume",
    "general.weight",
)
_CORE = ("battery.capacity", "battery.range", "motor.power")


@dataclass
class Plan:
    """One brochure before rendering; conflicts are planted by editing `items`."""

    entity: str
    kind: str
    market: str
    items: list[Item]
    conflict: tuple[str, str | None] | None = field(default=None)


def _entity_names(rng: random.Random, count: int) -> list[str]:
    names = [f"{b} {m}{t}" for t in _TRIMS for b in _BRANDS for m in _MODELS]
    base = names[: len(_BRANDS) * len(_MODELS)]
    rng.shuffle(base)
    if count > len(names):
        raise InvalidInputError(f"`n`={count!r} is too large: {len(names)} cars can be named")
    return (base + names[len(base) :])[:count]


def _spec(rng: random.Random) -> dict[str, float | tuple[str, ...]]:
    """True specifications of one car, canonical units (km, kW, s, mm, L, kg, EUR)."""
    capacity = rng.choice((round(rng.uniform(50, 110)), round(rng.uniform(50, 110), 1)))
    dc = round(capacity * rng.uniform(1.5, 2.8) / 5) * 5
    power = round(rng.uniform(110, 480))
    accel = round(max(2.9, 10.5 - power / 60 + rng.uniform(-0.5, 0.5)), 1)
    terms = sorted(FEATURE_TEXT)
    return {
        "battery.capacity": capacity,
        "range": round(capacity * rng.uniform(5.6, 7.0) / 5) * 5,
        "battery.charging_power/DC": dc,
        "battery.charging_power/AC": rng.choice((7, 11, 11, 22)),
        "battery.charge_time/10-80%": 60 * min(50, max(15, round(capacity / dc * 60))),
        "motor.power": power,
        "motor.torque": round(power * rng.uniform(1.6, 2.4) / 5) * 5,
        "motor.top_speed": round(rng.uniform(150, 260) / 5) * 5,
        "motor.acceleration/0-100 km/h": accel,
        "motor.acceleration/0-60 mph": round(accel * 0.95, 1),
        "driver_assistance.level": rng.choice((2, 2, 2, 2, 3)),
        "driver_assistance.features": tuple(sorted(rng.sample(terms, rng.randint(4, 8)))),
        "interior.seats": rng.choice((4, 5, 5, 5, 7)),
        "interior.screen_size": round(rng.uniform(10, 17.7), 1) * 25.4,
        "interior.cargo_volume": round(rng.uniform(350, 850) / 5) * 5,
        "general.price": round(rng.uniform(35_000, 95_000) / 100) * 100 - 10,
        "general.weight": round(rng.uniform(1650, 2700) / 5) * 5,
        "general.length": round(rng.uniform(4200, 5100)),
        "general.width": round(rng.uniform(1800, 2000)),
        "general.height": round(rng.uniform(1420, 1720)),
    }


def _number(value: float | tuple[str, ...]) -> float:
    if isinstance(value, tuple):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


def _price(eur: float, market: str) -> float:
    rate = {"EU": 1.0, "UK": 0.86, "US": 1.08, "CN": 7.8}[market]
    return eur if market == "EU" else round(eur * rate / 100) * 100 - 5 * (market != "CN")


def _items(
    spec: dict[str, float | tuple[str, ...]],
    market: str,
    kind: str,
    rng: random.Random,
    unlabelled_range: bool,
) -> list[Item]:
    items: list[Item] = []
    for key, value in spec.items():
        field, _, qualifier = key.partition("/")
        if field == "range":
            range_km = _number(value)
            cycles = _CYCLES[market][: rng.randint(1, len(_CYCLES[market]))]
            if unlabelled_range:
                items.append(
                    Item("battery.range", None, round(range_km * _CYCLE_FACTOR[cycles[0]]))
                )
            else:
                items.extend(
                    Item("battery.range", c, round(range_km * _CYCLE_FACTOR[c])) for c in cycles
                )
            continue
        if field == "motor.acceleration" and (qualifier == "0-60 mph") != (market == "US"):
            continue
        if key == "battery.charging_power/AC" and (kind != "spec_sheet" or rng.random() < 0.4):
            continue
        if field == "general.price":
            value = _price(_number(value), market)
        items.append(Item(field, qualifier or None, value))
    if kind != "spec_sheet":
        optional = [i for i in items if i.field not in _CORE]
        keep = set(map(id, rng.sample(optional, rng.randint(5, min(11, len(optional))))))
        items = [i for i in items if i.field in _CORE or id(i) in keep]
    return items


def _plant_conflicts(plans: list[Plan], entities: list[str], rng: random.Random) -> None:
    by_entity: dict[str, list[Plan]] = defaultdict(list)
    for plan in plans:
        by_entity[plan.entity].append(plan)
    for entity in entities:
        docs = by_entity[entity]
        if len(docs) < 2 or rng.random() < 0.5:
            continue
        holders: dict[tuple[str, str | None], list[int]] = defaultdict(list)
        for index, doc in enumerate(docs):
            for item in doc.items:
                if item.field in _CONFLICT_FIELDS and (
                    item.field != "battery.range" or item.qualifier
                ):
                    holders[(item.field, item.qualifier)].append(index)
        shared = sorted((k for k, v in holders.items() if len(v) >= 2), key=str)
        if not shared:
            continue
        key = rng.choice(shared)
        doc = docs[rng.choice(holders[key][1:])]
        for position, item in enumerate(doc.items):
            if (item.field, item.qualifier) == key and isinstance(item.value, float | int):
                if item.field == "battery.capacity":
                    changed = item.value + rng.choice((-3, -2, 2, 3))
                else:
                    changed = round(
                        item.value * (1 + rng.choice((-1, 1)) * rng.uniform(0.05, 0.09))
                    )
                doc.items[position] = Item(item.field, item.qualifier, changed)
        doc.conflict = key


def plan_brochures(rng: random.Random, n: int) -> tuple[list[Plan], list[str]]:
    """Plan `n` brochures: one to three per car, conflicts planted, in document order."""
    plans: list[Plan] = []
    entities: list[str] = []
    for entity in _entity_names(rng, n):
        if len(plans) >= n:
            break
        entities.append(entity)
        spec = _spec(rng)
        home = rng.choice(_MARKETS)
        kinds = ["spec_sheet", "marketing", "overview"][: rng.choice((1, 2, 2, 3))]
        unlabelled = rng.randrange(len(kinds)) if rng.random() < 0.3 else -1
        for index, kind in enumerate(kinds[: n - len(plans)]):
            market = home if rng.random() < 0.7 else rng.choice(_MARKETS)
            items = _items(spec, market, kind, rng, index == unlabelled and kind != "spec_sheet")
            plans.append(Plan(entity, kind, market, items))
    _plant_conflicts(plans, entities, rng)
    rng.shuffle(plans)
    return plans, entities
