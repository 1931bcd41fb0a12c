"""API keys: bearer tokens from configuration, compared in constant time, never logged.

Keys come from, in order: `SWARM_RAY_API_KEYS` (comma-separated), the file named by
`SWARM_RAY_API_KEYS_FILE` or by the gateway's `api_keys_file` option, else
`api_keys` under the state directory, created with one random key (mode 0600) on first
start, so a fresh gateway is never open. A keys file holds one key per line; blank lines
and `#` comments are skipped.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from swarm_ray._errors import InvalidSpecError

__all__ = ["ApiKeys"]

_MIN_LENGTH = 16


class ApiKeys:
    """The accepted keys; `repr` and `str` never show them."""

    __slots__ = ("_digests", "source")

    def __init__(self, keys: list[str], *, source: str) -> None:
        if not keys:
            raise InvalidSpecError(f"no API keys configured in {source}")
        short = [i for i, key in enumerate(keys, 1) if len(key) < _MIN_LENGTH]
        if short:
            raise InvalidSpecError(
                f"API keys number {short} in {source} are shorter than {_MIN_LENGTH} characters"
            )
        # Compare digests: equal length, so `compare_digest` leaks nothing about lengths.
        self._digests = [hashlib.sha256(key.encode()).digest() for key in keys]
        self.source = source
        """Where the keys came from (a variable name or a path), for messages."""

    def __repr__(self) -> str:
        return f"ApiKeys(<{len(self._digests)} hidden>, source={self.source!r})"

    def __len__(self) -> int:
        return len(self._digests)

    def accepts(self, presented: str | None) -> bool:
        """Whether `presented` is one of the keys (every key is compared, in constant time)."""
        if not presented:
            return False
        digest = hashlib.sha256(presented.encode()).digest()
        matched = False
        for known in self._digests:
            matched |= hmac.compare_digest(digest, known)
        return matched

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ApiKeys:
        """Keys from a file, one per line."""
        file = Path(path).expanduser()
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InvalidSpecError(f"API keys file `{file}` cannot be read: {exc}") from None
        keys = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
        return cls(keys, source=f"`{file}`")

    @classmethod
    def from_config(
        cls, keys_file: str | None = None, *, state_dir: str | os.PathLike[str]
    ) -> ApiKeys:
        """Keys from the environment, `keys_file`, or a file generated under `state_dir`."""
        if listed := os.environ.get("SWARM_RAY_API_KEYS"):
            keys = [key.strip() for key in listed.split(",") if key.strip()]
            return cls(keys, source="`SWARM_RAY_API_KEYS`")
        keys_file = keys_file or os.environ.get("SWARM_RAY_API_KEYS_FILE")
        if keys_file:
            return cls.from_file(keys_file)
        path = Path(state_dir).expanduser() / "api_keys"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another replica wrote it first
                pass
            else:
                with os.fdopen(fd, "w") as handle:
                    handle.write("# swarm-ray gateway API keys, one per line\n")
                    handle.write(secrets.token_urlsafe(32) + "\n")
        return cls.from_file(path)
