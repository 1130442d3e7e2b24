"""Concurrent runs share work: before a step goes to the executor its run hash is claimed
(store.claims); a step another live run has claimed is waited for, then served from the row that
run recorded under the same run hash -- the same result, checked like any cached one. A claim
whose process is gone is taken over, and a step whose holder recorded no success is computed
here. Two ``barca get`` of one target started together execute each step once."""
from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from barca.core import events as ev
from barca.core.types import Action, NodeId, Reason
from barca.store.claims import Claims

if TYPE_CHECKING:
    from barca.engine.states import StepState
    from barca.store.metadata import Store

Groups = list[tuple[NodeId, list["StepState"]]]
POLL_FIRST, POLL_MAX = 0.02, 0.25   # seconds between looks at the claims of awaited steps


class Sharing:
    """One run's side of sharing: its claims, and the rows other runs recorded since it began
    (by id: only rows newer than the run can be another run's work on the same steps)."""

    def __init__(self, store: Store, run_id: str, walk: Any, graph: Any, repairing: set[str],
                 on_event: ev.EventCallback) -> None:
        self.store, self.run_id, self.w, self.graph = store, run_id, walk, graph
        self.repairing = repairing   # the runner's: steps whose broken file is redone in place
        self.on_event = on_event
        self.claims = Claims(store, run_id)
        self._seen = self._max_id()   # before any decision: what is newer is another run's
        self._theirs: set[tuple[str, str]] = set()   # (asset, run hash) recorded by another run

    def _max_id(self) -> int:
        return self.claims.newest_row()

    def _recorded_by_others(self) -> set[tuple[str, str]]:
        """(asset, run hash) of every success another run recorded since this one began."""
        for rid, asset, run_hash, run_id in self.claims.successes_since(self._seen):
            self._seen = rid
            if run_id != self.run_id:
                self._theirs.add((asset, run_hash))
        return self._theirs

    def shareable(self, nid: NodeId, s: StepState) -> bool:
        """An asset's step (not a sensor's tick, not a repair) can be another run's work."""
        return (bool(s.run_hash) and self.graph.nodes[nid].kind == "asset"
                and s.id not in self.repairing)

    def serve(self, nid: NodeId, s: StepState) -> bool:
        """A step another run computed under the same run hash: its row is our result (False:
        the row is gone again, the step is computed here)."""
        row = self.store.success_row(nid, s.run_hash or "")
        if row is None:
            return False
        s.row = row
        s.action, s.reason, s.detail = Action.CACHED, Reason.MATERIALIZED, "computed by another run"
        self.w.cached += 1
        if not self.graph.nodes[nid].partitioned:
            self.on_event(ev.StepCached(s.id))
        return True

    def split(self, groups: Groups) -> tuple[Groups, Groups]:
        """(the steps to execute here, the steps another run is computing). A step another run
        finished while this one was deciding is served now."""
        want = [s.run_hash for nid, steps in groups for s in steps
                if self.shareable(nid, s) and s.run_hash]
        got = self.claims.take(want) if want else None
        if got is None:
            return groups, []
        theirs = self._recorded_by_others()
        mine: Groups = []
        waiting: Groups = []
        served: list[str] = []
        for nid, steps in groups:
            here: list[StepState] = []
            away: list[StepState] = []
            for s in steps:
                if not self.shareable(nid, s) or (s.run_hash in got
                                             and (nid, s.run_hash) not in theirs):
                    here.append(s)
                elif (nid, s.run_hash) in theirs and self.serve(nid, s):
                    served.append(s.run_hash or "")  # shareable: it has one
                elif s.run_hash in got:
                    here.append(s)
                else:
                    away.append(s)
            if here:
                mine.append((nid, here))
            if away:
                waiting.append((nid, away))
        if served:  # ours no more: another run's row stands for them
            with contextlib.suppress(Exception):
                self.claims.release(served)
        return mine, waiting

    def wait(self, waiting: Groups) -> Groups:
        """Wait until no live run holds these steps; serve those another run recorded. The steps
        left (their holder failed or died first) are returned, to be executed here."""
        n = sum(len(steps) for _, steps in waiting)
        self.on_event(ev.Note(f"waiting for {n} step{'s' if n != 1 else ''} another barca run is "
                         "computing; their results are used when it records them"))
        pending = [(nid, s) for nid, steps in waiting for s in steps]
        left: dict[NodeId, list[StepState]] = {}
        pause = POLL_FIRST
        while pending:
            time.sleep(pause)
            pause = min(POLL_MAX, pause * 1.5)
            held = self.claims.held([s.run_hash or "" for _, s in pending])
            theirs = self._recorded_by_others()
            still = []
            for nid, s in pending:
                if s.run_hash in held:
                    still.append((nid, s))
                elif not ((nid, s.run_hash) in theirs and self.serve(nid, s)):
                    left.setdefault(nid, []).append(s)
            pending = still
        return list(left.items())

    def release_writes(self, rows: list[dict[str, Any]]) -> list[tuple[str, list[Any]]]:
        return self.claims.release_writes([r["run_hash"] for r in rows if r.get("run_hash")])
