"""What ``barca serve`` keeps in the metadata database besides the runs' own rows: the queue
(a ``runs`` row with status ``pending``, its request and when it was queued), who triggered each
run, a finished run's JSON outcome, and the server's switches (the queue paused).

Every function takes the ``sqlite3`` connection of a writable ``Store`` (its schema migrated)."""
from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

# columns ``runs`` gained for the server (Store._open adds them to an older database)
RUN_COLUMNS = ("triggered_by TEXT", "scheduled_at TEXT", "schedule_id TEXT", "queued_at REAL",
               "request TEXT", "outcome TEXT")
ROW = ("run_id", "command", "target", "status", "started_at", "finished_at", "steps_run",
       "steps_cached", "steps_failed", "pool_size", "error", "pid", "triggered_by",
       "scheduled_at", "schedule_id", "queued_at", "request", "outcome")
FINISHED = ("success", "failed", "cancelled", "crashed", "error", "interrupted")


def _write(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(sql, args)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def ensure_state_table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS server_state (name TEXT PRIMARY KEY, value TEXT)")


def get_state(conn: sqlite3.Connection, name: str) -> Any:
    got = conn.execute("SELECT value FROM server_state WHERE name=?", (name,)).fetchone()
    return None if got is None else json.loads(got[0])


def set_state(conn: sqlite3.Connection, name: str, value: Any) -> None:
    _write(conn, "INSERT OR REPLACE INTO server_state (name, value) VALUES (?, ?)",
           (name, json.dumps(value)))


def enqueue(conn: sqlite3.Connection, run_id: str, command: str, target: str,
            request: dict[str, Any], triggered_by: str, scheduled_at: str | None = None,
            schedule_id: str | None = None) -> None:
    """A run accepted: a ``pending`` row, committed before the caller answers."""
    _write(conn, "INSERT INTO runs (run_id, command, target, status, queued_at, request, "
                 "triggered_by, scheduled_at, schedule_id) VALUES (?, ?, ?, 'pending', ?, ?, ?, "
                 "?, ?)", (run_id, command, target, time.time(), json.dumps(request),
                           triggered_by, scheduled_at, schedule_id))


def requeue_at_head(conn: sqlite3.Connection, run_id: str) -> None:
    """A run stopped by the drain deadline goes back first in line, to start again from the
    beginning under the same id at the next start."""
    first = conn.execute("SELECT min(queued_at) FROM runs WHERE status='pending'").fetchone()[0]
    head = min(first or time.time(), time.time()) - 1
    _write(conn, "UPDATE runs SET status='pending', queued_at=?, started_at=NULL, "
                 "finished_at=NULL, pid=NULL, proc=NULL, error=NULL, outcome=NULL "
                 "WHERE run_id=?", (head, run_id))


def pending(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """The queue, first in line first."""
    return rows(conn, "status='pending' ORDER BY queued_at, rowid")


def rows(conn: sqlite3.Connection, where: str, args: tuple[Any, ...] = ()
         ) -> list[dict[str, Any]]:
    cur = conn.execute(f"SELECT {', '.join(ROW)} FROM runs WHERE {where}", args)
    return [dict(zip(ROW, r, strict=True)) for r in cur]


def row(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    found = rows(conn, "run_id=?", (run_id,))
    return found[0] if found else None


def finish(conn: sqlite3.Connection, run_id: str, status: str, error: str | None,
           outcome: Any) -> None:
    """The server's last word on a run its child ended (or never began): the status only where
    the child did not write its own, the outcome always."""
    _write(conn, "UPDATE runs SET status=CASE WHEN status IN ('pending', 'running') THEN ? "
                 "ELSE status END, finished_at=coalesce(finished_at, ?), error=coalesce(error, "
                 "?), outcome=? WHERE run_id=?",
           (status, time.time(), error, None if outcome is None else json.dumps(outcome),
            run_id))


def mark(conn: sqlite3.Connection, run_id: str, status: str, error: str | None = None) -> None:
    _write(conn, "UPDATE runs SET status=?, finished_at=?, error=coalesce(?, error) "
                 "WHERE run_id=?", (status, time.time(), error, run_id))


def live_node_runs(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    """(run id, status, request JSON) of every run pending or running, CLI runs included."""
    return list(conn.execute("SELECT run_id, status, request FROM runs WHERE status IN "
                             "('pending', 'running')"))
