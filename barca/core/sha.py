"""SHA-256 as ``hashlib.sha256`` gives it, without loading OpenSSL for the little a cached
command hashes.

``import hashlib`` loads OpenSSL (``_hashlib``): ~11 M instructions, 3-4 ms, to hash the few
hundred bytes a cached ``barca get`` hashes. CPython's own SHA-256 (``_sha256``, loaded in
microseconds) is the same function -- the same digest for the same bytes (tests/test_sha.py) --
but about ten times slower than OpenSSL's on long input. So it hashes the first ``BUDGET`` bytes
of a process, about what loading OpenSSL costs, and hashlib everything after: a big artifact or
a walk of 10,000 keys pays OpenSSL's load once and gets its speed.

Only for data hashed in one call; a digest fed in parts (a file in blocks) takes hashlib."""
from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable
    from hashlib import _Hash

BUDGET = 256 * 1024  # bytes: ~2.5 ms of the built-in SHA-256, about what OpenSSL's load costs
# a call's own cost beyond OpenSSL's, counted in bytes hashed (~0.7 us: a verified small result
# of each of 500 readers stays under the budget)
PER_CALL = 64
TEXT = 256  # bytes of one of many short texts (a step's run hash text)

try:  # CPython 3.11 (3.12 and later: _sha2); another Python: hashlib only
    _builtin = __import__("_sha256").sha256
except ImportError:
    try:
        _builtin = __import__("_sha2").sha256
    except ImportError:
        _builtin = None
_spent = 0


def _within(cost: int) -> bool:
    global _spent
    if _builtin is None or _spent + cost > BUDGET:
        _spent = BUDGET  # spent: hashlib from here on (it is loaded now)
        return False
    _spent += cost
    return True


def sha256(data: bytes) -> _Hash:
    """``hashlib.sha256(data)``: the built-in SHA-256 within the process's budget, else
    OpenSSL's."""
    global _spent
    cost = len(data) + PER_CALL  # (as _within, in line: a cached get hashes each result)
    if _builtin is not None and _spent + cost <= BUDGET:
        _spent += cost
        got: _Hash = _builtin(data)
        return got
    _spent = BUDGET  # spent: hashlib from here on
    import hashlib
    return hashlib.sha256(data)


def constructor(n: int) -> Callable[[bytes], _Hash]:
    """``hashlib.sha256`` for ``n`` one-call digests of short texts (a few hundred bytes each,
    counted as ``TEXT`` bytes each): the built-in one while they fit the budget."""
    if _within((TEXT + PER_CALL) * n):
        got: Callable[[bytes], _Hash] = _builtin
        return got
    import hashlib
    return hashlib.sha256
