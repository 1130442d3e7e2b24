"""``barca list``'s result (``Listing``) and its options: how many nodes (``-l/--limit``,
``--all``) and which keys of each (``--fields``), as barca 0.30.2 reads them. ``total`` always
counts every node read, so a cut listing still says how many there are."""
from __future__ import annotations

from barca.core.errors import UsageError
from barca.core.record import Record
from barca.core.types import TYPE_CHECKING, short_name
from barca.present.display import _Displayable, _NodeTable, more_hint
from barca.present.statusview import field_names

if TYPE_CHECKING:
    from typing import Any

# the keys of a node's JSON (barca 0.30.2's, then barca's own: name, deps, partitions)
FIELDS = ("id", "kind", "freshness", "schedule", "inputs", "env", "next_fire", "name", "deps",
          "partitions", "max_failures")
TABLE_ROWS = 100  # a table without --limit or --all (JSON: every node)


class ListRow(Record):
    __slots__ = ("id", "kind", "freshness", "deps", "dims", "extra")
    _defaults = {"dims": (), "extra": None}
    id: str
    kind: str
    freshness: str
    deps: tuple[str, ...]
    dims: tuple[str, ...]
    extra: dict[str, Any] | None  # more keys of the node's JSON (inputs, env, schedule, ...)


class Listing(_NodeTable, _Displayable, Record):
    """``barca list``: one row per node, in topological order. ``total``: every node read
    (None: the rows); ``fields``: the keys kept of each node's JSON (``--fields``);
    ``table_limit``: the rows a table shows (see ``narrow``)."""
    __slots__ = ("rows", "root", "total", "fields", "table_limit")
    _defaults = {"root": "", "total": None, "fields": None, "table_limit": None}
    rows: tuple[ListRow, ...]
    root: str
    total: int | None
    fields: tuple[str, ...] | None
    table_limit: int | None

    def _node(self, r: ListRow) -> dict[str, Any]:
        node = dict({"id": r.id, "name": short_name(r.id), "kind": r.kind,
                     "freshness": r.freshness, "deps": list(r.deps),
                     "partitions": list(r.dims)}, **(r.extra or {}))
        return node if self.fields is None else {k: node[k] for k in self.fields if k in node}

    def to_json(self) -> dict[str, Any]:
        # barca 0.30.2's document: nodes, total, truncated, root (and a hint when cut)
        doc: dict[str, Any] = {"nodes": [self._node(r) for r in self.rows],
                               "total": self.matched,
                               "truncated": self.matched > len(self.rows), "root": self.root}
        if doc["truncated"]:
            doc["hint"] = more_hint(self.matched, "nodes")
        return doc

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        return (["NAME", "KIND", "FRESHNESS", "DEPS"],
                [[r.id, r.kind, r.freshness, ", ".join(r.deps) or "-"] for r in self._shown()],
                None, self.cut_note())

    def _html_table(self) -> tuple[list[str], list[list[str]], int | None, str, int | None]:
        from barca.core.render import short_names
        shown = self._shown()
        short = short_names([r.id for r in shown])
        return (["NAME", "KIND", "FRESHNESS", "DEPS"],
                [[short[r.id], r.kind, r.freshness,
                  ", ".join(short.get(d, d) for d in r.deps) or "-"] for r in shown],
                None, self.cut_note(), None)

    def __str__(self) -> str:
        from barca.core.render import text_table
        headers, rows, _, _ = self._table()
        return text_table(headers, rows, dashes=True)


def narrow(listing: Listing, limit: int | None = None, every: bool = False,
           fields: str | None = None) -> Listing:
    """The listing as the options ask: ``limit`` nodes in JSON and in a table (a table shows
    100 without it, JSON every node); ``every`` (``--all``) no limit; ``fields`` the keys kept
    of each node."""
    if limit is not None and every:
        raise UsageError("--limit and --all cannot be used together.",
                         "Write --limit N for the first N nodes, or --all for every node.")
    if limit is not None and limit < 0:
        raise UsageError(f"--limit {limit}: a limit is 0 or more nodes.",
                         "Write --limit 20, or --all for every node.")
    keep = field_names("--fields", fields, FIELDS) if fields is not None else None
    rows = listing.rows if limit is None else listing.rows[:limit]
    return Listing(rows, listing.root, listing.matched, keep,
                   None if every or limit is not None else TABLE_ROWS)


def as_asked(result: Any, args: Any) -> Any:
    """``barca list``'s result with its command line's options applied (local or from a
    server alike); the groups (``--groups``) as they are."""
    if not isinstance(result, Listing):
        return result
    fields = getattr(args, "fields", None)
    if fields is not None and getattr(args, "pretty", False):
        raise UsageError("--fields applies to JSON output.", "Drop --pretty, or use --json.")
    return narrow(result, getattr(args, "limit", None), getattr(args, "all", False), fields)
