"""Where a project is: its root (the folder holding ``barca.toml``) and its store's folder
under it, per environment."""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from pathlib import Path


def root_dir(start: str | os.PathLike[str] | None = None) -> str:
    """The nearest directory at or above ``start`` holding ``barca.toml``, else ``start``:
    absolute, symlinks resolved (``Path.resolve``'s answer), as a str. A cached command
    works on str paths: pathlib (which loads urllib.parse and ipaddress) is not imported on
    its path (#31 item 2)."""
    here = os.path.realpath(start or os.getcwd())
    d = here
    while True:
        if os.path.isfile(os.path.join(d, "barca.toml")):
            return d
        up = os.path.dirname(d)
        if up == d:
            return here
        d = up


def find_root(start: str | os.PathLike[str] | None = None) -> Path:
    """``root_dir`` as a ``Path``."""
    from pathlib import Path
    return Path(root_dir(start))


def stamp(path: str | os.PathLike[str]) -> tuple[int, int, int, int] | None:
    """A file's identity for a memo of what it holds: inode, size, mtime and ctime (an edit
    that keeps the mtime still moves the ctime); None when it cannot be read."""
    try:
        st = os.stat(path)
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

def valid_env_name(name: str) -> bool:
    import re  # (compiled when an environment is named: not on the path of a plain command)
    return bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", name)) and ".." not in name


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
