"""`barca gc` removes what barca kept for nodes that are no longer in the pipeline: a dict
source's values memo (``.barca/values/``) and the node's snapshot with its parts (tier
``removed_nodes``, before any result, whatever the budget). A node whose file the command did
not read is not gone; a dry run deletes nothing. In process."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from barca import api
from barca.core.settings import Settings
from barca.store import snapchunks, valuememo

KEEP = "from barca import asset\n\n\n@asset()\ndef other() -> int:\n    return 1\n"
ITEM = """

from barca import partitions


@asset(partitions={"key": partitions([f"k{i:02d}" for i in range(40)])})
def item(key: str) -> str:
    return key
"""


def _memo(root: Path, node: str) -> Path:
    where = valuememo.path(str(root), ".barca", node)
    valuememo.write(where, "salt", ["a"], ["1"], "0" * 64)
    return Path(where)


def _snapshot_rows(root: Path, node: str) -> tuple[int, int]:
    conn = sqlite3.connect(root / ".barca" / "metadata.db")
    try:
        return (conn.execute("SELECT count(*) FROM snapshots WHERE asset=?", (node,)).fetchone()[0],
                conn.execute("SELECT count(*) FROM snapshot_parts WHERE asset=?",
                             (node,)).fetchone()[0])
    finally:
        conn.close()


def _gc(root: Path, *files: str, **kw: object):
    return api.gc(*files, settings=Settings.resolve(root), **kw)


@pytest.fixture
def store_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(snapchunks, "PART", 640)  # item's 40 run hashes: a snapshot in parts
    (tmp_path / "pipeline.py").write_text(KEEP + ITEM)
    (tmp_path / "side.py").write_text(KEEP.replace("other", "side"))
    api.materialize(None, "pipeline.py")
    api.materialize(None, "side.py")
    return tmp_path


def test_gc_removes_the_memo_and_snapshot_parts_of_a_removed_node(store_root: Path) -> None:
    memo = _memo(store_root, "pipeline.py:item")
    kept, side = _memo(store_root, "pipeline.py:other"), _memo(store_root, "side.py:side")
    snaps, parts = _snapshot_rows(store_root, "pipeline.py:item")
    assert snaps == 1 and parts > 1
    (store_root / "pipeline.py").write_text(KEEP)  # item removed from the pipeline
    rel = memo.relative_to(store_root).as_posix()

    dry = _gc(store_root, "pipeline.py", dry_run=True)
    assert dry.tiers["removed_nodes"] == [rel]
    assert memo.exists() and _snapshot_rows(store_root, "pipeline.py:item") == (snaps, parts)

    report = _gc(store_root, "pipeline.py")
    assert report.tiers["removed_nodes"] == [rel] and list(report.evicted) == [rel]
    assert "removed_nodes: 1 file" in str(report)
    assert not memo.exists()
    assert _snapshot_rows(store_root, "pipeline.py:item") == (0, 0)
    # a node still in the pipeline, and one of a file gc did not read, keep theirs
    assert kept.exists() and side.exists()
    assert _snapshot_rows(store_root, "pipeline.py:other")[0] == 1
    assert _snapshot_rows(store_root, "side.py:side")[0] == 1
    assert report.freed() == report.size_bytes - report.after_bytes > 0

    again = _gc(store_root, "pipeline.py")
    assert again.tiers["removed_nodes"] == [] and not again.evicted
    assert api.materialize("other", "pipeline.py").steps_executed == 0  # still cached


def test_a_deleted_file_s_nodes_are_gone(store_root: Path) -> None:
    side = _memo(store_root, "side.py:side")
    (store_root / "side.py").unlink()
    report = _gc(store_root, "pipeline.py")
    assert report.tiers["removed_nodes"] == [side.relative_to(store_root).as_posix()]
    assert not side.exists() and _snapshot_rows(store_root, "side.py:side") == (0, 0)
