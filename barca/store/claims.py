"""Claims: the run hashes a process is computing now, in the metadata database, so that a second
command wanting the same result waits for it instead of computing it again.

A claim names its holder (run id, pid and the process's start time, see store.process): a
claim whose process is gone (killed, crashed) is taken over. A claim is only a way to share
work, never what makes a result current: a step served after waiting is the row recorded
under its run hash, checked like any other cached result."""
from __future__ import annotations

import contextlib
import os
import time
from typing import TYPE_CHECKING, Any

from barca.store.driver import sqlite3
from barca.store.process import process_alive, process_token

if TYPE_CHECKING:
    from barca.store.metadata import Store

_TABLE = ("CREATE TABLE IF NOT EXISTS claims (run_hash TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
          "pid INTEGER NOT NULL, proc TEXT NOT NULL, at REAL NOT NULL)")
_CHUNK = 500   # SQLite's host parameters per query stay well under its limit


class Claims:
    """The claims of one run (one command): taken before its steps go to the executor, given
    back in the transaction that records their rows (``release_writes``), and all at the end."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.pid = os.getpid()
        self.proc = process_token(self.pid)
        self.mine: set[str] = set()
        self.usable = True   # False once the database refused a write (read-only): no sharing

    def _conn(self) -> sqlite3.Connection | None:
        return self.store.conn if self.usable else None

    def take(self, hashes: list[str]) -> set[str] | None:
        """Claim these run hashes: the ones now ours (None: claims cannot be written here,
        compute everything). The others are held by another run."""
        conn = self._conn()
        if conn is None or not hashes:
            return None
        now = time.time()
        got: set[str] = set()
        try:
            conn.execute("BEGIN IMMEDIATE")  # waits out another writer (the busy timeout)
            try:
                conn.execute(_TABLE)
                # made as they are written (a repeated one is ignored as any other claimed)
                conn.executemany("INSERT OR IGNORE INTO claims VALUES (?, ?, ?, ?, ?)",
                                 ((h, self.run_id, self.pid, self.proc, now)
                                  for h in hashes if h not in self.mine))
                # each of them has one claim now (no other writer in this transaction): ours,
                # inserted now or before, unless another run's; told by the others' claims (few),
                # not by reading back ours (at 200,000 steps, 200,000 new strings)
                others = {h for (h,) in conn.execute(
                    "SELECT run_hash FROM claims WHERE run_id<>?", (self.run_id,))}
                got.update(h for h in hashes if h not in others)
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.DatabaseError):
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.DatabaseError:   # read-only or busy past the timeout: compute, share not
            self.usable = False
            return None
        self.mine |= got
        return got

    def release_writes(self, hashes: list[str]) -> list[tuple[str, list[tuple[Any, ...]]]]:
        """The statements that give back our claims of these run hashes: run in the transaction
        that records their rows, so a waiter never sees neither the claim nor the row."""
        mine = [h for h in dict.fromkeys(hashes) if h in self.mine]
        if not mine:
            return []
        self.mine.difference_update(mine)
        return [("DELETE FROM claims WHERE run_hash=? AND run_id=?",
                 [(h, self.run_id) for h in mine])]

    def release(self, hashes: list[str]) -> None:
        """Give back our claims of these run hashes now, in a transaction of their own."""
        writes = self.release_writes(hashes)
        if writes:
            self.store._write_all(writes)

    def release_all(self) -> None:
        """Give back every claim still ours (the run ends, finished or not)."""
        if not self.mine:
            return
        with contextlib.suppress(Exception):  # our process ending frees them for the others too
            self.release(list(self.mine))

    def held(self, hashes: list[str]) -> set[str]:
        """Of these run hashes, the ones another live run holds now; the claims of a process
        that is gone are removed (taken over) on the way."""
        conn = self._conn()
        if conn is None or not hashes:
            return set()
        holders: dict[str, tuple[str, int, str]] = {}
        try:
            for i in range(0, len(hashes), _CHUNK):
                part = hashes[i:i + _CHUNK]
                for h, run_id, pid, proc in conn.execute(
                        "SELECT run_hash, run_id, pid, proc FROM claims WHERE run_hash IN "
                        f"({','.join('?' * len(part))})", part):
                    holders[h] = (run_id, pid, proc)
        except sqlite3.DatabaseError:
            return set()
        alive: dict[tuple[int, str], bool] = {}
        dead = set()
        for run_id, pid, proc in holders.values():
            if run_id == self.run_id:
                continue
            if (pid, proc) not in alive:
                alive[pid, proc] = process_alive(pid, proc)
            if not alive[pid, proc]:
                dead.add(run_id)
        if dead:
            with contextlib.suppress(Exception):  # another waiter may take them over first
                self.store._write_all([("DELETE FROM claims WHERE run_id=?",
                                        [(r,) for r in dead])])
        return {h for h, (run_id, _, _) in holders.items()
                if run_id != self.run_id and run_id not in dead}

    def newest_row(self) -> int:
        """The id of the newest result row: what a run started after (rows past it can be
        another run's work on the same steps)."""
        conn = self._conn()
        with contextlib.suppress(sqlite3.DatabaseError, AttributeError):
            if conn is not None:
                return int(conn.execute(
                    "SELECT coalesce(max(id), 0) FROM materializations").fetchone()[0])
        return 0

    def successes_since(self, row: int) -> list[tuple[int, str, str, str]]:
        """(id, asset, run hash, run id) of every success another run recorded after row
        ``row``, and the newest success after it (whoever's: where the next look starts). Not
        this run's own rows: at 200,000 results just recorded, ~70 MB of tuples."""
        conn = self._conn()
        with contextlib.suppress(sqlite3.DatabaseError, AttributeError):
            if conn is not None:
                return list(conn.execute(
                    "SELECT id, asset, run_hash, run_id FROM materializations WHERE id > ? "
                    "AND status='success' AND (run_id IS NOT ? OR id = (SELECT max(id) FROM "
                    "materializations WHERE id > ? AND status='success')) ORDER BY id",
                    (row, self.run_id, row)))
        return []
