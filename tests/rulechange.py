"""A barca whose rules changed, simulated in this process: what an upgrade of barca that fixes a
hashing rule looks like to a project made by the older barca.

The one memo salt (barca.core.salt) moves, as it does when any of barca's rule modules is
edited, and one rule really changes: a helper's digest (``cone.Project.binding_digest``) is
taken differently. A memo that outlives a command and is not keyed by the salt keeps serving
the old rule's answer."""
from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_ORIGINAL: dict[str, Any] = {}


def set_rules(generation: int) -> None:
    """Rules number ``generation`` (0: barca as it is) from now on in this process."""
    from barca.core import salt as salt_mod
    from barca.identity import cone
    if not _ORIGINAL:
        _ORIGINAL["digest"] = cone.Project.binding_digest
        _ORIGINAL["salt"] = salt_mod.salt()
    original = _ORIGINAL["digest"]
    if generation == 0:
        cone.Project.binding_digest = original  # type: ignore[method-assign]
        salt_mod._SALT = _ORIGINAL["salt"]
        return

    def binding_digest(self: Any, mod: Any, name: str, stmts: list[Any]) -> str:
        got = original(self, mod, name, stmts)
        return hashlib.sha256(f"rules-{generation}\0{got}".encode()).hexdigest()

    cone.Project.binding_digest = binding_digest  # type: ignore[method-assign]
    salt_mod._SALT = hashlib.sha256(
        f"{_ORIGINAL['salt']}\0rules-{generation}".encode()).hexdigest()


@contextmanager
def rules(generation: int) -> Iterator[None]:
    """Rules number ``generation`` inside the block, barca's own after it."""
    set_rules(generation)
    try:
        yield
    finally:
        set_rules(0)
