"""A dict source's values and their digests as a worker last computed them, so that a tick where
one value of 200,000 moved hashes that value again, not all of them (engine.executors.worker).

A file per source node in ``<store>/values/``: barca's salt (the digest rule is barca's code),
the node's keys, its values and their digests (64 hex digits each, in key order), written
whole under a temp name and renamed, with the SHA-256 of what follows the header in front.
A pure memo of value -> digest by position: any file whose check holds gives the right digest
for each value it holds, however old; a file that is missing, damaged or of another salt is a
miss (every value hashed, as without it)."""
from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
from typing import Any

HEADER = b"barca values memo 1\n"


def path(root: str, prefix: str, node: str) -> str:
    name = hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(root, prefix, "values", name)


def read(where: str, salt: str) -> tuple[list[str], list[Any], str] | None:
    """(keys, values, digests) as last written under this salt; None: none to trust."""
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
    if not (isinstance(keys, list) and isinstance(values, list) and isinstance(digests, str)
            and len(keys) == len(values) and len(digests) == 64 * len(keys)):
        return None
    return keys, values, digests


def write(where: str, salt: str, keys: list[str], values: list[Any], digests: str) -> None:
    """Keep them (a memo: a write that fails is no error)."""
    try:
        body = marshal.dumps((salt, keys, values, digests))
    except ValueError:  # a value marshal cannot hold: nothing kept
        return
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
