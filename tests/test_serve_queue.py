"""The server's queue and run records in-process (#32): no server, no subprocess."""
from __future__ import annotations

import sqlite3

import pytest

from barca.core.errors import UsageError
from barca.faces.serve.queue import Queue, check_body, child_argv
from barca.store import serverq

PIPE = """
from barca import asset

@asset
def a():
    return 1

@asset(inputs={"a": a})
def b(a):
    return a + 1
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pipe.py").write_text(PIPE)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_typed_run_is_manual_and_a_queued_run_keeps_its_trigger(proj):
    from barca import api
    res = api.materialize("b", "pipe.py")
    db = proj / ".barca" / "metadata.db"
    conn = sqlite3.connect(db)
    assert serverq.row(conn, res.run_id)["triggered_by"] == "manual"
    q = Queue(proj, db, 1, None, lambda: ())
    run_id = q.submit({"command": "get", "targets": ["a"], "triggered_by": "schedule",
                       "scheduled_at": "2026-01-01T05:00:00Z", "schedule_id": "pipe.py:a"})
    row = serverq.row(conn, run_id)  # committed before submit returned
    assert (row["status"], row["triggered_by"], row["schedule_id"]) == \
        ("pending", "schedule", "pipe.py:a")
    # the queued run is named, so a skipped tick can say which run it waited for
    assert q.in_flight("pipe.py:a") == run_id and q.in_flight("pipe.py:b") is None
    assert q.position(run_id) == 1
    # the child begins the queued row under its id (its trigger kept), as the CLI would
    api.materialize("a", "pipe.py", run_id=run_id)
    row = serverq.row(conn, run_id)
    assert (row["status"], row["triggered_by"]) == ("success", "schedule")
    assert row["pool_size"] is not None
    # barca history says who triggered each run
    assert [(r.run_id, r.triggered_by) for r in api.history(2)] == \
        [(run_id, "schedule"), (res.run_id, "manual")]
    assert api.history(1).to_json()["runs"][0]["triggered_by"] == "schedule"
    assert q.in_flight("pipe.py:a") is None
    assert q.cancel(run_id) is None  # finished: nothing to cancel


def test_queue_order_requeue_at_head_and_cancel(proj):
    db = proj / ".barca" / "metadata.db"
    from barca.store.metadata import Store
    Store(proj).close()  # created and migrated
    q = Queue(proj, db, 1, None, lambda: ())
    ids = [q.submit({"command": "get", "targets": [n]}) for n in ("a", "b", "a")]
    assert [r["run_id"] for r in serverq.pending(q.conn)] == ids
    serverq.requeue_at_head(q.conn, ids[2])
    assert [r["run_id"] for r in serverq.pending(q.conn)] == [ids[2], ids[0], ids[1]]
    assert q.cancel(ids[0]) == "cancelled"
    assert serverq.row(q.conn, ids[0])["status"] == "cancelled"
    q.pause(True)
    assert Queue(proj, db, 1, None, lambda: ()).paused is True  # persisted


def test_run_bodies_are_checked_as_the_cli_checks_flags():
    for bad in ([], {"command": "get", "nope": 1}, {"command": "sql"},
                {"command": "get", "targets": [1]}, {"command": "get", "cascade": "no"},
                {"command": "get", "triggered_by": "schedule"}):
        with pytest.raises(UsageError):
            check_body(bad)
    body = check_body({"command": "get", "targets": "b", "refresh": ["a"], "cascade": False,
                       "partition": {"region": "emea"}, "values": True})
    argv = child_argv(body, "r1", ("pipe.py",), "dev")
    assert argv[3:] == ["get", "b", "pipe.py", "--json", "--run-id", "r1", "--refresh", "a",
                        "--no-cascade", "-o", "value", "--partition", '{"region": "emea"}',
                        "--env", "dev"]


def test_history_filters_are_the_stores(proj):
    """``/history``'s filters (status, trigger, a target in the run's list, since, limit) are
    one store query (serverq.recent); the route only checks the values."""
    import time
    from types import SimpleNamespace

    from barca import api
    from barca.faces.serve.runs import history
    db = proj / ".barca" / "metadata.db"
    first = api.materialize("a", "pipe.py").run_id
    between = time.time()
    time.sleep(0.01)
    second = api.materialize("b", "pipe.py").run_id
    q = Queue(proj, db, 1, None, lambda: ())
    queued = q.submit({"command": "get", "targets": ["b"], "triggered_by": "api"})
    server = SimpleNamespace(db_path=db, read_only=False)

    def ids(**filters: str) -> list[str]:
        return [r["run_id"] for r in history(server, filters)["runs"]]

    assert ids() == [queued, second, first]  # newest first, a queued run by when queued
    assert ids(status="success") == ids(status="complete") == [second, first]
    assert ids(triggered_by="api") == [queued]
    assert ids(target="pipe.py:a") == [first]
    assert ids(since=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(between)) +
               f".{int(between % 1 * 1e6):06d}Z") == [queued, second]
    assert ids(limit="1") == [queued]
