"""The settle record vouches for the snapshots the full decision matched, compared with the
ones read now: a snapshot changed behind the store's generation (which every writer of barca
moves) is not settled by the record. In process, with a real store."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from barca import api
from barca.engine import runner as runner_module

PIPELINE = """
from barca import asset


@asset()
def source() -> int:
    return 1


@asset(inputs={"source": source})
def r0(source: int) -> int:
    return source + 1
"""


def _settled_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = runner_module.settle_batch

    def spy(runner: object, batch: list[str]) -> list[str]:
        calls.append(len(batch))
        return real(runner, batch)
    monkeypatch.setattr(runner_module, "settle_batch", spy)
    return calls


def test_a_snapshot_changed_behind_the_generation_is_not_settled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    for _ in range(3):
        api.materialize(None, "pipeline.py")
    calls = _settled_walks(monkeypatch)
    assert api.materialize(None, "pipeline.py").steps_executed == 0
    assert calls  # settled by the record
    db = sqlite3.connect(tmp_path / ".barca" / "metadata.db", isolation_level=None)
    (gen,) = db.execute("SELECT n FROM generation").fetchone()
    db.execute("UPDATE snapshots SET digest = ? WHERE asset = 'pipeline.py:r0'", ("0" * 64,))
    db.execute("UPDATE generation SET n = ?", (gen,))  # as if no writer had moved it
    db.close()
    calls.clear()
    res = api.materialize(None, "pipeline.py")
    assert calls == [] and res.steps_executed == 0  # decided in full: still cached
    calls.clear()
    api.materialize(None, "pipeline.py")  # the snapshot written again, then a new record
    api.materialize(None, "pipeline.py")
    assert calls
