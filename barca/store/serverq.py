"""What ``barca serve`` keeps in the metadata database besides the runs' own rows: the queue
(a ``runs`` row with status ``pending``, its request and when it was queued), who triggered each
run, a finished run's JSON outcome, and the server's switches (the queue paused).

Every function takes the ``sqlite3`` connection of a writable ``Store`` (its schema migrated)."""
from __future__ import annotations

import json
import time
from typing import Any

from barca.store.driver import sqlite3
from barca.store.process import reap_crashed  # noqa: F401 - the queue's name for it
from barca.store.schema import RUN_COLUMNS

ROW = ("run_id", "command", "target", "status", "started_at", "finished_at", "steps_run",
       "steps_cached", "steps_failed", "pool_size", "error", "pid", "triggered_by",
       "scheduled_at", "schedule_id", "queued_at", "request", "outcome", "exit_code",
       "client_run_id", "files", "job", "attempts", "failure")
FINISHED = ("success", "failed", "cancelled", "crashed", "error", "interrupted")


def _write(conn: sqlite3.Connection, sql: str, args: tuple[Any, ...]) -> None:
    _write_many(conn, sql, [args])


def _write_many(conn: sqlite3.Connection, sql: str, rows: list[tuple[Any, ...]]) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.executemany(sql, rows)
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
    return _rows(conn, "status='pending' ORDER BY queued_at, rowid")


def running(conn: sqlite3.Connection, served_only: bool = False) -> list[dict[str, Any]]:
    """The runs in progress; ``served_only``: those a server started (they have a request)."""
    return _rows(conn, "status='running'" + (" AND request IS NOT NULL" if served_only else ""))


