"""A large snapshot is stored in parts (store.snapchunks): what is read back is always what was
written, a walk that moved one key rewrites one part, a part that is missing makes the
snapshot a miss (never a partial text), rows written inline before still read, and nodes
written one after another in one walk (as the runner writes a large node's snapshot as soon as
it is made) each keep the unchanged parts of what the walk read; a part changed behind the
walk's back is never kept. In
process, with real SQLite and a small part size."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from barca.store import snapchunks
from barca.store.metadata import Store


@pytest.fixture
def small_parts(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(snapchunks, "PART", 64 * 4)  # 4 run hashes a part
    return 64 * 4


def _row(asset: str, n: int, tag: str = "a", moved: dict[int, str] | None = None
         ) -> tuple[str, str, str, str, str]:
    keys = [f"key=k{i:03d}" for i in range(n)]
    hashes = [(moved or {}).get(i, f"{tag}{i:063x}"[:64]) for i in range(n)]
    return (asset, f"digest-{tag}", f"combined-{tag}", "\x00".join(keys), "".join(hashes))


def _parts(root: Path) -> list[tuple[str, str, int, str]]:
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        return conn.execute("SELECT asset, field, idx, gen FROM snapshot_parts "
                            "ORDER BY asset, field, idx").fetchall()


def _read(root: Path, asset: str) -> tuple[str, str, str, str] | None:
    store = Store(root)
    try:
        got = store.snapshots([asset]).get(asset)
        one = store.snapshot(asset)
        assert one == got  # one row or many: the same snapshot
        return None if got is None else tuple(got)  # type: ignore[return-value]
    finally:
        store.close()


def test_a_large_snapshot_reads_back_whole_and_a_moved_key_rewrites_one_part(
        tmp_path: Path, small_parts: int) -> None:
    store = Store(tmp_path)
    first = _row("n", 40)
    store.put_snapshots([first])
    assert _read(tmp_path, "n") == first[1:]
    with sqlite3.connect(tmp_path / ".barca" / "metadata.db") as conn:
        assert conn.execute("SELECT keys FROM snapshots").fetchone() == ("",)  # in parts
    before = set(_parts(tmp_path))
    assert len(before) == 10 + -(-len(first[3]) // small_parts)

    # a walk that read it and moved key 17 (part 4 of the hashes)
    store = Store(tmp_path)
    assert store.snapshots(["n"])["n"].hashes == first[4]
    second = _row("n", 40, moved={17: "f" * 64})
    second = (second[0], "digest-b", "combined-b", second[3], second[4])
    store.put_snapshots([second])
    store.close()
    after = set(_parts(tmp_path))
    assert len(after) == len(before)
    changed = after - before
    assert [(f, i) for _, f, i, _ in changed] == [("h", 4)]
    assert _read(tmp_path, "n") == second[1:]

    # a value changed back: read, written again, read back as written
    store = Store(tmp_path)
    store.snapshots(["n"])
    store.put_snapshots([first])
    store.close()
    assert _read(tmp_path, "n") == first[1:]


def test_keys_added_or_removed_and_a_writer_that_read_nothing(tmp_path: Path,
                                                              small_parts: int) -> None:
    store = Store(tmp_path)
    store.put_snapshots([_row("n", 40)])
    for n in (41, 39, 3, 57):  # a key added, removed, so few it is inline, many again
        store = Store(tmp_path)
        if n != 57:  # 57: written by a process that read no snapshot
            store.snapshots(["n"])
        row = _row("n", n, tag=str(n))
        store.put_snapshots([row])
        store.close()
        assert _read(tmp_path, "n") == row[1:]
        stored = _parts(tmp_path)
        assert (not stored) == (n == 3)  # an inline row leaves no part behind
        gens = {f: [g for _, ff, _, g in stored if ff == f] for f in snapchunks.FIELDS}
        assert len(gens["h"]) == (0 if n == 3 else -(-n * 64 // small_parts))


def test_a_missing_part_is_a_miss_and_an_inline_row_still_reads(tmp_path: Path,
                                                                small_parts: int) -> None:
    store = Store(tmp_path)
    old = _row("old", 40)
    with sqlite3.connect(tmp_path / ".barca" / "metadata.db") as conn:  # written inline
        conn.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?)", old)
    assert _read(tmp_path, "old") == old[1:]
    store.put_snapshots([_row("n", 40)])
    store.close()
    with sqlite3.connect(tmp_path / ".barca" / "metadata.db") as conn:
        conn.execute("DELETE FROM snapshot_parts WHERE field='h' AND idx=3")
    assert _read(tmp_path, "n") is None
    # the next write after a miss writes every part again
    store = Store(tmp_path)
    assert "n" not in store.snapshots(["n", "old"])
    store.put_snapshots([_row("n", 40, tag="c")])
    store.close()
    assert _read(tmp_path, "n") == _row("n", 40, tag="c")[1:]


# -- one walk writing several nodes' snapshots

def test_nodes_written_one_after_another_each_rewrite_only_their_moved_part(
        tmp_path: Path, small_parts: int) -> None:
    store = Store(tmp_path)
    store.put_snapshots([_row("a", 40), _row("b", 40)])
    store.close()
    before = set(_parts(tmp_path))

    store = Store(tmp_path)  # a walk: both read first, then written one after the other
    store.snapshots(["a", "b"])
    a2 = _row("a", 40, moved={17: "f" * 64})
    b2 = _row("b", 40, moved={30: "e" * 64})
    store.put_snapshots([a2])
    store.put_snapshots([b2])
    store.close()
    changed = {(asset, f, i) for asset, f, i, _ in set(_parts(tmp_path)) - before}
    assert changed == {("a", "h", 4), ("b", "h", 7)}
    assert _read(tmp_path, "a") == a2[1:]
    assert _read(tmp_path, "b") == b2[1:]


def test_a_node_written_twice_in_a_walk_and_parts_replaced_behind_its_back(
        tmp_path: Path, small_parts: int) -> None:
    store = Store(tmp_path)
    store.put_snapshots([_row("a", 40), _row("b", 40)])
    store.close()

    store = Store(tmp_path)
    store.snapshots(["a", "b"])
    a2 = _row("a", 40, moved={1: "f" * 64})
    store.put_snapshots([a2])
    a3 = _row("a", 40, moved={1: "f" * 64, 2: "d" * 64})
    store.put_snapshots([a3])  # what was read of "a" is not what is stored now
    assert _read(tmp_path, "a") == a3[1:]
    # another process writes "b" anew (new generations) before this walk writes it
    other = Store(tmp_path)
    other.put_snapshots([_row("b", 40, tag="c")])
    other.close()
    b2 = _row("b", 40, moved={30: "e" * 64})
    store.put_snapshots([b2])
    store.close()
    assert _read(tmp_path, "b") == b2[1:]


@pytest.mark.parametrize(("stored", "asked"), [(100, 80), (200, 64), (70, 70), (10, 10)])
def test_many_snapshots_read_at_once_are_each_one_read_alone(
        tmp_path: Path, small_parts: int, stored: int, asked: int) -> None:
    """Most of the table asked for is read in one scan of it (Store.snapshots), the rest name
    by name: either way each snapshot is the one read alone, large ones in parts too, and a
    name with none is not in the answer."""
    store = Store(tmp_path)
    rows = [_row(f"n{i:03d}", 40 if i % 7 == 0 else 1, tag=f"t{i}") for i in range(stored)]
    store.put_snapshots(rows)
    names = [f"n{i:03d}" for i in range(0, stored, max(1, stored // asked))][:asked - 1]
    names.append("missing")
    store.close()
    store = Store(tmp_path)
    try:
        got = store.snapshots(names)
        assert sorted(got) == sorted(n for n in names if n != "missing")
        for n in got:
            assert got[n] == store.snapshot(n)
            assert tuple(got[n]) == rows[int(n[1:])][1:]
    finally:
        store.close()
