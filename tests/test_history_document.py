"""`barca history`'s runs as scripts written for barca 0.30.2 read them: times as
`YYYY-MM-DD HH:MM:SS` (UTC), the pipeline `files` a run read, its `job` (`all` or the node ids
asked for), `attempts` (calls of its steps' functions, retries too), `failure` (its first
failed step), the server's `scheduled_at`, `schedule_id` and `client_run_id`, and
`steps_executed` counting a step that ran and failed. Without `--limit` or `--all`, JSON holds
every run and a table the newest ten (with a note of the rest). All of it in `--fields`."""
from __future__ import annotations

import datetime as dt
import time

import pytest

import barca
from barca.core.errors import UsageError

PIPELINE = '''from barca import asset

@asset()
def ok() -> int:
    return 1


@asset(inputs={"ok": ok}, retries=2)
def flaky(ok: int) -> int:
    raise ValueError("nope")
'''


def _cli(*argv: str):
    from barca.faces.commands import dispatch, parse
    return dispatch(parse(list(argv)), on_event=lambda e: None).result


@pytest.fixture
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    return tmp_path


def test_a_run_says_its_files_job_attempts_and_first_failure(here) -> None:
    with pytest.raises(barca.StepFailed):
        barca.get("pipeline.py")
    barca.get("ok", "pipeline.py")
    newest, failed = _cli("history", "--json").to_json()["runs"]
    for run in (newest, failed):
        start = dt.datetime.strptime(run["started_at"], "%Y-%m-%d %H:%M:%S")
        assert abs(start.replace(tzinfo=dt.UTC).timestamp() - time.time()) < 120
        dt.datetime.strptime(run["finished_at"], "%Y-%m-%d %H:%M:%S")
        assert run["files"] == ["pipeline.py"]
        assert run["scheduled_at"] is run["schedule_id"] is run["client_run_id"] is None
    # the failed run: ok once, flaky three times (two retries); its first failure; both steps
    # executed (one failed)
    assert failed["job"] == "all" and failed["status"] == "failed"
    assert failed["attempts"] == 1 + 3
    assert failed["failure"] == {"node": "pipeline.py:flaky", "error": "ValueError: nope"}
    assert failed["steps_executed"] == 2 and failed["steps_failed"] == 1
    # a cached run of one target: its node id, nothing called, no failure
    assert newest["job"] == "pipeline.py:ok" and newest["target"] == "ok"
    assert newest["attempts"] == 0 and newest["failure"] is None
    assert newest["steps_executed"] == 0
    # every one of them is a field --fields keeps
    doc = _cli("history", "--fields", "run_id,job,files,attempts,failure,scheduled_at")
    assert list(doc.to_json()["runs"][1]) == ["run_id", "job", "files", "attempts", "failure",
                                              "scheduled_at"]
    with pytest.raises(UsageError):
        _cli("history", "--fields", "run_id,nosuch")


def test_the_run_document_counts_a_failed_step_as_executed(here) -> None:
    with pytest.raises(barca.StepFailed) as failed:
        barca.get("pipeline.py")
    assert failed.value.result.to_json()["steps_executed"] == 2


def test_json_holds_every_run_and_a_table_the_newest_ten(here) -> None:
    for _ in range(12):
        barca.get("ok", "pipeline.py")
    every = _cli("history", "--json")
    assert len(every.to_json()["runs"]) == 12 and every.to_json()["truncated"] is False
    table = _cli("history", "--pretty")
    assert len(str(table).splitlines()) == 1 + 10
    assert table.cut_note() == ("showing 10 of 12 runs; pass --limit N for more, or --all for "
                                "all 12 runs")
    assert len(str(_cli("history", "--pretty", "--all")).splitlines()) == 1 + 12
    assert len(_cli("history", "--json", "-l", "3").to_json()["runs"]) == 3


def test_a_servers_run_row_says_the_same(here) -> None:
    """`GET /runs`, `/history` and `/runs/{id}` render the same row (barca serve's spec:
    files, job, attempts, failure, steps_total, steps_executed)."""
    import sqlite3

    from barca.faces.serve.render import run_summary
    from barca.store import serverq
    with pytest.raises(barca.StepFailed):
        barca.get("pipeline.py")
    conn = sqlite3.connect(here / ".barca" / "metadata.db")
    try:
        (row,) = serverq.recent(conn, 10)
    finally:
        conn.close()
    got = run_summary(row)
    assert got["files"] == ["pipeline.py"] and got["job"] == "all" and got["attempts"] == 4
    assert got["failure"] == {"node": "pipeline.py:flaky", "error": "ValueError: nope"}
    assert (got["steps_total"], got["steps_executed"], got["steps_run"]) == (2, 2, 1)
