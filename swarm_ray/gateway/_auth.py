"""API keys: bearer tokens from configuration, each belonging to a principal.

Keys come from, in order: `SWARM_RAY_API_KEYS` (comma-separated), the file named by
`SWARM_RAY_API_KEYS_FILE` or by the gateway's `api_keys_file` option, else
`api_keys` under the state directory, created with one random admin key (mode 0600) on
first start, so a fresh gateway is never open. A keys file holds one entry per line;
blank lines and `#` comments are skipped. An entry is one of:

    KEY                 a principal of its own, named `key-` + a digest of the key
    NAME:KEY            the principal NAME (several keys may share one)
    NAME:KEY:admin      NAME with the admin role: it sees every principal's tasks

Keys are compared in constant time and never logged; a principal's tasks and uploads are
its own (see `swarm_ray.core.guards._principal`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from swarm_ray.core import PRINCIPAL_ID, InvalidSpecError, Principal

__all__ = ["ApiKeys"]

_MIN_LENGTH = 16
_ROLES = frozenset({"admin"})


def _entry(text: str, source: str, number: int) -> tuple[str, Principal]:
    """One `KEY`, `NAME:KEY` or `NAME:KEY:ROLE` entry as (key, principal)."""
    parts = text.split(":")
    if len(parts) == 1:
        key = parts[0]
        name = "key-" + hashlib.sha256(key.encode()).hexdigest()[:8]
        roles: list[str] = []
    elif len(parts) in (2, 3):
        name, key = parts[0].strip(), parts[1].strip()
        roles = [r.strip() for r in parts[2].split(",") if r.strip()] if len(parts) == 3 else []
    else:
        raise InvalidSpecError(
            f"API key entry number {number} in {source} has {len(parts) - 1} colons; "
            "write `KEY`, `NAME:KEY` or `NAME:KEY:admin`"
        )
    if not re.match(PRINCIPAL_ID, name):
        raise InvalidSpecError(
            f"API key entry number {number} in {source}: principal name {name!r} may hold "
            "only letters, digits and `_.@-` (1 to 64 characters)"
        )
    unknown = sorted(set(roles) - _ROLES)
    if unknown:
        raise InvalidSpecError(
            f"API key entry number {number} in {source}: unknown role(s) {unknown}; "
            f"known: {sorted(_ROLES)}"
        )
    if len(key) < _MIN_LENGTH:
        raise InvalidSpecError(
            f"API key entry number {number} in {source} is shorter than {_MIN_LENGTH} characters"
        )
    return key, Principal(id=name, admin="admin" in roles)


class ApiKeys:
    """The accepted keys and their principals; `repr` and `str` never show the keys."""

    __slots__ = ("_entries", "source")

    def __init__(self, entries: list[str], *, source: str) -> None:
        if not entries:
            raise InvalidSpecError(f"no API keys configured in {source}")
        parsed = [_entry(text, source, n) for n, text in enumerate(entries, 1)]
        # Compare digests: equal length, so `compare_digest` leaks nothing about lengths.
        self._entries = [(hashlib.sha256(k.encode()).digest(), p) for k, p in parsed]
        self.source = source
        """Where the keys came from (a variable name or a path), for messages."""

    def __repr__(self) -> str:
        return f"ApiKeys(<{len(self._entries)} hidden>, source={self.source!r})"

    def __len__(self) -> int:
        return len(self._entries)

    def principal(self, presented: str | None) -> Principal | None:
        """The principal whose key `presented` is, or None (every key is compared)."""
        if not presented:
            return None
        digest = hashlib.sha256(presented.encode()).digest()
        found: Principal | None = None
        for known, principal in self._entries:
            if hmac.compare_digest(digest, known) and found is None:
                found = principal
        return found

    def accepts(self, presented: str | None) -> bool:
        """Whether `presented` is one of the keys."""
        return self.principal(presented) is not None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ApiKeys:
        """Keys from a file, one entry per line."""
        file = Path(path).expanduser()
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InvalidSpecError(f"API keys file `{file}` cannot be read: {exc}") from None
        entries = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
        return cls(entries, source=f"`{file}`")

    @classmethod
    def from_config(
        cls, keys_file: str | None = None, *, state_dir: str | os.PathLike[str]
    ) -> ApiKeys:
        """Keys from the environment, `keys_file`, or a file generated under `state_dir`."""
        if listed := os.environ.get("SWARM_RAY_API_KEYS"):
            entries = [key.strip() for key in listed.split(",") if key.strip()]
            return cls(entries, source="`SWARM_RAY_API_KEYS`")
        keys_file = keys_file or os.environ.get("SWARM_RAY_API_KEYS_FILE")
        if keys_file:
            return cls.from_file(keys_file)
        path = Path(state_dir).expanduser() / "api_keys"
        if not path.exists():
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:  # another replica wrote it first
                pass
            else:
                with os.fdopen(fd, "w") as handle:
                    handle.write("# swarm-ray gateway API keys: KEY, NAME:KEY or NAME:KEY:admin\n")
                    handle.write(f"admin:{secrets.token_urlsafe(32)}:admin\n")
        return cls.from_file(path)
