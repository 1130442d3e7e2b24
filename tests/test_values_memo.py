"""A dict source's values memo (store.valuememo, kept by the worker): each key's value digest
from a source step is exactly the one hashing every value finds (hashing.json_digests), after
one value moved, a key added or removed, a value changed back, values that are not strings, a
damaged memo or one of another salt. Only the values that moved are hashed again. The memo
holds keys and values as strings joined by NUL (not lists of 200,000 objects): values or keys
that a NUL would make ambiguous are never memoised, and a memo of the earlier format (lists) is
a miss. In process."""
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


def _check(value: dict[str, Any], memo: str) -> tuple[list[str], str | None, list[Any] | None]:
    got = worker.source_keys(value, memo)
    assert got[0] == [str(k) for k in value]
    assert got[1] == hashing.json_digests(list(value.values()))  # as without any memo
    assert got[2] == list(value.values())
    return got


def test_one_moved_value_is_hashed_again_and_every_digest_is_exact(tmp_path: Path,
                                                                   hashed: list[int]) -> None:
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(20)}
    _check(base, memo)
    assert hashed == [20]
    moved = dict(base, k07="changed")
    _check(moved, memo)
    assert hashed[-1] == 1  # only k07
    _check(base, memo)  # changed back: the memo still holds the first values
    assert hashed[-1] == 0
    _check(dict(base, k03="x", k09="y", k11="z", k12="w"), memo)  # past MEMO_MOVED: written
    assert hashed[-1] == 4
    _check(dict(base, k03="x", k09="y", k11="z", k12="w"), memo)
    assert hashed[-1] == 0


def test_keys_added_removed_reordered_and_values_not_strings(tmp_path: Path,
                                                             hashed: list[int]) -> None:
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(20)}
    _check(base, memo)
    _check(dict(base, k20="new"), memo)  # a key added: every value hashed, memo written
    assert hashed[-1] == 21
    smaller = dict(base)
    del smaller["k05"]
    _check(smaller, memo)  # a key removed
    assert hashed[-1] == 19
    _check(dict(reversed(list(smaller.items()))), memo)  # reordered
    assert hashed[-1] == 19
    # values that are not strings (1 and "1", True and 1 differ in JSON): never from the memo
    mixed = {f"k{i:02d}": [i, 1, True, 1.0, None, {"a": i}][i % 6] for i in range(20)}
    _check(mixed, memo)
    _check(dict(mixed, k01=True), memo)
    _check(dict(mixed, k01="1"), memo)
    assert hashed[-3:] == [20, 20, 20]


def test_a_damaged_memo_or_another_salt_is_a_miss(tmp_path: Path, hashed: list[int],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(20)}
    _check(base, memo)
    data = bytearray(Path(memo).read_bytes())
    assert valuememo.read(memo, worker.salt()) is not None
    data[-70] ^= 1  # one digest's character, say
    Path(memo).write_bytes(bytes(data))
    assert valuememo.read(memo, worker.salt()) is None
    _check(dict(base, k01="other"), memo)
    assert hashed[-1] == 20
    Path(memo).write_bytes(b"")
    assert valuememo.read(memo, worker.salt()) is None
    _check(base, memo)
    valuememo.write(memo, "another salt", list(base), list(base.values()), "0" * 64 * 20)
    _check(base, memo)  # a memo of other rules: every value hashed again
    assert hashed[-1] == 20
    monkeypatch.setattr(worker, "MEMO_KEYS", 100)  # a small source keeps no memo
    Path(memo).unlink()
    _check(base, memo)
    assert not Path(memo).exists()


