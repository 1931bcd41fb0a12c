"""How a pooled capability's batch is cut into streaming calls, and how an agent streams
the results back (no Ray started: the agent class runs in this process)."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from swarm_ray.runtime._executors import _MAX_CHUNK, _chunks
from swarm_ray.runtime._subagent import BUNCH_S, SubAgent


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


class _Timed(SubAgent):
    """An agent whose sub-tasks are durations: each sleeps that long (None raises)."""

    def __init__(self) -> None:  # no capability: `run` below stands in for it
        self._name = "timed"
        self.finished: dict[int, float] = {}

    def run(self, subtask: Any) -> Any:
        index, seconds = subtask
        if seconds is None:
            raise RuntimeError(f"sub-task {index} broke")
        time.sleep(seconds)
        self.finished[index] = time.perf_counter()
        return index


def _stream(durations: list[float | None]) -> tuple[_Timed, list[tuple[list[int], float]]]:
    agent = _Timed()
    bunches = [(b, time.perf_counter()) for b in agent.run_stream(list(enumerate(durations)))]
    return agent, bunches


def test_fast_results_stream_back_in_bunches_in_order() -> None:
    _agent, bunches = _stream([0.0] * 300)
    assert [i for bunch, _ in bunches for i in bunch] == list(range(300))
    assert len(bunches) < 300 // 4  # not one streamed item per sub-task


def test_no_result_waits_for_a_slow_one_behind_it() -> None:
    agent, bunches = _stream([0.0, 0.0, 0.4, 0.0, 0.4])
    assert [i for bunch, _ in bunches for i in bunch] == [0, 1, 2, 3, 4]
    for bunch, arrived in bunches:
        for i in bunch:  # out within the window (plus scheduling), never after a slow one
            assert arrived - agent.finished[i] < BUNCH_S + 0.15, (i, bunches)
    assert [2] in [b for b, _ in bunches]  # a slow result goes out alone


def test_a_failing_run_streams_what_finished_then_raises() -> None:
    agent = _Timed()
    stream = agent.run_stream([(0, 0.0), (1, None), (2, 0.0)])
    assert next(stream) == [0]
    with pytest.raises(RuntimeError, match="sub-task 1 broke"):
        next(stream)
    assert 2 not in agent.finished  # the worker stopped at the failure


def test_after_a_slow_sub_task_the_next_starts_only_once_its_result_is_sent() -> None:
    """As a plain generator: if sending fails (the orchestrator died), nothing more runs."""
    agent = _Timed()
    stream = agent.run_stream([(0, 0.05), (1, 0.05), (2, 0.0)])
    assert next(stream) == [0]
    time.sleep(0.3)  # the stream is not asked for more: the worker waits, 1 never runs
    assert list(agent.finished) == [0]
    stream.close()  # what a failed send does to the generator
    time.sleep(0.2)
    assert list(agent.finished) == [0]


def test_a_waiter_cancelled_as_it_is_handed_an_agent_passes_the_agent_on() -> None:
    """Cancelling a task can land between `release` and the waiter waking; the agent
    then goes to the next waiter (or back to idle), never lost from the pool."""
    import asyncio

    from swarm_ray.runtime._executors import _Pool
    from swarm_ray.testing import testing_catalog

    spec = next(c for c in testing_catalog().capabilities if c.id == "test.echo.text")
    spec = spec.model_copy(
        update={"resources": spec.resources.model_copy(update={"max_concurrency": 1})}
    )
    pool = _Pool(spec, "unused")
    agent = object()  # a stand-in: nothing here calls it
    pool.names[agent] = "agent-0"
    pool.idle.append(agent)

    async def scenario() -> tuple[object, list[object]]:
        held = await pool.acquire()
        cancelled = asyncio.create_task(pool.acquire())
        behind = asyncio.create_task(pool.acquire())
        await asyncio.sleep(0)  # both wait now
        pool.release(held)  # handed to the first waiter ...
        cancelled.cancel()  # ... which is cancelled before it wakes
        with contextlib.suppress(asyncio.CancelledError):
            await cancelled
        got = await asyncio.wait_for(behind, 5)
        pool.release(got)
        return got, list(pool.idle)

    got, idle = asyncio.run(scenario())
    assert got is agent and idle == [agent]
