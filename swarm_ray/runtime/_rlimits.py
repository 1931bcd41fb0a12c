"""Hard limits for agents that run untrusted work: memory, CPU time, processes.

A capability whose `Resources` set `max_memory_bytes`, `max_cpu_s` or `max_processes`
runs each attempt in a child process of its pooled agent or Ray Data row, forked from a
zygote that imported the capability's modules once (`_zygote`), with
`resource.setrlimit` applied in that child only:

- `RLIMIT_AS`: the child's address space may grow by `max_memory_bytes` past what the
  interpreter and the capability's imports took at the fork; a runaway allocation gets a
  `MemoryError` (the attempt fails with `resource_limit`);
- `RLIMIT_CPU`: `max_cpu_s` seconds of CPU past start-up; then the kernel stops it
  (`SIGXCPU`, then `SIGKILL`);
- `RLIMIT_NPROC`: `max_processes` more processes (threads count too) for the child's
  user; a fork bomb's `fork` fails. Root ignores this limit, so a child of a root
  agent first becomes `nobody`.

The child leads its own process group and dies with its zygote, which dies with its
agent; when it ends, the whole group is killed, so nothing it started outlives the
attempt.
Only that attempt fails: the agent, its other sub-tasks and the rest of the swarm go on;
a failure names the files the attempt was reading (its input's `ReadPath` fields).
The document and video workloads declare limits by default for untrusted principals'
tasks (`declared_limits`): a PDF or decompression bomb in a tenant's upload fails its
own sub-task with `resource_limit`.
A fork from a warm zygote costs milliseconds (a zygote's first attempt of a capability
pays its imports, as a fresh interpreter did every time); limits are still for untrusted
work, not for every capability.
"""

from __future__ import annotations

import math
import os
import signal
import time
from typing import Any

from swarm_ray.core.guards._access import read_paths
from swarm_ray.core.model._capability import CapabilitySpec, Resources
from swarm_ray.core.model._errors import ErrorCode
from swarm_ray.core.model._subtask import SubTask, SubTaskResult
from swarm_ray.runtime._zygote import ZygoteLost, run_forked

__all__: list[str] = []

NOBODY = 65534
"""The user a root agent's limited children run as."""


def _tasks_of(uid: int) -> int:
    """Processes and threads whose real user is `uid` (what `RLIMIT_NPROC` counts)."""
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as status:
                real = next(int(line.split()[1]) for line in status if line.startswith("Uid:"))
            if real == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except (OSError, StopIteration, ValueError):
            continue
    return count


def _vm_size() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def apply_limits(resources: Resources) -> None:
    """Set this process's limits from `resources` (in the child, after its imports)."""
    import resource

    if resources.max_memory_bytes is not None:
        cap = _vm_size() + resources.max_memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    if resources.max_cpu_s is not None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        soft = math.ceil(used.ru_utime + used.ru_stime + resources.max_cpu_s)
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    if resources.max_processes is not None:
        uid = NOBODY if os.geteuid() == 0 else os.getuid()
        cap = _tasks_of(uid) + 1 + resources.max_processes
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))
        if os.geteuid() == 0:  # root ignores RLIMIT_NPROC: become nobody for the attempt
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)


def _naming_files(message: str, spec: CapabilitySpec, subtask: SubTask) -> str:
    """`message`, saying which files the attempt was reading.

    They are its input's `ReadPath` fields, nested ones too: a video's segment names its
    file under `job.path`, a first pass under `metadata.path`.
    """
    named = [p for p in read_paths(spec.input_model, subtask.input) if p not in message]
    if not named:
        return message
    return f"{message} (reading {', '.join(f'`{p}`' for p in named)})"


def _failed(
    spec: CapabilitySpec,
    subtask: SubTask,
    agent: str | None,
    started: float,
    message: str,
    code: ErrorCode = ErrorCode.RESOURCE_LIMIT,
) -> SubTaskResult:
    from swarm_ray.runtime._agent import error_result

    result = error_result(subtask, code, _naming_files(message, spec, subtask), agent)
    return result.model_copy(
        update={"timings": result.timings.model_copy(update={"started_at": started})}
    )


