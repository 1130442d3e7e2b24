"""Where a project is: its root (the folder holding ``barca.toml``) and its store's folder
under it, per environment."""
from __future__ import annotations

import os
import re
from pathlib import Path


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest directory at or above ``start`` holding ``barca.toml``, else ``start``."""
    here = os.path.realpath(start or os.getcwd())  # Path.resolve's answer, without pathlib
    d = here
    while True:
        if os.path.isfile(os.path.join(d, "barca.toml")):
            return Path(d)
        up = os.path.dirname(d)
        if up == d:
            return Path(here)
        d = up


def stamp(path: Path) -> tuple[int, int, int, int] | None:
    """A file's identity for a memo of what it holds: inode, size, mtime and ctime (an edit
    that keeps the mtime still moves the ctime); None when it cannot be read."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)



# A file edited twice within one tick of the file system's clock (coarse on some) keeps its
# stamp; its ctime is then that recent, so a stamp younger than this proves nothing (as git
# treats its index). Every memo of a file's contents reads a young file again.
RACY_NS = 2_000_000_000


def young(stamp: tuple[int, ...]) -> bool:
    """Whether a ``stamp`` (ctime last) is too recent to vouch for the file's contents."""
    import time
    return stamp[-1] >= time.time_ns() - RACY_NS

_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.fullmatch(name)) and ".." not in name


def store_prefix(env: str | None) -> str:
    """The store's folder, relative to the project root: ``.barca``, or ``.barca/envs/<env>``
    for a named environment (``Settings.env``: ``--env``, ``BARCA_ENV``, ``default_env``)."""
    name = env or ""
    if not name:
        return ".barca"
    if not valid_env_name(name):
        from barca.core.errors import UsageError
        raise UsageError(f"--env {name!r} is not a plain folder name.",
                         "Name an environment with letters, digits, '.', '_' and '-' only "
                         "(for example --env staging).")
    return f".barca/envs/{name}"
