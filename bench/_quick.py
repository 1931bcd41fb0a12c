"""What the benchmarks share for `--quick` (`make bench-quick`, run by CI).

A quick run is small, not fake: it runs the same path as a full one (Ray, Serve, the CLI
where the bench uses it) on less work. Goals are printed, never asserted, since timings
on a shared machine are noisy; a figure that cannot be produced at all (no sample, no
/proc reading, a run that did not complete) ends the run with a non-zero exit and a line
saying which figure, so CI fails where a bench has rotted.
"""

from __future__ import annotations

import sys
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
