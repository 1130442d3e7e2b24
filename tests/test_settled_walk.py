"""A walk a settle record vouches for (barca.engine.settle) settles each node from its snapshot
without the general walk's per-node steps (barca.engine.runner ``_settled_state``): in process,
with a real store. What it serves is what the full decision serves (the record deleted), for
``get`` and ``status``; the output mode is no part of the state (a ``--json`` command and a
``--pretty`` one share the record); an edit after a settled run is noticed."""
from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from barca import api
from barca.core.settings import Settings
from barca.engine import settle

PIPELINE = """
from barca import asset, partitions
from helpers import bump

KEYS = ["a", "b", "c"]


@asset()
def base() -> int:
    return 10


@asset(inputs={"base": base}, partitions={"k": partitions(KEYS)})
def item(base: int, k: str) -> int:
    return bump(base) + len(k)


@asset(inputs={"base": base})
def mid(base: int) -> dict:
    return {"v": bump(base), "name": "mid"}


@asset(inputs={"mid": mid})
def top(mid: dict) -> int:
    return mid["v"] * 2
"""


@contextmanager
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bool]]:
    """Whether each walk's settle record matched (the real check, its answers kept)."""
    got: list[bool] = []
    real = settle.Settle.check

    def counting(self: settle.Settle, snapshots: Any) -> bool:
        got.append(real(self, snapshots))
        return got[-1]

    with monkeypatch.context() as m:
        m.setattr(settle.Settle, "check", counting)
        yield got


def _run(target: str | None, output: str | None = None) -> dict[str, Any]:
    s = Settings.resolve(output=output)
    doc = api.materialize(target, "pipeline.py", settings=s).to_json()
    doc.pop("run_id"), doc.pop("elapsed_seconds")
    return doc


def _status(target: str | None) -> Any:
    doc = api.status(target, "pipeline.py").to_json()
    return doc


def _forget_records(root: Path) -> None:
    with sqlite3.connect(root / ".barca" / "metadata.db") as conn:
        conn.execute("DELETE FROM settle_records")


@pytest.fixture
def settled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    (tmp_path / "helpers.py").write_text("def bump(x):\n    return x + 1\n")
    monkeypatch.chdir(tmp_path)
    assert _run(None)["steps_executed"] == 6
    assert _run(None)["steps_executed"] == 0  # decided in full: writes the record
    return tmp_path


@pytest.mark.parametrize("target", [None, "top", "item"])
def test_a_settled_walk_serves_what_the_full_decision_serves(
        settled: Path, monkeypatch: pytest.MonkeyPatch, target: str | None) -> None:
    _run(target)  # the record of this cone
    with checks(monkeypatch) as got:
        served = _status(target), _run(target)
    assert got == [True, True]  # both walks settled by the record
    _forget_records(settled)
    with checks(monkeypatch) as got:
        full = _status(target), _run(target)
    assert got == [False, False]  # no record: the full decision
    assert served == full


def test_the_output_mode_is_no_part_of_the_state(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _run(None, "json")
    with checks(monkeypatch) as got:
        assert _run(None, "pretty")["steps_executed"] == 0
        assert _run(None, "json")["steps_executed"] == 0
        assert _run(None)["steps_executed"] == 0
    assert got == [True, True, True]
    with checks(monkeypatch) as got:  # a setting that is part of the state: decided again
        api.materialize(None, "pipeline.py", settings=Settings.resolve(pool_size=1))
    assert got == [False]


def test_an_edit_after_a_settled_run_is_noticed(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with checks(monkeypatch) as got:
        assert _run("top")["final_output"] == 22
        assert _run("top")["final_output"] == 22
    assert got == [False, True]  # the first writes top's record, the second is served by it
    (settled / "helpers.py").write_text("def bump(x):\n    return x + 2\n")
    with checks(monkeypatch) as got:
        out = _run("top")
    assert got == [False]
    assert out["steps_executed"] == 2 and out["final_output"] == 24
    assert _run("top")["steps_executed"] == 0
    text = (settled / "pipeline.py").read_text()
    (settled / "pipeline.py").write_text(text.replace('"v": bump(base)', '"v": bump(base) + 1'))
    with checks(monkeypatch) as got:
        out = _run("top")
    assert got == [False]
    assert out["steps_executed"] == 2 and out["final_output"] == 26


def test_a_tampered_result_under_a_settled_record_is_computed_again(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run("top")["steps_executed"] == 0
    mine = [f for f in (settled / ".barca" / "artifacts").rglob("*.json") if "top" in str(f)]
    assert len(mine) == 1
    mine[0].write_text("999")
    with checks(monkeypatch) as got:
        out = _run("top")
    assert got == [True]  # the record vouches for the decision; the read value is checked
    assert out["steps_executed"] == 1 and out["final_output"] == 22
    assert mine[0].read_text() != "999"


def test_a_settled_walk_finds_its_results_where_the_record_says(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record says where each one-key node's result is (the newest success of the run hash
    its snapshot holds): a walk it vouches for reads no result row of one (a partitioned
    node's are read, as before), yet serves, and checks, what the full decision does."""
    from barca.store.metadata import Store
    _run(None)
    statements: list[str] = []
    real = Store._open

    def traced(self: Store, create: bool) -> None:
        real(self, create)
        if self.conn is not None:
            self.conn.set_trace_callback(statements.append)

    with checks(monkeypatch) as got:
        monkeypatch.setattr(Store, "_open", traced)
        served = _run(None)
        monkeypatch.setattr(Store, "_open", real)
    assert got == [True]
    reads = [s for s in statements if "materializations" in s and s.lstrip().startswith("SELECT")
             and any(f"pipeline.py:{n}'" in s for n in ("base", "mid", "top"))]
    assert reads == [], reads
    _forget_records(settled)
    assert _run(None) == served


def test_only_the_records_written_last_are_kept(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record per cone (a target set), the oldest dropped past settle.KEEP: one keyed by an
    older barca's salt would be kept for good otherwise. A dropped one costs a full decision."""
    monkeypatch.setattr(settle, "KEEP", 2)
    _forget_records(settled)
    for target in ("top", "mid", "item"):  # each writes its cone's record
        _run(target)
    with sqlite3.connect(settled / ".barca" / "metadata.db") as conn:
        assert conn.execute("SELECT count(*) FROM settle_records").fetchone() == (2,)
    with checks(monkeypatch) as got:
        assert _run("item")["steps_executed"] == 0  # the newest: kept
        assert _run("mid")["steps_executed"] == 0
        assert _run("top")["steps_executed"] == 0  # the oldest: dropped, decided in full
    assert got == [True, True, False]


@pytest.mark.parametrize("size", [0, 1, 2047, 2048, 2049, 5000])
def test_a_result_is_read_whole_at_every_size(tmp_path: Path, size: int) -> None:
    """One read for a small result (its size as fstat said it): the bytes and digest are the
    file's at and around the preview size."""
    import hashlib

    from barca.engine.integrity import SMALL_BYTES, read_digest
    data = bytes(i % 251 for i in range(size))
    f = tmp_path / "r.bin"
    f.write_bytes(data)
    digest, kept = read_digest(str(f), True, regular=True)
    assert digest == hashlib.sha256(data).hexdigest()
    assert kept == (data if size <= SMALL_BYTES else None)
