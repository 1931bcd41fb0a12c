"""Rollouts: every ended task as data, for research on how the swarm plans and runs.

When tasks end, the orchestrator writes their rollouts as Parquet files under the result
store (`SWARM_RAY_RESULTS_URI`, by default `results/` in the state directory):

- `rollouts/attempts/{batch}.parquet`: one row per sub-task attempt (task, stage,
  capability, agent, input digest, output, queued / started / ended times, attempt,
  status, error code, tokens, watermark), plus an `attempt = 0` row for each sub-task
  that never ran (skipped, cancelled);
- `rollouts/tasks/{batch}.parquet`: one row per task (the plan as a DAG, template
  and planner, the judges' scores as rewards, wall time, summed sub-task time,
  critical-path time and critical steps, parallelism).

A batch is the tasks that ended while the previous write ran or within `BATCH_S` of its
start (`RolloutWriter`): a lone task is written at once, while under load the fixed
cost of a Parquet file and a store write is paid a few times a second, not once per
task (it was most of the orchestrator's CPU per gateway request). A batch's name is its
write time in milliseconds and its first task's id, the same in both folders; the
attempts file goes first, so a reader that finds a task row finds its attempts too.
Rows in flight when the orchestrator is killed (at most `BATCH_S` of ended tasks) are
lost: a rollout is a by-product, never what a task waits for.

The measures follow Kimi's PARL: `critical_steps` is the most attempts along any chain of
dependencies (the steps no parallelism can remove), `total_steps` every attempt;
`parallelism` is summed sub-task run time over wall time (how many ran at once, on
average) and `step_parallelism` total over critical steps (what the plan allowed).

`swarm_ray.rollouts(uri)` reads many runs back as one `ray.data.Dataset`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.fs as pafs  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from swarm_ray.core.durability._journal import should_offload
from swarm_ray.core.guards._watermark import read_claims
from swarm_ray.core.model._errors import InvalidSpecError
from swarm_ray.core.model._record import TaskRecord
from swarm_ray.core.views._attempts import Attempt, critical_path, histories, longest_path
from swarm_ray.runtime._results import ResultStore

if TYPE_CHECKING:
    from swarm_ray.core.driver._driver import TaskDriver
    from swarm_ray.core.scheduling._scheduler import Scheduler

__all__ = ["rollouts"]

log = logging.getLogger(__name__)

ROLLOUT_VERSION = 1
"""Version of the rollout columns; bumped when a column changes meaning."""
_INLINE_OUTPUT = 4096
"""Outputs up to this many characters of JSON are kept in the attempt row itself."""

ATTEMPT_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("trace_id", pa.string()),
        ("subtask_id", pa.string()),
        ("stage", pa.string()),
        ("capability_id", pa.string()),
        ("planned_capability_id", pa.string()),
        ("agent", pa.string()),
        ("item", pa.int64()),
        ("dimension", pa.string()),
        ("round", pa.int64()),
        ("depends_on", pa.list_(pa.string())),
        ("attempt", pa.int64()),
        ("status", pa.string()),
        ("accepted", pa.bool_()),
        ("error_code", pa.string()),
        ("error_message", pa.string()),
        ("input_digest", pa.string()),
        ("output_ref", pa.string()),
        ("output_json", pa.string()),
        ("confidence", pa.float64()),
        ("queued_at", pa.float64()),
        ("started_at", pa.float64()),
        ("ended_at", pa.float64()),
        ("wait_s", pa.float64()),
        ("run_s", pa.float64()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("model_calls", pa.int64()),
        ("cost", pa.float64()),
        ("watermark", pa.string()),
        ("on_critical_path", pa.bool_()),
    ]
)
"""Columns of `rollouts/attempts/*.parquet`."""

TASK_SCHEMA = pa.schema(
    [
        ("task_id", pa.string()),
        ("trace_id", pa.string()),
        ("state", pa.string()),
        ("template", pa.string()),
        ("planner", pa.string()),
        ("query", pa.string()),
        ("items", pa.int64()),
        ("dimensions", pa.list_(pa.string())),
        ("stages", pa.list_(pa.string())),
        ("plan_json", pa.string()),
        ("subtasks", pa.int64()),
        ("created_at", pa.float64()),
        ("ended_at", pa.float64()),
        ("wall_s", pa.float64()),
        ("subtask_time_s", pa.float64()),
        ("critical_path_s", pa.float64()),
        ("critical_path", pa.list_(pa.string())),
        ("critical_steps", pa.int64()),
        ("total_steps", pa.int64()),
        ("failed_attempts", pa.int64()),
        ("parallelism", pa.float64()),
        ("step_parallelism", pa.float64()),
        ("reward", pa.float64()),
        ("rewards", pa.list_(pa.struct([("judge", pa.string()), ("score", pa.float64())]))),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("cost", pa.float64()),
        ("owner", pa.string()),
        ("warnings", pa.int64()),
        ("error_code", pa.string()),
        ("rollout_version", pa.int64()),
    ]
)
"""Columns of `rollouts/tasks/*.parquet`."""


def _attempt_row(
    base: dict[str, Any], attempt: Attempt, kept: Any, results: ResultStore, task_id: str
) -> dict[str, Any]:
    r = attempt.result
    row = dict(base, attempt=attempt.attempt, status=attempt.status, ended_at=attempt.at)
    if r is None:
        return row
    output_ref, output_json = r.output_ref, None
    if r.output is not None:
        text = json.dumps(r.output, ensure_ascii=False, default=str)
        if len(text) <= _INLINE_OUTPUT:
            output_json = text
        elif should_offload(text):  # where the driver stored it (see `TaskDriver._offload`)
            output_ref = results.ref(f"{task_id}/{r.subtask_id}-{r.attempt}.json")
    t = r.timings
    row.update(
        capability_id=r.capability_id,
        agent=r.agent,
        accepted=kept is not None
        and kept.attempt == r.attempt
        and kept.capability_id == r.capability_id,
        error_code=str(r.error.code) if r.error else None,
        error_message=r.error.message[:1000] if r.error else None,
        input_digest=_digest(r.watermark),
        output_ref=output_ref,
        output_json=output_json,
        confidence=r.confidence,
        queued_at=t.queued_at,
        started_at=t.started_at,
        ended_at=t.finished_at or attempt.at,
        wait_s=(t.started_at - t.queued_at) if t.started_at and t.queued_at else None,
        run_s=t.duration_s,
        prompt_tokens=r.usage.prompt_tokens,
        completion_tokens=r.usage.completion_tokens,
        model_calls=r.usage.calls,
        cost=r.usage.cost,
        watermark=r.watermark or None,
    )
    return row


def _digest(token: str) -> str | None:
    if not token:
        return None
    try:
        return read_claims(token).input_digest
    except Exception:  # a malformed token in a result the scheduler kept: no digest
        return None


def _rewards(record: TaskRecord, scheduler: Scheduler) -> list[dict[str, Any]]:
    """Judges' scores: numeric `score` fields of judge outputs (`*.judge.*` capabilities)."""
    scores: dict[str, list[float]] = defaultdict(list)
    specs = {s.id: s for s in scheduler.specs()}
    for sid, result in scheduler.final_results().items():
        if result.capability_id.split(".")[1:2] != ["judge"] or result.output is None:
            continue
        output, stage = result.output, specs[sid].stage if sid in specs else sid
        found = [(name, v["score"]) for name, v in output.items() if isinstance(v, dict)]
        found = [(name, score) for name, score in found if _number(score)]
        if _number(output.get("score")):
            found.append((stage, output["score"]))
        if not found and isinstance(output.get("passed"), bool):
            found.append((stage, 1.0 if output["passed"] else 0.0))
        for name, score in found:
            scores[name].append(float(score))
    return [{"judge": k, "score": sum(v) / len(v)} for k, v in sorted(scores.items())]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


