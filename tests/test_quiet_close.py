"""A cached command closes the metadata database without a checkpoint (store.quietclose): its
bookkeeping stays in the WAL, committed and seen by every later reader, until a command that
writes results checkpoints it. Nothing of it is lost, a deleted ``metadata.db`` is still
rebuilt, and status's LAST RUN of a many-key node is the newest *current* result."""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from barca import api
from barca.store import quietclose

KEYS = 20  # more run hashes than the point queries of status's LAST RUN (16)
PIPELINE = f"""
from barca import asset, collect, partitions

@asset(partitions={{"key": partitions([f"k{{i:02d}}" for i in range({KEYS})])}})
def item(key: str) -> dict:
    return {{"key": key, "v": VERSION}}

@asset(inputs={{"items": collect(item)}})
def total(items: list) -> int:
    return len(items)
"""


def _write(root: Path, version: int) -> None:
    (root / "pipeline.py").write_text(f"VERSION = {version}\n" + PIPELINE)


def _get() -> int:
    return api.materialize("total", "pipeline.py").steps_executed


def _wal(root: Path) -> int:
    try:
        return os.path.getsize(root / ".barca" / "metadata.db-wal")
    except OSError:
        return 0


def _runs(root: Path) -> list[tuple[str, int, int]]:
    conn = sqlite3.connect(root / ".barca" / "metadata.db")
    try:
        return list(conn.execute(
            "SELECT status, steps_run, steps_cached FROM runs ORDER BY started_at"))
    finally:
        conn.close()


@pytest.fixture
def store_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    _write(tmp_path, 1)
    assert _get() == KEYS + 1
    return tmp_path


def test_a_cached_get_leaves_its_rows_in_the_wal_and_loses_none(store_root: Path) -> None:
    assert _wal(store_root) == 0  # a run that wrote results checkpointed at its close
    for _ in range(3):
        assert _get() == 0
    assert _wal(store_root) > 0  # the cached gets did not checkpoint (nor fsync) at their close
    runs = _runs(store_root)  # a new connection reads their rows from the WAL
    assert runs[-3:] == [("success", 0, KEYS + 1)] * 3 and len(runs) == 4
    _write(store_root, 2)  # a run that writes results checkpoints everything with its own
    assert _get() == KEYS + 1
    assert _wal(store_root) == 0
    assert len(_runs(store_root)) == 5


def test_a_wal_past_the_bound_is_checkpointed_by_a_cached_close(
        store_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _get() == 0
    left = _wal(store_root)
    assert left > 0
    monkeypatch.setattr(quietclose, "QUIET_WAL_BYTES", left - 1)
    assert _get() == 0
    assert _wal(store_root) == 0
    assert len(_runs(store_root)) == 3


def test_a_deleted_metadata_db_is_rebuilt_though_a_wal_was_left(store_root: Path) -> None:
    assert _get() == 0
    assert _wal(store_root) > 0
    (store_root / ".barca" / "metadata.db").unlink()
    assert _get() == 0  # the results on disk are adopted, under the same run hashes
    status = api.status(None, "pipeline.py").to_json()
    assert [n["cache"]["state"] for n in status["nodes"]] == ["cached", "cached"]


def test_status_last_run_of_many_keys_is_the_newest_current_result(store_root: Path) -> None:
    def last() -> dict:
        doc = api.status("item", "pipeline.py").to_json()
        return doc["nodes"][0]["last_materialization"]
    assert _get() == 0  # a settled walk
    v1 = last()
    _write(store_root, 2)
    assert _get() == KEYS + 1
    v2 = last()
    assert v2["run_id"] != v1["run_id"]
    _write(store_root, 1)  # reverted: v1's results are current again, though v2's rows are newer
    assert _get() == 0
    assert _get() == 0  # settled: the newest successful row is not a current one
    assert last() == v1
