"""The store as a decision sees it: read-only. Each node's history (its rows, looked up by key
and by run hash) and its snapshot, read on first ask and kept for the command. Nothing here
writes: recording results, snapshots and adopted artifacts is the runner's work, after the
decision."""
from __future__ import annotations

from barca.store import NodeHistory, Store
from barca.types import NodeId


class StoreView:
    """Read-only: what the store held when the command asked.

    ``snapshots=False`` reads no snapshot, so every node is decided key by key as with an empty
    snapshot table: one of the memo layers the property tests switch off to show that no
    decision depends on them (see Context's ``memo``)."""
    __slots__ = ("store", "snapshots", "_hist", "_snaps", "_evicted")

    def __init__(self, store: Store, snapshots: bool = True) -> None:
        self.store = store
        self.snapshots = snapshots
        self._hist: dict[NodeId, NodeHistory] = {}
        self._snaps: dict[NodeId, tuple[str, str, str, str] | None] | None = None
        self._evicted: dict[NodeId, set[str]] = {}

    def load_snapshots(self, nids: list[NodeId] | None) -> None:
        """Read the snapshots of every node a walk may decide, in one query, before it starts
        (``None`` forgets them: the walk is over and the store may have new ones)."""
        if nids is None or not self.snapshots:
            self._snaps = None
            return
        got = self.store.snapshots(list(nids))
        self._snaps = {n: got.get(n) for n in nids}

    @property
    def snapshots_loaded(self) -> dict[NodeId, tuple[str, str, str, str] | None] | None:
        """The snapshots ``load_snapshots`` read (None: none were)."""
        return self._snaps

    def history(self, nid: NodeId) -> NodeHistory:
        got = self._hist.get(nid)
        if got is None:
            got = self._hist[nid] = self.store.history(nid)
        return got

    def locate(self, nids: list[NodeId]) -> None:
        """Read where the successful results of these nodes are, in one query (rather than one
        per node when each is first asked for)."""
        for n, where in self.store.success_locations_of(list(nids)).items():
            self.history(n).locate(where)

    def snapshot(self, nid: NodeId) -> tuple[str, str, str, str] | None:
        """(digest, combined, keys joined by NUL, run hashes concatenated) of the node's last
        complete walk."""
        if not self.snapshots:
            return None
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
