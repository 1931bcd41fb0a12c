"""Configuration read from the environment, with defaults that need nothing installed.

| variable | default | meaning |
| --- | --- | --- |
| `SWARM_RAY_STATE_DIR` | `~/.swarm-ray` | state database, result store, audit logs, keys |
| `SWARM_RAY_STATE_URL` | SQLite in the state dir | `redis://host:port/db` for clusters |
| `SWARM_RAY_RESULTS_URI` | `results/` in the state dir | any `pyarrow.fs` URI (`s3://...`) |
| `SWARM_RAY_WATERMARK_KEY` | (unset) | the watermark secret itself |
| `SWARM_RAY_AGENT_IDLE_S` | `60` | pooled agents idle this long are released |
| `SWARM_RAY_ZYGOTE_IDLE_S` | `60` | idle zygotes (parents of limited attempts) close after this |
| `SWARM_RAY_PLACEMENT_S` | `600` | an agent or stage unplaced this long fails "no resources for" |
| `SWARM_RAY_AUTOSCALING` | `0` | `1`: an autoscaler adds nodes, so no request is refused at once |
| `SWARM_RAY_ORCHESTRATOR_RESOURCE` | (head node) | a resource the orchestrators' nodes declare |
| `SWARM_RAY_WATERMARK_KEY_FILE` | (unset) | a file holding the watermark secret |
| `SWARM_RAY_HEALTH_INTERVAL_S` | `10` | seconds between health checks of Serve capabilities |
| `SWARM_RAY_AUDIT` | `1` | `0` turns the audit trail (`audit/` in the state dir) off |
| `SWARM_RAY_AUDIT_DEBUG_SAMPLE` | `0.01` | share of traces whose DEBUG audit lines are kept |
| `SWARM_RAY_API_KEYS` | (unset) | gateway API keys, comma-separated |
| `SWARM_RAY_API_KEYS_FILE` | `api_keys` in the state dir | gateway API keys, one per line |
| `SWARM_RAY_KEEP_FINISHED` | `1000` | ended tasks held in memory (older ones reload) |
| `SWARM_RAY_GC_THRESHOLD` | `10000,10,10` | orchestrator's and gateway's `gc` thresholds |
| `SWARM_RAY_LLM_CONFIG` | (unset) | its `compute_prices` (the rest is `swarm_ray.llm`'s) |
"""

from __future__ import annotations

import gc
import os
import re
import secrets
from pathlib import Path

from swarm_ray.core.guards._watermark import WatermarkKey
from swarm_ray.core.model._errors import InvalidSpecError


def state_dir() -> Path:
    """The directory holding swarm-ray's state (created on first use by whoever writes)."""
    configured = os.environ.get("SWARM_RAY_STATE_DIR")
    return Path(configured).expanduser() if configured else Path.home() / ".swarm-ray"


def secure_state_dir(path: Path) -> None:
    """Create the state directory readable by its owner only, and keep new files so.

    The directory holds the task records, the watermark key, API keys, uploads and
    reports: mode 0700, and this process's umask 0077 so every file and folder it (and
    the agents it starts) creates afterwards is 0600 / 0700.
    """
    os.umask(0o077)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        path.chmod(0o700)


def tune_gc() -> None:
    """Collect garbage less often in a long-lived, allocation-heavy service process.

    Python's default (a young collection every 700 net allocations) spent about a seventh
    of the orchestrator's CPU at a few hundred tasks a second, and its full collections
    paused the event loop for 200 ms or more. `10000,10,10` cut the orchestrator's time in
    collections from 3.9 s to 1.0 s over 8,000 no-op tasks, with no full collection;
    `20000,20,20` saved a little more CPU but paused twice as long. Objects that exist
    now (modules, the catalog) are frozen out of every later collection.
    """
    configured = os.environ.get("SWARM_RAY_GC_THRESHOLD", "10000,10,10")
    if configured.strip() == "default":
        return
    try:
        young, middle, old = (int(part) for part in configured.split(","))
    except ValueError:
        raise ValueError(
            f"`SWARM_RAY_GC_THRESHOLD` must be three integers like `10000,10,10` or "
            f"`default`, got {configured!r}"
        ) from None
    gc.collect()
    gc.freeze()
    gc.set_threshold(young, middle, old)


def watermark_key(state: str | os.PathLike[str] | None = None) -> WatermarkKey:
    """The watermark key, from the first of these that is set.

    `SWARM_RAY_WATERMARK_KEY` (the secret), the file `SWARM_RAY_WATERMARK_KEY_FILE`
    names, or `watermark.key` under the state directory, created (0600) on first use.
    """
    if secret := os.environ.get("SWARM_RAY_WATERMARK_KEY"):
        return WatermarkKey(secret.encode())
    path = Path(os.environ.get("SWARM_RAY_WATERMARK_KEY_FILE") or "")
    if not os.environ.get("SWARM_RAY_WATERMARK_KEY_FILE"):
        path = Path(state or state_dir()) / "watermark.key"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(32))
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise InvalidSpecError(f"cannot read watermark key file `{path}`: {exc.strerror}") from None
    return WatermarkKey(secret.encode())


def compute_prices() -> dict[str, float]:
    """Capability id -> price per second of run time, from `SWARM_RAY_LLM_CONFIG`.

    The operator's settings file (`swarm_ray.llm._settings` reads the rest of it, and
    checks this key too); `{}` when unset or when the file names no `compute_prices`.

    Raises:
        InvalidSpecError: the file cannot be read, or its prices are not numbers >= 0.
    """
    path = os.environ.get("SWARM_RAY_LLM_CONFIG")
    if not path:
        return {}
    import yaml

    try:
        data = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8")) or {}
        prices = (data.get("compute_prices") or {}) if isinstance(data, dict) else {}
        found = {str(cid): float(price) for cid, price in dict(prices).items()}
    except (OSError, ValueError, TypeError, yaml.YAMLError) as exc:
        raise InvalidSpecError(
            f"`compute_prices` in `SWARM_RAY_LLM_CONFIG` ({path}): {exc}"
        ) from None
    negative = [cid for cid, price in found.items() if price < 0]
    if negative:
        raise InvalidSpecError(f"`compute_prices` of {negative[0]!r} is negative")
    return found


ORCHESTRATOR_RESOURCE = "SWARM_RAY_ORCHESTRATOR_RESOURCE"
_RESOURCE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")


def orchestrator_resource() -> str | None:
    """The custom resource whose nodes hold the orchestrator shards, if the operator names one.

    Unset, they live on the head node. Named, they go to nodes that declare it (`ray start
    --resources '{"orchestrators": 8}'`, or a KubeRay worker group's `rayStartParams`),
    each taking 0.001 of it.

    Raises:
        InvalidSpecError: not a resource name.
    """
    name = os.environ.get(ORCHESTRATOR_RESOURCE, "").strip()
    if not name:
        return None
    if not _RESOURCE_NAME.match(name) or name in ("CPU", "GPU", "memory", "object_store_memory"):
        raise InvalidSpecError(
            f"`{ORCHESTRATOR_RESOURCE}` must name a custom resource the orchestrators' nodes "
            f"declare (letters, digits, `_.-`), not {name!r}"
        )
    return name