Rows = tuple[list[dict[str, Any]], dict[str, Any]]
"""One task's rollout as plain rows: its attempt rows and its task row."""


def rollout_tables(
    record: TaskRecord, scheduler: Scheduler, results: ResultStore
) -> tuple[pa.Table, pa.Table]:
    """(attempt rows, the task row) of an ended task, as tables."""
    return _tables([rollout_rows(record, scheduler, results)])


def _tables(batch: Sequence[Rows]) -> tuple[pa.Table, pa.Table]:
    """The attempts and tasks tables of several tasks' rows, in one conversion.

    `from_pylist` costs about the same for one row as for a hundred.
    """
    attempts = [row for rows, _ in batch for row in rows]
    return (
        pa.Table.from_pylist(attempts, schema=ATTEMPT_SCHEMA),
        pa.Table.from_pylist([task for _, task in batch], schema=TASK_SCHEMA),
    )


def rollout_rows(record: TaskRecord, scheduler: Scheduler, results: ResultStore) -> Rows:
    """(attempt rows, the task row) of an ended task, as plain Python.

    Cheap to build on the event loop; `_tables` turns a batch of them into Arrow on the
    writer's thread.
    """
    specs = scheduler.specs()
    history = histories(scheduler)
    chain, chain_s = critical_path(specs, history)
    on_chain = set(chain)
    _steps_chain, critical_steps = longest_path(specs, lambda sid: history[sid].count)
    rows: list[dict[str, Any]] = []
    for spec in specs:
        h = history[spec.id]
        base = {
            "task_id": record.task_id,
            "trace_id": record.trace_id,
            "subtask_id": spec.id,
            "stage": spec.stage,
            "capability_id": spec.capability_id,
            "planned_capability_id": spec.capability_id,
            "item": spec.item,
            "dimension": spec.element,
            "round": spec.round,
            "depends_on": list(spec.depends_on),
            "on_critical_path": spec.id in on_chain,
        }
        kept = scheduler.result(spec.id)
        rows += [_attempt_row(base, a, kept, results, record.task_id) for a in h.attempts]
        answered = {a.attempt for a in h.attempts}
        if not h.attempts or (h.running_attempt and h.running_attempt not in answered):
            status = str(scheduler.status(spec.id))  # never ran, or cut off while running
            rows.append(dict(base, attempt=h.running_attempt or 0, status=status))
    ended_at = record.machine.audit[-1].at if record.machine.audit else record.updated_at
    wall_s = max(0.0, ended_at - record.created_at)
    busy_s = sum(h.run_s for h in history.values())
    total_steps = sum(len(h.attempts) for h in history.values())
    rewards = _rewards(record, scheduler)
    usage = scheduler.usage()
    plan = record.plan
    stages = list(dict.fromkeys(s.stage for s in specs))
    dag = {
        "template": plan.template.name if plan else None,
        "stages": [
            {"name": s.name, "capability": s.capability, "depends_on": list(s.depends_on)}
            for s in (plan.template.stages if plan else ())
        ],
        "subtasks": [
            {
                "id": s.id,
                "stage": s.stage,
                "capability": s.capability_id,
                "depends_on": s.depends_on,
            }
            for s in specs
        ],
    }
    task = {
        "task_id": record.task_id,
        "trace_id": record.trace_id,
        "state": str(record.machine.state),
        "template": plan.template.name if plan else None,
        "planner": record.request.planner,
        "query": record.request.query,
        "items": len(record.request.items),
        "dimensions": list(record.request.params.get("dimensions") or []),
        "stages": stages,
        "plan_json": json.dumps(dag, default=str),
        "subtasks": len(specs),
        "created_at": record.created_at,
        "ended_at": ended_at,
        "wall_s": wall_s,
        "subtask_time_s": busy_s,
        "critical_path_s": chain_s,
        "critical_path": chain,
        "critical_steps": int(critical_steps),
        "total_steps": total_steps,
        "failed_attempts": sum(
            a.status != "succeeded" for h in history.values() for a in h.attempts
        ),
        "parallelism": busy_s / wall_s if wall_s > 0 else None,
        "step_parallelism": total_steps / critical_steps if critical_steps else None,
        "reward": sum(r["score"] for r in rewards) / len(rewards) if rewards else None,
        "rewards": rewards,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost": usage.cost,
        "owner": record.owner,
        "warnings": len(record.warnings),
        "error_code": str(record.error.code) if record.error else None,
        "rollout_version": ROLLOUT_VERSION,
    }
    return rows, task