def test_a_dict_of_strings_is_encoded_exactly_as_json_encodes_it() -> None:
    import json
    tricky = ["", "a", "é", "\u2028", "\x00", "\x1f", '"', "\\", "/", "\ud800", "😀", "a\nb",
              "\t", "0", "ß", "İ", "k\x7f", "é"]
    for value in ({"b": "1", "a": "2"},  # not in key order
                  {f"k{i:03d}": v for i, v in enumerate(tricky)},  # in key order
                  {v + "x": v for v in tricky},
                  {"a": "1"}, {"": "", "a": "é", "b": "😀 x", "c": "ß/İ", "d": "'"},
                  {f"k{i:03d}": f"v{i}" for i in range(300)},
                  {"a": 'say "hi"', "b": "x"}, {"a": "x", "b\\": "y"}, {"a": "\u2028"}):
        got = hashing.str_dict_json(value)
        assert got is not None
        assert got[0] == json.dumps(value, ensure_ascii=False)
        assert got[1] == hashing.canonical_json(value)
        assert got[2] == json.dumps(list(value.values()), ensure_ascii=False)
    for other in ({}, {"a": 1}, {"a": ["x"]}, {1: "a"}, {"a": True}, {"a": None}):
        assert hashing.str_dict_json(other) is None  # type: ignore[arg-type]


def test_a_dict_sources_digests_are_read_only_for_its_own_keys_in_its_order() -> None:
    """InputPlan.source_digests compares the keys as one string: it says what comparing each
    key's dimension value with the source's keys says."""
    from barca.engine.inputs import InputPlan
    from barca.engine.states import SourceOutput

    def plan(src_keys: list[str], sent: bool) -> InputPlan:
        p = InputPlan.__new__(InputPlan)
        # sent: the keys joined by NUL too, as a worker sends them (compared as one text)
        p.source = SourceOutput(src_keys, "0" * 64 * len(src_keys), None,
                                "\x00".join(src_keys) if sent else None)
        p.dim0 = "key"
        return p

    cases = [
        (["a", "b"], ["key=a", "key=b"]), (["a", "b"], ["key=b", "key=a"]),
        (["a", "b"], ["key=a"]), (["a"], ["key=a", "key=b"]), ([], []),
        (["a", "b"], ["kez=a", "key=b"]), (["a\\,", "b"], ["key=a\\,", "key=b"]),
        (["a,b"], ["key=a,b"]), (["a\x00key=b"], ["key=a", "key=b"]),
        (["a", "b\x00key=c"], ["key=a\x00key=b", "key=c"]), (["a=b"], ["key=a=b"]),
        (["é", ""], ["key=é", "key="]),
    ]
    cases += [(["a", "b"], ["key=a", "key=b", "key="]), (["a", "bkey=c"], ["key=a", "key=bkey=c"]),
              (["a", "b"], ["key=akey=b", "key="]), (["ab", "c"], ["key=a", "key=bc"])]
    for src_keys, keys in cases:
        for sent in (False, True):
            p = plan(src_keys, sent)
            was = p._raw_keys(keys) == src_keys \
                and len(p.source.digests or "") == 64 * len(keys)
            assert (p.source_digests(keys) is not None) == was, (src_keys, keys, sent)


def test_a_combined_digest_is_the_digest_of_its_pairs() -> None:
    """hashing.combined_digest made from one list of pieces is sha("k1=h1", NUL, ...) still."""
    from barca.identity.digests import sha
    for keys, hashes in ((["a"], ["h1"]), (["a", "b", "é\ud800"], ["1", "2", "3"]),
                         (["b", "a"], ["1", "2"]), ([], []), (["a", "b"], ["1"]),
                         ([f"key=k{i:05d}" for i in range(3000)],
                          [f"{i:064x}" for i in range(3000)])):
        pairs = sorted(zip(keys, hashes, strict=False))
        assert hashing.combined_digest(keys, hashes) == sha("\x00".join(map("=".join, pairs)))


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
    assert got == ("\x00".join(keys), "\x00".join(values),
                   bytes.fromhex(hashing.json_digests(values)), [0])
    # format 2: the digests as hex, no marks: a miss (read as the format it is, never as 3)
    body = marshal.dumps((worker.salt(), "\x00".join(keys), "\x00".join(values),
                          hashing.json_digests(values)))
    Path(memo).write_bytes(b"barca values memo 2\n" + hashlib.sha256(body).digest() + body)
    assert valuememo.read(memo, worker.salt()) is None
    _check(base, memo)
    assert hashed[-1] == 20
    # one byte of the memo changed: its SHA-256 check fails, a miss
    data = bytearray(Path(memo).read_bytes())
    data[-1] ^= 1
    Path(memo).write_bytes(bytes(data))
    assert valuememo.read(memo, worker.salt()) is None
    _check(dict(base, k01="x"), memo)
    assert hashed[-1] == 20


