"""A dict source's values and their digests as a worker last computed them, so that a tick where
one value of 200,000 moved hashes that value again, not all of them (engine.executors.worker).

A file per source node in ``<store>/values/``: barca's salt (the digest rule is barca's code),
the node's keys and its values (string values only), each joined by NUL, their digests (32
bytes each, in key order: half the hex text to read and check) and where every ``STEP``-th
value begins in the values' text (so a tick compares the values a block at a time and splits
only a block that moved), written whole under a temp name and renamed, with the SHA-256 of
what follows the header in front. A few strings, not a list of 200,000 of each: read in a few
milliseconds, where the lists took ~60 ms.
A pure memo of value -> digest by position: any file whose check holds gives the right digest
for each value it holds, however old; a file that is missing, damaged or of another salt is a
miss (every value hashed, as without it)."""
from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
from typing import Any

HEADER = b"barca values memo 3\n"  # 1: lists of keys and values; 2: the digests as hex
STEP = 1024  # values a mark stands for: where every STEP-th value begins in the values' text


def path(root: str, prefix: str, node: str) -> str:
    name = hashlib.sha256(node.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(root, prefix, "values", name)


def read(where: str, salt: str) -> tuple[str, str, bytes, list[int]] | None:
    """(keys, values, digests, marks) as last written under this salt -- the keys and the
    values each joined by NUL, none holding one; the digests (32 bytes a value, in order); and
    where value ``j * STEP`` begins in the values' text, for each j (checked here: the text
    between two marks holds exactly STEP values). None: none to trust."""
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
    if not (isinstance(got, tuple) and len(got) == 5 and got[0] == salt):
        return None
    _, keys, values, digests, at = got
    if not (isinstance(keys, str) and isinstance(values, str) and isinstance(digests, bytes)):
        return None
    n = keys.count("\x00") + 1
    if values.count("\x00") + 1 != n or len(digests) != 32 * n or not _marks_hold(values, at, n):
        return None
    return keys, values, digests, at


def _marks_hold(values: str, at: object, n: int) -> bool:
    """Whether ``at`` is where value ``j * STEP`` of ``values`` (n of them, joined by NUL)
    begins, for every j: contiguous chunks, each ended by a NUL (but the last), each holding
    as many NULs as its values less one."""
    if type(at) is not list or len(at) != -(-n // STEP) or at[0] != 0 \
            or not _INT.issuperset(map(type, at)):
        return False
    last = len(at) - 1
    for j, a in enumerate(at):
        b = at[j + 1] - 1 if j < last else len(values)
        if not 0 <= a <= b <= len(values) \
                or (j < last and values[b] != "\x00") \
                or values.count("\x00", a, b) != min(STEP, n - j * STEP) - 1:
            return False
    return True


def marks(values: list[str]) -> list[int]:
    """Where value ``j * STEP`` begins in ``"\\x00".join(values)``, for each j."""
    out: list[int] = []
    pos = 0
    for j in range(0, len(values), STEP):
        out.append(pos)
        chunk = values[j:j + STEP]
        pos += sum(map(len, chunk)) + len(chunk)
    return out


def joined(items: list[Any], strings: bool = False) -> str | None:
    """Strings joined by NUL, when every item is a string and none holds a NUL (None: not
    so): the list reads back from it, ``split("\\x00")``. ``strings``: every item is known
    to be a string (not looked at again)."""
    if not items or not (strings or _STRING.issuperset(map(type, items))):
        return None
    text = "\x00".join(items)
    return text if text.count("\x00") == len(items) - 1 else None


_STRING = frozenset({str})
_INT = frozenset({int})


def write(where: str, salt: str, keys: list[str], values: list[Any], digests: str | bytes,
          kj: str | None = None, vj: str | None = None) -> None:
    """Keep them (a memo: a write that fails, or of values it cannot hold, is no error);
    ``digests``: as hex or as bytes; ``kj``, ``vj``: ``joined(keys)``, ``joined(values)``,
    when made already."""
    kj = joined(keys) if kj is None else kj
    vj = joined(values) if vj is None else vj
    if kj is None or vj is None:
        return
    try:
        raw = digests if isinstance(digests, bytes) else bytes.fromhex(digests)
    except ValueError:
        return
    if len(raw) != 32 * len(keys):
        return
    body = marshal.dumps((salt, kj, vj, raw, marks(values)))
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
