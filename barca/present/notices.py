"""What a planning command (``plan``, ``get``, ``run``, ``--dry-run``) says about the steps it
is about to run, before any runs: warnings on stderr, and the capacity they share."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from barca.core import events as ev
from barca.core.types import NodeId, short_name


class Capacity:
    """How much step weight may run at once, where that number came from, and the pool."""
    __slots__ = ("pool_size", "capacity", "source")

    def __init__(self, settings: Any) -> None:
        from barca.engine.executors import capacity, default_pool_size
        self.pool_size = default_pool_size(settings)
        self.capacity, self.source = capacity(settings, self.pool_size)

    def weights(self, graph: Any, nids: Iterable[NodeId]) -> dict[str, int]:
        """node id -> weight, for the nodes heavier than 1."""
        return {n: graph.nodes[n].weight for n in nids if graph.nodes[n].weight > 1}

    def warnings(self, graph: Any, nids: Iterable[NodeId]) -> list[str]:
        """One line per node heavier than the capacity: it runs alone."""
        return [f"'{short_name(n)}' has weight={w}, more than the capacity {self.capacity} "
                f"({self.source}); it runs alone"
                for n, w in self.weights(graph, nids).items() if w > self.capacity]

    def announce(self, graph: Any, nids: Iterable[NodeId],
                 on_event: ev.EventCallback) -> list[str]:
        lines = self.warnings(graph, nids)
        for line in lines:
            on_event(ev.Note(line, "warning"))
        return lines
