"""barca.core.sha (#31 item 2): the built-in SHA-256 a cached command uses instead of loading
OpenSSL gives hashlib's digest for the same bytes, and gives way to hashlib past its budget."""
from __future__ import annotations

import hashlib
import random

from barca.core import sha


def test_the_same_digest_as_hashlib() -> None:
    rnd = random.Random(31)
    for n in [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000, 4096, 65537]:
        data = rnd.randbytes(n)
        assert sha.sha256(data).hexdigest() == hashlib.sha256(data).hexdigest(), n
        assert sha.sha256(data).digest() == hashlib.sha256(data).digest(), n
    texts = [f"json\x00{i}\x00é".encode() for i in range(50)]
    make = sha.constructor(len(texts))
    assert [make(t).hexdigest() for t in texts] == [hashlib.sha256(t).hexdigest() for t in texts]


def test_past_the_budget_hashlib_hashes(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(sha, "_spent", 0)
    small = sha.sha256(b"x")
    assert sha._builtin is not None and isinstance(small, sha._builtin(b"").__class__)
    big = b"y" * (sha.BUDGET + 1)
    assert type(sha.sha256(big)) is type(hashlib.sha256())  # OpenSSL's, for the rest
    assert type(sha.sha256(b"x")) is type(hashlib.sha256())
    assert sha.constructor(1) is hashlib.sha256
    assert sha.sha256(big).hexdigest() == hashlib.sha256(big).hexdigest()
