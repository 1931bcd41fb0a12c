"""Orchestrator capacity, measured for N = 1, 2 and 4 shards, and what a rate needs.

One orchestrator (N = 1) is measured in depth (parts 1 to 4 below); then part 5 runs N
shards (`SWARM_RAY_ORCHESTRATORS=N`, issue 44) for each N of `--shards` in the same run
and measures their total settlements a second and each shard's CPU per settlement and
busy fraction. On 2 cores the total cannot grow much; the projection of how many shards
a rate needs is arithmetic on each shard's measured cost (a shard per 2 cores), assuming
shards add up linearly until the state store saturates.

Run: python bench/scale.py [--n 2000] [--http 600] [--open 400]
     python bench/scale.py --quick      # CI: well under a minute of measuring

Same run, one local cluster (4 logical CPUs on this machine's cores), warm before the
clock starts, one orchestrator at a time (the SQLite one for parts 1 to 3, then it is
killed, its agents with it, and the Redis one runs part 1):

1. settlements a second: one task of `--n` no-op sub-tasks (`noop_fanout`), then one of
   `--n` sub-tasks of 2 KB in and 2 KB out (`echo_flat`, validated models), each once per
   state store: SQLite (the default, a file) and Redis (a `redis-server` started here,
   when one is installed). For each: the orchestrator actor's own CPU per settlement and
   its busy fraction (its CPU over the wall time, read from /proc for its pid), and store
   writes per settlement (SQLite: rows appended to the task log; Redis: the store's
   atomic writes, `EVALSHA` calls, from `INFO commandstats`). Beside them, a bare Ray
   task's time (`bench/fanout.py`'s), the reference of issue 44's CPU goal;
2. HTTP tasks a second through the gateway (`bench/gateway.py`'s set-up: Serve on a free
   port, one principal per client), `--clients` clients each sending its next task when
   the last is answered, until every task has finished; the orchestrator's CPU per task;
3. memory per open task: the orchestrator's resident memory (VmRSS) before and after
   `--open` tasks are submitted that stay open (each waits on a sleeping sub-task);
4. the stores' own ceilings for one writer: 2 KB log appends a second from this process
   on one connection, straight into a SQLite file (32 to a commit) and into the Redis
   server (each append its own round trip, as the orchestrator's are). A shard is one
   such writer; a Redis server serves many at once, so its own limit is higher. Beside
   them, the ceiling of the one place every shard shares (`_ledger`), from two threads
   with a ledger each, as two shards: admissions a second (a seat taken and given back,
   what each principal's task costs it) and spend lines a second (a task's line set and
   the day's sum read, what each result of a task under a daily budget costs it);

5. shards: for each N of `--shards`, a fresh set of N shards (SQLite, one store part
   each), warm; N tasks of `--n` no-op sub-tasks at once, one a shard; total
   settlements a second, and each shard's CPU per settlement and busy fraction;
6. a killed shard: two shards each settle a task of 20 x `--n` no-op sub-tasks, once
   as they are and once with shard 1 killed (Ray restarts it) a quarter of the way in;
   shard 0's settlements a second (its task's own start to end) in the second run
   against the first, and how long shard 1 took to answer again (a status call that
   rides out the restart);

then how many shards, Redis servers and nodes a rate needs: `--concurrent` tasks (10,000)
each settling `--task-subtasks` sub-tasks over `--task-minutes`, and `--per-hour`
sub-tasks an hour (a million).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from contextlib import closing, nullcontext
from pathlib import Path
from typing import Any

import ray
from _latency import closed_round, start_gateway
from _quick import need
from fanout import time_bare

import swarm_ray
from swarm_ray.runtime._client import NAMESPACE
from swarm_ray.runtime._shards import shard_name, shard_of
from swarm_ray.runtime._store import open_state_store

_TICK = os.sysconf("SC_CLK_TCK")
_REDIS_WRITES = ("cmdstat_evalsha", "cmdstat_eval")
"""The Redis store writes through two Lua scripts (append, put_task): a call is a write."""


def _pid(name: str) -> int:
    """The process id of the orchestrator actor named `name`."""
    actor = ray.get_actor(name, namespace=NAMESPACE)
    return int(ray.get(actor.__ray_call__.remote(lambda _self: os.getpid())))


def _cpu(pid: int) -> float:
    """CPU seconds the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line[:6] == "VmRSS:")) / 1024


