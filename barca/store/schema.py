"""The metadata database's tables (``.barca/metadata.db``): created by every writer that opens it;
columns added since are added by ``create``."""
from __future__ import annotations

import os

from barca.core.errors import InfrastructureError
from barca.core.sha import sha256
from barca.store.driver import sqlite3

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, command TEXT, target TEXT, status TEXT,
    started_at REAL, finished_at REAL, steps_run INTEGER, steps_cached INTEGER,
    steps_failed INTEGER, pool_size INTEGER, error TEXT, pid INTEGER, proc TEXT);
CREATE TABLE IF NOT EXISTS materializations (
    id INTEGER PRIMARY KEY AUTOINCREMENT, node TEXT NOT NULL, asset TEXT NOT NULL,
    partition TEXT NOT NULL, run_hash TEXT NOT NULL, path TEXT, format TEXT, size INTEGER,
    sha256 TEXT, parts TEXT, status TEXT NOT NULL, error TEXT, traceback TEXT, elapsed REAL,
    run_id TEXT, created_at REAL NOT NULL, shape TEXT, value_hash TEXT, remote INTEGER,
    attempts INTEGER);
CREATE TABLE IF NOT EXISTS definitions (
    node TEXT PRIMARY KEY, file_sha TEXT NOT NULL, deps TEXT NOT NULL, parts TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshots (
    asset TEXT PRIMARY KEY, digest TEXT NOT NULL, combined TEXT NOT NULL, keys TEXT NOT NULL,
    hashes TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS snapshot_parts (
    asset TEXT NOT NULL, field TEXT NOT NULL, idx INTEGER NOT NULL, gen TEXT NOT NULL,
    text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS snapshot_parts_asset ON snapshot_parts(asset);
CREATE TABLE IF NOT EXISTS logs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, node TEXT NOT NULL,
    step TEXT NOT NULL, ts REAL NOT NULL, stream TEXT NOT NULL, line TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS logs_run ON logs(run_id, id);
CREATE TABLE IF NOT EXISTS evictions (
    path TEXT PRIMARY KEY, asset TEXT NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS reads (path TEXT PRIMARY KEY, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS settled (name TEXT PRIMARY KEY, value REAL NOT NULL);
CREATE INDEX IF NOT EXISTS mat_asset ON materializations(asset, partition, status);
CREATE INDEX IF NOT EXISTS mat_hash ON materializations(asset, run_hash);
CREATE TABLE IF NOT EXISTS settle_records (
    cone TEXT PRIMARY KEY, key TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS generation (n INTEGER NOT NULL);
INSERT INTO generation (n) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM generation);
""" + "".join(  # every write a decision could see moves the generation, whoever writes it
    f"CREATE TRIGGER IF NOT EXISTS gen_{table}_{op.lower()} AFTER {op} ON {table} "
    "BEGIN UPDATE generation SET n = n + 1; END;\n"
    for table in ("materializations", "snapshots", "evictions", "definitions")
    for op in ("INSERT", "UPDATE", "DELETE"))

# columns ``runs`` gained for the server (Store._open adds them to an older database; the
# server's reads and writes of them are store.serverq)
RUN_COLUMNS = ("triggered_by TEXT", "scheduled_at TEXT", "schedule_id TEXT", "queued_at REAL",
               "request TEXT", "outcome TEXT", "exit_code INTEGER", "client_run_id TEXT",
               "files TEXT", "job TEXT", "attempts INTEGER", "failure TEXT")


# what ``made`` compares: this text, and the columns _once adds (a new one: a new
# number here), with the file's schema cookie, which every CREATE, ALTER or DROP moves
# (31 bits of its SHA-256: the digest already loaded, where zlib's crc32 loaded zlib, #31 item 2)
_SIGNATURE = int(sha256((SCHEMA + "".join(RUN_COLUMNS) + "remote attempts pid proc 1").encode())
                 .hexdigest()[:8], 16)


def _stamp_of(conn: sqlite3.Connection) -> int:
    (cookie,) = conn.execute("PRAGMA schema_version").fetchone()
    return (_SIGNATURE ^ int(cookie)) & 0x7FFFFFFF or 1


def made(conn: sqlite3.Connection) -> bool:
    """Whether this barca made the file's tables as they are now (its stamp in the header's
    ``user_version``, for the schema cookie it saw): then a writer need not run the schema
    again (~30 statements each command). Any table or column added or dropped since, by
    anyone, moves the cookie: the schema runs again."""
    (got,) = conn.execute("PRAGMA user_version").fetchone()
    return bool(got) and got == _stamp_of(conn)


def stamp(conn: sqlite3.Connection) -> None:
    """After the schema ran: the stamp ``made`` looks for."""
    conn.execute(f"PRAGMA user_version={_stamp_of(conn)}")

def create(conn: sqlite3.Connection, wait: float) -> None:
    """WAL mode, the tables and the columns added since. Two processes creating a new
    database at once (two kernels started together) can meet while it is still in rollback
    mode, where SQLite answers "locked" at once rather than wait (deadlock avoidance): the
    whole step is tried again until the busy timeout has passed."""
    import contextlib
    import time as clock
    deadline = clock.monotonic() + wait
    pause = 0.02
    while True:
        try:
            _once(conn)
            return
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if ("locked" not in text and "busy" not in text) or clock.monotonic() > deadline:
                raise
            with contextlib.suppress(sqlite3.DatabaseError):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            clock.sleep(pause)
            pause = min(0.25, pause * 2)


def _once(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.executescript(SCHEMA)
    cols = {r[1] for r in conn.execute("PRAGMA table_info(materializations)")}
    if "remote" not in cols:  # a store written before the remote column existed
        _add_column(conn, "materializations", "remote INTEGER")
    if "attempts" not in cols:  # calls of the function (retries=), for barca stats
        _add_column(conn, "materializations", "attempts INTEGER")
    runs = {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    for col in ("pid INTEGER", "proc TEXT", *RUN_COLUMNS):  # added since: see serverq
        if col.split()[0] not in runs:
            _add_column(conn, "runs", col)
    stamp(conn)


def _add_column(conn: sqlite3.Connection, table: str, col: str) -> None:
    """A column added since the table was made; another process may have added it
    meanwhile (that is fine; "locked" is not, and is tried again)."""
    try:
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {col}")
    except sqlite3.OperationalError as exc:
        if "duplicate column" not in str(exc):
            raise


def from_barca_030(conn: sqlite3.Connection) -> bool:
    """A metadata database barca 0.30 (the Rust original) wrote: its materializations say
    ``node_id`` where ours say ``node``. A user coming from it is told so, and what to do,
    rather than "no such column"."""
    cols = {r[1] for r in conn.execute("PRAGMA table_info(materializations)")}
    return "node_id" in cols and "node" not in cols


def barca_030_error(root: str | Path, db_path: str | Path) -> InfrastructureError:
    old = os.path.join(root, ".barca")
    return InfrastructureError(
        f"{db_path} was written by barca 0.30 (the Rust original); this barca keeps its "
        f"records differently and cannot read it. Nothing was run and the file was not "
        f"changed.",
        f"Move the old store aside, then run again: mv {old} {old}-0.30 -- this barca starts "
        f"a new .barca/ and computes the results again (0.30's results are not reused); the "
        f"moved folder stays as it was for barca 0.30.", path=str(db_path))


def db_error(db_path: str | Path, exc: Exception) -> InfrastructureError:
    """What a command says when SQLite fails on the metadata database: another program holds
    it (wait), or the file is not one barca can use (move it aside; it is kept)."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return InfrastructureError(
            f"{db_path} is locked by another program: {text}",
            "Wait for the other barca command (or the program holding the database) to "
            "finish, then run again.", path=str(db_path))
    return InfrastructureError(
        f"{db_path} is not a usable barca metadata database: {text}",
        f"Move the file aside (nothing was run, the file was kept): "
        f"mv {db_path} {db_path}.broken", path=str(db_path))
