"""Limited attempts (a tenant's upload): a fork of a warm zygote against a fresh interpreter.

An HTTP tenant's PDF is parsed, extracted, embedded and indexed in limited child processes
(`swarm_ray.runtime._rlimits`), one per attempt. Each child was a fresh interpreter that
imported swarm_ray and the workload before it could start; it is now forked from a zygote
of the agent's that imported them once (`swarm_ray.runtime._zygote`).

Side by side in one run, on generated brochures parsed by the real `document.parsing.pdf`
capability under its declared limits (as every tenant's upload is):

- **fork**: `run_limited`, the agent's own path: the first attempt starts the zygote (and
  pays the imports once), the others fork it;
- **fresh**: what a fresh interpreter paid per attempt before any work: starting Python
  and importing what the old child imported (`swarm_ray.runtime._agent`, the capability's
  module), plus the same attempt's own time run in process.

    python bench/limits.py [--attempts 20]
    python bench/limits.py --quick      # CI: 5 attempts

Prints the median time per attempt of each and their ratio (goal: a warm fork at least
10x quicker than a fresh interpreter).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _quick import need

from swarm_ray.core.model._subtask import SubTask
from swarm_ray.documents import documents_catalog
from swarm_ray.runtime._agent import run_subtask
from swarm_ray.runtime._rlimits import run_limited
from swarm_ray.testing.sample_documents import generate_brochures

GOAL = 10.0
"""A warm fork at least this many times quicker than a fresh interpreter, per attempt."""


def _subtask(capability: str, path: Path, n: int) -> SubTask:
    return SubTask(
        task_id="bench-limits",
        subtask_id=f"parse[{n}]",
        capability_id=capability,
        attempt=1,
        input={"path": str(path)},
        watermark="bench",
        trace_id="bench",
        timeout_s=120,
        queued_at=time.time(),
        owner="bench-tenant",  # an HTTP caller's: the declared limits apply
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=20, help="attempts of each kind")
    parser.add_argument("--quick", action="store_true", help="CI: 5 attempts")
    args = parser.parse_args()
    if args.quick:
        args.attempts = 5
    spec = next(s for s in documents_catalog().capabilities if s.id == "document.parsing.pdf")
    need(spec.resources.max_memory_bytes, "the parse capability's declared memory limit")
    module = (spec.entrypoint or "").partition(":")[0]
    with tempfile.TemporaryDirectory() as tmp:
        pdfs = sorted(generate_brochures(tmp, n=min(args.attempts, 10)).pdf_paths)
        need(pdfs, "generated brochures")
        forked: list[float] = []
        in_process: list[float] = []
        fresh: list[float] = []
        for n in range(args.attempts):
            subtask = _subtask(spec.id, Path(pdfs[n % len(pdfs)]), n)
            started = time.perf_counter()
            result = run_limited(spec, subtask, agent="bench")
            forked.append(time.perf_counter() - started)
            if result.error is not None:
                need(None, f"a limited parse ({result.error.message})")
            started = time.perf_counter()
            run_subtask(spec, subtask, agent="bench")
            in_process.append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", f"import swarm_ray.runtime._agent, {module}"],
                check=True,
            )
            fresh.append(time.perf_counter() - started + in_process[-1])
    warm = statistics.median(forked[1:]) if len(forked) > 1 else forked[0]
    old = statistics.median(fresh)
    ms = 1000
    print(f"{args.attempts} limited parses of generated brochures (document.parsing.pdf)")
    first = forked[0] * ms
    print(f"  fork of a zygote: first {first:.0f} ms (starts it), then median {warm * ms:.1f} ms")
    print(f"  the attempt in process: median {statistics.median(in_process) * ms:.1f} ms")
    print(f"  fresh interpreter (start-up and imports, plus the attempt): median {old * ms:.0f} ms")
    ratio = old / warm
    verdict = "met" if ratio >= GOAL else "not met"
    print(f"fresh / warm fork: {ratio:.1f}x (goal >= {GOAL:g}x: {verdict})")


if __name__ == "__main__":
    main()