class Store:
    """Counts the writes of one orchestrator's state store."""

    def __init__(self, url: str | None, state: Path) -> None:
        self.url, self.state = url, state
        self.name = "redis" if url else "sqlite"

    def writes(self) -> int:
        if self.url is None:
            path = f"file:{self.state / 'state.db'}?mode=ro"
            with closing(sqlite3.connect(path, uri=True)) as conn:
                return int(conn.execute("SELECT count(*) FROM log").fetchone()[0])
        import redis

        with closing(redis.Redis.from_url(self.url)) as client:
            stats = client.info("commandstats")
        return sum(int(stats.get(k, {}).get("calls", 0)) for k in _REDIS_WRITES)


def settle(
    client: swarm_ray.SwarmClient, pid: int, store: Store, template: str, items: tuple[Any, ...]
) -> dict[str, float]:
    """One task of `items` sub-tasks: settlements/s, CPU and store writes per settlement."""
    writes, cpu, started = store.writes(), _cpu(pid), time.perf_counter()
    record = client.run(template=template, items=items)
    wall = time.perf_counter() - started
    used, written = _cpu(pid) - cpu, store.writes() - writes
    assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
    n = len(items)
    return {"rate": n / wall, "cpu_ms": 1000 * used / n, "busy": used / wall, "writes": written / n}


def store_ceiling(url: str | None, folder: Path, seconds: float) -> float:
    """2 KB log appends a second into a bare store over 64 tasks, in batches of 32 (SQLite
    commits a batch at once; Redis writes each append by itself, as for the orchestrator)."""
    store = open_state_store(url or f"sqlite:///{folder / 'ceiling.db'}")
    payload = '"' + "x" * 2046 + '"'
    done, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        with store.batch():
            for i in range(32):
                store.append(f"ceiling-{(done + i) % 64}", "result", payload)
        done += 32
    return done / (time.perf_counter() - started)


