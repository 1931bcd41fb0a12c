"""How a pooled capability's batch is cut into streaming calls (no Ray started)."""

from __future__ import annotations

import pytest

from swarm_ray.runtime._executors import _MAX_CHUNK, _chunks


@pytest.mark.parametrize(("n", "agents"), [(1, 1), (8, 4), (20, 2), (100, 4), (2000, 4)])
def test_chunks_carry_every_subtask_once_in_order(n: int, agents: int) -> None:
    chunks = _chunks(list(range(n)), agents)  # type: ignore[arg-type]
    assert [x for c in chunks for x in c] == list(range(n))
    sizes = [len(c) for c in chunks]
    assert all(1 <= s <= _MAX_CHUNK for s in sizes)
    assert sizes == sorted(sizes, reverse=True)  # large first, small toward the end


def test_a_big_fan_out_costs_few_calls_and_ends_in_small_ones() -> None:
    sizes = [len(c) for c in _chunks(list(range(2000)), 4)]  # type: ignore[arg-type]
    assert len(sizes) <= 2000 // _MAX_CHUNK * 2  # not one call per 16, as before
    # the last chunks are short: no agent keeps a long one while the others idle
    assert max(sizes[-4:]) == 1


def test_a_small_batch_goes_to_every_agent() -> None:
    assert len(_chunks(list(range(4)), 4)) == 4  # type: ignore[arg-type]
