"""The DAG picture: nodes laid out by dependency level (left to right), coloured by state, drawn
as self-contained SVG by barca itself (no Graphviz or other binary at run time).

``DagPicture`` is a result object like the others: frozen data, ``to_json()``, and renderings
(``image/svg+xml`` and ``text/plain`` in its mime bundle). It imports no IPython or ipywidgets;
the status widget and the CLI only render it."""
from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from barca.core.render import COLOURS, prose_label
from barca.core.types import short_name

# the states a node may be drawn in: a StatusReport's states, plus the widget's live ones
STATES = ("cached", "stale", "never_run", "partial", "unknown", "always_runs", "running", "failed")
FALLBACK_COLOUR = COLOURS["unknown"]

NODE_H = 46
MIN_NODE_W = 150
MAX_NODE_W = 300
CHAR_W = 7.4          # ~width of one character at 12px in a monospace font
COL_GAP = 64
ROW_GAP = 18
MARGIN = 12
MAX_LABEL = 36        # characters; longer names are cut with an ellipsis (full id in <title>)
EDGE_COLOUR = "#8a8a8a"


def colour(state: str) -> str:
    """The fill colour of a node in ``state`` (render.COLOURS, defined once)."""
    return COLOURS.get(state, FALLBACK_COLOUR)


@dataclass(frozen=True)
class DagNode:
    id: str
    name: str                  # what the box says (the short name; the id if names collide)
    kind: str                  # asset | sensor | task
    state: str                 # one of STATES
    level: int                 # column: 0 for nodes without dependencies
    row: int                   # position within its column, top to bottom
    detail: str = ""           # the WHY cell, shown as a tooltip
    keys: tuple[int, int] | None = None  # (cached, total) for a partitioned node

    def label(self) -> str:
        """The second line of the box: the state, with ``k/n keys`` for partitioned nodes."""
        text = prose_label(self.state)
        if self.keys is not None:
            done, total = self.keys
            text += f" {done}/{total} keys"
        return text


