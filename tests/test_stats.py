"""barca stats TARGET (and barca.stats, %barca stats): executions counted, timings of the
successful ones, the cache hit rate, the recent runs newest first."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project

from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.queries.stats import stats, stats_report
from barca.store.metadata import Store

PIPELINE = """
import os
from barca import asset


@asset(retries=1)
def raw() -> int:
    if os.path.exists("fail"):
        raise ValueError("told to fail")
    return 1
"""


def _settings(root: Path) -> Settings:
    return Settings.resolve(root, environ={})


def _record(root: Path, runs: list[tuple[str, float, str]]) -> None:
    store = Store(root)
    store.record([{"node": "pipeline.py:raw", "asset": "pipeline.py:raw", "partition": "",
                   "run_hash": h, "status": status, "elapsed": e,
                   "error": "ValueError: x" if status == "failed" else None,
                   "created_at": 1_700_000_000 + i, "run_id": f"r{i}", "attempts": 1}
                  for i, (status, e, h) in enumerate(runs)])
    store.close()


def test_aggregates_over_recorded_executions(tmp_path: Path) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    never = stats("raw", str(tmp_path / "pipeline.py"), settings=_settings(tmp_path))
    assert never == {"id": "pipeline.py:raw", "total_runs": 0, "avg_elapsed_seconds": None,
                     "median_elapsed_seconds": None, "p95_elapsed_seconds": None,
                     "max_elapsed_seconds": None, "cache_hit_rate": 0.0, "recent_runs": []}
    _record(tmp_path, [("success", 1.0, "a"), ("success", 3.0, "a"), ("failed", 9.0, "b"),
                       ("success", 2.0, "c")])
    got = stats("raw", str(tmp_path / "pipeline.py"), settings=_settings(tmp_path))
    assert got["total_runs"] == 4
    assert (got["avg_elapsed_seconds"], got["median_elapsed_seconds"],
            got["max_elapsed_seconds"]) == (2.0, 2.0, 3.0)
    assert got["p95_elapsed_seconds"] == pytest.approx(2.9)
    assert got["cache_hit_rate"] == 0.25   # the second "a" only
    assert [r["status"] for r in got["recent_runs"]] == ["success", "failed", "success",
                                                         "success"]
    failed = got["recent_runs"][1]
    assert failed["elapsed_seconds"] is None and failed["error_message"] == "ValueError: x"
    assert got["recent_runs"][0]["created_at"] == "2023-11-14 22:13:23"
    assert set(got["recent_runs"][0]) == {"elapsed_seconds", "status", "created_at",
                                          "error_message", "attempts"}
    some = stats("raw", str(tmp_path / "pipeline.py"), fields="status,attempts",
                 settings=_settings(tmp_path))
    assert some["recent_runs"][0] == {"status": "success", "attempts": 1}


@pytest.mark.parametrize(("target", "fields", "says"), [
    ("", None, "target"), ("nope", None, "nope"), ("raw", "status,nope", "nope")])
def test_usage_errors(tmp_path: Path, target: str, fields: str | None, says: str) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    with pytest.raises(UsageError, match=says):
        stats_report(target, str(tmp_path / "pipeline.py"), fields=fields,
                     settings=_settings(tmp_path))


def test_a_notebook_shows_a_table(tmp_path: Path) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    _record(tmp_path, [("success", 1.0, "a")])
    html = stats_report("raw", str(tmp_path / "pipeline.py"),
                        settings=_settings(tmp_path))._repr_mimebundle_()["text/html"]
    assert "<table" in html and "CREATED AT" in html and "cache hit rate 0%" in html


@pytest.mark.slow
def test_stats_through_the_cli(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    r = project.barca("stats", "raw", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["total_runs"] == 0 and r.json()["recent_runs"] == []
    assert project.barca("get", "raw", "pipeline.py").code == 0
    assert project.barca("get", "raw", "pipeline.py").code == 0          # a cache hit: not run
    assert project.barca("get", "raw", "pipeline.py", "--refresh", "raw").code == 0
    project.write("fail", "")
    assert project.barca("get", "raw", "pipeline.py", "--refresh", "raw").code == 1
    r = project.barca("stats", "raw", "pipeline.py", "--json")
    body = r.json()
    assert body["total_runs"] == 3
    assert body["cache_hit_rate"] == pytest.approx(2 / 3, abs=1e-3)
    assert [x["status"] for x in body["recent_runs"]] == ["failed", "success", "success"]
    assert body["recent_runs"][0]["error_message"] == "ValueError: told to fail"
    assert body["recent_runs"][0]["attempts"] == 2      # retries=1
    r = project.barca("stats", "raw", "pipeline.py", "--fields", "status")
    assert json.loads(r.out)["recent_runs"][0] == {"status": "failed"}  # --fields: JSON
    r = project.barca("stats", "raw", "pipeline.py", "--pretty")
    assert r.code == 0 and "3 runs" in r.out and "ValueError: told to fail" in r.out
    for bad in (["stats", "pipeline.py"], ["stats", "nope", "pipeline.py"],
                ["stats", "raw", "pipeline.py", "--fields", "nope"]):
        assert project.barca(*bad).code == 2, bad


def test_a_typo_of_status_still_means_status() -> None:
    """`stats` is close to `stauts` too: two swapped letters mean the word with those letters."""
    from barca.faces.commands import parse
    for typo, meant in (("stauts", "status"), ("stast", "stats"), ("hstory", "history")):
        with pytest.raises(UsageError, match=f"Did you mean '{meant}'"):
            parse([typo])
