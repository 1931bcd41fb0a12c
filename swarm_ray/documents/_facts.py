"""The shapes a fact takes between extraction, normalisation and comparison.

A fact is one value a document states about one entity and one field, together with the
evidence for it (page, quote, document id) so that a reviewer can always go back to the
source. The models are frozen and JSON-serialisable because they travel between Ray
workers as capability inputs and outputs.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class QuantityKind(StrEnum):
    """What a field measures; decides the canonical unit and which units may be compared.

    Kinds are declared, not inferred from units, because different quantities share a
    dimensionality: a torque in N·m and an energy in J are the same to pint.
    """

    ENERGY = "energy"
    DISTANCE = "distance"
    LENGTH = "length"
    POWER = "power"
    TORQUE = "torque"
    SPEED = "speed"
    DURATION = "duration"
    VOLUME = "volume"
    MASS = "mass"
    NUMBER = "number"
    MONEY = "money"
    CATEGORY = "category"


class ExtractionMethod(StrEnum):
    """How a fact was found; part of the evidence a reviewer weighs."""

    SYNONYM = "synonym"
    """A number with a unit, attributed to a field by a nearby synonym."""
    PATTERN = "pattern"
    """A field-specific regular expression matched the value directly."""
    VOCABULARY = "vocabulary"
    """A term of a field's vocabulary (a feature name) was mentioned."""
    LLM = "llm"
    """An LLM attributed the value to the field (the fallback where rules were unsure);
    the value itself is one the text states, found by the rules' unit lexicon."""


class Fact(BaseModel):
    """One value one document states about one field of one entity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entity: str
    """The product the document is about (brand and model name)."""
    field: str
    """The field as `dimension.field`, e.g. `battery.capacity`."""
    kind: QuantityKind
    """The quantity kind the field declares."""
    value: float | str
    """The value as written (numbers parsed, units not converted); a term for categories."""
    unit: str
    """The unit's normalised symbol (`mi`, `kWh`, `EUR`), empty when the value has none."""
    qualifier: str | None = None
    """A label that makes values comparable only among themselves: the test cycle of a range
    (`WLTP`, `EPA`, ...), `DC` or `AC` for charging power, `0-100 km/h` for acceleration."""
    value_text: str
    """The value exactly as it appears in the document, unit included."""
    page: int = Field(ge=1)
    """1-based page number of the evidence."""
    quote: str
    """The text around the value that justified the attribution."""
    confidence: float = Field(ge=0.0, le=1.0)
    """How specific the match was: a strong synonym next to the value scores high."""
    method: ExtractionMethod
    """The rule that produced the fact."""
    document_id: str
    """Content id of the source document (`ParsedDocument.document_id`)."""
    source: str
    """File name of the source document, for people reading a report."""


class Conversion(BaseModel):
    """One unit conversion, recorded so a normalised value can be audited."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_value: float
    from_unit: str
    to_value: float
    to_unit: str


class NormalisedFact(BaseModel):
    """A fact with its value in the canonical unit of its kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fact: Fact
    """The fact as extracted, value and unit as written."""
    value: float | str
    """The value in `unit`; categories pass through unchanged."""
    unit: str
    """The canonical unit of the fact's kind (the currency code for money)."""
    conversion: Conversion | None = None
    """The conversion applied; `None` when the value was already canonical."""
