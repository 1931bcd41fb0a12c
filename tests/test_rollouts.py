"""Rollouts: attempt and task rows of an ended task, written as Parquet, read as a Dataset."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from pydantic import BaseModel

from swarm_ray import TaskRecord, TaskRequest, TaskTemplate, TokenUsage
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._fsm import TaskMachine
from swarm_ray.core.model._plan import expand
from swarm_ray.core.model._signals import Dispatch, Fallback, Retry, RunIntent, Start
from swarm_ray.core.model._subtask import SubTaskSpec, Timings
from swarm_ray.core.scheduling._scheduler import Scheduler
from swarm_ray.core.views._attempts import histories, longest_path
from swarm_ray.runtime import _rollout
from swarm_ray.runtime._results import ResultStore
from swarm_ray.runtime._rollout import RolloutWriter, rollout_rows, rollout_tables, write_rollouts
from tests.support import done, failed, registry, spec, wait_until


class Verdict(BaseModel):
    score: float


class Scores(BaseModel):
    factuality: Verdict
    coherence: Verdict


TEMPLATE = """
name: judged
aggregate: judge
stages:
  - name: parse
    capability: doc.parse.text
    fan_out: per_item
    input: {text: $item}
  - name: extract
    capability: doc.extract.text
    fan_out: per_item
    depends_on: [parse]
    input: {text: $from.parse.text}
  - name: judge
    capability: qa.judge.scores
    depends_on: [extract]
    partial_ok: true
    input: {parts: $from.extract.text}
