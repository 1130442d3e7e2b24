"""``barca list``: one row per node, from the static model alone (kept apart from the API
module so listing imports neither the planner nor the store)."""
from __future__ import annotations

from typing import Any

from barca.core.settings import Settings, settings_of
from barca.model.topology import load_graph
from barca.present.listview import Listing, ListRow


def list_nodes(*files: str, settings: Settings | None = None, groups: bool = False,
               **flags: Any) -> Any:
    """One row per node (never per key): id, kind, freshness, what it reads; with
    ``groups=True``, the groups instead (``barca list --groups``)."""
    graph = load_graph(tuple(str(f) for f in files if f is not None),
                       settings_of(settings, **flags))
    if groups:
        from barca.present.grouping import GroupListing
        return GroupListing(tuple(g.to_json() for g in graph.groups))
    return Listing(tuple(
        ListRow(n, graph.nodes[n].kind, graph.nodes[n].freshness, tuple(graph.upstream[n]),
                tuple(d.name for d in graph.nodes[n].dims), _extra(graph, n))
        for n in graph.order), graph.root_dir)


def _extra(graph: Any, n: str) -> dict[str, Any]:
    """What a node's JSON says besides its id, kind, freshness, deps and dimensions: its
    inputs (the ids of the nodes it reads, sorted, as barca 0.30.2 lists them: a script
    written for it reads the same list), the env= names, and a schedule's cron, max_failures
    and next firing (``barca serve``'s scheduler reads the schedules from these rows)."""
    m = graph.nodes[n]
    out: dict[str, Any] = {"inputs": sorted(set(graph.upstream[n])), "env": list(m.env)}
    if m.schedule is not None:
        from barca.present.schedules import next_fire
        out["schedule"] = m.schedule
        out["max_failures"] = m.max_failures
        out["next_fire"] = next_fire(m.schedule)
    return out
