"""A large node's snapshot holds its run hashes as the text its combined digest is made of
(identity.pairs, store.snapchunks field ``c``): read in place as the run hashes of the node's
keys, a one-key change splices that text, and the digest of the spliced text is exactly the
combined digest the rule (engine.md §2) computes over every key's run hash. A text that does
not have its keys' shape is never read as run hashes; a small node's row stays inline in the
earlier form, and a snapshot of the earlier form (``h``) still reads, and is replaced whole by
the next write. In process, with real SQLite."""
from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from barca.core.sha import sha256
from barca.engine.decision import stored_hashes
from barca.identity import hashing
from barca.identity.digests import sha
from barca.identity.pairs import Pairs, picked, spliced, text_digest, text_of
from barca.store import snapchunks
from barca.store.metadata import Store
from barca.store.rows import Snapshot


def _keys(n: int, seed: int = 1) -> list[str]:
    """Sorted unique keys of many lengths, some holding ``=`` or non-ASCII text."""
    rnd = random.Random(seed)
    alphabet = "ab=é\u4e2d0123456789"
    got = {"".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 12))) for _ in range(n)}
    return sorted(got)


def _hashes(n: int, tag: str = "a") -> list[str]:
    return [sha(f"{tag}{i}") for i in range(n)]


def _rule(keys: list[str], hashes: list[str]) -> str:
    """The combined digest as engine.md §2 states it: sha over "k=h" in sorted key order."""
    return sha("\x00".join(map("=".join, sorted(zip(keys, hashes, strict=True)))))


def test_the_pairs_text_is_the_combined_digests_input_and_reads_as_the_run_hashes() -> None:
    keys = _keys(300)
    hashes = _hashes(len(keys))
    text = text_of(keys, hashes)
    assert text is not None
    assert sha256(text.encode("utf-8", "surrogatepass")).hexdigest() == _rule(keys, hashes)
    p = Pairs.of(keys, text, "\x00".join(keys))
    assert p is not None
    assert len(p) == len(keys) and list(p) == hashes
    assert [p[i] for i in (0, 7, 150, len(keys) - 1, -1)] == \
        [hashes[i] for i in (0, 7, 150, len(keys) - 1, -1)]
    assert picked(p, [3, 4, 200]) == [hashes[3], hashes[4], hashes[200]]
    assert hashing.combined_digest(keys, p) == _rule(keys, hashes)
    # not in order, or not one hash a key: no text (the digest sorts them, as ever)
    assert text_of(list(reversed(keys)), hashes) is None
    assert text_of(keys, hashes[:-1]) is None


@pytest.mark.parametrize("moved", [[0], [17], [299], [5, 6, 250], list(range(0, 300, 3))])
def test_a_spliced_text_digests_as_the_rule_over_the_moved_run_hashes(moved: list[int]
                                                                      ) -> None:
    keys = _keys(300, seed=len(moved))
    n = len(keys)
    hashes = _hashes(n)
    p = Pairs.of(keys, text_of(keys, hashes) or "", "\x00".join(keys))
    assert p is not None
    moved = sorted({i % n for i in moved})
    new = {i: sha(f"moved{i}") for i in moved}
    new[min(moved)] = hashes[min(moved)]  # one "moved" to the run hash it had
    want = list(hashes)
    for i, h in new.items():
        want[i] = h
    got = spliced(p, new)
    assert list(got) == want
    assert hashing.combined_digest(keys, got) == _rule(keys, want)
    assert spliced(p, {}) is p and spliced(p, {3: hashes[3]}) is p  # nothing moved: no copy


def test_a_long_text_is_digested_in_pieces_as_the_whole() -> None:
    text = "k=é\ud800\u4e2d\x00" * 1000 + "x"
    for chunk in (1, 2, 3, 7, 64, len(text), 10 ** 6):
        assert text_digest(text, chunk) == sha256(text.encode("utf-8", "surrogatepass")
                                                  ).hexdigest()


def test_a_text_not_of_its_keys_shape_is_refused_or_never_read_as_run_hashes() -> None:
    keys = [f"k{i:03d}" for i in range(50)]
    hashes = _hashes(50)
    text = text_of(keys, hashes) or ""
    joined = "\x00".join(keys)
    assert Pairs.of(keys, text[:-1], joined) is None          # cut short
    assert Pairs.of(keys, text + "x\x00", joined) is None     # one entry too many
    assert Pairs.of(keys[:-1], text, "\x00".join(keys[:-1])) is None  # other keys
    # the same length, another key at a place: found when read, never served as a run hash
    other = ["j" + k[1:] if i == 20 else k for i, k in enumerate(keys)]
    p = Pairs.of(other, text, "\x00".join(other))
    assert p is not None
    assert p[20] == ""  # no run hash matches it: that key is decided again
    assert "" in p.every()


def _parts(root: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        return conn.execute("SELECT field, idx FROM snapshot_parts ORDER BY field, idx"
                            ).fetchall()


def _two_hundred(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str], str]:
    """200 keys, their run hashes and the keys joined, with parts small enough to be several."""
    monkeypatch.setattr(snapchunks, "PART", 600)
    keys = [f"key=k{i:04d}" for i in range(200)]
    return keys, _hashes(200), "\x00".join(keys)


