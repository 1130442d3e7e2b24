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
        import hashlib
        h = hashlib.sha256()
        pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for dirpath, dirnames, filenames in os.walk(pkg):
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in _SKIP and not d.startswith(("_", ".")))
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    h.update(os.path.relpath(path, pkg).encode() + b"\0")
                    with open(path, "rb") as f:
                        h.update(f.read())
                    h.update(b"\0")
        _SALT = h.hexdigest()
    return _SALT
