import pickle

import pytest

import swarm_ray
from swarm_ray import SwarmError, SwarmRuntimeError, SwarmUserError
from swarm_ray.core.model._errors import ErrorCode, error_for_code


def _all_error_classes() -> list[type[SwarmError]]:
    found: list[type[SwarmError]] = []
    stack: list[type[SwarmError]] = [SwarmError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__name__)


ALL = _all_error_classes()


def test_tree_has_every_documented_class() -> None:
    names = {c.__name__ for c in ALL}
    for name in (
        "InvalidSpecError",
        "InvalidInputError",
        "UnknownCapabilityError",
        "InvalidPlanError",
        "SubTaskTimeoutError",
        "AgentUnavailableError",
        "WatermarkRejectedError",
        "CircuitOpenError",
        "InvalidStateTransitionError",
    ):
        assert name in names
        assert name in (swarm_ray.core.model._errors.__doc__ or ""), (
            f"{name} missing from the drawn tree"
        )


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_every_error_survives_pickle(cls: type[SwarmError]) -> None:
    # every constructor takes (message, **details); some subclasses require a few details
    details = {"capability_id": "a.b.c", "errors": [{"field": "f"}], "path": "x.pdf", "reason": "r"}
    err = cls("`thing` went wrong: 'x'", **details)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert back == err
    assert str(back) == str(err)
    assert back.details == details
    assert back.capability_id == "a.b.c"


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_user_and_runtime_errors_are_apart(cls: type[SwarmError]) -> None:
    if cls in (SwarmError,):
        return
    assert issubclass(cls, SwarmUserError) != issubclass(cls, SwarmRuntimeError)


def test_missing_detail_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = SwarmError("x").nope


def test_error_for_code_gives_the_most_general_class_of_that_code() -> None:
    for cls in ALL:
        if cls.code is not ErrorCode.UNKNOWN:
            general = error_for_code(cls.code)
            assert issubclass(cls, general) and general.code is cls.code
