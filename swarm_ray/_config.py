"""Configuration read from the environment, with defaults that need nothing installed.

| variable | default | meaning |
| --- | --- | --- |
| `SWARM_RAY_STATE_DIR` | `~/.swarm-ray` | state database, result store, audit logs, keys |
| `SWARM_RAY_STATE_URL` | SQLite in the state dir | `redis://host:port/db` for clusters |
| `SWARM_RAY_RESULTS_URI` | `results/` in the state dir | any `pyarrow.fs` URI (`s3://...`) |
| `SWARM_RAY_WATERMARK_KEY` | (unset) | the watermark secret itself |
| `SWARM_RAY_AGENT_IDLE_S` | `60` | pooled agents idle this long are released |
| `SWARM_RAY_WATERMARK_KEY_FILE` | (unset) | a file holding the watermark secret |
"""

from __future__ import annotations

import os
from pathlib import Path


def state_dir() -> Path:
    """The directory holding swarm-ray's state (created on first use by whoever writes)."""
    configured = os.environ.get("SWARM_RAY_STATE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".swarm-ray"
