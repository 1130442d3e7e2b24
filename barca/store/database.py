"""The metadata database as the layers above the store see it, without a ``Store``: its
driver's error (the server answers it, ``doctor`` reports it) and connection type (for
annotations), and ``barca doctor``'s integrity check. Only the store package imports
``sqlite3``; every other module names these (a contract in ``pyproject.toml``)."""
from __future__ import annotations

from pathlib import Path

from barca.store.driver import sqlite3

Connection = sqlite3.Connection
DatabaseError = sqlite3.DatabaseError


def quick_check(db: Path) -> str:
    """SQLite's ``PRAGMA quick_check`` of the file, opened read-only, and a read of its results
    table: "ok", or what is wrong (on one line)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            verdict = conn.execute("PRAGMA quick_check").fetchone()[0]
            conn.execute("SELECT count(*) FROM materializations").fetchone()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        verdict = str(exc)
    return " ".join(str(verdict).split())  # quick_check reports over several lines


def made_by_barca_030(db: Path) -> bool:
    """Whether the file is the database of barca 0.30 (the Rust original), read without
    writing: ``doctor`` names it as such rather than as a broken file."""
    from barca.store.schema import from_barca_030
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return from_barca_030(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
