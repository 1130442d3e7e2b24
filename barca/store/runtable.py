"""The ``runs`` table's writes, mixed into ``Store``: a run begun and ended (with how many times
its steps' functions were called and its first failure, read off the rows it recorded), a run
served whole from what a process kept, and the runs of processes that died marked so."""
from __future__ import annotations

import os
import time

from barca.store.process import process_token, reap_crashed

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    from barca.store.driver import sqlite3


class RunTable:
    # a run barca serve queued begins under its id, keeping its trigger; a finished run is
    # never reopened
    _BEGIN_RUN = ("INSERT INTO runs (run_id, command, target, status, started_at, pool_size, "
                  "pid, proc, triggered_by, files, job) VALUES (?, ?, ?, 'running', ?, ?, ?, "
                  "?, 'manual', ?, ?) ON CONFLICT(run_id) DO UPDATE SET status='running', "
                  "started_at=excluded.started_at, pool_size=excluded.pool_size, "
                  "pid=excluded.pid, proc=excluded.proc, files=excluded.files, "
                  "job=excluded.job WHERE runs.status IN ('pending', 'running')")
    _END_RUN = ("UPDATE runs SET status=?, finished_at=?, steps_run=?, steps_cached=?, "
                "steps_failed=?, error=?, attempts=?, failure=? WHERE run_id=?")
    # a served run: the row _BEGIN_RUN then _END_RUN make, in one statement (no process to
    # record; a new id, so no queued run to take over)
    _SERVED_RUN = ("INSERT INTO runs (run_id, command, target, status, started_at, finished_at, "
                   "steps_run, steps_cached, steps_failed, pool_size, error, pid, proc, "
                   "triggered_by, files, job, attempts) VALUES (?, ?, ?, 'success', ?, ?, 0, ?, "
                   "0, ?, NULL, NULL, NULL, 'manual', ?, ?, 0)")

    if TYPE_CHECKING:
        conn: sqlite3.Connection | None
        _floors: dict[str, int]

        def _write(self, sql: str, values: list[tuple[Any, ...]]) -> None: ...

        def _write_all(self, writes: Sequence[tuple[str, Iterable[tuple[Any, ...]]]],
                       generation: int | None = None) -> bool: ...

    def begin_run(self, run_id: str, command: str, target: str, pool_size: int,
                  files: Sequence[str] = (), job: str | None = None) -> None:
        """A run starts: its command, target (as typed), pool size, process, the pipeline
        files it reads and its job (``all``, or the node ids it was asked for)."""
        self.reap_crashed()
        self._write(self._BEGIN_RUN, [(run_id, command, target, time.time(), pool_size,
                                       os.getpid(), process_token(os.getpid()),
                                       _files_text(files), job)])
        assert self.conn is not None
        # the newest row before the run's own: its rows are read from there, by id, at its
        # end (no index on run_id to keep up at every row written)
        (floor,) = self.conn.execute("SELECT coalesce(max(id), 0) FROM materializations"
                                     ).fetchone()
        self._floors[run_id] = floor

    def reap_crashed(self) -> list[str]:
        """``process.reap_crashed``: runs whose process is gone marked ``crashed``."""
        if self.conn is None:
            return []
        return reap_crashed(self.conn)

    def running_runs(self) -> list[dict[str, Any]]:
        """The runs in progress now (a crashed one marked so first)."""
        if self.conn is None:
            return []
        self.reap_crashed()
        cur = self.conn.execute("SELECT run_id, started_at FROM runs WHERE status='running'")
        return [{"run_id": r, "started_at": t} for r, t in cur]

    def end_run(self, run_id: str, status: str, run: int, cached: int, failed: int,
                error: str | None = None) -> None:
        """A run ends: its counts, and from the rows it recorded how many times its steps'
        functions were called (retries too) and its first failed step (node and error)."""
        attempts, failure = 0, None
        floor = self._floors.pop(run_id, None)
        if (run or failed) and floor is not None and self.conn is not None:
            (attempts,) = self.conn.execute(
                "SELECT coalesce(sum(coalesce(attempts, 1)), 0) FROM materializations "
                "WHERE id > ? AND run_id = ?", (floor, run_id)).fetchone()
            first = self.conn.execute(
                "SELECT asset, error FROM materializations WHERE id > ? AND run_id = ? AND "
                "status = 'failed' ORDER BY id LIMIT 1", (floor, run_id)).fetchone()
            if first is not None:
                import json  # (a failed run only)
                failure = json.dumps({"node": first[0], "error": first[1]})
        self._write(self._END_RUN, [(status, time.time(), run, cached, failed, error,
                                     attempts, failure, run_id)])

    def served_run(self, generation: int, run_id: str, command: str, target: str,
                   pool_size: int, cached: int, also: list[tuple[str, list[tuple[Any, ...]]]],
                   files: Sequence[str] = (), job: str | None = None) -> bool:
        """A run served whole from what a process kept (barca.api.warm): begun and finished, with
        ``also`` (what it read), in one transaction -- only while the store's generation is
        still ``generation`` (read under the write lock): False, nothing written, if moved."""
        now = time.time()
        return self._write_all([(self._SERVED_RUN, [(run_id, command, target, now, now, cached,
                                                      pool_size, _files_text(files), job)]),
                                *also], generation)


def _files_text(files: Sequence[str]) -> str | None:
    """The files as the column holds them: a JSON list (None: none named). Written here: a
    cached command loads no json module (a quote, a backslash and a control character are
    escaped as \\uXXXX, which any JSON reader reads back)."""
    if not files:
        return None
    return "[" + ", ".join('"' + "".join(c if c >= " " and c not in '"\\' else
                                         f"\\u{ord(c):04x}" for c in f) + '"'
                           for f in files) + "]"