def _parquet(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd")
    data: bytes = sink.getvalue().to_pybytes()
    return data


def write_rollouts(results: ResultStore, batch: Sequence[tuple[str, Rows]]) -> str:
    """Write the rollouts of `batch` (task id, `rollout_rows(...)`) as one file a table.

    Atomically, file by file, the task rows last (a reader that finds a task row finds
    its attempts too). Returns the batch's name (`{name}.parquet` in both folders).
    """
    if not batch:
        raise ValueError("an empty batch of rollouts")
    name = f"{time.time_ns() // 1_000_000:013d}-{batch[0][0]}"
    attempts, tasks = _tables([rows for _, rows in batch])
    results.put_bytes(f"rollouts/attempts/{name}.parquet", _parquet(attempts))
    results.put_bytes(f"rollouts/tasks/{name}.parquet", _parquet(tasks))
    return name


def enabled() -> bool:
    """Whether the orchestrator writes rollouts (`SWARM_RAY_ROLLOUTS=0` turns them off)."""
    return os.environ.get("SWARM_RAY_ROLLOUTS", "1").lower() not in ("0", "false", "off")


def _folders(root: str, table: str) -> list[tuple[str, Any, str]]:
    """`rollouts/{table}` folders found at or under `root` (a results root or a state dir).

    Each as its URI or path for Ray Data, its filesystem and its path on that filesystem.
    """
    remote = "://" in root
    fs, base = (
        pafs.FileSystem.from_uri(root)
        if remote
        else (pafs.LocalFileSystem(), str(Path(root).expanduser().resolve()))
    )
    base = base.rstrip("/")
    for candidate in (
        f"{base}/{table}",
        f"{base}/rollouts/{table}",
        f"{base}/results/rollouts/{table}",
    ):
        if candidate.rsplit("/", 2)[-2] != "rollouts":
            continue
        if fs.get_file_info(candidate).type == pafs.FileType.Directory:
            name = f"{root.split('://', 1)[0]}://{candidate}" if remote else candidate
            return [(name, fs, candidate)]
    return []


def rollouts(
    uri: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    table: Literal["tasks", "attempts"] = "tasks",
) -> Any:
    """Every run's rollout under one or more roots, as one `ray.data.Dataset`.

    Up to `SMALL_BYTES` of files are read here and handed over whole; more are read by
    Ray Data's own tasks. Files written before a column was added read it as nulls.

    Args:
        uri: A result store root (`SWARM_RAY_RESULTS_URI`, a local path or any
            `pyarrow.fs` URI), a state directory (its `results/`), a `rollouts` folder,
            or a list of these (runs left by several jobs).
        table: `tasks` (one row per task: plan, rewards, critical steps, parallelism)
            or `attempts` (one row per sub-task attempt).

    Raises:
        InvalidSpecError: `table` is neither, or no rollout is found under `uri`.
    """
    import ray.data

    if table not in ("tasks", "attempts"):
        raise InvalidSpecError(f"`table` must be 'tasks' or 'attempts', not {table!r}")
    roots = [uri] if isinstance(uri, str | os.PathLike) else list(uri)
    folders = [folder for root in roots for folder in _folders(os.fspath(root), table)]
    if not folders:
        raise InvalidSpecError(
            f"no rollouts (`rollouts/{table}/*.parquet`) under {[os.fspath(r) for r in roots]!r}"
        )
    table_read = _read_small([(fs, path) for _, fs, path in folders])
    if table_read is not None:
        return ray.data.from_arrow(table_read)
    return ray.data.read_parquet([name for name, _, _ in folders], file_extensions=["parquet"])


SMALL_BYTES = 64 * 2**20
"""Rollouts up to this size in all are read in the calling process and handed to Ray Data
whole (`ray.data.from_arrow`); larger ones are read by Ray Data's tasks. On a local
cluster here `read_parquet` took 10-19 s for one small file (listing and reading are
tasks of their own), where reading it in process took 0.1 s."""


def _read_small(folders: list[tuple[Any, str]]) -> pa.Table | None:
    """The Parquet files of `folders` as one table, if they hold `SMALL_BYTES` at most.

    Each folder comes as its filesystem and its path on it (found once, by `_folders`).
    Files written by older versions may lack newer columns: those read as nulls.
    """
    found: list[tuple[Any, str]] = []
    total = 0
    for fs, path in folders:
        for info in fs.get_file_info(pafs.FileSelector(path)):
            if info.type == pafs.FileType.File and info.path.endswith(".parquet"):
                found.append((fs, info.path))
                total += info.size or 0
                if total > SMALL_BYTES:
                    return None
    if not found:
        return None
    tables = [pq.read_table(path, filesystem=fs) for fs, path in sorted(found, key=lambda f: f[1])]
    return pa.concat_tables(tables, promote_options="permissive")


BATCH_S = 1.0
"""While tasks keep ending, rollouts are written at most once in this many seconds.

A Parquet file has a fixed cost (schema, footer, a store write): at 0.25 s, writing
four pairs a second was about a tenth of the orchestrator's CPU under a busy gateway
(py-spy, `bench/gateway.py`); a second of ended tasks is what a crash can lose."""


class RolloutWriter:
    """Writes ended tasks' rollouts in batches, on a thread of its own (see the docstring).

    `add` is called on the event loop; a lone task is written at once, and tasks that end
    while a write runs, or within `interval_s` of its start, go into the next write
    together. One writer thread: writes never pile up, nor take the default executor's
    threads the orchestrator's intake runs on.
    """

    def __init__(self, results: ResultStore, interval_s: float = BATCH_S) -> None:
        self.results = results
        self.interval_s = interval_s
        self._pending: list[tuple[str, Rows]] = []
        self._busy = False  # a write is scheduled or running
        self._started = -math.inf  # event-loop time the last write started
        self._idle: asyncio.Event | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollouts")

    def add(self, task_id: str, rows: Rows) -> None:
        """Queue one task's rollout (on the event loop)."""
        self._pending.append((task_id, rows))
        if not self._busy:
            self._schedule()

    def record(self, driver: TaskDriver) -> None:
        """An observer of task ends: build the ended task's rollout and queue it.

        The rows are built here, on the event loop, while nothing else touches the
        scheduler; Arrow and Parquet encoding and the store write run on the writer's
        thread, once per batch. A failure is logged, never raised.
        """
        if not enabled() or driver.scheduler is None:
            return
        try:
            rows = rollout_rows(driver.record, driver.scheduler, self.results)
        except Exception:
            log.exception("could not build the rollout of task `%s`", driver.task_id)
            return
        self.add(driver.task_id, rows)

    async def drain(self) -> None:
        """Wait until every rollout added so far is written (or failed and logged)."""
        while self._busy:
            assert self._idle is not None
            await self._idle.wait()

    def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        self._busy = True
        if self._idle is None:
            self._idle = asyncio.Event()
        self._idle.clear()
        loop.call_later(max(0.0, self._started + self.interval_s - loop.time()), self._write)

    def _write(self) -> None:
        loop = asyncio.get_running_loop()
        batch, self._pending = self._pending, []
        self._started = loop.time()
        future = loop.run_in_executor(self._thread, _write_logged, self.results, batch)
        future.add_done_callback(self._written)

    def _written(self, _future: asyncio.Future[None]) -> None:
        if self._pending:
            self._schedule()
            return
        self._busy = False
        assert self._idle is not None
        self._idle.set()


def _write_logged(results: ResultStore, batch: list[tuple[str, tuple[pa.Table, pa.Table]]]) -> None:
    try:
        write_rollouts(results, batch)
    except Exception:  # a rollout is a by-product: losing one must not hurt the task
        ids = ", ".join(f"`{task_id}`" for task_id, _ in batch)
        log.exception("could not write the rollouts of tasks %s under %r", ids, results)