def recent(conn: sqlite3.Connection, limit: int, status: str | None = None,
           triggered_by: str | None = None, target: str | None = None,
           since: float | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` runs (queued or begun), newest first; each filter given narrows
    them: a status, a trigger, a target named in the run's target list, begun (or queued)
    at or after ``since``."""
    where, args = _recent(status, triggered_by, target, since)
    return _rows(conn, where + " ORDER BY coalesce(started_at, queued_at) DESC "
                "LIMIT ?", (*args, limit))


def recent_count(conn: sqlite3.Connection, status: str | None = None,
                 triggered_by: str | None = None, target: str | None = None,
                 since: float | None = None) -> int:
    """How many runs ``recent`` keeps with these filters, its limit aside."""
    where, args = _recent(status, triggered_by, target, since)
    return conn.execute(f"SELECT count(*) FROM runs WHERE {where}", args).fetchone()[0]


def _recent(status: str | None, triggered_by: str | None, target: str | None,
            since: float | None) -> tuple[str, list[Any]]:
    return _filters(None if status is None else [status],
                    None if triggered_by is None else [triggered_by], target, since,
                    "coalesce(started_at, queued_at)")


def _filters(status: list[str] | None, triggered_by: list[str] | None, target: str | None,
             since: float | None, began: str) -> tuple[str, list[Any]]:
    """The WHERE of a runs query keeping one of these statuses, one of these triggers, runs
    whose target list names ``target``, begun (``began``) at or after ``since``."""
    where: list[str] = ["1"]
    args: list[Any] = []
    for column, values in (("status", status), ("triggered_by", triggered_by)):
        if values is not None:
            where.append(f"{column} IN ({','.join('?' * len(values))})")
            args.extend(values)
    if target is not None:
        where.append("(',' || target || ',') LIKE ?")
        args.append(f"%,{target},%")
    if since is not None:
        where.append(f"{began} >= ?")
        args.append(since)
    return " AND ".join(where), args


def start(conn: sqlite3.Connection, run_id: str, pid: int, proc: str | None) -> None:
    """A queued run's child process began: ``running``, with the process (only if still
    ``pending``: a cancel in between wins)."""
    _write(conn, "UPDATE runs SET status='running', started_at=?, pid=?, proc=? WHERE run_id=? "
                 "AND status='pending'", (time.time(), pid, proc, run_id))


def connect(db_path: Any, read_only: bool = False) -> sqlite3.Connection:
    """A connection for the server's threads; read-only: the file opened read-only (nothing
    created or migrated), or an empty in-memory store when there is no file yet."""
    from pathlib import Path
    if read_only:
        if Path(db_path).exists():
            conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=15,
                                   isolation_level=None, check_same_thread=False)
        else:
            from barca.store.schema import SCHEMA
            conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            conn.executescript(SCHEMA)
            for col in RUN_COLUMNS:
                conn.execute(f"ALTER TABLE runs ADD COLUMN {col}")
    else:
        conn = sqlite3.connect(db_path, timeout=15, isolation_level=None,
                               check_same_thread=False)
    conn.execute("PRAGMA busy_timeout=15000")
    return conn


def _rows(conn: sqlite3.Connection, where: str, args: tuple[Any, ...] = ()
         ) -> list[dict[str, Any]]:
    """``runs`` rows as dicts of ``ROW``; a column a store does not have yet is None (a
    read-only server migrates nothing). The WHERE clause is this module's own: the modules
    above call the readers named for what they ask (``pending``, ``running``, ``recent``)."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    cols = ", ".join(c if c in have else f"NULL AS {c}" for c in ROW)
    cur = conn.execute(f"SELECT {cols} FROM runs WHERE {where}", args)
    return [dict(zip(ROW, r, strict=True)) for r in cur]


def row(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    found = _rows(conn, "run_id=?", (run_id,))
    return found[0] if found else None


def finish(conn: sqlite3.Connection, run_id: str, status: str, error: str | None,
           outcome: Any, exit_code: int | None = None) -> None:
    """The server's last word on a run its child ended (or never began): the status only where
    the child did not write its own; the outcome and the command's exit code always."""
    _write(conn, "UPDATE runs SET status=CASE WHEN status IN ('pending', 'running') THEN ? "
                 "ELSE status END, finished_at=coalesce(finished_at, ?), error=coalesce(error, "
                 "?), outcome=?, exit_code=? WHERE run_id=?",
           (status, time.time(), error, None if outcome is None else json.dumps(outcome),
            exit_code, run_id))


def mark(conn: sqlite3.Connection, run_id: str, status: str, error: str | None = None) -> None:
    _write(conn, "UPDATE runs SET status=?, finished_at=?, error=coalesce(?, error) "
                 "WHERE run_id=?", (status, time.time(), error, run_id))


def live_node_runs(conn: sqlite3.Connection) -> list[tuple[str, str, str | None]]:
    """(run id, status, request JSON) of every run pending or running, CLI runs included."""
    return list(conn.execute("SELECT run_id, status, request FROM runs WHERE status IN "
                             "('pending', 'running')"))


def live_targets(conn: sqlite3.Connection) -> dict[str, str | None]:
    """run id -> its target label, of every run pending or running."""
    return dict(conn.execute("SELECT run_id, target FROM runs WHERE status IN "
                             "('pending', 'running')"))


# history's columns that runs gained after its first ones (RUN_COLUMNS)
HISTORY_LATER = ("triggered_by", "files", "job", "attempts", "failure", "scheduled_at",
                 "schedule_id", "client_run_id")


def history(conn: sqlite3.Connection, limit: int | None, status: list[str] | None = None,
            triggered_by: list[str] | None = None, target: str | None = None,
            since: float | None = None, run_id: str | None = None
            ) -> tuple[list[dict[str, Any]], int]:
    """``barca history``'s rows, newest first, with ``triggered_by`` (None in a store written
    before runs recorded it, which a read-only command does not migrate): the newest ``limit``
    (None: all) of those the filters keep (see ``_filters``), and how many they keep."""
    have = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    if triggered_by is not None and "triggered_by" not in have:
        return [], 0  # (no run of such a store says how it was started)
    # the columns a store written by an older barca may not have yet: NULL there
    later = ", ".join(c if c in have else f"NULL AS {c}" for c in HISTORY_LATER)
    where, args = _filters(status, triggered_by, target, since, "started_at")
    if run_id is not None:  # (one run: barca history RUN_ID)
        where, args = f"{where} AND run_id=?", [*args, run_id]
    cur = conn.execute(
        "SELECT run_id, command, target, status, started_at, finished_at, steps_run, "
        f"steps_cached, steps_failed, pool_size, error, {later} FROM runs WHERE {where} "
        "ORDER BY started_at DESC LIMIT ?", (*args, -1 if limit is None else limit))
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur]
    total = conn.execute(f"SELECT count(*) FROM runs WHERE {where}", args).fetchone()[0]
    return rows, total


def run_steps(conn: sqlite3.Connection, run_id: str, after: int = 0) -> list[tuple[Any, ...]]:
    """(id, asset, key, status, elapsed, error, created_at, attempts) of the steps a run
    recorded (executed ones: a cache hit writes no row), in order."""
    return list(conn.execute(
        "SELECT id, asset, partition, status, elapsed, error, created_at, attempts "
        "FROM materializations WHERE run_id=? AND id>? ORDER BY id", (run_id, after)))


def store_history(store: Any, limit: int | None, *filters: Any, **named: Any
                  ) -> tuple[list[dict[str, Any]], int]:
    """``history`` of a Store's database (its crashed runs marked first): nothing when it has
    none yet."""
    if store.conn is None:
        return [], 0
    store.reap_crashed()
    return history(store.conn, limit, *filters, **named)


def store_steps(store: Any, run_id: str) -> list[dict[str, Any]]:
    """``step_rows`` of a Store's database."""
    return [] if store.conn is None else step_rows(store.conn, run_id)


STEP_COLUMNS = ("asset", "partition", "run_hash", "status", "attempts", "elapsed", "path",
                "format", "size", "error", "traceback")


def step_rows(conn: sqlite3.Connection, run_id: str) -> list[dict[str, Any]]:
    """Every step a run recorded (a result or a failure; a cache hit writes none), in the
    order recorded: ``STEP_COLUMNS`` of each."""
    cur = conn.execute(f"SELECT {', '.join(STEP_COLUMNS)} FROM materializations "
                       "WHERE run_id=? ORDER BY id", (run_id,))
    return [dict(zip(STEP_COLUMNS, r, strict=True)) for r in cur]


def run_logs(conn: sqlite3.Connection, run_id: str, after: int = 0) -> list[tuple[Any, ...]]:
    """(id, node, stream, ts, line) of what a run's steps printed, in recorded order."""
    try:
        return list(conn.execute("SELECT id, node, stream, ts, line FROM logs WHERE run_id=? "
                                 "AND id>? ORDER BY id", (run_id, after)))
    except sqlite3.OperationalError:  # a store from before logs were kept
        return []


def result_path(conn: sqlite3.Connection, asset: str, run_hash: str) -> str | None:
    """The file of an unpartitioned node's successful result under ``run_hash``."""
    got = conn.execute("SELECT path FROM materializations WHERE asset=? AND run_hash=? AND "
                       "status='success' AND partition='' ORDER BY id DESC LIMIT 1",
                       (asset, run_hash)).fetchone()
    return got[0] if got and got[0] else None


def run_proc(conn: sqlite3.Connection, run_id: str) -> str | None:
    """The process token (start time) a run recorded beside its pid."""
    got = conn.execute("SELECT proc FROM runs WHERE run_id=?", (run_id,)).fetchone()
    return got[0] if got and got[0] else None
