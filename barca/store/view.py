"""The store as a decision sees it: read-only. Each node's history (its rows, looked up by key
and by run hash) and its snapshot, read on first ask and kept for the command. Nothing here
writes: recording results, snapshots and adopted artifacts is the runner's work, after the
decision."""
from __future__ import annotations

from barca.core.types import NodeId, cast
from barca.store.driver import sqlite3
from barca.store.metadata import Row, Snapshot, Store
from barca.store.schema import db_error

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Set


class NodeHistory:
    """What the store knows of one node: the newest row per key (any status, and successful),
    and successful rows looked up by run hash.

    Lazy: a planner that needs a handful of rows asks for them one by one (an indexed query
    each); the newest row of every key is read in one query on first use of ``latest`` /
    ``latest_success``, or once point queries stop being few."""

    POINT_QUERIES = 64
    # (slots: a settled walk makes one per node)
    __slots__ = ("store", "asset", "_latest", "_latest_success", "_by_hash", "_older", "_points",
                 "_where", "_where_points", "_hint")

    def __init__(self, store: Store | None, asset: str) -> None:
        self.store, self.asset = store, asset
        self._latest: dict[str, Row] | None = None if store is not None else {}
        self._latest_success: dict[str, Row] = {}
        self._by_hash: dict[str, Row | None] = {}
        self._older = False
        self._points = 0
        self._where: dict[str, tuple[str, str, str, str]] | None = None
        self._where_points = 0
        # (run hash, where): a settled node's one location, read with its snapshot (see hint)
        self._hint: tuple[str, tuple[str, str, str, str]] | None = None

    @classmethod
    def of(cls, asset: str, rows: list[Row]) -> NodeHistory:
        """A history held in memory (oldest row first), read from no store: what a test of the
        decision says the store held."""
        got = cls(None, asset)
        latest: dict[str, Row] = {}
        for r in rows:
            latest[r.partition] = r
            if r.status == "success":
                got._latest_success[r.partition] = r
                got._by_hash[r.run_hash] = r  # the newest success of a run hash wins
        got._latest = latest
        return got

    def _load(self) -> None:
        assert self.store is not None
        latest, latest_success, older = self.store.newest_rows(self.asset)
        self._latest, self._latest_success, self._older = latest, latest_success, older
        for r in latest_success.values():
            self._by_hash.setdefault(r.run_hash, r)

    @property
    def latest(self) -> dict[str, Row]:
        """partition -> newest row of any status."""
        if self._latest is None:
            self._load()
        assert self._latest is not None  # _load sets it
        return self._latest

    @property
    def latest_success(self) -> dict[str, Row]:
        """partition -> newest successful row."""
        if self._latest is None:
            self._load()
        return self._latest_success

    def _point(self) -> bool:
        """Whether to ask for one row (rather than read every key's newest rows at once)."""
        if self._latest is not None or self.store is None:
            return False
        self._points += 1
        if self._points > self.POINT_QUERIES:
            self._load()
            return False
        return True

    def newest_success(self, key: str) -> Row | None:
        if self._point() and self.store is not None:  # (_point is False without a store)
            return self.store.newest_row(self.asset, key, True)
        return self.latest_success.get(key)

    def newest(self, key: str) -> Row | None:
        if self._point() and self.store is not None:
            return self.store.newest_row(self.asset, key, False)
        return self.latest.get(key)

    def success(self, run_hash: str) -> Row | None:
        """A successful row with this run hash (the newest), if any."""
        if run_hash in self._by_hash:
            return self._by_hash[run_hash]
        if self.store is None:
            return None
        if self._point():
            row = self.store.success_row(self.asset, run_hash)
        elif run_hash in self._by_hash:  # every key's newest rows were just read
            return self._by_hash[run_hash]
        elif not self._older:
            # a miss among the newest rows is a miss, not remembered: a first run of 200,000
            # keys asks for each once (a dict of them all, ~10 MB, held to the walk's end)
            return None
        else:  # unless older successes exist
            row = self.store.success_row(self.asset, run_hash)
        self._by_hash[run_hash] = row
        return row

    def hint(self, run_hash: str, where: tuple[str, str, str, str]) -> None:
        """Where the newest successful row of this run hash is, as read with the node's
        snapshot in a walk that nothing wrote to since (a settled one: engine.settle): its
        location found without reading the node's rows again."""
        self._hint = (run_hash, where)

    def locate(self, where: dict[str, tuple[str, str, str, str]]) -> None:
        """Every successful row's location, read for many nodes at once (see StoreView)."""
        if self._where is None:
            self._where = where

    def resolve(self, run_hash: str, ask: bool = True) -> tuple[str, str, str, str] | None:
        """(path, format, sha256, shape) of the newest successful row with this run hash:
        a point query each for a few, then every successful row's four columns in one read
        (not whole rows: a 200,000-key target resolves all of its keys). Not ``ask``: only
        if this history already holds it (no query; None else)."""
        row = self._by_hash.get(run_hash)
        if row is not None:
            return _where(row)
        hint = self._hint
        if hint is not None and hint[0] == run_hash:
            return hint[1]
        if self._where is None and self.store is not None and ask:
            self._where_points += 1
            if self._where_points <= self.POINT_QUERIES:
                row = self.store.success_row(self.asset, run_hash)
                return None if row is None else _where(row)
            self._where = self.store.success_locations(self.asset)
        return (self._where or {}).get(run_hash)

    def newest_of(self, wanted: Set[str], settled: bool) -> Row | None:
        """The newest successful row whose run hash is one of ``wanted``, or None unless each
        of them has a successful row. ``settled``: the decision found a successful row for
        each (every key cached), so the node's newest success is the answer when its run hash
        is wanted (not after a revert). Else read from ids and run hashes, then one row: every
        row of a 2,000-key node, parts and all, was most of what ``status`` read."""
        store = self.store
        conn = store.conn if store is not None else None
        if store is None or conn is None:
            return None
        seen: set[str] = set()
        best = -1
        try:
            if settled:
                (best,) = conn.execute("SELECT max(id) FROM materializations WHERE asset=? "
                                       "AND status='success'", (self.asset,)).fetchone()
                got = store.rows(self.asset, "id=?", (best,))
                if got and got[0].run_hash in wanted:
                    return got[0]
                best = -1
            for i, h in conn.execute("SELECT id, run_hash FROM materializations WHERE asset=? "
                                     "AND status='success'", (self.asset,)):
                if h in wanted:
                    seen.add(h)
                    best = max(best, i)
        except sqlite3.DatabaseError as exc:
            raise db_error(store.db_path, exc) from None
        if len(seen) < len(wanted):
            return None
        got = store.rows(self.asset, "id=?", (best,))
        return got[0] if got else None

    def all_success(self) -> list[Row]:
        """Every successful row, oldest first (small nodes only: sensors)."""
        if self.store is None:
            return []
        return self.store.rows(self.asset, "status='success'")


