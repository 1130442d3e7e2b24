"""The local store: ``.barca/metadata.db`` (SQLite, WAL) and the artifacts directory."""
from __future__ import annotations

import os
import time

from barca.core.errors import InfrastructureError
from barca.store import quietclose, schema, snapchunks
from barca.store.driver import sqlite3
from barca.store.rows import Row, Snapshot  # the records it returns (re-exported here)
from barca.store.runtable import RunTable
from barca.store.schema import RUN_COLUMNS, SCHEMA, barca_030_error, db_error, from_barca_030  # noqa: F401

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Sequence
    from pathlib import Path
    from typing import Any, NoReturn

COLUMNS = ("node", "asset", "partition", "run_hash", "path", "format", "size", "sha256", "parts",
           "status", "error", "traceback", "elapsed", "run_id", "created_at", "shape",
           "value_hash", "remote", "attempts")


class Store(RunTable):
    def __init__(self, root: str | Path, create: bool = True, prefix: str = ".barca") -> None:
        # str paths (``root``, ``dir``, ``db_path``: as Paths, made when asked): pathlib is not
        # loaded on a cached command's path (#31 item 2)
        self.root_dir = os.fspath(root)
        self.prefix = prefix   # ".barca", or ".barca/envs/<env>" (Settings.store_prefix)
        self.folder = os.path.join(self.root_dir, prefix)
        self.db_file = os.path.join(self.folder, "metadata.db")
        self.conn: sqlite3.Connection | None = None
        self._evicted: set[str] | None = None
        self._seen: snapchunks.Seen = {}  # the chunked snapshots read (see snapchunks)
        self._opened_at: int | None = None  # the generation when opened (see quietclose)
        self._floors: dict[str, int] = {}  # run id -> newest row id at its start (runtable)
        if create:
            self._open(create=True)
        elif os.path.exists(self.db_file):
            self._open(create=False)

    @property
    def root(self) -> Path:
        from pathlib import Path
        return Path(self.root_dir)

    @property
    def dir(self) -> Path:
        from pathlib import Path
        return Path(self.folder)

    @property
    def db_path(self) -> Path:
        from pathlib import Path
        return Path(self.db_file)

    def _open(self, create: bool) -> None:
        try:
            if create:
                self._folder()
            wait = _wait()
            self.conn = sqlite3.connect(self.db_file, timeout=wait, isolation_level=None,
                                        check_same_thread=False)
            self.conn.execute(f"PRAGMA busy_timeout={int(wait * 1000)}")
            self._not_rust_barca()  # before anything is written into it
            # per connection: WAL syncs at checkpoints, not at each commit (nor a kernel's ask)
            self.conn.execute("PRAGMA synchronous=NORMAL")
            if create and not schema.made(self.conn):  # (made: the tables are all there)
                schema.create(self.conn, wait)
            self._opened_at = quietclose.generation(self.conn)
        except (sqlite3.DatabaseError, OSError) as exc:
            self._cannot(exc)

    def _cannot(self, exc: sqlite3.DatabaseError | OSError) -> NoReturn:
        """Why this store cannot be opened or made ready: its database, or its folder."""
        if isinstance(exc, sqlite3.DatabaseError):
            raise db_error(self.db_file, exc) from None
        raise InfrastructureError(
            f"cannot create {self.folder}: {exc.strerror or exc}",
            "Check that the project directory is writable.", path=self.folder) from None

    def _folder(self) -> None:
        """The store's folder, and the ``.gitignore`` that keeps ``.barca/`` out of git."""
        os.makedirs(self.folder, exist_ok=True)
        gi = os.path.join(self.root_dir, ".barca", ".gitignore")
        if not os.path.exists(gi):
            with open(gi, "w") as f:
                f.write("*\n")

    def for_writing(self) -> Store:
        """This store, made ready to be written (as ``Store(create=True)``: its folder, its
        tables made or checked), on the connection already open when there is one: a second
        connection would parse the whole schema again (~1 M instructions of every cached
        command). A new store when none was open (no database yet)."""
        if self.conn is None:
            return Store(self.root_dir, create=True, prefix=self.prefix)
        self._evicted = None  # (read again through the writer, as a new store would)
        try:
            self._folder()
            if not schema.made(self.conn):
                schema.create(self.conn, _wait())
        except (sqlite3.DatabaseError, OSError) as exc:
            self._cannot(exc)
        return self

    def _not_rust_barca(self) -> None:
        """A database barca 0.30 wrote is neither read nor changed (see ``from_barca_030``)."""
        assert self.conn is not None
        if from_barca_030(self.conn):
            self.conn.close()
            self.conn = None
            raise barca_030_error(self.root_dir, self.db_file)

    @property
    def is_open(self) -> bool:
        """Whether there is a database to read (a read-only command finds none before the
        first run) and it was not closed."""
        return self.conn is not None

    def close(self, last: bool = True) -> None:  # last: no other connection of ours is open
        if self.conn is not None:
            conn, self.conn = self.conn, None
            quietclose.close(conn, self.db_file, self._opened_at if last else None)

    # ---------------------------------------------------------------- reads
    _SELECT = ("SELECT id, node, asset, partition, run_hash, path, format, size, sha256, parts, "
               "status, error, elapsed, run_id, created_at, shape, value_hash "
               "FROM materializations ")

    def rows(self, asset: str, where: str = "1", args: tuple[Any, ...] = (),
             order: str = "id") -> list[Row]:
        if self.conn is None:
            return []
        try:
            cur = self.conn.execute(self._SELECT + f"WHERE asset=? AND {where} ORDER BY {order}",
                                    (asset, *args))
            return list(map(Row._make, cur))
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None

    def newest_rows(self, asset: str) -> tuple[dict[str, Row], dict[str, Row], bool]:
        """The newest row per key (any status), the newest successful row per key, and whether
        older successful rows exist: in one query (not the whole history)."""
        rows = self.rows(asset, "id IN (SELECT max(id) FROM materializations WHERE asset=? "
                                "GROUP BY partition, status)", (asset,))
        latest: dict[str, Row] = {}
        latest_success: dict[str, Row] = {}
        for r in rows:  # ordered by id: newer rows overwrite older ones
            latest[r.partition] = r
            if r.status == "success":
                latest_success[r.partition] = r
        assert self.conn is not None  # (rows() read none without one, and is not called then)
        try:
            count = self.conn.execute(
                "SELECT count(*) FROM materializations WHERE asset=? AND status='success'",
                (asset,)).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None
        return latest, latest_success, count > len(latest_success)

    def success_locations(self, asset: str) -> dict[str, tuple[str, str, str, str]]:
        """run hash -> (path, format, sha256, shape) of its newest successful row."""
        return self.success_locations_of([asset]).get(asset, {})

    def success_locations_of(self, assets: list[str]
                             ) -> dict[str, dict[str, tuple[str, str, str, str]]]:
        """``success_locations`` of several nodes, in one query per 500 names."""
        out: dict[str, dict[str, tuple[str, str, str, str]]] = {a: {} for a in assets}
        if self.conn is None:
            return out
        try:
            for i in range(0, len(assets), 500):
                part = assets[i:i + 500]
                for row in self.conn.execute(
                        "SELECT asset, run_hash, path, format, sha256, shape FROM "
                        f"materializations WHERE asset IN ({','.join('?' * len(part))}) "
                        "AND status='success' ORDER BY id", part):
                    out[row[0]][row[1]] = row[2:]
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None
        return out

    def newest_row(self, asset: str, key: str, success: bool) -> Row | None:
        found = self.rows(asset, "partition=?" + (" AND status='success'" if success else ""),
                          (key,), order="id DESC LIMIT 1")
        return found[0] if found else None

    def table_rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``runs`` or ``materializations`` as a dict (``barca sql``'s ``barca.``
        schema, which DuckDB reads)."""
        if table not in ("runs", "materializations"):
            raise ValueError(f"not a table barca sql shows: {table}")
        if self.conn is None:
            return []
        cur = self.conn.execute(f"SELECT * FROM {table}")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=False)) for r in cur]

    # ---------------------------------------------------------------- node snapshots
    def snapshot(self, asset: str) -> Snapshot | None:
        """The last complete walk of a node (see Snapshot)."""
        if self.conn is None:
            return None
        try:
            got = self.conn.execute("SELECT digest, combined, keys, hashes FROM snapshots "
                                    "WHERE asset=?", (asset,)).fetchone()
        except sqlite3.OperationalError:  # a store written before snapshots existed
            return None
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None
        return snapchunks.whole(self.conn, asset, Snapshot._make(got), self._seen) \
            if got else None

    def snapshots(self, assets: list[str]) -> dict[str, Snapshot]:
        """The snapshots of these nodes (see ``snapshot``), in one query per 500 names."""
        if self.conn is None or not assets:
            return {}
        out: dict[str, Snapshot] = {}
        self._seen.clear()  # a new walk: what an earlier one read is not kept
        query = "SELECT asset, digest, combined, keys, hashes FROM snapshots WHERE asset IN ({})"
        try:
            wanted: Collection[str] | None = None
            parts: Iterable[Any]
            if len(assets) >= 64 and self.conn.execute(
                    "SELECT count(*) FROM snapshots").fetchone()[0] <= len(assets) * 3 // 2:
                # (most of the table: a scan of it costs less than a lookup of each name,
                # ~10 k instructions a row against ~16 k)
                wanted = set(assets)
                parts = (self.conn.execute("SELECT asset, digest, combined, keys, hashes "
                                           "FROM snapshots"),)
            else:
                parts = (self.conn.execute(query.format(",".join("?" * len(p))), p)
                         for p in (assets[i:i + 500] for i in range(0, len(assets), 500)))
            make, mark = tuple.__new__, snapchunks.MARK  # (per row: no Python call made)
            for rows in parts:
                for row in rows:
                    if wanted is not None and row[0] not in wanted:
                        continue
                    snap = make(Snapshot, row[1:5])
                    got = snapchunks.expand(self.conn, row[0], snap, self._seen) \
                        if row[4].startswith(mark) else snap  # (as snapchunks.whole)
                    if got is not None:  # (a snapshot in parts that cannot be read: a miss)
                        out[row[0]] = got
        except sqlite3.OperationalError:  # a store written before snapshots existed
            return {}
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None
        return out

    def put_snapshots(self, snaps: list[tuple[str, str, str, str, str]]) -> None:
        """(asset, digest, combined, keys, hashes) rows, in one transaction (a large one in
        parts: see snapchunks)."""
        try:
            if snaps and self.conn is not None:
                snapchunks.put(self.conn, snaps, self._seen)
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None

    def pending_uploads(self) -> list[tuple[int, str, str, str]]:
        """Successful results not yet copied to the remote store: (row id, path, node, key)."""
        if self.conn is None:
            return []
        return list(self.conn.execute(
            "SELECT id, path, asset, partition FROM materializations WHERE status='success' "
            "AND (remote IS NULL OR remote=0) AND path IS NOT NULL"))

    def mark_uploaded(self, ids: list[int]) -> None:
        if ids:
            self._write("UPDATE materializations SET remote=1 WHERE id=?", [(i,) for i in ids])

    def success_row(self, asset: str, run_hash: str) -> Row | None:
        found = self.rows(asset, "run_hash=? AND status='success'", (run_hash,),
                          order="id DESC LIMIT 1")
        return found[0] if found else None

    def executions(self, asset: str) -> list[tuple[Any, ...]]:
        """Every recorded execution of a node, oldest first: (status, elapsed, created_at,
        error, run_hash, attempts) (``barca stats``)."""
        if self.conn is None:
            return []
        cols = {r[1] for r in self.conn.execute("PRAGMA table_info(materializations)")}
        tries = "attempts" if "attempts" in cols else "NULL"  # a store opened read-only
        try:
            return list(self.conn.execute(
                f"SELECT status, elapsed, created_at, error, run_hash, {tries} "
                "FROM materializations WHERE asset=? ORDER BY id", (asset,)))
        except sqlite3.DatabaseError as exc:
            raise db_error(self.db_file, exc) from None

    def runs(self, limit: int = 20) -> list[dict[str, Any]]:
        if self.conn is None:
            return []
        self.reap_crashed()
        from barca.store.serverq import history
        return history(self.conn, limit)[0]  # with who triggered each run, where recorded

    def run(self, run_id: str) -> dict[str, Any] | None:
        """One run's row; ``run_id`` may be a unique prefix."""
        if self.conn is None:
            return None
        self.reap_crashed()
        cur = self.conn.execute(
            "SELECT run_id, command, target, status FROM runs WHERE run_id LIKE ? "
            "ORDER BY started_at DESC LIMIT 2", (run_id.replace("%", "").replace("_", "") + "%",))
        found = [dict(zip(("run_id", "command", "target", "status"), r, strict=False)) for r in cur]
        return found[0] if len(found) == 1 or (found and found[0]["run_id"] == run_id) else None

    def log_lines(self, run_id: str, after: int = 0) -> list[tuple[int, str, str, str, float, str]]:
        """The lines a run's steps wrote, after line id ``after``: (id, node, step, stream,
        time, line), in the order they were recorded."""
        if self.conn is None:
            return []
        try:
            return list(self.conn.execute(
                "SELECT id, node, step, stream, ts, line FROM logs WHERE run_id=? AND id>? "
                "ORDER BY id", (run_id, after)))
        except sqlite3.OperationalError:  # a store written before logs were recorded
            return []

    def last_lines(self, node: str, limit: int) -> tuple[str, list[tuple[int, str, str, str,
                                                                      float, str]]]:
        """The last ``limit`` lines one node's steps wrote in the node's last run (a result
        or a failure; none when it printed nothing): (run id, lines as ``log_lines`` has)."""
        if self.conn is None:
            return "", []
        try:
            got = self.conn.execute("SELECT run_id FROM materializations WHERE asset=? "
                                    "ORDER BY id DESC LIMIT 1", (node,)).fetchone()
            if got is None:
                return "", []
            rows = list(self.conn.execute(
                "SELECT id, node, step, stream, ts, line FROM logs WHERE run_id=? AND node=? "
                "ORDER BY id DESC LIMIT ?", (got[0], node, limit)))
        except sqlite3.OperationalError:  # a store written before logs were recorded
            return "", []
        return got[0], rows[::-1]

    def run_steps(self, run_id: str) -> list[tuple[str, str]]:
        """(node, step) of every step a run recorded a result or a failure for."""
        if self.conn is None:
            return []
        return list(self.conn.execute(
            "SELECT DISTINCT asset, node FROM materializations WHERE run_id=?", (run_id,)))

    def evicted_assets(self) -> set[str]:
        """The nodes some of whose results the cache size limit evicted (read once)."""
        if self._evicted is None:
            self._evicted = set()
            if self.conn is not None:
                # a store written before evictions existed has no such table
                try:  # noqa: SIM105 - (contextlib: not loaded on a cached command's path, #31)
                    self._evicted = {r[0] for r in self.conn.execute(
                        "SELECT DISTINCT asset FROM evictions")}
                except sqlite3.OperationalError:
                    pass
        return self._evicted

    def evicted_paths(self, asset: str) -> set[str]:
        if asset not in self.evicted_assets() or self.conn is None:
            return set()
        return {r[0] for r in self.conn.execute("SELECT path FROM evictions WHERE asset=?",
                                                (asset,))}

    # ---------------------------------------------------------------- settle records
    def generation(self) -> int | None:
        """A number that every write of a result, snapshot, eviction or definition moves on
        (SQLite triggers, so no writer, in any process, can forget): the store's state as a
        settle record sees it. None for a store without it (read-only, or older)."""
        if self.conn is None:
            return None
        try:
            got = self.conn.execute("SELECT n FROM generation").fetchone()
        except sqlite3.DatabaseError:
            return None
        return None if got is None else int(got[0])

    def settle_record(self, cone: str) -> tuple[str, str] | None:
        """(key, value) of the cone's settle record (see barca.engine.settle), if any."""
        if self.conn is None:
            return None
        try:
            got = self.conn.execute("SELECT key, value FROM settle_records WHERE cone=?",
                                    (cone,)).fetchone()
        except sqlite3.DatabaseError:
            return None
        return None if got is None else (got[0], got[1])

    def put_settle_record(self, cone: str, key: str, value: str, keep: int) -> None:
        """The cone's record; of the others, the ``keep - 1`` written last (see engine.settle)."""
        self._write_all([
            ("INSERT OR REPLACE INTO settle_records (cone, key, value) VALUES (?, ?, ?)",
             [(cone, key, value)]),
            ("DELETE FROM settle_records WHERE rowid NOT IN (SELECT rowid FROM settle_records "
             "ORDER BY rowid DESC LIMIT ?)", [(keep,)])])

    # ---------------------------------------------------------------- writes
    def adopt(self, new: str, olds: Callable[[str], bool],
              definition: Callable[[], dict[str, str]]) -> list[str]:
        """Successful rows of other assets recorded again under ``new`` (store.adopt)."""
        if self.conn is None:
            return []
        from barca.store.adopt import adopt_rows  # (a notebook's rename only)
        return adopt_rows(self.conn, COLUMNS, new, olds, definition)

    def record(self, rows: Iterable[dict[str, Any]],
               lines: Sequence[tuple[str, str, str, float, str, str]] = (),
               also: Iterable[tuple[str, list[Any]]] = ()) -> None:
        """Materialization rows (their artifacts already exist), the lines their steps wrote
        (run id, node, step, time, stream, line) and ``also`` (claims given back), at once."""
        rows = list(rows)
        values = [tuple(map(r.get, COLUMNS)) for r in rows]  # (no generator per row)
        writes = []
        if values:
            writes.append((f"INSERT INTO materializations ({', '.join(COLUMNS)}) "
                           f"VALUES ({', '.join('?' * len(COLUMNS))})", values))
        if lines:
            writes.append(("INSERT INTO logs (run_id, node, step, ts, stream, line) "
                           "VALUES (?, ?, ?, ?, ?, ?)", list(lines)))
        if values and self.evicted_assets():  # a result computed again is no longer evicted
            writes.append(("DELETE FROM evictions WHERE path=?",
                           [(r.get("path"),) for r in rows if r.get("path")]))
        writes.extend(also)
        if writes:
            self._write_all(writes)

    def _write(self, sql: str, values: list[tuple[Any, ...]]) -> None:
        self._write_all([(sql, values)])

    def note_reads(self, paths: Collection[str], more: Collection[str] = ()) -> None:
        """What this command read or produced, for the cache limit's "least recently read"
        (``paths`` and ``more`` written as they are: their union, at 400,000 paths, would be
        another large set). Here, not in barca.store.cachelimit: a cached command loads none of
        the eviction's code."""
        if (paths or more) and self.conn is not None:
            import itertools
            self._write_all([reads_write(itertools.chain(paths, more))])

    def _write_all(self, writes: Sequence[tuple[str, Iterable[tuple[Any, ...]]]],
                   generation: int | None = None) -> bool:
        """The writes in one transaction; with ``generation``, only if the store is still at it
        (False: nothing written)."""
        assert self.conn is not None
        try:
            self.conn.execute("BEGIN IMMEDIATE")
            if generation is not None and self.conn.execute(
                    "SELECT n FROM generation").fetchone() != (generation,):
                self.conn.execute("ROLLBACK")
                return False
            for sql, values in writes:
                self.conn.executemany(sql, values)
            self.conn.execute("COMMIT")
        except sqlite3.DatabaseError as exc:
            import contextlib
            with contextlib.suppress(sqlite3.DatabaseError):
                self.conn.execute("ROLLBACK")
            raise db_error(self.db_file, exc) from None
        return True


def reads_write(paths: Iterable[str]) -> tuple[str, Iterable[tuple[Any, ...]]]:
    """The write that notes ``paths`` as read now (its rows made as they are written: a list
    of 400,000 of them would be the largest thing a first run holds)."""
    import itertools  # (the rows zipped in C: no Python step per path)
    # an upsert: a path read before has its time set in place, not its row deleted and made
    # again (a cached walk of 500 results notes each of them)
    return ("INSERT INTO reads (path, at) VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET "
            "at=excluded.at", zip(paths, itertools.repeat(time.time())))


def _wait() -> float:
    """Seconds a connection waits for another's lock (``BARCA_DB_TIMEOUT``, default 15)."""
    return float(os.environ.get("BARCA_DB_TIMEOUT", "15") or 15)
