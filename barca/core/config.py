"""``barca.toml``: a project's settings file, read with ``tomllib`` and checked key by key.

An invalid file is a usage error naming ``barca.toml``, the line and the key, with the keys that
are accepted; an empty file is fine. Which value wins when a flag, an environment variable and
this file all say something is decided in ``barca.core.settings``."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from barca.core.errors import UsageError

FILE = "barca.toml"

# section -> key -> (type check, what a value must be); "" is the top level
SCHEMA: dict[str, dict[str, tuple[Any, str]]] = {
    "": {"default_env": (str, "an environment name (a plain folder name)")},
    "remote": {"uri": (str, "a store URI: file:///path, s3://bucket/prefix, ..."),
               "key_file": (str, "the path of a file holding the store's signing key")},
    "cache": {"max_size": ((str, int), 'a size: "20GB", "500MB", "20GiB", bytes, "10%" or "off"')},
    "discovery": {"include": (list, "a list of glob patterns of pipeline files"),
                  "exclude": (list, "a list of glob patterns to skip")},
    "run": {"pool_size": (int, "a positive number of worker processes"),
            "executor": (str, "local, dask, or a Dask scheduler address (tcp://HOST:PORT)")},
    "execution": {"capacity": (int, "a whole number >= 1: how much weight may run at once")},
    "server": {"drain_timeout": ((int, float), "a number of seconds >= 0"),
               "max_runs": (int, "a positive number of runs at once"),
               "token_env": (str, "the name of the variable holding the server's token"),
               "url": (str, "a barca server's URL: http://HOST:PORT")},
}


def _accepted() -> str:
    keys = [k for k in SCHEMA[""]] + [f"[{s}] {k}" for s in SCHEMA if s for k in SCHEMA[s]]
    return ", ".join(keys)


def _line_of(text: str, section: str, key: str | None) -> int:
    """The line a section (or a key in it) is written on: tomllib does not say."""
    current = ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = re.match(r"^\[\s*([^\]]+?)\s*\]", line)
        if m:
            current = m.group(1)
            if key is None and current == section:
                return n
            continue
        if key is not None and current == section and re.match(
                rf"^{re.escape(key)}\s*=|^\"{re.escape(key)}\"\s*=", line):
            return n
    return 1


def _bad(path: Path, line: int, what: str, fix: str) -> UsageError:
    return UsageError(f"{path.name}:{line}: {what}", fix, path=str(path), line=line)


def load(root: Path) -> dict[str, dict[str, Any]]:
    """The checked settings of ``root/barca.toml`` as ``{section: {key: value}}`` (top-level
    keys under ""); ``{}`` when there is no file."""
    path = root / FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{FILE} cannot be read: {exc}",
                         f"Fix or remove {path}.", path=str(path)) from None
    import tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise _bad(path, int(m.group(1)) if m else 1, f"not valid TOML ({exc})",
                   f"Fix the syntax of {FILE}; an empty file is fine.") from None
    out: dict[str, dict[str, Any]] = {}
    for name, value in data.items():
        if isinstance(value, dict):
            if name not in SCHEMA or not name:
                raise _bad(path, _line_of(text, name, None), f"unknown section [{name}]",
                           f"Accepted: {_accepted()}.")
            for key, v in value.items():
                out.setdefault(name, {})[key] = _check(path, text, name, key, v)
        else:
            out.setdefault("", {})[name] = _check(path, text, "", name, value)
    return out


def _check(path: Path, text: str, section: str, key: str, value: Any) -> Any:
    where = f"[{section}] {key}" if section else key
    spec = SCHEMA[section].get(key)
    line = _line_of(text, section, key)
    if spec is None:
        from barca.core.errors import did_you_mean
        known = [k for k in SCHEMA[section]]
        raise _bad(path, line, f"unknown key {where}.{did_you_mean(key, known)}",
                   f"Accepted: {_accepted()}.")
    kind, what = spec
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if ok and kind is list:
        ok = all(isinstance(v, str) for v in value)
    if ok and key in ("pool_size", "capacity", "max_runs"):
        ok = value >= 1
    if ok and key == "drain_timeout":
        ok = value >= 0
    if ok and key == "max_size":
        from barca.core.sizes import parse_size
        try:
            parse_size(value, f"{FILE} [cache] max_size")
        except UsageError:
            ok = False
    if ok and key == "default_env":
        from barca.core.root import valid_env_name
        ok = valid_env_name(value)
    if not ok:
        raise _bad(path, line, f"{where} = {value!r} is not {what}.",
                   f"Fix {where} in {FILE}.")
    return value