class StoreView:
    """Read-only: what the store held when the command asked.

    ``snapshots=False`` reads no snapshot, so every node is decided key by key as with an empty
    snapshot table: one of the memo layers the property tests switch off to show that no
    decision depends on them (see Context's ``memo``)."""
    __slots__ = ("store", "snapshots", "_hist", "_snaps", "_evicted", "located", "_due")

    def __init__(self, store: Store, snapshots: bool = True) -> None:
        self.store = store
        self.snapshots = snapshots
        self._hist: dict[NodeId, NodeHistory] = {}
        self._snaps: dict[NodeId, Snapshot | None] | None = None
        self._evicted: dict[NodeId, set[str]] = {}
        # node -> where its snapshot's one run hash has its newest success, as the settle
        # record of this very state says (engine.settle: set when it vouches for the walk)
        self.located: dict[str, tuple[str, str, str, str]] = {}
        self._due: list[NodeId] | None = None  # snapshots to read when first asked for

    def load_snapshots(self, nids: list[NodeId] | None, later: bool = False) -> None:
        """Read the snapshots of every node a walk may decide, in one query, before it starts
        (``None`` forgets them: the walk is over and the store may have new ones).
        ``later`` (a walk no settle record can vouch for, so none is looked at before the
        first node is decided): not now, but when ``load_due`` is called (by the runner, while
        the first steps run on the pool: a sensor's) or a snapshot is first asked for,
        whichever comes first -- read before any is looked at, as without it."""
        self.located = {}
        self._due = None
        if later and nids:
            self._due, self._snaps = list(nids), None
            return
        if nids is None or not self.snapshots:
            self._snaps = None
            return
        got = self.store.snapshots(list(nids))
        snaps: dict[str, Snapshot | None] = dict.fromkeys(nids)  # (None: none; the rest in C)
        snaps.update(got)
        self._snaps = cast(dict[NodeId, Snapshot | None], snaps)

    def load_due(self) -> None:
        """The snapshots ``load_snapshots`` put off, read now (nothing when none are due)."""
        if self._due is not None:
            self.load_snapshots(self._due)

    @property
    def snapshots_loaded(self) -> dict[NodeId, Snapshot | None] | None:
        """The snapshots ``load_snapshots`` read (None: none were, or not yet)."""
        return self._snaps

    def history(self, nid: NodeId) -> NodeHistory:
        got = self._hist.get(nid)
        if got is None:
            got = self._hist[nid] = NodeHistory(
                self.store if self.store.conn is not None else None, nid)
        return got

    def locate(self, nids: list[NodeId]) -> None:
        """Read where the successful results of these nodes are, in one query (rather than one
        per node when each is first asked for)."""
        hists = self._hist
        nids = [n for n in nids if (h := hists.get(n)) is None or h._hint is None]
        for n, where in self.store.success_locations_of(list(nids)).items():
            hist = hists.get(cast(NodeId, n))  # (most: made by the walk; a lookup, no call)
            if hist is None:
                hist = self.history(cast(NodeId, n))
            if hist._where is None:  # (as NodeHistory.locate)
                hist._where = where

    def snapshot(self, nid: NodeId) -> Snapshot | None:
        """The node's last complete walk (see Snapshot)."""
        if not self.snapshots:
            return None
        if self._due is not None:
            self.load_due()
        if self._snaps is not None and nid in self._snaps:
            return self._snaps[nid]
        return self.store.snapshot(nid)

    def evicted(self, nid: NodeId) -> set[str]:
        """Paths of the node's results that the cache size limit evicted (usually none: one
        query per command tells)."""
        if nid not in self.store.evicted_assets():
            return set()
        got = self._evicted.get(nid)
        if got is None:
            got = self._evicted[nid] = self.store.evicted_paths(nid)
        return got

    def forget(self, nid: NodeId) -> None:
        """The node's rows changed (the runner recorded some): read them again when asked."""
        self._hist.pop(nid, None)
        self._evicted.pop(nid, None)


def _where(row: Row) -> tuple[str, str, str, str]:
    """(path, format, sha256, shape) of a successful row, as ``Store.success_locations`` reads
    them (a success has a path, a format and a digest)."""
    return cast(tuple[str, str, str, str], (row.path, row.format, row.sha256, row.shape))