def test_a_large_snapshot_is_stored_as_the_pairs_text_and_a_moved_key_rewrites_one_part(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, hashes, joined = _two_hundred(monkeypatch)
    text = text_of(keys, hashes) or ""
    store = Store(tmp_path)
    store.put_snapshots([("n", "d1", _rule(keys, hashes), joined, text)])
    store.close()
    fields = {f for f, _ in _parts(tmp_path)}
    assert fields == {"k", "c"}  # the text, not the hashes concatenated
    store = Store(tmp_path)
    snap = store.snapshots(["n"])["n"]
    assert snap.hashes == text and snap.keys == joined
    got = stored_hashes(snap, keys, joined)
    assert isinstance(got, Pairs) and list(got) == hashes
    before = set(_parts(tmp_path))
    moved = spliced(got, {123: sha("moved")})
    moved_text = text_of(keys, moved) or ""
    store.put_snapshots([("n", "d2", hashing.combined_digest(keys, moved), joined,
                          moved_text)])
    store.close()
    with sqlite3.connect(tmp_path / ".barca" / "metadata.db") as conn:
        gens = conn.execute("SELECT field, idx, gen FROM snapshot_parts").fetchall()
    assert len({g for _, _, g in gens}) == 2  # one part written again, under a new generation
    assert set(_parts(tmp_path)) == before
    store = Store(tmp_path)
    again = store.snapshot("n")
    store.close()
    assert again is not None and again.hashes == moved_text and again.digest == "d2"
    assert list(stored_hashes(again, keys)) == [sha("moved") if i == 123 else h
                                                for i, h in enumerate(hashes)]


def test_an_earlier_snapshot_reads_and_a_small_one_stays_inline_in_the_earlier_form(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys, hashes, joined = _two_hundred(monkeypatch)
    store = Store(tmp_path)
    # written by a barca before the pairs text: hashes concatenated, in parts ("h")
    store.put_snapshots([("n", "d1", _rule(keys, hashes), joined, "".join(hashes))])
    store.close()
    assert {f for f, _ in _parts(tmp_path)} == {"k", "h"}
    store = Store(tmp_path)
    snap = store.snapshots(["n"])["n"]
    assert stored_hashes(snap, keys, joined) == hashes  # read as it was
    # the next write stores the text, and no part of the earlier form is left
    store.put_snapshots([("n", "d1", _rule(keys, hashes), joined, text_of(keys, hashes) or "")])
    # a small node: inline, its run hashes concatenated (as any barca reads them)
    few = keys[:3]
    store.put_snapshots([("m", "d3", _rule(few, hashes[:3]), "\x00".join(few),
                          text_of(few, hashes[:3]) or "")])
    store.close()
    assert {f for f, _ in _parts(tmp_path)} == {"k", "c"}
    with sqlite3.connect(tmp_path / ".barca" / "metadata.db") as conn:
        assert conn.execute("SELECT hashes FROM snapshots WHERE asset='m'").fetchone() == (
            "".join(hashes[:3]),)
    # a reader of the earlier form (fields k and h only) finds a miss, never a wrong text
    assert snapchunks._refs("@k:1;c:2") is not None and snapchunks._refs("@k:1;x:2") is None
    store = Store(tmp_path)
    m = store.snapshot("m")
    store.close()
    assert m is not None and stored_hashes(m, few) == hashes[:3]


def test_a_snapshot_of_other_keys_reads_as_its_own_keys_run_hashes() -> None:
    keys = [f"k{i:03d}" for i in range(40)]
    hashes = _hashes(40)
    snap = Snapshot("d", "c", "\x00".join(keys), text_of(keys, hashes) or "")
    got = stored_hashes(snap, keys[:-1] + ["k999"])  # a key removed, another added
    assert got == hashes  # a list in the snapshot's key order (decided key by key)
    assert stored_hashes(Snapshot("d", "c", "a", "f" * 63), ["a"]) == []  # not 64 a hash


@pytest.mark.slow  # every step runs in the worker processes of a real pool
def test_a_store_of_the_earlier_form_ticks_right_and_is_rewritten_as_the_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A dict source's tick over snapshots an earlier barca wrote (run hashes concatenated):
    one key runs, every key served is what a decision without any memo finds, and the
    snapshots are then the text; a tick over those is right too."""
    from test_dict_values_memo import PIPELINE, N, from_scratch, hashed, name, ran, tick
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    versions = {name(i): "v1" for i in range(N)}
    assert tick(tmp_path, versions)["steps_executed"] == 2 * N + 1
    db = tmp_path / ".barca" / "metadata.db"

    def fields() -> set[tuple[str, str]]:
        with sqlite3.connect(db) as conn:
            got = conn.execute("SELECT DISTINCT CAST(asset AS BLOB), field FROM snapshot_parts")
            return {(a, f) for a, f in got if not a.endswith(b"\x00values")}

    nodes = {b"pipeline.py:fetched", b"pipeline.py:parsed"}
    assert fields() == {(n, f) for n in nodes for f in ("k", "c")}
    store = Store(tmp_path)  # as a barca before the text wrote them
    snaps = store.snapshots(["pipeline.py:fetched", "pipeline.py:parsed"])
    store.put_snapshots([(a, s.digest, s.combined, s.keys,
                          "".join(stored_hashes(s, s.keys.split("\x00"))))
                         for a, s in snaps.items()])
    store.close()
    assert fields() == {(n, f) for n in nodes for f in ("k", "h")}
    for t, i in enumerate((1500, 3)):
        versions[name(i)] = f"v{t + 2}"
        with hashed(monkeypatch) as counts:
            got = tick(tmp_path, versions)
        assert got["steps_executed"] == 3
        assert ran(got)["pipeline.py:parsed"] == [f"key={name(i)}"]
        assert max(counts) < 10, counts  # settled from the snapshot, either form
        assert all(a == "cached" for a, _ in from_scratch(tmp_path).values())
        assert fields() == {(n, f) for n in nodes for f in ("k", "c")}
