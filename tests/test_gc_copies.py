"""`barca gc` and the cache limit delete the copies `sql --server` fetched into
``.barca/sql-cache/`` before any result: they are not this project's results and a query
fetches and checks them again. A copy a query used in the last minute is held."""
from __future__ import annotations

import os
import time
from pathlib import Path

from barca import api
from barca.core.settings import Settings

PIPELINE = "from barca import asset\n\n\n@asset()\ndef a() -> int:\n    return 1\n"


def _project(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    copies = tmp_path / ".barca" / "sql-cache" / "artifacts" / "pipeline.py--a"
    copies.mkdir(parents=True)
    old, new = copies / "old.json", copies / "new.json"
    old.write_bytes(b"1" * 40_000)
    new.write_bytes(b"2" * 40_000)
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))
    return tmp_path, old, new


def _gc(root: Path, **kw: object):
    return api.gc(str(root / "pipeline.py"), settings=Settings.resolve(root), **kw)


def test_gc_deletes_fetched_copies_first_and_holds_one_in_use(tmp_path: Path) -> None:
    root, old, new = _project(tmp_path)
    dry = _gc(root, max_size="1", dry_run=True)
    assert dry.tiers["copies"] == [".barca/sql-cache/artifacts/pipeline.py--a/old.json"]
    assert ".barca/sql-cache/artifacts/pipeline.py--a/new.json" in dry.held
    assert old.exists() and new.exists()  # a dry run deletes nothing

    report = _gc(root, max_size="1")
    assert list(report.evicted) == [".barca/sql-cache/artifacts/pipeline.py--a/old.json"]
    assert report.after_bytes == report.size_bytes - 40_000  # the sizes add up
    assert not old.exists() and new.exists()
    assert "copies: 1 file" in str(report)


def test_gc_off_deletes_copies_and_nothing_current(tmp_path: Path) -> None:
    root, old, new = _project(tmp_path)
    report = _gc(root, max_size="off")
    assert report.tiers["copies"] == [".barca/sql-cache/artifacts/pipeline.py--a/old.json"]
    assert report.tiers["least_recently_read"] == []
    assert not old.exists() and new.exists()


def test_under_its_budget_gc_keeps_the_copies(tmp_path: Path) -> None:
    root, old, new = _project(tmp_path)
    report = _gc(root, max_size="10GB")
    assert report.evicted == () and old.exists() and new.exists()
