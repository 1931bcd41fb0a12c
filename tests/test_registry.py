import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

from swarm_ray import (
    CapabilitySpec,
    DuplicateCapabilityError,
    InvalidInputError,
    InvalidOutputError,
    InvalidSpecError,
    Resources,
    UnknownCapabilityError,
)
from swarm_ray.core.model._registry import Registry
from tests.support import TextIn, TextOut, spec


class PagesIn(BaseModel):
    path: str
    max_pages: int = 10


@pytest.mark.parametrize("cid", ["document.parsing.pdf", "a.b.c", "llm_x.gen_2.chat"])
def test_good_ids(cid: str) -> None:
    assert spec(cid).id == cid


@pytest.mark.parametrize(
    "cid", ["document.parsing", "Document.parsing.pdf", "a.b.c.d", "a..c", "1a.b.c", ""]
)
def test_bad_ids_are_refused(cid: str) -> None:
    with pytest.raises(ValidationError, match="domain.category.name"):
        spec(cid)


@pytest.mark.parametrize("gpus", [0, 0.25, 0.5, 1, 2, 8])
def test_gpu_fractions_and_whole_numbers(gpus: float) -> None:
    assert Resources(num_gpus=gpus).num_gpus == gpus


@pytest.mark.parametrize("gpus", [1.5, 2.25, -0.5])
def test_bad_gpu_counts(gpus: float) -> None:
    with pytest.raises(ValidationError):
        Resources(num_gpus=gpus)


def test_ray_options_carry_resources() -> None:
    opts = Resources(num_cpus=0.5, num_gpus=0.25, memory_bytes=2**30).ray_options()
    assert opts == {"num_cpus": 0.5, "num_gpus": 0.25, "memory": 2**30}
    assert Resources().ray_options() == {"num_cpus": 1.0}


def test_duplicate_ids_refused() -> None:
    reg = Registry([spec("a.b.c")])
    with pytest.raises(DuplicateCapabilityError, match="`a.b.c` is already registered"):
        reg.register(spec("a.b.c"))


def test_unknown_capability_names_it_and_neighbours() -> None:
    reg = Registry([spec("document.parsing.pdf"), spec("document.indexing.chroma")])
    with pytest.raises(UnknownCapabilityError) as info:
        reg.get("document.parsing.docx")
    assert "`document.parsing.docx`" in str(info.value)
    assert "document.parsing.pdf" in str(info.value)


def test_input_validation_names_capability_field_and_problem() -> None:
    reg = Registry([spec("document.parsing.pdf", input_model=PagesIn)])
    with pytest.raises(InvalidInputError) as info:
        reg.validate_input("document.parsing.pdf", {"path": "a.pdf", "max_pages": "many"})
    err = info.value
    assert "`document.parsing.pdf`" in str(err)
    assert "`max_pages`" in str(err) and "'many'" in str(err)
    assert err.errors[0]["field"] == "max_pages"
    assert reg.validate_input("document.parsing.pdf", {"path": "a.pdf"}) == PagesIn(path="a.pdf")


def test_missing_field_is_named() -> None:
    reg = Registry([spec("document.parsing.pdf", input_model=PagesIn)])
    with pytest.raises(InvalidInputError, match="field `path`: Field required"):
        reg.validate_input("document.parsing.pdf", {})


def test_output_validation() -> None:
    reg = Registry([spec("a.b.c")])
    assert reg.validate_output("a.b.c", {"text": "x"}) == TextOut(text="x")
    with pytest.raises(InvalidOutputError, match="field `text`"):
        reg.validate_output("a.b.c", {"txt": 1})


def test_fallback_checks() -> None:
    Registry([spec("a.b.c", fallback="a.b.d"), spec("a.b.d")]).check()
    with pytest.raises(InvalidSpecError, match="not registered"):
        Registry([spec("a.b.c", fallback="a.b.x")]).check()
    with pytest.raises(InvalidSpecError, match="loop"):
        Registry([spec("a.b.c", fallback="a.b.d"), spec("a.b.d", fallback="a.b.c")]).check()
    with pytest.raises(ValidationError, match="itself"):
        spec("a.b.c", fallback="a.b.c")


def test_bad_entrypoint_refused() -> None:
    with pytest.raises(ValidationError, match="package.module:function"):
        spec("a.b.c", entrypoint="not a path")


def test_one_json_schema_covers_every_capability() -> None:
    reg = Registry([spec("document.parsing.pdf", input_model=PagesIn), spec("text.echo.plain")])
    schema = reg.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert set(schema["x-capabilities"]) == {"document.parsing.pdf", "text.echo.plain"}
    assert validator.is_valid({"capability": "document.parsing.pdf", "input": {"path": "x.pdf"}})
    assert not validator.is_valid({"capability": "document.parsing.pdf", "input": {"max_pages": 1}})
    assert validator.is_valid({"capability": "text.echo.plain", "input": {"text": "hi"}})
    assert not validator.is_valid({"capability": "no.such.thing", "input": {"text": "hi"}})


def test_specs_pickle_for_ray() -> None:
    import pickle

    s = spec("a.b.c", input_model=TextIn, resources=Resources(num_gpus=0.25))
    back = pickle.loads(pickle.dumps(s))
    assert back == s and back.input_model is TextIn


def test_catalogue_lines() -> None:
    reg = Registry([spec("b.b.b"), spec("a.a.a")])
    assert [c["id"] for c in reg.catalogue()] == ["a.a.a", "b.b.b"]
    assert isinstance(CapabilitySpec, type)
