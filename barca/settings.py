"""A project's settings and the one rule that says which source wins: a flag, then an
environment variable, then ``barca.toml``, then the default (``barca docs config``)."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from barca.errors import UsageError

# setting -> (environment variable, barca.toml section, key)
SOURCES: dict[str, tuple[str, str, str]] = {
    "env": ("BARCA_ENV", "", "default_env"),
    "remote_uri": ("BARCA_REMOTE_URI", "remote", "uri"),
    "store_key_file": ("", "remote", "key_file"),  # BARCA_STORE_KEY (the key itself) wins
    "cache_max_size": ("BARCA_CACHE_MAX_SIZE", "cache", "max_size"),
    "pool_size": ("BARCA_POOL_SIZE", "run", "pool_size"),
    "executor": ("BARCA_EXECUTOR", "run", "executor"),
    "include": ("", "discovery", "include"),
    "exclude": ("", "discovery", "exclude"),
}

_FILES: dict[Path, tuple[float, dict[str, dict[str, Any]]]] = {}


def project_file(root: Path) -> dict[str, dict[str, Any]]:
    """``root/barca.toml``, checked; read again only when the file changes."""
    from barca.config import FILE, load
    path = root / FILE
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return {}
    got = _FILES.get(root)
    if got is None or got[0] != stamp:
        got = _FILES[root] = (stamp, load(root))
    return got[1]


def value(name: str, root: Path | None = None, flag: Any = None,
          environ: Mapping[str, str] | None = None) -> Any:
    """The setting ``name``: ``flag`` if given, else its environment variable (if set and not
    empty), else ``barca.toml`` at ``root`` (the project root), else None."""
    if flag is not None:
        return flag
    var, section, key = SOURCES[name]
    env = os.environ if environ is None else environ
    if name == "remote_uri" and remote_off(env):  # off for this command, wherever set
        return None
    if var and env.get(var, "").strip():
        return env[var].strip()
    if root is None:
        from barca.discovery import find_root
        root = find_root()
    return project_file(root).get(section, {}).get(key)


def remote_off(environ: Mapping[str, str] | None = None) -> bool:
    """``BARCA_REMOTE=off``: the configured store is not used by this command."""
    env = os.environ if environ is None else environ
    return env.get("BARCA_REMOTE", "").strip().lower() == "off"


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.I)
_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(text: str | int, what: str, disk: int | None = None) -> int | None:
    """A cache size: bytes, ``"500MB"``, ``"20GiB"``, ``"10%"`` of ``disk`` (the filesystem's
    size), or ``"off"`` (None: no limit). Anything else is a usage error naming ``what``."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text >= 0:
            return text
    elif isinstance(text, str):
        t = text.strip().lower()
        if t == "off":
            return None
        if t.endswith("%"):
            try:
                pct = float(t[:-1])
            except ValueError:
                pct = -1.0
            if 0 < pct <= 100:
                return int((disk or 0) * pct / 100) if disk is not None else 0
        else:
            m = _SIZE.match(text)
            if m:
                return int(float(m.group(1)) * _UNITS[(m.group(2) or "b").lower()])
    raise UsageError(f"{what} = {text!r} is not a size.",
                     f'Write {what} as bytes, "500MB", "20GB", "20GiB", "10%" (of the disk) '
                     'or "off".')
