"""A first run at scale holds less (#31 item 4) and records the same.

A big node's snapshot (and the values row beside it) is written as soon as its rows are
(``Runner.snapshot_now`` keys or more), not held to the walk's end: what is written is what a
walk holding every snapshot to its end writes, and the next run is served by it. A step's
SHA-256, kept as bytes, reads back as the hex digits it was given. In process, a real store and
a real pool (bench/s08 measures the memory itself, at 200,000 keys)."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from barca import api
from barca.core.types import NodeId
from barca.engine.runner import Runner
from barca.engine.states import StepState
from barca.store.metadata import Store

PIPELINE = (Path(__file__).parent / "pipelines" / "dict_chain.py").read_text()

N = 12
MOVING = ("id", "created_at", "elapsed", "run_id")  # a clock's or a run's own, not the result's


def get(root: Path) -> dict[str, Any]:
    here = os.getcwd()
    os.chdir(root)
    try:
        return api.materialize("parsed", "pipeline.py").to_json()
    finally:
        os.chdir(here)


def written(root: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Every result row (but its id, times and run id) and every snapshot row, sorted."""
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        cols = [c for _, c, *_ in conn.execute("PRAGMA table_info(materializations)")
                if c not in MOVING]
        rows = sorted(conn.execute(f"SELECT {', '.join(cols)} FROM materializations"),
                      key=repr)
        snaps = sorted(conn.execute("SELECT asset, digest, combined, keys, hashes "
                                    "FROM snapshots"))
    return rows, snaps


def first_run(root: Path, monkeypatch: pytest.MonkeyPatch, now: int) -> list[int]:
    """A first run with ``Runner.snapshot_now`` at ``now``: the size of each snapshot write."""
    root.mkdir()
    (root / "pipeline.py").write_text(PIPELINE)
    (root / "versions.json").write_text(json.dumps({f"k{i:02d}": "v1" for i in range(N)}))
    writes: list[int] = []
    real = Store.put_snapshots

    def counted(self: Store, snaps: list[tuple[str, str, str, str, str]]) -> None:
        if snaps:
            writes.append(len(snaps))
        real(self, snaps)

    with monkeypatch.context() as m:
        m.setattr(Runner, "snapshot_now", now)
        m.setattr(Store, "put_snapshots", counted)
        assert get(root)["steps_executed"] == 2 * N + 1
    return writes


def test_a_big_nodes_snapshot_written_early_is_the_one_written_at_the_end(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    late = first_run(tmp_path / "late", monkeypatch, 10**9)
    early = first_run(tmp_path / "early", monkeypatch, N)
    # fetched's snapshot and its values row, then parsed's: all at the end, or each node's
    # as soon as its rows are recorded
    assert late == [3]
    assert early == [2, 1]
    rows, snaps = written(tmp_path / "early")
    assert (rows, snaps) == written(tmp_path / "late")
    assert len(rows) == 2 * N + 1 and len(snaps) == 3
    # the next run is served by those snapshots: only the sensor runs
    assert get(tmp_path / "early")["steps_executed"] == 1


def test_a_steps_sha256_reads_back_as_given() -> None:
    st = StepState(NodeId("pipeline.py:a"), "key=k")
    for value in ("ab" * 32, "AB" * 32, "not a digest", "", None):
        st.sha256 = value
        assert st.sha256 == value
    st.sha256 = "0f" * 32
    assert st.row is None and st.sha256 == "0f" * 32


def _row(run_id: str, run_hash: str, status: str = "success") -> dict[str, Any]:
    return {"node": f"p.py:a[{run_hash}]", "asset": "p.py:a", "partition": run_hash,
            "run_hash": run_hash, "path": f".barca/artifacts/x/{run_hash}.json",
            "format": "json", "status": status, "run_id": run_id, "created_at": 0.0}


def test_claims_hold_the_callers_run_hashes_and_read_only_other_runs_rows(
        tmp_path: Path) -> None:
    """Sharing's reads at scale: the run hashes claimed are the caller's own strings (not read
    back, one new string each), and the rows recorded since are another run's and the newest
    one (where the next look starts), not this run's own (at 200,000 results, ~70 MB)."""
    from barca.store.claims import Claims
    store = Store(tmp_path)
    try:
        mine, theirs = Claims(store, "mine"), Claims(store, "theirs")
        assert theirs.take(["h2"]) == {"h2"}
        want = [f"h{i}" for i in range(1, 5)]
        got = mine.take(want)
        assert got == {"h1", "h3", "h4"}  # h2 is another run's
        assert all(any(g is w for w in want) for g in got)
        assert mine.take(["h1", "h2"]) == {"h1"}  # ours from before; theirs still
        start = mine.newest_row()
        store.record([_row("mine", "h1"), _row("theirs", "h2"), _row("mine", "h3"),
                      _row("theirs", "h9", "failed"), _row("mine", "h4")])
        seen = mine.successes_since(start)
        assert [(h, r) for _, _, h, r in seen] == [("h2", "theirs"), ("h4", "mine")]
        assert seen[-1][0] == mine.newest_row()
        assert mine.successes_since(seen[-1][0]) == []
    finally:
        store.close()
