"""The public surface of `swarm_ray.documents`: sorted, complete, and nothing stray."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import swarm_ray.documents as documents


def test_all_is_sorted_and_resolves() -> None:
    def isort_style(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2), name

    assert documents.__all__ == sorted(set(documents.__all__), key=isort_style)
    for name in documents.__all__:
        assert hasattr(documents, name), name


def test_every_private_module_export_is_public() -> None:
    internal = {
        "_mentions", "_values", "_labels", "_layout", "_grid",  # of the extractor
        "_table", "_rows", "_cells",  # of the extractor's readers
        "_symbols", "_choice", "_links", "_counts", "_terms", "_series", "_sole", "_part_rows",
        "_variants", "_charts", "_summary", "_format",  # of the choice, the report
        "_unit_grammar",  # of the units
        "_quantities", "_candidates", "_features", "_scorer", "_training", "_learned",  # learned
        "_sample_plan", "_sample_text", "_sample_pdf", "_sample_datasheets",  # of the samples
    }  # fmt: skip
    exported = set(documents.__all__)
    for info in pkgutil.iter_modules(documents.__path__):
        if info.name in internal:
            continue
        module = importlib.import_module(f"swarm_ray.documents.{info.name}")
        missing = [n for n in getattr(module, "__all__", ()) if n not in exported]
        unexported = {
            "lookup_currency", "lookup_unit", "unit_phrase_regex", "COUNT", "MONEY", "TEXT",
            "entity_key", "document_parts", "short_watermark", "FIELDS_GROUP", "field_groups",
            "score_facts", "unplaced_fields", "plausible",
        }  # fmt: skip
        assert set(missing) <= unexported, (info.name, missing)


def test_importing_the_package_does_not_import_reportlab() -> None:
    code = "import sys, swarm_ray.documents; print('reportlab' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"
