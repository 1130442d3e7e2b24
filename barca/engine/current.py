"""A node's *current* result, in one place: for each key, the successful row whose run hash is
the key's run hash now (as the decision computes it), never simply the newest row. After a
revert (code v1 -> v2 -> v1) the current result is v1's again, though v2's row is newer.

``get``, ``status``, ``barca sql``, ``-o path`` and the cache limit's tiers all ask here: a
decided NodeState's rows (``rows_of``), or a walk that decides them (``current_results``)."""
from __future__ import annotations

from collections.abc import Set

from barca.core.errors import BarcaError
from barca.core.types import NodeId
from barca.engine.states import NodeState
from barca.store.metadata import Row

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from barca.core.settings import Settings
    from barca.engine.planner import Context
    from barca.model.topology import Graph
    from barca.store.cachelimit import Currency


def rows_of(ctx: Context, ns: NodeState) -> dict[str, Row]:
    """key -> current result of a decided node, for the keys that have one (a stale key, one
    never run, or one whose run hash is not knowable yet has none). A manual asset's and an
    evicted result's row count: the decision serves them under their own run hash."""
    hashes = _hashes(ns)
    if not hashes:
        return {}
    by_hash = _success_by_hash(ctx, ns.node, set(hashes.values()))
    return {k: by_hash[h] for k, h in hashes.items() if h in by_hash}


def newest_current(ctx: Context, ns: NodeState) -> Row | None:
    """The newest (by id) of ``rows_of``, when every key of the node has a current result;
    else None. (``status``'s LAST RUN: it reads ids and run hashes, not every row.)"""
    hashes = _hashes(ns)
    if not hashes or ns.keys is None or len(hashes) < len(ns.keys):
        return None
    wanted = set(hashes.values())
    if len(wanted) > 16:
        return ctx.history(ns.node).newest_of(wanted, ns.lazy and not ns.odd_steps())
    by_hash = _success_by_hash(ctx, ns.node, wanted)
    rows = [by_hash[h] for h in hashes.values() if h in by_hash]
    return max(rows, key=lambda r: r.id) if len(rows) == len(ns.keys) else None


def _hashes(ns: NodeState) -> dict[str, str]:
    """key -> run hash of each key of a decided node whose run hash is known."""
    if ns.keys is None:
        return {}
    hashes: dict[str, str] = {}
    if ns.lazy and not ns.odd_steps():  # every key cached under its run hash (a settled node)
        hashes = dict(zip(ns.keys, ns.run_hashes() or (), strict=False))
    if not hashes or "" in hashes.values():
        hashes = {k: h for k, h, action in ns.step_hashes()
                  if h and action not in ("unknown", "skipped")}
    return hashes


def _success_by_hash(ctx: Context, nid: NodeId, wanted: set[str]) -> dict[str, Row]:
    """The newest successful row of each run hash in ``wanted`` -- the row a decided step
    reads (NodeHistory.success) -- a point query each for a few, else every successful row
    of the node in one read."""
    out: dict[str, Row] = {}
    if len(wanted) <= 16:
        hist = ctx.history(nid)
        for h in wanted:
            row = hist.success(h)
            if row is not None:
                out[h] = row
        return out
    for row in ctx.store.rows(nid, "status='success'"):  # oldest first: newer ones win
        if row.run_hash in wanted:
            out[row.run_hash] = row
    return out


def walk(ctx: Context, targets: list[NodeId]) -> dict[NodeId, NodeState]:
    """Decide every node of the targets' cones as ``status`` does: runs nothing, writes
    nothing; a sensor is assumed to return what it last returned."""
    from barca.engine.runner import Runner
    return Runner(ctx, targets, execute=False).run().states


def current_results(ctx: Context, targets: list[NodeId] | None = None
                    ) -> dict[NodeId, dict[str, Row]]:
    """Every node's current results (``targets``' cones; None: the whole graph)."""
    states = walk(ctx, list(ctx.graph.order) if targets is None else targets)
    return {n: rows_of(ctx, ns) for n, ns in states.items()}


def currency(graph: Graph, settings: Settings, keep: Set[str] = frozenset()
             ) -> Currency:
    """What the cache limit may call superseded: every environment's nodes decided as
    ``status`` decides them (each environment with its own settings and store), their
    current results, and ``keep`` (what the running command produced or read)."""
    from barca.engine.planner import Context
    from barca.store.cachelimit import Currency, stores
    current: set[str] = set()
    decided: set[tuple[str, str]] = set()
    for store in stores(graph.root):
        env = store.prefix.removeprefix(".barca").removeprefix("/envs/")
        try:
            ctx = Context(graph, store, settings.replace(env=env))
            states = walk(ctx, list(graph.order))
        except BarcaError:
            store.close()
            continue  # not decidable now (a key expression fails): none of it is superseded
        for nid, ns in states.items():
            if ns.keys is None or not all(h for _, h, _ in ns.step_hashes()):
                continue  # a key's run hash is not knowable without running: not decided
            decided.add((store.prefix, nid))
            current.update(r.path for r in rows_of(ctx, ns).values() if r.path)
        store.close()
    return Currency(frozenset(current), frozenset(decided), frozenset(keep))
