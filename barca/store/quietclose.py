"""Closing the metadata database without a checkpoint when the command changed nothing a
decision reads.

SQLite's last connection to close checkpoints the WAL into the database file and deletes the
WAL: two fsyncs at the close, and two more when the next command creates the WAL again (its
header, its directory). For a command that only read, or wrote bookkeeping (its ``runs`` row,
the ``reads`` times of the cache limit, a memo), that is most of what it spends above Python's
start-up. Such a command leaves its writes in the WAL instead: they are committed there
(``synchronous=NORMAL``: a crash of the process loses nothing, a power cut at most those last
bookkeeping rows, never the database's consistency), every later reader sees them, and the next
command that writes results checkpoints them with its own. Each command's first connection reads
the whole WAL again (SQLite's recovery of its index), so a WAL past ``QUIET_WAL_BYTES`` is
checkpointed by the close as before (a cached get adds ~20 kB: a checkpoint every dozen).

Whether a command changed what a decision reads is the store's generation (schema: moved by
every write of a result, snapshot, eviction or definition, by any process): unchanged since
the connection opened, the close is quiet. A read-only connection never checkpoints; one held
open on the file while the writer closes makes the writer's close not the last one."""
from __future__ import annotations

import os

from barca.store.driver import sqlite3

QUIET_WAL_BYTES = 256 * 1024  # recovery reads it at ~10 instructions a byte: <1 ms


def generation(conn: sqlite3.Connection) -> int | None:
    """The store's generation, None when there is none to read (an older or odd file)."""
    try:
        got = conn.execute("SELECT n FROM generation").fetchone()
    except sqlite3.DatabaseError:
        return None
    return None if got is None else int(got[0])


def close(conn: sqlite3.Connection, db_path: str, opened_at: int | None) -> None:
    """Close ``conn``; quietly (no checkpoint) when the generation is still ``opened_at``
    (None: close it plainly, e.g. while another connection of this process stays open)."""
    hold = None
    if opened_at is not None and not conn.in_transaction and generation(conn) == opened_at \
            and 0 < _wal_size(db_path) <= QUIET_WAL_BYTES:  # (an empty one: nothing to keep)
        try:
            hold = sqlite3.connect(f"{file_uri(db_path)}?mode=ro", uri=True, timeout=0,
                                   check_same_thread=False)
            # a read of the file's header takes the lock it holds (and parses no schema)
            hold.execute("PRAGMA user_version").fetchone()
        except sqlite3.DatabaseError:
            pass
    try:
        conn.close()
    finally:
        if hold is not None:
            hold.close()  # read-only: it never checkpoints, so the WAL is left as it is


def file_uri(path: str) -> str:
    """``Path(path).resolve().as_uri()``, without pathlib (and the urllib.parse it loads for
    this): ``file://`` and the absolute path, each byte but ``A-Za-z0-9_.-~/`` %-escaped, so a
    ``?``, ``#`` or ``%`` in a folder's name is not read as part of SQLite's URI."""
    raw = os.fsencode(os.path.realpath(path))
    return "file://" + "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in raw)


_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-~/")


def _wal_size(db_path: str) -> int:
    """The WAL file's size: what it holds, or more (a WAL is reused from its start after a
    checkpoint, never shortened), so a quiet close never leaves more than the bound."""
    try:
        return os.stat(f"{db_path}-wal").st_size
    except OSError:
        return 0