@dataclass(frozen=True)
class DagPicture:
    nodes: tuple[DagNode, ...]
    edges: tuple[tuple[str, str], ...]   # (from, to): from is a dependency of to

    # ------------------------------------------------------------------ building

    @classmethod
    def from_status(cls, report: Any, edges: Iterable[tuple[str, str]] | None = None,
                    states: Mapping[str, str] | None = None) -> DagPicture:
        """Lay out a ``StatusReport``'s nodes. ``edges`` default to each row's ``deps``;
        ``states`` override some nodes' states (the widget's ``running`` / ``failed``)."""
        rows = list(report.rows)
        ids = [r.id for r in rows]
        known = set(ids)
        if edges is None:
            edges = [(d, r.id) for r in rows for d in r.deps]
        edge_list = list(dict.fromkeys((a, b) for a, b in edges if a in known and b in known))
        ups: dict[str, list[str]] = {i: [] for i in ids}
        for a, b in edge_list:
            ups[b].append(a)
        levels = _levels(ids, ups)
        rows_at = _rows(ids, ups, levels)
        names = [short_name(r.id) for r in rows]
        clash = {n for n in names if names.count(n) > 1}
        overrides = dict(states or {})
        nodes = []
        for r, name in zip(rows, names, strict=False):
            parts = r.partitions
            keys = (int(parts.get("cached", 0)), int(parts.get("total", 0))) if parts else None
            nodes.append(DagNode(
                id=r.id, name=r.id if name in clash else name, kind=r.kind,
                state=overrides.get(r.id, r.state), level=levels[r.id], row=rows_at[r.id],
                detail=r.detail, keys=keys))
        return cls(tuple(nodes), tuple(edge_list))

    # ------------------------------------------------------------------ data

    def to_json(self) -> dict[str, Any]:
        return {
            "nodes": [{"id": n.id, "name": n.name, "kind": n.kind, "state": n.state,
                       "level": n.level, "row": n.row, "label": n.label(),
                       "colour": colour(n.state), "detail": n.detail,
                       "keys": None if n.keys is None else {"cached": n.keys[0],
                                                            "total": n.keys[1]}}
                      for n in self.nodes],
            "edges": [{"from": a, "to": b} for a, b in self.edges],
        }

    def json_text(self) -> str:
        return json.dumps(self.to_json(), indent=2, ensure_ascii=False)

    # ------------------------------------------------------------------ renderings

    def _geometry(self) -> tuple[float, dict[str, tuple[float, float]], float, float]:
        longest = max([len(n.name[:MAX_LABEL]) for n in self.nodes]
                      + [len(n.label()) for n in self.nodes] + [0])
        w = min(MAX_NODE_W, max(MIN_NODE_W, round(longest * CHAR_W + 24)))
        per_col: dict[int, int] = {}
        for n in self.nodes:
            per_col[n.level] = max(per_col.get(n.level, 0), n.row + 1)
        tallest = max(per_col.values(), default=0)
        pos: dict[str, tuple[float, float]] = {}
        for n in self.nodes:
            shift = (tallest - per_col[n.level]) * (NODE_H + ROW_GAP) / 2
            pos[n.id] = (MARGIN + n.level * (w + COL_GAP),
                         MARGIN + shift + n.row * (NODE_H + ROW_GAP))
        cols = max(per_col, default=-1) + 1
        width = 2 * MARGIN + cols * w + max(0, cols - 1) * COL_GAP
        height = 2 * MARGIN + tallest * NODE_H + max(0, tallest - 1) * ROW_GAP
        return w, pos, max(width, 2 * MARGIN), max(height, 2 * MARGIN)

    def svg(self) -> str:
        """The picture as one self-contained SVG document (no external resources)."""
        w, pos, width, height = self._geometry()
        digest = hashlib.sha1("|".join(n.id for n in self.nodes).encode()).hexdigest()[:10]
        arrow = f"barca-arrow-{digest}"
        a = html.escape
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="barca-dag" width="{width:.0f}" '
               f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
               'font-family="ui-monospace, SFMono-Regular, Menlo, Consolas, monospace" '
               'font-size="12">',
               f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="10" refY="5" '
               'markerWidth="7" markerHeight="7" orient="auto">'
               f'<path d="M0,0 L10,5 L0,10 z" fill="{EDGE_COLOUR}"/></marker></defs>']
        if not self.nodes:
            out.append(f'<text x="{MARGIN}" y="{MARGIN + 12}" fill="{EDGE_COLOUR}">'
                       'no nodes</text>')
        out.append('<g class="barca-edges">')
        for src, dst in self.edges:
            (x1, y1), (x2, y2) = pos[src], pos[dst]
            sx, sy = x1 + w, y1 + NODE_H / 2
            tx, ty = x2 - 1, y2 + NODE_H / 2
            bend = max(20.0, (tx - sx) / 2)
            out.append(f'<path class="barca-edge" data-from="{a(src)}" data-to="{a(dst)}" '
                       f'd="M{sx:.1f},{sy:.1f} C{sx + bend:.1f},{sy:.1f} {tx - bend:.1f},'
                       f'{ty:.1f} {tx:.1f},{ty:.1f}" fill="none" stroke="{EDGE_COLOUR}" '
                       f'stroke-width="1.5" marker-end="url(#{arrow})"/>')
        out.append("</g>")
        for n in self.nodes:
            x, y = pos[n.id]
            fill = colour(n.state)
            name = n.name if len(n.name) <= MAX_LABEL else n.name[:MAX_LABEL - 1] + "…"
            dash = ' stroke-dasharray="5,3"' if n.state == "running" else ""
            tip = f"{n.id} ({n.kind}): {n.label()}" + (f" | {n.detail}" if n.detail else "")
            out.append(
                f'<g class="barca-node" data-node="{a(n.id)}" data-state="{a(n.state)}" '
                f'transform="translate({x:.1f},{y:.1f})"><title>{a(tip)}</title>'
                f'<rect width="{w}" height="{NODE_H}" rx="8" ry="8" fill="{fill}" '
                f'stroke="rgba(0,0,0,0.35)" stroke-width="1.5"{dash}/>'
                f'<text x="10" y="19" fill="#ffffff" font-weight="700">{a(name)}</text>'
                f'<text x="10" y="36" fill="#ffffff">{a(n.label())}</text></g>')
        out.append("</svg>")
        return "".join(out)

    def __str__(self) -> str:
        by_id = {n.id: n for n in self.nodes}
        ups: dict[str, list[str]] = {n.id: [] for n in self.nodes}
        for src, dst in self.edges:
            ups[dst].append(by_id[src].name)
        lines = [f"DAG: {len(self.nodes)} nodes, {len(self.edges)} edges"]
        for n in sorted(self.nodes, key=lambda n: (n.level, n.row)):
            deps = f"  <- {', '.join(ups[n.id])}" if ups[n.id] else ""
            lines.append(f"  [{n.level}] {n.name} ({n.label()}){deps}")
        return "\n".join(lines)

    def _repr_svg_(self) -> str:
        return self.svg()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {"image/svg+xml": self.svg(), "text/plain": str(self)}


def _levels(ids: list[str], ups: dict[str, list[str]]) -> dict[str, int]:
    """Longest path from a node without dependencies (a cycle, which the graph forbids, is
    cut rather than looped on)."""
    level: dict[str, int] = {}
    visiting: set[str] = set()

    def of(n: str) -> int:
        if n in level:
            return level[n]
        if n in visiting:
            return 0
        visiting.add(n)
        level[n] = 1 + max((of(d) for d in ups[n]), default=-1)
        visiting.discard(n)
        return level[n]

    for i in ids:
        of(i)
    return level


def _rows(ids: list[str], ups: dict[str, list[str]], levels: dict[str, int]) -> dict[str, int]:
    """Order each column by the mean row of the node's dependencies (fewer crossings), ties in
    the report's order."""
    order = {n: i for i, n in enumerate(ids)}
    row: dict[str, int] = {}
    for lv in sorted(set(levels.values())):
        col = [n for n in ids if levels[n] == lv]

        def key(n: str) -> tuple[float, int]:
            placed = [row[d] for d in ups[n] if d in row]
            return (sum(placed) / len(placed) if placed else -1.0, order[n])

        for i, n in enumerate(sorted(col, key=key)):
            row[n] = i
    return row
