"""Results with no record: an artifact under a step's run hash with no row (a killed run, a
deleted metadata.db). Its name is its run hash and it was written atomically, so once the
decision says a step must run for want of any record, the runner looks for one -- in
``.barca/artifacts/`` or in the remote store -- and adopts it instead of running the step."""
from __future__ import annotations

import os
import time

from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.core.types import NodeId, Status
from barca.engine.states import NodeState, StepState
from barca.store.metadata import Row

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any


class Adoption:
    """Looks for artifacts with no record, for one command (one listing of the artifacts
    folder, not a stat per key). ``fetch``: copy one found in the remote store here (get/run),
    or only read its manifest (predictions: cached only if the manifest checks, as a fetch
    requires)."""

    def __init__(self, store: Any, remote: Any, fetch: bool) -> None:
        self.store, self.remote, self.fetch = store, remote, fetch
        self._dirs: set[str] | None = None
        self._nodes: dict[NodeId, bool] = {}  # whether the listing holds any of its folders

    def apply(self, ns: NodeState) -> list[StepState]:
        """Adopt what can be among a node's steps the decision marked ``adoptable`` (the
        decision's phase 3, barca.engine.decision.adopted)."""
        from barca.engine.decision import adopted  # (a node decided: none, when settled)
        return adopted(ns, self.find)

    def _any_dir(self, nid: NodeId) -> bool:
        """Whether any folder in the listing is one of this node's (they all start with its
        part of the name)."""
        got = self._nodes.get(nid)
        if got is None:
            from barca.store.artifacts import node_dir
            part = node_dir(nid)  # (every key's folder name starts with it)
            got = self._nodes[nid] = any(d.startswith(part) for d in self._dirs or ())
        return got

    def find(self, nid: NodeId, key: str, run_hash: str) -> Row | None:
        from barca.store.artifacts import EXT, node_dir
        if self._dirs is None:
            try:
                self._dirs = set(os.listdir(self.store.dir / "artifacts"))
            except OSError:
                self._dirs = set()
        if not self._dirs and self.remote is None:  # a first run: nowhere to find one
            return None
        local = self._any_dir(nid)  # none of the node's folders: no key's (not one parse each)
        d = node_dir(nid, key) if local or self.remote is not None else ""
        local = local and d in self._dirs
        if not local and self.remote is None:
            return None
        for fmt, ext in EXT.items():
            rel = f"{self.store.prefix}/artifacts/{d}/{run_hash}.{ext}"
            if (local and (self.store.root / rel).is_file()) or (
                    self.remote is not None
                    and rel in self.remote.listing(d, self.store.prefix)
                    and (self.remote.fetch(self.store.root, rel) is not None if self.fetch
                         else self.remote.vouches(rel))):
                # a row not yet recorded (id 0): the runner records it (adopted_row), with
                # the size and SHA-256 read then
                return Row(id=0, node=nid, asset=nid, partition=key, run_hash=run_hash,
                           path=rel, format=fmt, size=None, sha256=None, parts=None,
                           status=Status.SUCCESS, error=None, elapsed=None, run_id=None,
                           created_at=0.0, shape=None, value_hash=None)
        return None


def adopted_row(root: Any, nid: NodeId, s: StepState, run_id: str) -> dict[str, Any] | None:
    """The row recording an adopted artifact (its SHA-256 read now, in blocks), or None if it
    is gone."""
    from barca.store import shapes
    from barca.store.artifacts import file_sha256
    where = root / (s.path or "")
    try:
        size, s.sha256 = where.stat().st_size, file_sha256(where)
    except OSError:
        return None
    return {
        "node": s.id, "asset": nid, "partition": s.key, "run_hash": s.run_hash,
        "path": s.path, "format": s.format, "size": size, "sha256": s.sha256,
        "parts": jsontext.dumps(s.parts, sort_keys=True) if s.parts else None,
        "status": "success", "error": None, "traceback": None, "elapsed": 0.0,
        "run_id": run_id, "created_at": time.time(),
        "shape": shapes.encode(shapes.of_file(where, s.format)), "value_hash": None}


def open_remote(settings: Any, warn: Any) -> Any:
    """The command's remote store, or None; its module (fsspec, manifests) is imported only
    where one is configured, not by every cached command."""
    if not settings.remote_uri:
        return None
    from barca.store import remote
    return remote.open_store(settings, warn)
