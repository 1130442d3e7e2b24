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
    __slots__ = ("store", "snapshots", "_hist")

    def __init__(self, store: Store, snapshots: bool = True) -> None:
        self.store = store
        self.snapshots = snapshots
        self._hist: dict[NodeId, NodeHistory] = {}

    def history(self, nid: NodeId) -> NodeHistory:
        got = self._hist.get(nid)
        if got is None:
            got = self._hist[nid] = self.store.history(nid)
        return got

    def snapshot(self, nid: NodeId) -> tuple[str, str, str, str] | None:
        """(digest, combined, keys joined by NUL, run hashes concatenated) of the node's last
        complete walk."""
        return self.store.snapshot(nid) if self.snapshots else None

    def forget(self, nid: NodeId) -> None:
        """The node's rows changed (the runner recorded some): read them again when asked."""
        self._hist.pop(nid, None)
