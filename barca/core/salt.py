"""The one salt every memo that outlives a command is keyed by: the source of barca's rules.

A memo (the discovery cache, the definitions table, snapshots, settle records, warm state) is an
early exit of the one rule (a result is current when its run hash is the run hash now), so it
must die with any change to the code that makes that rule. The salt is the text of every module
of the package except the faces (they only render): an upgraded or edited barca is a new salt,
and every older memo is a miss."""
from __future__ import annotations

import os

_SALT: str | None = None
_SKIP = ("faces",)  # subpackages that never decide what a value is


def salt() -> str:
    global _SALT
    if _SALT is None:
        _SALT = _remembered()
    return _SALT


def _sources(pkg: str) -> list[os.DirEntry[str]]:
    """The package's ``.py`` files, a folder's own files (by name) before its subfolders (by
    name), as ``os.walk`` gives them; a symlinked folder is not entered. Directory entries, so
    that the stamp stats each file once, by the path the listing already holds (every command
    stamps the whole package)."""
    out: list[os.DirEntry[str]] = []

    def visit(folder: str) -> None:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
        subs = []
        for e in entries:
            if e.is_dir():
                if e.name not in _SKIP and not e.name.startswith(("_", ".")) \
                        and not e.is_symlink():
                    subs.append(e.path)
            elif e.name.endswith(".py"):
                out.append(e)
        for sub in subs:
            visit(sub)

    visit(pkg)
    return out


def _digest(pkg: str, files: list[os.DirEntry[str]]) -> str:
    import hashlib
    h = hashlib.sha256()
    for e in files:
        path = e.path
        h.update(path[len(pkg) + 1:].encode() + b"\0")  # the path inside the package
        with open(path, "rb") as f:
            h.update(f.read())
        h.update(b"\0")
    return h.hexdigest()


def _remembered() -> str:
    """The salt, read again only when a source file's size or modification time moved (or a
    file came or went): the very test Python applies before it runs a module's cached bytecode,
    so the salt follows the code that runs. Kept in barca/core/__pycache__, beside that
    bytecode; where that folder cannot be written, the salt is computed every time."""
    from barca.core.sha import sha256  # the stamp, every command: no OpenSSL for it
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = _sources(pkg)
    cut = len(pkg) + 1
    lines = []
    for e in files:
        st = e.stat()  # follows a symlinked file, as os.stat
        lines.append(f"{e.path[cut:]}\0{st.st_size}\0{st.st_mtime_ns}\n")
    stamp = sha256("".join(lines).encode())
    folder = os.path.join(pkg, "core", "__pycache__")
    memo = os.path.join(folder, f"salt-{stamp.hexdigest()[:32]}.txt")
    try:
        with open(memo) as f:
            got = f.read()
        if len(got) == 64 and not got.strip("0123456789abcdef"):  # 64 hex digits
            return got
    except OSError:
        pass
    value = _digest(pkg, files)
    try:  # best effort: the next command reads it instead of every source file
        os.makedirs(folder, exist_ok=True)
        for old in os.listdir(folder):
            if old.startswith("salt-") and old.endswith(".txt"):
                os.unlink(os.path.join(folder, old))
        tmp = f"{memo}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(value)
        os.replace(tmp, memo)
    except OSError:
        pass
    return value
