"""Two processes that create one project's metadata database at once (two kernels started
together, two `barca get` in a fresh checkout) both succeed: a new database is still in
rollback mode, where SQLite answers "locked" at once instead of waiting (issue #36, item 11)."""
from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pytest


def _open(root: str, at: float, q) -> None:
    from barca.store.metadata import Store
    while time.time() < at:
        pass
    try:
        Store(Path(root), create=True).begin_run(f"r{mp.current_process().pid}", "get", "x", 1)
        q.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported below
        q.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.slow
def test_processes_creating_one_database_at_once_all_succeed(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    for trial in range(8):
        root = tmp_path / str(trial)
        root.mkdir()
        q = ctx.Queue()
        at = time.time() + 1.0
        procs = [ctx.Process(target=_open, args=(str(root), at, q)) for _ in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        got = [q.get(timeout=5) for _ in procs]
        assert got == ["ok"] * len(procs), (trial, got)
