"""What a planning command (``plan``, ``get``, ``run``, ``--dry-run``) says about the steps it
is about to run, before any runs: warnings on stderr, and the capacity they share."""
from __future__ import annotations

from barca.core import events as ev
from barca.core.types import NodeId, short_name

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


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


# ---------------------------------------------------------------------------- warnings

def warning_object(kind: str, message: str, node: str | None = None,
                   param: str | None = None) -> dict[str, Any]:
    return {"kind": kind, "node": node, "param": param, "message": message}


def warning_objects(raw: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Warnings of any kind (``plan_warnings``' dicts: node, parameter, kind, message) as the
    JSON shows them, ``{kind, node, param, message}``, sorted by node, param and kind."""
    out = [warning_object(w.get("kind") or "note", w.get("message") or "", w.get("node"),
                          w.get("param", w.get("parameter"))) for w in raw]
    return sorted(out, key=lambda w: (w["node"] or "", w["param"] or "", w["kind"]))


def warning_lines(objs: list[dict[str, Any]]) -> list[str]:
    """What stderr says of them: one line each, but one summary line for every undeclared
    environment variable (``barca status`` lists them per node)."""
    lines = [w["message"] for w in objs if w["kind"] != "undeclared_env"]
    env = [w for w in objs if w["kind"] == "undeclared_env"]
    if env:
        steps = len({w["node"] for w in env})
        names = ", ".join(sorted({w["param"] for w in env}))
        lines.append(f"{steps} step{'s' if steps != 1 else ''} read environment variables not "
                     f"declared in env=: {names}; barca status lists them")
    return lines


def undeclared_env(objs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """node id -> the environment variables it reads without declaring them, sorted."""
    out: dict[str, list[str]] = {}
    for w in objs:
        if w["kind"] == "undeclared_env":
            out.setdefault(w["node"], []).append(w["param"])
    return {n: sorted(v) for n, v in out.items()}


def announce_warnings(graph: Any, nids: list[NodeId],
                      on_event: ev.EventCallback) -> list[dict[str, Any]]:
    """The plan warnings of ``nids`` (the targets' cones, or the whole project), as objects;
    each said on stderr before any step runs."""
    from barca.model.topology import plan_warnings
    objs = warning_objects(plan_warnings(graph, nids))
    for line in warning_lines(objs):
        on_event(ev.Note(line, "warning"))
    return objs
