"""The shapes a fact takes between extraction, normalisation and comparison.

A fact is one value a document states about one entity and one field, together with the
evidence for it (page, quote, document id) so that a reviewer can always go back to the
source. The models are frozen and JSON-serialisable because they travel between Ray
workers as capability inputs and outputs.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field


class Statistic(StrEnum):
    """Which statistic of a specification a value is: datasheets state limits, not values."""

    MIN = "min"
    TYP = "typ"
    MAX = "max"


class ExtractionMethod(StrEnum):
    """How a fact was found; part of the evidence a reviewer weighs."""

    SYNONYM = "synonym"
    """A number with a unit, attributed to a field by a nearby synonym."""
    PATTERN = "pattern"
    """A field-specific regular expression matched the value directly."""
    LABEL = "label"
    """A value next to one of the field's labels: in a table row (its column header giving
    the statistic), in the label's own cell, or in a phrase."""
    VOCABULARY = "vocabulary"
    """A term of a field's vocabulary (a feature name) was mentioned."""
    LEARNED = "learned"
    """The learned scorer chose the value among every candidate of the field (a request's
    `choice: learned`); its confidence is the model's probability."""
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
    kind: str
    """What the field measures, from its declared unit (`temperature`, `data rate`,
    `dBm`, `count`, `money`, `text`)."""
    value: float | str
    """The value as written (numbers parsed, units not converted); a term for categories."""
    unit: str
    """The unit as written (`mi`, `kWh`, `°C`, `EUR`), empty when the value has none."""
    field_unit: str = ""
    """The unit the field declares (`°C`, `Gb/s`); normalisation converts to it."""
    statistic: Statistic | None = None
    """`min`, `typ` or `max` where the document says which (a table column, a range's
    ends, `up to`); `None` for a value stated plainly."""
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
    """A fact with its value in the unit its field declares."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fact: Fact
    """The fact as extracted, value and unit as written."""
    value: float | str
    """The value in `unit`; text passes through unchanged."""
    unit: str
    """The unit its field declares (the currency code for money, empty for text)."""
    conversion: Conversion | None = None
    """The conversion applied; `None` when the value was already canonical."""