def ledger_ceiling(url: str | None, folder: Path, seconds: float, shards: int = 2) -> Any:
    """Part 4, the shared ledger: admissions and spend lines a second from `shards`
    threads, each with a ledger of its own as each shard has (see the module docstring)."""
    import threading

    from swarm_ray.core.model._subtask import TokenUsage
    from swarm_ray.runtime._ledger import open_ledger

    home = folder / f"ledger-{'redis' if url else 'sqlite'}"
    home.mkdir(parents=True, exist_ok=True)
    ledgers = [open_ledger(url, home, k) for k in range(shards)]
    usage = TokenUsage(prompt_tokens=100, completion_tokens=20, calls=1, cost=0.001)

    def seat(ledger: Any, k: int, n: int) -> None:
        ledger.take(f"p{n % 8}", f"t{k}-{n}", 1 << 30)
        ledger.give_back(f"t{k}-{n}")

    def line(ledger: Any, k: int, n: int) -> None:
        ledger.post_spend(f"p{n % 8}", "2026-12-06", f"t{k}-{n % 64}", usage)
        ledger.spent(f"p{n % 8}", "2026-12-06")

    found = {}
    for kind, step in (("admissions", seat), ("spend lines", line)):
        counts: list[int] = []

        def run(k: int, step: Any = step, counts: list[int] = counts) -> None:
            n, end = 0, time.perf_counter() + seconds
            while time.perf_counter() < end:
                step(ledgers[k], k, n)
                n += 1
            counts.append(n)

        threads = [threading.Thread(target=run, args=(k,)) for k in range(shards)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        found[kind] = sum(counts) / seconds
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="sub-tasks per settlement run")
    parser.add_argument("--repeat", type=int, default=2, help="settlement runs per kind")
    parser.add_argument("--http", type=int, default=600, help="HTTP tasks through the gateway")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--open", type=int, default=400, help="open tasks for memory")
    parser.add_argument("--store-s", type=float, default=3.0, help="each store's ceiling run")
    parser.add_argument("--concurrent", type=int, default=10_000)
    parser.add_argument("--task-subtasks", type=int, nargs="+", default=[300, 4300])
    parser.add_argument("--task-minutes", type=float, default=30.0)
    parser.add_argument("--per-hour", type=float, default=1_000_000)
    parser.add_argument("--cores-per-node", type=int, default=16)
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--quick", action="store_true", help="CI: small runs, once each")
    args = parser.parse_args()
    if args.quick:
        args.n, args.repeat, args.http, args.open, args.store_s = 300, 1, 100, 100, 0.5

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests.conftest_redis`
    from tests.conftest_redis import REDIS_SERVER, running_redis_server

    os.environ.setdefault("SWARM_RAY_AUDIT_DEBUG_SAMPLE", "0.01")
    env = {"SWARM_RAY_LIMIT_MAX_OPEN_TASKS": str(10 * (args.open + args.http))}
    folder = Path(tempfile.mkdtemp(prefix="swarm-bench-scale-"))
    started = time.perf_counter()
    gateway = start_gateway(
        "bench-scale", [f"client{i}" for i in range(args.clients)], num_cpus=4, env=env
    )
    print(f"cold start (Ray, orchestrator, Serve, gateway): {time.perf_counter() - started:.1f} s")
    if shutil.which(REDIS_SERVER) is None:
        print(f"no `{REDIS_SERVER}` on PATH: the Redis rows are left out")
    redis = running_redis_server(folder) if shutil.which(REDIS_SERVER) else nullcontext(None)
    with redis as redis_url:
        found = measure(args, gateway)
        gateway.swarm.shutdown()  # its agents go with it: the Redis side gets the cores
        found["shards"] = [shard_scaling(args, n, folder / f"shards-{n}", env) for n in args.shards]
        found["kill"] = shard_kill(args, folder / "shard-kill", env)
        stores = [Store(None, gateway.state)]
        if redis_url is not None:
            client = swarm_ray.connect(
                catalogs=["swarm_ray.testing:testing_catalog"],
                state_url=redis_url,
                state_dir=folder / "redis-side",
                name="bench-scale-redis",
                env=env,
            )
            stores.append(Store(redis_url, folder))
            found.update(settlements(args, client, "bench-scale-redis", stores[-1]))
            client.shutdown()
        ceilings = {s.name: store_ceiling(s.url, folder, args.store_s) for s in stores}
        found["ledgers"] = {s.name: ledger_ceiling(s.url, folder, args.store_s) for s in stores}
    report(args, found, ceilings)
    ray.shutdown()


def settlements(
    args: argparse.Namespace, client: swarm_ray.SwarmClient, name: str, store: Store
) -> dict[Any, Any]:
    """Part 1 for one orchestrator: the best of `--repeat` runs of each kind, warm."""
    found: dict[Any, Any] = {}
    pid = _pid(name)
    noop = tuple(range(args.n))
    payload = tuple(f"{i:06d}" + "x" * 2042 for i in range(args.n))  # 2 KB each way
    for kind, template, items in (("noop", "noop_fanout", noop), ("2kb", "echo_flat", payload)):
        settle(client, pid, store, template, items)  # warm: the agent pools at full size
        runs = [settle(client, pid, store, template, items) for _ in range(args.repeat)]
        found[store.name, kind] = max(runs, key=lambda r: r["rate"])
    return found


def shard_scaling(args: argparse.Namespace, n: int, state: Path, env: dict[str, str]) -> Any:
    """Part 5 for N = `n` shards: `n` tasks of `--n` no-op sub-tasks at once, one a shard."""
    name = f"bench-shards-{n}"
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=state,
        name=name,
        orchestrators=n,
        env=env,
    )
    pids = [_pid(shard_name(name, k)) for k in range(n)]
    items = tuple(range(args.n))

    def run() -> tuple[float, list[float]]:
        cpu, started = [_cpu(p) for p in pids], time.perf_counter()
        handles = [client.start(template="noop_fanout", items=items) for _ in range(n)]
        need({shard_of(h.id) for h in handles} == set(range(n)) or None, "one task a shard")
        for handle in handles:
            record = handle.wait()
            assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
        wall = time.perf_counter() - started
        return wall, [_cpu(p) - c for p, c in zip(pids, cpu, strict=True)]

    run()  # warm: every shard's agent pool at full size
    wall, used = min((run() for _ in range(args.repeat)), key=lambda r: r[0])
    client.shutdown()
    return {
        "n": n,
        "rate": n * args.n / wall,
        "cpu_ms": [1000 * u / args.n for u in used],
        "busy": [u / wall for u in used],
    }


def shard_kill(args: argparse.Namespace, state: Path, env: dict[str, str]) -> dict[str, float]:
    """Part 6: shard 0's rate while shard 1 is killed, and shard 1's time to answer."""
    name = "bench-shard-kill"
    client = swarm_ray.connect(
        catalogs=["swarm_ray.testing:testing_catalog"],
        state_dir=state,
        name=name,
        orchestrators=2,
        env=env,
    )
    items = tuple(range(20 * args.n))

    def run(kill: bool) -> tuple[float, float]:
        handles = [client.start(template="noop_fanout", items=items) for _ in range(2)]
        need([shard_of(h.id) for h in handles] == [0, 1] or None, "one task a shard")
        answered = 0.0
        if kill:
            while (handles[1].status().progress or 0.0) < 0.25:
                time.sleep(0.02)
            killed = time.perf_counter()
            ray.kill(client.aio.shards[1], no_restart=False)
            handles[1].status()  # rides out the restart: answers once shard 1 is back
            answered = time.perf_counter() - killed
        record = handles[0].wait()
        assert record.machine.state is swarm_ray.TaskState.COMPLETED, record.error
        ended = handles[0].status()  # its own start and end, whatever shard 1 did
        wall = ended.updated_at - ended.created_at
        last = handles[1].wait()
        assert last.machine.state is swarm_ray.TaskState.COMPLETED, last.error
        return len(items) / wall, answered

    run(False)  # warm
    calm, _ = run(False)
    hit, answered = run(True)
    client.shutdown()
    return {"calm": calm, "hit": hit, "answered_s": answered}


def measure(args: argparse.Namespace, gateway: Any) -> dict[Any, Any]:
    """Parts 1 to 3 on the gateway's orchestrator (SQLite); see the module docstring."""
    time_bare(args.n)  # enough idle workers for n
    found = {"bare_ms": min(time_bare(args.n) for _ in range(args.repeat)) / args.n * 1000}
    found.update(settlements(args, gateway.swarm, "bench-scale", Store(None, gateway.state)))
    # HTTP tasks through the gateway: closed loop, until every task is done.
    swarm, pid = gateway.swarm, _pid("bench-scale")
    headers = [{"Authorization": f"Bearer {k}"} for k in gateway.keys.values()]
    asyncio.run(closed_round(gateway.url, headers, args.clients))  # warm
    while swarm.info()["open_tasks"]:
        time.sleep(0.05)
    cpu, started = _cpu(pid), time.perf_counter()
    answered, refused = asyncio.run(closed_round(gateway.url, headers, args.http))
    while swarm.info()["open_tasks"]:
        time.sleep(0.05)
    wall, used = time.perf_counter() - started, _cpu(pid) - cpu
    need(answered, "HTTP tasks answered 202 (every one was refused)")
    found["http"] = {
        "rate": len(answered) / wall,
        "cpu_ms": 1000 * used / len(answered),
        "busy": used / wall,
        "refused": len(refused),
    }
    # Memory per open task: tasks that wait on a sleeping sub-task stay open.
    time.sleep(0.5)
    rss = _rss_mib(pid)
    for i in range(args.open):
        swarm.submit(template="echo_fanout", items=(f"open{i}",), params={"delay_s": 600})
    need(swarm.info()["open_tasks"] >= args.open or None, f"{args.open} open tasks")
    time.sleep(0.5)
    found["open"] = {"rss0": rss, "rss1": _rss_mib(pid), "n": args.open}
    return found


def report(args: argparse.Namespace, found: dict[str, Any], ceilings: dict[str, float]) -> None:
    bare = found["bare_ms"]
    print(f"\none orchestrator (N = 1, measured), {args.n} sub-tasks a run, best of {args.repeat}")
    print(
        f"{'store':<7} {'sub-task':<9} {'settled/s':>10} {'CPU ms/settle':>14} {'busy':>5} "
        f"{'writes/settle':>14}"
    )
    for (store, kind), r in ((k, v) for k, v in found.items() if isinstance(k, tuple)):
        print(
            f"{store:<7} {kind:<9} {r['rate']:10,.0f} {r['cpu_ms']:14.3f} {r['busy']:5.2f} "
            f"{r['writes']:14.2f}"
        )
    sqlite_2kb = found["sqlite", "2kb"]
    print(
        f"orchestrator CPU per 2 KB sub-task (SQLite) {sqlite_2kb['cpu_ms']:.3f} ms = "
        f"{sqlite_2kb['cpu_ms'] / bare:.2f} x a bare Ray task's {bare:.3f} ms (goal <= 0.5)"
    )
    http = found["http"]
    print(
        f"HTTP tasks through the gateway ({args.clients} clients, one no-op sub-task each, "
        f"until all finished): {http['rate']:.0f} tasks/s, orchestrator CPU "
        f"{http['cpu_ms']:.2f} ms a task, busy {http['busy']:.2f}"
        + (f" ({http['refused']} refused with 422)" if http["refused"] else "")
    )
    opened = found["open"]
    per_task_kib = 1024 * (opened["rss1"] - opened["rss0"]) / opened["n"]
    print(
        f"memory per open task: orchestrator RSS {opened['rss0']:.0f} -> {opened['rss1']:.0f} "
        f"MiB over {opened['n']} open tasks = {per_task_kib:.1f} KiB a task"
    )
    print(
        "store ceilings, one writer (2 KB appends/s from one process on one connection; SQLite "
        "32 to a commit; a Redis server takes more from many connections): "
        + ", ".join(f"{name} {rate:,.0f}" for name, rate in ceilings.items())
    )
    http_rate = found["http"]["rate"]
    for name, ledger in found["ledgers"].items():
        print(
            f"shared ledger on {name}, two shards' threads: {ledger['admissions']:,.0f} "
            f"admissions/s (a seat taken and given back: one a principal's task) = "
            f"{ledger['admissions'] / http_rate:.0f} x one shard's HTTP tasks/s; "
            f"{ledger['spend lines']:,.0f} spend lines/s (one a result, under a daily budget)"
        )
    report_shards(args, found["shards"])
    kill = found["kill"]
    print(
        f"a killed shard (2 shards, {20 * args.n} no-op sub-tasks each, shard 1 killed a "
        f"quarter of the way in): shard 0 settled {kill['hit']:,.0f}/s against "
        f"{kill['calm']:,.0f}/s undisturbed = {kill['hit'] / kill['calm']:.2f} (goal >= 0.80); "
        f"shard 1 answered again {kill['answered_s']:.1f} s after the kill (goal < 10 s)"
    )
    project(args, found, ceilings, per_task_kib)


def report_shards(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    """Part 5: total settlements/s for each N, each shard's cost, and against N = 1."""
    print(
        f"\nshards (measured here, SQLite, {args.n} no-op sub-tasks a shard, best of "
        f"{args.repeat}, {os.cpu_count()} cores for shards, agents and Ray together)"
    )
    print(f"{'N':>3} {'settled/s':>10} {'x N=1':>6} {'CPU ms/settle, each shard':>27} {'busy':>12}")
    one = runs[0]["rate"] if runs and runs[0]["n"] == 1 else None
    for run in runs:
        cost = " ".join(f"{c:.3f}" for c in run["cpu_ms"])
        busy = " ".join(f"{b:.2f}" for b in run["busy"])
        ratio = f"{run['rate'] / one:6.2f}" if one else f"{'':>6}"
        print(f"{run['n']:3d} {run['rate']:10,.0f} {ratio} {cost:>27} {busy:>12}")
        ceiling = sum(1000 / c for c in run["cpu_ms"] if c > 0)
        print(
            f"    on a core each: {ceiling:,.0f}/s (the sum of 1 / each shard's CPU a settlement)"
        )


def project(
    args: argparse.Namespace, found: dict[str, Any], ceilings: dict[str, float], task_kib: float
) -> None:
    """How many shards, stores and nodes a rate needs, from one shard's measured cost.

    A shard's ceiling is what its own CPU per settlement allows on a core of its own
    (1 / CPU per settlement); the settlement rate measured here, with the agents and
    Ray's daemons on the same 2 cores, is the floor. Shards are assumed to add up
    linearly until the store's writes reach its measured ceiling; each shard gets two
    cores (issue 44's "2N free cores"), so a node of `--cores-per-node` holds half as
    many shards.
    """
    per_node = max(1, args.cores_per_node // 2)
    print(
        "\nprojection (arithmetic on the N = 1 figures above, not a measurement; assumes "
        "shards scale linearly until the store saturates)"
    )
    stores = [name for name in ceilings if (name, "2kb") in found]
    for name in stores:
        shard = found[name, "2kb"]
        print(
            f"one shard on {name}, 2 KB sub-tasks: {shard['rate']:,.0f}/s measured here "
            f"(floor), {1000 / shard['cpu_ms']:,.0f}/s on a core of its own (1 / its CPU per "
            f"settlement); {shard['writes']:.2f} store writes a settlement; a shard per 2 "
            f"cores, {per_node} per {args.cores_per_node}-core node"
        )
    targets = [(f"{args.per_hour:,.0f} sub-tasks an hour", args.per_hour / 3600, 0)]
    for subtasks in args.task_subtasks:
        rate = args.concurrent * subtasks / (args.task_minutes * 60)
        targets.append(
            (
                f"{args.concurrent:,} concurrent tasks of {subtasks:,} sub-tasks over "
                f"{args.task_minutes:g} min",
                rate,
                args.concurrent,
            )
        )
    for what, rate, open_tasks in targets:
        print(f"  {what}: {rate:,.0f} settlements/s")
        for name in stores:
            shard = found[name, "2kb"]
            low = math.ceil(rate * shard["cpu_ms"] / 1000)
            high = math.ceil(rate / shard["rate"])
            writes = rate * shard["writes"]
            print(
                f"    {name}: {low} to {high} shard(s), {math.ceil(low / per_node)} to "
                f"{math.ceil(high / per_node)} node(s) of orchestrators; {writes:,.0f} store "
                f"writes/s = {writes / ceilings[name]:.2f} x one writer's ceiling"
            )
        if open_tasks:
            memory = open_tasks * task_kib / 1024
            print(f"    {memory:,.0f} MiB of open tasks in orchestrator memory, all shards")


if __name__ == "__main__":
    main()
