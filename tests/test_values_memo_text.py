"""The values memo holds a dict source's keys and values as strings joined by NUL (not lists of
200,000 objects): values or keys that a NUL would make ambiguous are never memoised, a memo
of the earlier format (lists) is a miss, and every digest stays the one hashing every value
finds. In process."""
from __future__ import annotations

import hashlib
import marshal
from pathlib import Path
from typing import Any

import pytest

from barca.engine.executors import worker
from barca.identity import hashing
from barca.store import valuememo


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many values each json_digests call hashed (the real function, counted)."""
    counts: list[int] = []
    real = hashing.json_digests

    def counting(values: Any) -> str:
        values = list(values)
        counts.append(len(values))
        return real(values)

    monkeypatch.setattr(worker, "json_digests", counting)
    monkeypatch.setattr(worker, "MEMO_KEYS", 4)
    monkeypatch.setattr(worker, "MEMO_MOVED", 3)
    return counts


def _check(value: dict[str, Any], memo: str) -> None:
    got = worker.source_keys(value, memo)
    assert got[0] == list(value)
    assert got[1] == hashing.json_digests(list(value.values()))  # as without any memo
    assert got[2] == list(value.values())


def test_values_holding_a_nul_are_never_memoised_and_stay_exact(tmp_path: Path,
                                                                hashed: list[int]) -> None:
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(20)}
    nul = dict(base, k03="a\x00b")  # joined by NUL, it would read as two values
    _check(nul, memo)
    assert not Path(memo).exists()
    _check(base, memo)
    assert Path(memo).exists()
    # the memo's values split at NUL would line up again with these: not read from it
    _check(dict(base, k03="v3\x00v4", k04="x"), memo)
    assert hashed[-1] == 20
    _check(dict(base, k05="moved"), memo)
    assert hashed[-1] == 1


def test_a_memo_of_the_earlier_format_or_tampered_is_a_miss(tmp_path: Path,
                                                              hashed: list[int]) -> None:
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(20)}
    keys, values = list(base), list(base.values())
    # format 1: marshalled lists, under its own header, checked as it was
    body = marshal.dumps((worker.salt(), keys, values, hashing.json_digests(values)))
    Path(memo).parent.mkdir(parents=True)
    Path(memo).write_bytes(b"barca values memo 1\n" + hashlib.sha256(body).digest() + body)
    assert valuememo.read(memo, worker.salt()) is None
    _check(base, memo)
    assert hashed[-1] == 20
    got = valuememo.read(memo, worker.salt())
    assert got == ("\x00".join(keys), "\x00".join(values), hashing.json_digests(values))
    # one byte of the memo changed: its SHA-256 check fails, a miss
    data = bytearray(Path(memo).read_bytes())
    data[-1] ^= 1
    Path(memo).write_bytes(bytes(data))
    assert valuememo.read(memo, worker.salt()) is None
    _check(dict(base, k01="x"), memo)
    assert hashed[-1] == 20
