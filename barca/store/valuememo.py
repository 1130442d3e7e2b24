"""A dict source's values and their digests as a worker last computed them, so that a tick where
one value of 200,000 moved hashes that value again, not all of them (engine.executors.worker).

A file per source node in ``<store>/values/``: barca's salt (the digest rule is barca's code),
the node's keys and its values (string values only), each joined by NUL, and their digests
(64 hex digits each, in key order), written whole under a temp name and renamed, with the
SHA-256 of what follows the header in front. Three strings, not a list of 200,000 of each:
read in a few milliseconds, where the lists took ~60 ms.
A pure memo of value -> digest by position: any file whose check holds gives the right digest
for each value it holds, however old; a file that is missing, damaged or of another salt is a
miss (every value hashed, as without it)."""
from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
from typing import Any

HEADER = b"barca values memo 2\n"  # 1: lists of keys and values


def path(root: str, prefix: str, node: str) -> str:
    name = hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(root, prefix, "values", name)


def read(where: str, salt: str) -> tuple[str, str, str] | None:
    """(keys, values, digests) as last written under this salt -- the keys and the values each
    joined by NUL, none holding one; None: none to trust."""
    try:
        with open(where, "rb") as f:
            data = f.read()
    except OSError:
        return None
    n = len(HEADER)
    if data[:n] != HEADER or hashlib.sha256(memoryview(data)[n + 32:]).digest() != data[n:n + 32]:
        return None
    try:
        got = marshal.loads(memoryview(data)[n + 32:])
    except (EOFError, ValueError, TypeError):
        return None
    if not (isinstance(got, tuple) and len(got) == 4 and got[0] == salt):
        return None
    _, keys, values, digests = got
    if not (isinstance(keys, str) and isinstance(values, str) and isinstance(digests, str)):
        return None
    n = keys.count("\x00") + 1
    if values.count("\x00") + 1 != n or len(digests) != 64 * n:
        return None
    return keys, values, digests


def joined(items: list[Any]) -> str | None:
    """Strings joined by NUL, when every item is a string and none holds a NUL (None: not
    so): the list reads back from it, ``split("\\x00")``."""
    if not items or not _STRING.issuperset(map(type, items)):
        return None
    text = "\x00".join(items)
    return text if text.count("\x00") == len(items) - 1 else None


_STRING = frozenset({str})


def write(where: str, salt: str, keys: list[str], values: list[Any], digests: str,
          kj: str | None = None, vj: str | None = None) -> None:
    """Keep them (a memo: a write that fails, or of values it cannot hold, is no error);
    ``kj``, ``vj``: ``joined(keys)``, ``joined(values)``, when made already."""
    kj = joined(keys) if kj is None else kj
    vj = joined(values) if vj is None else vj
    if kj is None or vj is None or len(digests) != 64 * len(keys):
        return
    body = marshal.dumps((salt, kj, vj, digests))
    tmp = f"{where}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(where), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(HEADER + hashlib.sha256(body).digest())
            f.write(body)
        os.replace(tmp, where)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
