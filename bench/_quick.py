"""What the benchmarks share for `--quick` (`make bench-quick`, run by CI).

A quick run is small, not fake: it runs the same path as a full one (Ray, Serve, the CLI
where the bench uses it) on less work. Goals are printed, never asserted, since timings
on a shared machine are noisy; a figure that cannot be produced at all (no sample, no
/proc reading, a run that did not complete) ends the run with a non-zero exit and a line
saying which figure, so CI fails where a bench has rotted.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def need(value: T | None, what: str) -> T:
    """`value`, or exit non-zero naming the figure when it is missing or empty."""
    if value is None or (hasattr(value, "__len__") and len(value) == 0):  # type: ignore[arg-type]
        script = Path(sys.argv[0]).name
        print(f"{script}: FAILED: cannot produce {what}", file=sys.stderr, flush=True)
        raise SystemExit(1)
    return value


def watchdog(after_s: float, report: Callable[[], str]) -> None:
    """Print `report()` once, `after_s` seconds from now, if the bench is still running.

    For what a stack cannot show: CI stops a hung quick bench with SIGABRT (`make
    bench-quick`), and Python then prints each thread's stack, but not what the cluster
    held. Call it with the limit's margin, before the step that may hang.
    """

    def run() -> None:
        time.sleep(after_s)
        try:
            text = report()
        except Exception as exc:  # the report is a diagnosis: it must not end the bench
            text = f"(the report failed: {exc!r})"
        script = Path(sys.argv[0]).name
        print(f"{script}: still running after {after_s:.0f} s: {text}", file=sys.stderr, flush=True)

    threading.Thread(target=run, name="bench-watchdog", daemon=True).start()
