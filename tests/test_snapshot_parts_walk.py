"""Snapshots in parts (store.snapchunks) written one node after another in one walk, as the
runner writes a large node's snapshot as soon as it is made: each write keeps the unchanged
parts of what the walk read, also for the nodes written after the first. What is read back
is always what was written, and a part changed behind the walk's back is never kept. In
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


def _parts(root: Path) -> set[tuple[str, str, int, str]]:
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        return set(conn.execute("SELECT asset, field, idx, gen FROM snapshot_parts"))


def _read(root: Path, asset: str) -> tuple[str, ...] | None:
    store = Store(root)
    try:
        got = store.snapshots([asset]).get(asset)
        return None if got is None else tuple(got)
    finally:
        store.close()


def test_nodes_written_one_after_another_each_rewrite_only_their_moved_part(
        tmp_path: Path, small_parts: int) -> None:
    store = Store(tmp_path)
    store.put_snapshots([_row("a", 40), _row("b", 40)])
    store.close()
    before = _parts(tmp_path)

    store = Store(tmp_path)  # a walk: both read first, then written one after the other
    store.snapshots(["a", "b"])
    a2 = _row("a", 40, moved={17: "f" * 64})
    b2 = _row("b", 40, moved={30: "e" * 64})
    store.put_snapshots([a2])
    store.put_snapshots([b2])
    store.close()
    changed = {(asset, f, i) for asset, f, i, _ in _parts(tmp_path) - before}
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
