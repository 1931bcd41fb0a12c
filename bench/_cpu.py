"""CPU seconds of this machine's processes, by role, read from /proc (benchmarks only).

A role is a Ray process title prefix (`ray::Orchestrator`, `ray::SubAgent`, ...); this
process is `driver`; with `rest`, every other process is summed under that name (raylet,
GCS, dashboard, Serve's controller, the kernel's threads). Empty where there is no /proc.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def cpu_by_role(roles: Sequence[str], *, rest: str | None = None) -> dict[str, float]:
    """CPU seconds so far per role, summed over the processes alive now."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    found: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else []):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = "driver" if int(pid) == os.getpid() else None
        role = role or next((r for r in roles if command.startswith(f"ray::{r}")), rest)
        if role is not None:
            found[role] = found.get(role, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return found


def spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per role between two readings, largest first (processes that ended
    in between are not counted)."""
    used = {role: after[role] - before.get(role, 0.0) for role in after}
    return dict(sorted(((r, s) for r, s in used.items() if s > 0.01), key=lambda rs: -rs[1]))


def peak_rss_by_role(roles: Sequence[str]) -> dict[str, float]:
    """The largest peak resident memory (VmHWM, MiB) of any live process of each role.

    A process's peak covers its whole life, so a pooled worker's figure is the most it
    ever held, over every task it ran. Empty where there is no /proc.
    """
    found: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc") if os.path.isdir("/proc") else []):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        role = next((r for r in roles if command.startswith(f"ray::{r}")), None)
        if role is None and int(pid) == os.getpid():
            role = "driver"
        peak = next((line.split()[1] for line in status.splitlines() if line[:6] == "VmHWM:"), None)
        if role is not None and peak is not None:
            found[role] = max(found.get(role, 0.0), int(peak) / 1024)
    return found