def test_values_are_compared_a_block_at_a_time_and_every_digest_is_exact(
        tmp_path: Path, hashed: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The memo marks where every STEP-th value begins: a tick compares blocks and splits only
    a block that moved -- the first or last value of a block, the last value, a value that
    grew or shrank (every later block then begins elsewhere in the new text), several blocks."""
    monkeypatch.setattr(valuememo, "STEP", 3)
    monkeypatch.setattr(worker, "MEMO_MOVED", 100)  # the memo stays as first written
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(20)}
    _check(base, memo)
    assert valuememo.read(memo, worker.salt())[3] == [0, 9, 18, 27, 38, 50, 62]  # type: ignore
    for moves in ({"k00": "x"}, {"k02": "longer value"}, {"k03": ""}, {"k19": "end"},
                  {"k05": "v6", "k06": "v5"}, {"k01": "", "k02": "v1v2"},  # the same text
                  {"k00": "a", "k08": "bbbbbbbb", "k09": "", "k17": "c", "k18": "v1"}):
        _check(dict(base, **moves), memo)
        assert hashed[-1] == len(moves)
    _check(base, memo)
    assert hashed[-1] == 0


def test_marks_that_do_not_hold_are_a_miss(tmp_path: Path, hashed: list[int],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A memo whose marks are not where its blocks begin (written so, with a good SHA-256) is
    never read: compared at the wrong places, a moved value would keep its old digest."""
    monkeypatch.setattr(valuememo, "STEP", 3)
    memo = str(tmp_path / "values" / "n")
    base = {f"k{i:02d}": f"v{i}" for i in range(9)}
    keys, values = list(base), list(base.values())
    digests = bytes.fromhex(hashing.json_digests(values))
    Path(memo).parent.mkdir(parents=True)
    for marks in ([0, 6, 12], [0, 9], [0, 9, 18, 27], [3, 9, 18], [0, 9, 17], "x", [0, 9.0, 18]):
        body = marshal.dumps((worker.salt(), "\x00".join(keys), "\x00".join(values), digests,
                              marks))
        Path(memo).write_bytes(valuememo.HEADER + hashlib.sha256(body).digest() + body)
        assert valuememo.read(memo, worker.salt()) is None, marks
    body = marshal.dumps((worker.salt(), "\x00".join(keys), "\x00".join(values), digests,
                          [0, 9, 18]))
    Path(memo).write_bytes(valuememo.HEADER + hashlib.sha256(body).digest() + body)
    assert valuememo.read(memo, worker.salt()) is not None  # the same memo, marks that hold
    _check(dict(base, k04="moved"), memo)
    assert hashed[-1] == 1


def test_a_snapshot_digest_is_the_digest_of_its_parts_also_for_a_large_node() -> None:
    """hashing.snapshot_digest of a large node hashes its keys once for the two digests a
    decision makes of them (the state after them kept): each is still sha(parts)."""
    from barca.core.salt import salt
    from barca.identity.digests import sha
    keys = [f"key=k{i:06d}" for i in range(20_000)]
    joined = "\x00".join(keys)
    inputs = ["input:fetched:key:" + "a" * 64]
    cases = (("d1", inputs, "s1", joined), ("d1", inputs, "s2", joined),
             ("d1", [], None, joined), ("d2", inputs, "s1", joined),
             ("d1", inputs, "s1", "\x00".join(keys)),  # the same text, another string
             ("d1", inputs, "s1", joined + "\x00key=z"), ("d1", inputs, "s1", joined))
    for definition, ins, source, text in cases:
        n = text.count("\x00") + 1
        want = sha(salt(), definition, "", str(n), text, *ins,
                   *([f"source:{source}"] if source is not None else []))
        assert hashing.snapshot_digest(definition, "", text.split("\x00"), ins, source,
                                       text) == want
