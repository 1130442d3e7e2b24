"""``barca list``: one row per node, from the static model alone (kept apart from the API
module so listing imports neither the planner nor the store)."""
from __future__ import annotations

from typing import Any

from barca.core.settings import Settings, settings_of
from barca.model.topology import load_graph
from barca.present.results import Listing, ListRow


def list_nodes(*files: str, settings: Settings | None = None, **flags: Any) -> Listing:
    """One row per node (never per key): id, kind, freshness, what it reads."""
    graph = load_graph(tuple(str(f) for f in files if f is not None),
                       settings_of(settings, **flags))
    return Listing(tuple(
        ListRow(n, graph.nodes[n].kind, graph.nodes[n].freshness, tuple(graph.upstream[n]),
                tuple(d.name for d in graph.nodes[n].dims))
        for n in graph.order))
