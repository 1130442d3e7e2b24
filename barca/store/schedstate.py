"""``schedule_state`` in the metadata DB: what ``barca serve``'s scheduler keeps of each
schedule across restarts (failed ticks in a row, a pause, the last tick), one row per schedule
id, kept when the node is no longer scheduled (a pause applies again if its schedule comes
back). ``barca status`` reads it too, so both say the same of a schedule."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from barca.store.driver import sqlite3

if TYPE_CHECKING:
    from barca.store.metadata import Store

SCHEMA = """CREATE TABLE IF NOT EXISTS schedule_state (
    id TEXT PRIMARY KEY, failures INTEGER NOT NULL DEFAULT 0, paused INTEGER NOT NULL DEFAULT 0,
    paused_until REAL, failed_at REAL, last_fired REAL, last_run TEXT, last_status TEXT)"""
COLUMNS = ("failures", "paused", "paused_until", "failed_at", "last_fired", "last_run",
           "last_status")


def read(conn: sqlite3.Connection | None, schedule_id: str) -> dict[str, Any] | None:
    """The kept state of one schedule; None when there is none (no server ever ran it)."""
    if conn is None:
        return None
    try:
        row = conn.execute(f"SELECT {', '.join(COLUMNS)} FROM schedule_state WHERE id=?",
                           (schedule_id,)).fetchone()
    except sqlite3.OperationalError:  # no server has created the table
        return None
    if row is None:
        return None
    out = dict(zip(COLUMNS, row, strict=True))
    out["paused"] = bool(out["paused"])
    return out


def kept_state(store: Store, schedule_id: str) -> dict[str, Any] | None:
    """``read`` through a command's store (``barca status``)."""
    return read(store.conn, schedule_id)


class StateTable:
    """The scheduler's own connection to the table: created if missing when ``writable``;
    else the database is only read (a ``--read-only`` server never writes it)."""

    def __init__(self, db_path: Path, writable: bool = True) -> None:
        self.writable = writable
        if writable:
            db_path.parent.mkdir(parents=True, exist_ok=True)
        where = db_path if writable else f"{db_path.resolve().as_uri()}?mode=ro"
        self.conn = sqlite3.connect(where, timeout=15, isolation_level=None,
                                    check_same_thread=False, uri=not writable)
        self.conn.execute("PRAGMA busy_timeout=15000")
        if writable:
            self.conn.execute(SCHEMA)

    def load(self, schedule_id: str) -> dict[str, Any] | None:
        return read(self.conn, schedule_id)

    def save(self, schedule_id: str, values: dict[str, Any]) -> None:
        row = tuple(int(values["paused"]) if c == "paused" else values[c] for c in COLUMNS)
        self.conn.execute(f"INSERT OR REPLACE INTO schedule_state (id, {', '.join(COLUMNS)}) "
                          f"VALUES (?{', ?' * len(COLUMNS)})", (schedule_id, *row))

    def succeeded_since(self, node: str, since: float) -> bool:
        """Whether a run computed ``node`` successfully after ``since`` (an explicit
        ``barca get``, ``POST /runs``): that ends a failing schedule."""
        try:
            row = self.conn.execute("SELECT 1 FROM materializations WHERE node=? AND "
                                    "status='success' AND created_at>? LIMIT 1",
                                    (node, since)).fetchone()
        except sqlite3.OperationalError:  # no run has created the table yet
            return False
        return row is not None

    def close(self) -> None:
        self.conn.close()
