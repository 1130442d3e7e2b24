"""Whether the process that began a run is still the one running: its pid and its start
time (``/proc``), so a reused pid is told apart from the process that began the run; the runs
whose process is gone marked ``crashed``."""
from __future__ import annotations

import os

from barca.store.driver import sqlite3


def _proc_stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (Linux); None elsewhere or gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_token(pid: int) -> str:
    """What names one process beyond its pid, which the system reuses: the host and, where
    the system tells (Linux), the process's start time."""
    fields = _proc_stat(pid)
    start = fields[19] if fields and len(fields) > 19 else ""
    return f"{os.uname().nodename}|{start}"  # the host name, without importing socket


def process_alive(pid: int, token: str) -> bool:
    """Whether the process ``token`` (see process_token) names is still running. A process on
    another host counts as alive: it cannot be checked from here."""
    host, _, start = token.partition("|")
    if host != os.uname().nodename:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return True
    fields = _proc_stat(pid)
    if fields is None:
        return not os.path.exists("/proc/self/stat")  # no /proc: the pid exists, trust it
    if fields[0] in ("Z", "X"):  # a zombie: dead, not yet waited for
        return False
    return not start or (len(fields) > 19 and fields[19] == start)


def new_run_id() -> str:
    """A run's id: the time in milliseconds (so ids sort roughly by start) and 16 random bits."""
    import time
    return f"{int(time.time() * 1000) & 0xFFFFFFFF:08x}{os.urandom(2).hex()}"


def reap_crashed(conn: sqlite3.Connection) -> list[str]:
    """Mark ``crashed`` every ``running`` run whose process is gone (its pid no longer
    names the process that began it: ended, killed, or the pid reused, told apart by the
    process's start time). A run begun on another machine, or by a barca that did not
    record its process, is left as it is: nothing here can tell. The run ids marked.
    (Here, not with the server's queue in store.serverq: every command that records a run
    reaps first, and a cached one should not load the queue's module for it.)"""
    try:
        live = list(conn.execute("SELECT run_id, pid, proc FROM runs WHERE status='running'"))
    except sqlite3.OperationalError:  # a store written before runs knew their process
        return []
    gone = [run_id for run_id, pid, proc in live
            if pid is not None and proc and not process_alive(pid, proc)]
    if gone:
        import contextlib
        import time
        why = "the process running it ended before it finished (killed or crashed)"
        with contextlib.suppress(sqlite3.DatabaseError):  # a read-only store: shown as is
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("UPDATE runs SET status='crashed', finished_at=?, error=? "
                                 "WHERE run_id=? AND status='running'",
                                 [(time.time(), why, r) for r in gone])
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
    return gone