"""

# Run time of each stage's attempts, in seconds: the critical path is parse -> extract -> judge
# through the item whose extraction failed once and ran twice.
RUN_S = {"parse": 1.0, "extract": 2.0, "judge": 0.5}


def _run(tmp_path: Path) -> tuple[TaskRecord, Scheduler]:
    from tests.support import ManyIn

    reg = registry(spec("qa.judge.scores", input_model=ManyIn, output_model=Scores))
    request = TaskRequest(template="judged", items=("a", "b"))
    plan = expand(TaskTemplate.from_yaml(TEMPLATE), request, task_id="t1")
    scheduler = Scheduler(plan, reg)
    clock = [0.0]
    pending: list[RunIntent] = [
        i for i in scheduler.handle(Start(at=0.0)) if isinstance(i, RunIntent)
    ]
    failed_once = False
    while pending:
        intent = pending.pop(0)
        start = clock[0]
        clock[0] += RUN_S[intent.stage]
        timings = Timings(queued_at=start, started_at=start + 0.01, finished_at=clock[0])
        if intent.subtask_id == "extract[1]" and not failed_once:
            failed_once = True
            event: Any = failed(intent, ErrorCode.AGENT_ERROR, at=clock[0])
            event = event.model_copy(
                update={"result": event.result.model_copy(update={"timings": timings})}
            )
        elif intent.stage == "judge":
            scores = {"factuality": {"score": 0.8}, "coherence": {"score": 0.6}}
            event = done(intent, at=clock[0], output=scores, timings=timings)
        else:
            usage = TokenUsage(prompt_tokens=10, completion_tokens=3, calls=1, cost=0.25)
            event = done(intent, at=clock[0], timings=timings, usage=usage, agent="agent-1")
        for out in scheduler.handle(event):
            if isinstance(out, Dispatch | Retry | Fallback):
                pending.append(out)
    assert scheduler.outcome is not None
    record = TaskRecord(
        task_id="t1",
        trace_id="trace-1",
        request=request,
        machine=TaskMachine(task_id="t1"),
        plan=plan,
        created_at=0.0,
        updated_at=clock[0],
    )
    return record, scheduler


def test_attempt_and_task_rows(tmp_path: Path) -> None:
    record, scheduler = _run(tmp_path)
    store = ResultStore(str(tmp_path / "results"))
    attempts, task = rollout_tables(record, scheduler, store)
    rows = attempts.to_pylist()
    by_id: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_id.setdefault(row["subtask_id"], []).append(row)
    assert sorted(by_id) == ["extract[0]", "extract[1]", "judge", "parse[0]", "parse[1]"]
    retried = by_id["extract[1]"]
    assert [(r["attempt"], r["status"], r["accepted"]) for r in retried] == [
        (1, "failed", False),
        (2, "succeeded", True),
    ]
    assert retried[0]["error_code"] == "agent_error"
    assert retried[1]["run_s"] == pytest.approx(1.99)
    assert retried[1]["wait_s"] == pytest.approx(0.01)
    assert retried[1]["prompt_tokens"] == 10 and retried[1]["agent"] == "agent-1"
    assert retried[1]["cost"] == 0.25 and retried[0]["cost"] == 0.0
    assert json.loads(by_id["parse[0]"][0]["output_json"]) == {"text": "parse[0]"}
    (row,) = task.to_pylist()
    assert row["critical_path"] == ["parse[1]", "extract[1]", "judge"]
    assert row["critical_path_s"] == pytest.approx(0.99 + 1.99 * 2 + 0.49)
    assert row["critical_steps"] == 4 and row["total_steps"] == 6
    assert row["failed_attempts"] == 1
    assert row["cost"] == pytest.approx(0.25 * 4) and row["owner"] is None  # 4 paid attempts
    assert row["wall_s"] == pytest.approx(record.updated_at)
    assert row["parallelism"] == pytest.approx(row["subtask_time_s"] / row["wall_s"])
    assert row["step_parallelism"] == pytest.approx(6 / 4)
    assert row["rewards"] == [
        {"judge": "coherence", "score": 0.6},
        {"judge": "factuality", "score": 0.8},
    ]
    assert row["reward"] == pytest.approx(0.7)
    assert row["template"] == "judged" and row["planner"] == "template"
    dag = json.loads(row["plan_json"])
    assert [s["name"] for s in dag["stages"]] == ["parse", "extract", "judge"]
    assert {s["id"] for s in dag["subtasks"]} == set(by_id)

    name = write_rollouts(store, [("t1", rollout_rows(record, scheduler, store))])
    assert name.endswith("-t1")
    root = tmp_path / "results" / "rollouts"
    assert pq.read_table(root / "attempts" / f"{name}.parquet").to_pylist() == rows
    assert pq.read_table(root / "tasks" / f"{name}.parquet").to_pylist() == [row]


def _rows(root: Path, table: str, task_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """The rows of `root/{table}/*.parquet` (of `task_ids` only if given), oldest first.

    A file holds a batch: the tasks that ended together.
    """
    where = None if task_ids is None else [("task_id", "in", task_ids)]
    files = sorted((root / table).glob("*.parquet"))
    return [r for f in files for r in pq.read_table(f, filters=where).to_pylist()]


def _task_ids(root: Path) -> set[str]:
    files = sorted((root / "tasks").glob("*.parquet"))
    return {t for f in files for t in pq.read_table(f, columns=["task_id"])["task_id"].to_pylist()}


def _tables(task_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    return [{"task_id": task_id, "attempt": n} for n in (1, 2)], {"task_id": task_id}


def test_a_lone_rollout_is_written_at_once_and_a_burst_in_one_batch(tmp_path: Path) -> None:
    root = tmp_path / "results" / "rollouts"

    async def main() -> None:
        writer = RolloutWriter(ResultStore(str(tmp_path / "results")), interval_s=0.5)
        writer.add("t1", _tables("t1"))
        await writer.drain()
        assert _task_ids(root) == {"t1"}
        # Ended within the interval of the last write: they wait for the next, together.
        writer.add("t2", _tables("t2"))
        writer.add("t3", _tables("t3"))
        await asyncio.sleep(0.1)
        assert _task_ids(root) == {"t1"}
        await writer.drain()

    asyncio.run(main())
    files = sorted(p.name for p in (root / "tasks").glob("*.parquet"))
    assert len(files) == 2 and files == sorted(p.name for p in (root / "attempts").glob("*"))
    assert [r["task_id"] for r in pq.read_table(root / "tasks" / files[1]).to_pylist()] == [
        "t2",
        "t3",
    ]
    assert [r["attempt"] for r in _rows(root, "attempts")] == [1, 2] * 3


def test_histories_and_the_longest_path_follow_the_dag() -> None:
    specs = [
        SubTaskSpec(id="a", stage="s", capability_id="x"),
        SubTaskSpec(id="b", stage="s", capability_id="x", depends_on=("a",)),
        SubTaskSpec(id="c", stage="s", capability_id="x", depends_on=("a",)),
        SubTaskSpec(id="d", stage="s", capability_id="x", depends_on=("b", "c", "gone")),
    ]
    weights = {"a": 1.0, "b": 5.0, "c": 2.0, "d": 1.0}
    assert longest_path(specs, weights.__getitem__) == (["a", "b", "d"], 7.0)
    assert longest_path(specs, lambda _sid: 0.0) == ([], 0.0)


def test_running_attempts_count_in_a_history(tmp_path: Path) -> None:
    reg = registry()
    request = TaskRequest(template="pipeline", items=("a",), params={"dimensions": ["x"]})
    from tests.support import pipeline

    plan = expand(pipeline(), request, task_id="t1")
    scheduler = Scheduler(plan, reg)
    (parse,) = [i for i in scheduler.handle(Start(at=0.0)) if isinstance(i, RunIntent)]
    found = histories(scheduler)
    assert found[parse.subtask_id].count == 1 and found[parse.subtask_id].attempts == []
    assert found["merge"].count == 0


def _copy_runs(root: Path, state: Path, task_ids: list[str]) -> Path:
    """A state directory holding the rollouts of `task_ids` only, one file a task."""
    for table in ("tasks", "attempts"):
        folder = state / "results" / "rollouts" / table
        folder.mkdir(parents=True, exist_ok=True)
        schema = pq.read_schema(next((root / table).glob("*.parquet")))
        for task_id in task_ids:
            mine = pa.Table.from_pylist(_rows(root, table, [task_id]), schema=schema)
            pq.write_table(mine, folder / f"{task_id}.parquet")
    return state


def test_small_rollouts_are_read_whole_and_older_files_lack_newer_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "results" / "rollouts" / "tasks"
    folder.mkdir(parents=True)
    pq.write_table(pa.table({"task_id": ["old"], "wall_s": [1.0]}), folder / "1.parquet")
    pq.write_table(
        pa.table({"task_id": ["new"], "wall_s": [2.0], "reward": [0.5]}), folder / "2.parquet"
    )
    (folder / "notes.txt").write_text("not a rollout")
    table = _rollout._read_small([(pafs.LocalFileSystem(), str(folder))])
    assert table is not None
    assert table.to_pylist() == [
        {"task_id": "old", "wall_s": 1.0, "reward": None},
        {"task_id": "new", "wall_s": 2.0, "reward": 0.5},
    ]
    # Over the limit, Ray Data's tasks read them instead; an empty folder has nothing.
    monkeypatch.setattr(_rollout, "SMALL_BYTES", 100)
    assert _rollout._read_small([(pafs.LocalFileSystem(), str(folder))]) is None
    (tmp_path / "empty").mkdir()
    assert _rollout._read_small([(pafs.LocalFileSystem(), str(tmp_path / "empty"))]) is None


@pytest.mark.ray
def test_an_ended_task_leaves_its_rollout_and_rollouts_reads_it(
    swarm: Any, swarm_state_dir: Path, tmp_path: Path
) -> None:
    import swarm_ray

    task_id = swarm.submit(
        template="echo_fanout",
        items=("r1", "r2", "r3"),
        params={"record_dir": str(tmp_path), "fail_first": 1},
    )
    assert str(swarm.task(task_id).wait(timeout_s=120).machine.state) == "completed"
    root = swarm_state_dir / "results" / "rollouts"
    wait_until(lambda: task_id in _task_ids(root), 30, "the rollout")
    attempts = _rows(root, "attempts", [task_id])
    echoes = [r for r in attempts if r["stage"] == "echo"]
    assert len(echoes) == 6  # each echo failed once, then succeeded
    assert sorted((r["attempt"], r["status"]) for r in echoes) == (
        [(1, "failed")] * 3 + [(2, "succeeded")] * 3
    )
    for row in echoes:
        assert row["queued_at"] <= row["started_at"] <= row["ended_at"]
        assert row["watermark"] and row["input_digest"] and row["agent"]
    # Read through a copy holding this run and one other: the session's own store holds
    # every task of the suite, and reading a thousand small files is slow on 2 cores.
    other = swarm.submit(template="echo_fanout", items=("other",))
    swarm.task(other).wait(timeout_s=120)
    wait_until(lambda: other in _task_ids(root), 30, "the other rollout")
    runs = _copy_runs(root, tmp_path / "state", [task_id, other])
    tasks = swarm_ray.rollouts(runs).to_pandas()
    assert set(tasks["task_id"]) == {task_id, other}
    (mine,) = tasks[tasks["task_id"] == task_id].to_dict("records")
    assert mine["state"] == "completed" and mine["total_steps"] == 7
    assert mine["critical_steps"] == 3  # echo (2 attempts) -> join (1)
    assert list(mine["critical_path"])[-1] == "join"
    assert mine["wall_s"] > 0 and mine["parallelism"] > 0
    rows = swarm_ray.rollouts([runs / "results"], table="attempts").to_pandas()
    assert (rows["task_id"] == task_id).sum() == 7
    with pytest.raises(swarm_ray.InvalidSpecError, match="no rollouts"):
        swarm_ray.rollouts(tmp_path)


@pytest.mark.ray
def test_the_notebook_plots_the_runs(
    swarm: Any,
    swarm_state_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: Any,
) -> None:
    ids = []
    for items in (("n1",), ("n2", "n3", "n4")):
        ids.append(swarm.submit(template="echo_fanout", items=items))
        swarm.task(ids[-1]).wait(timeout_s=120)
    task_id = ids[-1]
    root = swarm_state_dir / "results" / "rollouts"
    for ended in ids:
        wait_until(lambda e=ended: e in _task_ids(root), 30, "rollouts")
    monkeypatch.setenv("ROLLOUTS", str(_copy_runs(root, tmp_path / "state", ids)))
    notebook = Path(__file__).resolve().parent.parent / "notebooks" / "rollouts.ipynb"
    namespace: dict[str, Any] = {}
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] == "code":
            exec("".join(cell["source"]), namespace)
    out = capsys.readouterr().out
    assert f"run {task_id}:" in out and "echo" in out and "join" in out
    assert list(namespace["tasks"]["task_id"]) == ids  # oldest first
    assert Path(namespace["plot_path"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    per_stage = namespace["per_stage"]
    assert per_stage.loc["echo", "attempts"] == 3 and per_stage.loc["join", "on_critical_path"] == 1


@pytest.mark.ray
def test_shutdown_writes_the_rollouts_of_tasks_that_just_ended(
    ray_cluster: None, tmp_path: Path
) -> None:
    import swarm_ray

    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=tmp_path / "state",
        name="swarm-rollout-flush",
    )
    # Back to back: the later ones end within a batch interval of the first's write.
    ids = [client.run(template="noop_fanout", items=(n,)).task_id for n in range(3)]
    client.shutdown()
    assert _task_ids(tmp_path / "state" / "results" / "rollouts") == set(ids)
