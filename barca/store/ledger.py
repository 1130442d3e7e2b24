"""The server's ledger in its metadata database: which results it holds (by node and run hash),
its materialization records, and the runs laptops post (``triggered_by = 'client'``). The SQL
of ``barca serve``'s ledger routes; every function takes a ``sqlite3`` connection
(``serverq.connect``)."""
from __future__ import annotations

import time
from typing import Any

from barca.store.driver import sqlite3
from barca.store.metadata import COLUMNS

# a materialization record as the routes show it: (column, key in the answer)
MAT_FIELDS = (("id", "id"), ("node", "node_id"), ("asset", "node"), ("partition", "partition"),
              ("run_hash", "run_hash"), ("run_id", "run_id"), ("status", "status"),
              ("path", "path"), ("format", "format"), ("size", "size_bytes"),
              ("sha256", "digest"), ("elapsed", "elapsed_seconds"), ("attempts", "attempts"),
              ("error", "error"), ("created_at", "created_at"))


def base_node(node_id: str) -> tuple[str, str]:
    """``file.py:fn[k=a]`` -> (``file.py:fn``, ``k=a``); an unpartitioned id has key ``''``."""
    if node_id.endswith("]") and "[" in node_id:
        head, key = node_id[:-1].split("[", 1)
        return head, key
    return node_id, ""


def lookup(conn: sqlite3.Connection, pairs: list[tuple[str, str]]) -> list[dict[str, Any] | None]:
    """For each (node id, run hash): the newest successful record of that result (its path,
    format, size and digest), or None when the ledger holds none. One query per 400 pairs."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    wanted = [(base_node(n)[0], h) for n, h in pairs]
    for i in range(0, len(wanted), 400):
        part = wanted[i:i + 400]
        where = " OR ".join("(asset=? AND run_hash=?)" for _ in part)
        args = [x for pair in part for x in pair]
        cur = conn.execute("SELECT asset, run_hash, partition, path, format, size, sha256 "
                           f"FROM materializations WHERE status='success' AND ({where}) "
                           "ORDER BY id", args)
        for asset, rh, key, path, fmt, size, digest in cur:  # newer rows win
            found[(asset, rh)] = {"partition": key or None, "path": path, "format": fmt,
                                  "size_bytes": size, "digest": digest}
    return [found.get(w) for w in wanted]


def materializations(conn: sqlite3.Connection, node: str | None, run_id: str | None,
                     status: str | None, run_hash: str | None, since: float | None,
                     limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
    """Step records newest first, filtered (``node``: a node id, every key of it), and how
    many match in all."""
    where: list[str] = ["1"]
    args: list[Any] = []
    if node:
        base, key = base_node(node)
        where.append("asset=?")
        args.append(base)
        if key:
            where.append("partition=?")
            args.append(key)
    for column, value in (("run_id", run_id), ("status", status), ("run_hash", run_hash)):
        if value:
            where.append(f"{column}=?")
            args.append(value)
    if since is not None:
        where.append("created_at>=?")
        args.append(since)
    cond = " AND ".join(where)
    total = conn.execute(f"SELECT count(*) FROM materializations WHERE {cond}", args).fetchone()[0]
    cols = ", ".join(c for c, _ in MAT_FIELDS)
    cur = conn.execute(f"SELECT {cols} FROM materializations WHERE {cond} ORDER BY id DESC "
                       "LIMIT ? OFFSET ?", (*args, limit, offset))
    return [dict(zip([k for _, k in MAT_FIELDS], r, strict=True)) for r in cur], total


def client_run(conn: sqlite3.Connection, client_run_id: str) -> str | None:
    """The server's id of the run a client posted under ``client_run_id``, if recorded."""
    got = conn.execute("SELECT run_id FROM runs WHERE triggered_by='client' AND "
                       "client_run_id=? ORDER BY rowid LIMIT 1", (client_run_id,)).fetchone()
    return got[0] if got else None


def digests(conn: sqlite3.Connection, keys: list[tuple[str, str, str]]) -> dict[tuple[str, str,
                                                                                      str], str]:
    """(asset, key, run hash) -> the digest of the newest successful record the ledger holds."""
    out: dict[tuple[str, str, str], str] = {}
    for asset, key, rh in keys:
        got = conn.execute("SELECT sha256 FROM materializations WHERE asset=? AND partition=? "
                           "AND run_hash=? AND status='success' ORDER BY id DESC LIMIT 1",
                           (asset, key, rh)).fetchone()
        if got and got[0]:
            out[(asset, key, rh)] = got[0]
    return out


def record_client_run(conn: sqlite3.Connection, run_id: str, run: dict[str, Any],
                      steps: list[dict[str, Any]]) -> None:
    """A client's run and its step records, in one transaction: the run's row
    (``triggered_by = 'client'``, its own id as ``client_run_id``) and one materialization
    row per step (``steps``: dicts of ``metadata.COLUMNS``, their objects already checked to
    be in the store)."""
    now = time.time()
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "INSERT INTO runs (run_id, command, target, status, started_at, finished_at, "
            "steps_run, steps_cached, steps_failed, triggered_by, client_run_id, exit_code) "
            "VALUES (?, ?, ?, 'success', ?, ?, ?, ?, 0, 'client', ?, 0)",
            (run_id, run["command"], run["target"], run.get("started_at") or now,
             run.get("finished_at") or now, len(steps), run.get("steps_cached") or 0,
             run["run_id"]))
        conn.executemany(f"INSERT INTO materializations ({', '.join(COLUMNS)}) VALUES "
                         f"({', '.join('?' * len(COLUMNS))})",
                         [tuple(dict(s, run_id=run_id, created_at=s.get("created_at") or now
                                     ).get(c) for c in COLUMNS) for s in steps])
        # a result recorded again is no longer evicted (as Store.record)
        conn.executemany("DELETE FROM evictions WHERE path=?", [(s["path"],) for s in steps])
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