def run_limited(spec: CapabilitySpec, subtask: SubTask, *, agent: str | None) -> SubTaskResult:
    """Run one attempt in a limited child process; never raises."""
    started = time.time()
    limits = spec.resources
    modules = (spec.entrypoint.partition(":")[0],) if spec.entrypoint is not None else ()
    try:
        ended = run_forked(
            "swarm_ray.runtime._rlimits:attempt",
            (spec, subtask, agent),
            modules=("swarm_ray.runtime._agent", *modules),
            timeout_s=subtask.timeout_s * 0.95,
        )
    except ZygoteLost as exc:
        message = f"attempt of `{spec.id}` lost its limited process: {exc}"
        return _failed(spec, subtask, agent, started, message, ErrorCode.AGENT_UNAVAILABLE)
    if ended.code is None:
        message = (
            f"sub-task `{subtask.subtask_id}` ran past its {subtask.timeout_s} s deadline "
            "in its limited process"
        )
        return _failed(spec, subtask, agent, started, message, ErrorCode.TIMEOUT)
    if ended.code == 0 and ended.result:
        return SubTaskResult.model_validate_json(ended.result)
    code = ended.code
    if code in (-signal.SIGXCPU, -signal.SIGKILL) and limits.max_cpu_s is not None:
        why = f"used its {limits.max_cpu_s} s of CPU time and was stopped"
    elif code == -signal.SIGABRT and limits.max_memory_bytes is not None:
        # native code (pdfium, FFmpeg) aborts where Python would raise `MemoryError`
        why = (
            f"was aborted (SIGABRT) by native code, most likely an allocation past its "
            f"memory limit of {limits.max_memory_bytes} bytes"
        )
    elif code < 0:
        why = f"was killed by {signal.Signals(-code).name}"
    else:
        tail = ended.output.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        why = f"ended with status {code}: {tail[0][:300]}"
    return _failed(spec, subtask, agent, started, f"attempt of `{spec.id}` {why}")


def attempt(spec: CapabilitySpec, subtask: SubTask, agent: str | None, result_fd: int) -> None:
    """The forked child (`_zygote`): limit, run, write the result to `result_fd`, exit."""
    from swarm_ray.runtime._agent import run_subtask

    me = os.getpid()
    apply_limits(spec.resources)
    result = run_subtask(spec, subtask, agent=agent)
    if os.getpid() != me:  # a process the capability forked came back here: not ours
        os._exit(1)
    error = result.error
    forks = spec.resources.max_processes is not None
    if forks and error is not None and error.message.startswith("BlockingIOError"):
        # `fork` refused: EAGAIN at the process limit
        message = (
            f"attempt of `{spec.id}` hit its limit of {spec.resources.max_processes} "
            f"processes: {error.message}"
        )
        error = error.model_copy(update={"code": ErrorCode.RESOURCE_LIMIT, "message": message})
    if error is not None and error.code is ErrorCode.RESOURCE_LIMIT:
        # a limit met inside the attempt (a `MemoryError`): name the file that did it
        message = _naming_files(error.message, spec, subtask)
        result = result.model_copy(update={"error": error.model_copy(update={"message": message})})
    with os.fdopen(result_fd, "wb") as sink:
        sink.write(result.model_dump_json().encode())
    os._exit(0)


def declared_limits(kind: str, *, memory_bytes: int, cpu_s: float) -> dict[str, Any]:
    """The hard limits a workload that reads tenant files declares (`Resources` fields).

    `SWARM_RAY_{KIND}_MAX_MEMORY` (bytes) and `SWARM_RAY_{KIND}_MAX_CPU_S` override the
    defaults. They apply to untrusted principals' sub-tasks (files HTTP callers
    uploaded); `SWARM_RAY_{KIND}_LIMIT_ALL=1` applies them to every task, and
    `SWARM_RAY_{KIND}_MAX_MEMORY=0` to none.
    """
    memory = int(os.environ.get(f"SWARM_RAY_{kind}_MAX_MEMORY", memory_bytes))
    if memory <= 0:
        return {}
    cpu = float(os.environ.get(f"SWARM_RAY_{kind}_MAX_CPU_S", cpu_s))
    every = os.environ.get(f"SWARM_RAY_{kind}_LIMIT_ALL", "") == "1"
    return {"max_memory_bytes": memory, "max_cpu_s": cpu, "limits_untrusted_only": not every}


def limited(resources: Resources, subtask: SubTask | None = None) -> bool:
    """Whether an attempt (of `subtask`, if given) with `resources` runs limited."""
    if resources.limits_untrusted_only and (subtask is None or not subtask.untrusted):
        return False
    return any(
        v is not None
        for v in (resources.max_memory_bytes, resources.max_cpu_s, resources.max_processes)
    )
