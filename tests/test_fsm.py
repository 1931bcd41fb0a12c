import itertools

import pytest

from swarm_ray import InvalidStateTransitionError, TaskState
from swarm_ray.core.model._fsm import TRANSITIONS, TaskMachine, transition

S = TaskState
LEGAL = {
    (S.CREATED, S.ROUTING),
    (S.ROUTING, S.DISPATCHING),
    (S.DISPATCHING, S.EXECUTING),
    (S.EXECUTING, S.AGGREGATING),
    (S.AGGREGATING, S.FINALIZING),
    (S.FINALIZING, S.COMPLETED),
    *(
        (w, end)
        for w in (S.CREATED, S.ROUTING, S.DISPATCHING, S.EXECUTING, S.AGGREGATING, S.FINALIZING)
        for end in (S.FAILED, S.CANCELLED)
    ),
}


@pytest.mark.parametrize(("src", "dst"), list(itertools.product(S, S)))
def test_every_pair_of_states(src: TaskState, dst: TaskState) -> None:
    machine = TaskMachine(task_id="t1", state=src)
    if (src, dst) in LEGAL:
        moved = transition(machine, dst, reason="because", at=12.5, trace_id="tr")
        assert moved.state is dst
        assert machine.state is src  # the old machine is unchanged
        (entry,) = moved.audit
        assert (entry.from_state, entry.to_state, entry.reason, entry.at, entry.trace_id) == (
            src,
            dst,
            "because",
            12.5,
            "tr",
        )
    else:
        with pytest.raises(InvalidStateTransitionError) as info:
            transition(machine, dst, reason="because", at=1.0, trace_id="tr")
        assert f"`{src}`" in str(info.value) and f"`{dst}`" in str(info.value)
        assert info.value.task_id == "t1"


def test_table_is_the_legal_set() -> None:
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == LEGAL


def test_terminal_states() -> None:
    assert {s for s in S if s.terminal} == {S.COMPLETED, S.FAILED, S.CANCELLED}


def test_happy_path_audit_log_accumulates() -> None:
    machine = TaskMachine(task_id="t1")
    path = [S.ROUTING, S.DISPATCHING, S.EXECUTING, S.AGGREGATING, S.FINALIZING, S.COMPLETED]
    for i, state in enumerate(path):
        machine = transition(machine, state, reason=f"step {i}", at=float(i), trace_id="tr")
    assert [e.to_state for e in machine.audit] == path
    assert [e.from_state for e in machine.audit] == [S.CREATED, *path[:-1]]
