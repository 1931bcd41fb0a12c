"""The orchestrator's bookkeeping parts, without Ray: turn commits, the task table, runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from swarm_ray.core.model._errors import StateStoreError
from swarm_ray.core.model._subtask import TokenUsage
from swarm_ray.runtime._store import SQLiteStateStore
from swarm_ray.runtime._tasks import InFlight, TaskTable
from swarm_ray.runtime._turns import Turns


def _driver(task_id: str, owner: str | None = "ann", *, ended: bool = False) -> Any:
    state = SimpleNamespace(terminal=ended)
    return SimpleNamespace(
        task_id=task_id,
        record=SimpleNamespace(owner=owner),
        state=state,
        usage=lambda: TokenUsage(prompt_tokens=1, completion_tokens=2),
    )


def test_writes_of_one_turn_commit_together_before_their_gate_opens(tmp_path: Path) -> None:
    store = SQLiteStateStore(tmp_path / "state.db")
    failed: list[set[str]] = []
    turns = Turns(store, lambda touched, exc: failed.append(touched))

    async def main() -> None:
        first = turns.gate_for("t1")
        store.append("t1", "event", "{}")
        second = turns.gate_for("t2")
        assert first is second and not first.done()  # one batch for the whole turn
        await turns.committed()
        assert first.result() is True
        assert [e.seq for e in store.read_log("t1")] == [1]
        assert turns.gate_for("t3") is not first  # the next turn opens a new batch
        await turns.committed()

    asyncio.run(main())
    assert failed == []


class _BrokenBatch:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        raise StateStoreError("disk full (test)")


def test_a_failed_commit_closes_the_gate_and_names_every_task_that_wrote() -> None:
    failed: list[tuple[set[str], str]] = []
    store: Any = SimpleNamespace(batch=_BrokenBatch)
    turns = Turns(store, lambda touched, exc: failed.append((touched, exc.message)))

    async def main() -> bool:
        gate = turns.gate_for("t1")
        turns.gate_for("t2")
        return await gate

    assert asyncio.run(main()) is False
    assert failed == [({"t1", "t2"}, "disk full (test)")]


def test_the_table_forgets_the_oldest_ended_tasks_and_counts_open_ones_per_owner() -> None:
    async def main() -> None:
        table = TaskTable(keep_finished=2)
        drivers = [_driver(f"t{n}") for n in range(4)]
        for d in drivers:
            table.track(d)
        table.track(_driver("bob1", owner="bob"))
        assert table.open_of("ann") == 4 and table.open_of("bob") == 1
        assert len(table.open_usage("ann")) == 4
        for d in drivers[:3]:
            d.state.terminal = True
            table.ended(d.task_id)
        assert table.open_of("ann") == 1  # ended ones are pruned as they are counted
        assert "t0" not in table and "t1" in table and "t2" in table  # two kept
        await table.until_ended("t1", timeout_s=0.1)  # returns at once: it ended

    asyncio.run(main())


def test_a_follower_wakes_at_the_next_change_or_its_timeout() -> None:
    async def main() -> None:
        table = TaskTable(keep_finished=10)
        table.track(_driver("t1"))
        loop = asyncio.get_running_loop()
        start = loop.time()
        loop.call_later(0.05, table.notify, "t1")
        await table.until_changed("t1", timeout_s=5.0)
        assert loop.time() - start < 1.0
        start = loop.time()
        await table.until_changed("t1", timeout_s=0.05)  # nobody changes it
        assert loop.time() - start >= 0.04

    asyncio.run(main())


def test_halting_cancels_only_the_runs_that_hold_a_halted_sub_task() -> None:
    async def main() -> list[set[str]]:
        inflight = InFlight()
        cancelled: set[str] = set()

        async def run(name: str) -> None:
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.add(name)
                raise

        inflight.spawn("t1", ["a", "b"], run("t1:ab"))
        inflight.spawn("t1", ["c"], run("t1:c"))
        inflight.spawn("t2", ["a"], run("t2:a"))
        await asyncio.sleep(0)
        seen = []
        for task_id, halted in (("t1", {"b"}), ("t1", {"b"}), ("t2", {"a"})):
            inflight.halt(task_id, halted)
            await asyncio.sleep(0.01)
            seen.append(set(cancelled))
        inflight.halt("t1", {"c"})
        await asyncio.sleep(0.01)
        return seen

    # the run holding `b` only; halting it again finds nothing; another task's `a` apart
    assert asyncio.run(main()) == [{"t1:ab"}, {"t1:ab"}, {"t1:ab", "t2:a"}]
