"""Result objects: frozen data whose ``to_json()`` is the contract, and the renderings derived
from it (``__str__`` = the CLI's ``--pretty`` text, ``__rich__``, ``_repr_mimebundle_``).

Each is a ``barca.core.record.Record``: its fields are its ``__slots__`` in order, defaults in
``_defaults``; built by position or keyword, compared, hashed and shown like a frozen dataclass."""
from __future__ import annotations

from barca.core.record import Record, slot_setters
from barca.core.types import TYPE_CHECKING, short_name
from barca.present.display import (  # noqa: F401 - shared by every result object
    _Displayable,
    _NodeTable,
    more_hint,
)

# The table renderer (core.render), the shape words (store.shapes) and the plans are imported
# where they are used: a cached command printing JSON loads none of them.
if TYPE_CHECKING:  # (typing is not imported at run time: #31 item 2)
    from typing import Any

    from barca.present.plans import PhasePlan, Plan, PlanRow  # noqa: F401 - their old home


def __getattr__(name: str) -> Any:
    """The plans' old home: ``from barca.present.results import Plan`` still works."""
    if name in ("PhasePlan", "Plan", "PlanRow"):
        from barca.present import plans
        return getattr(plans, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# ---------------------------------------------------------------------------- status

class StatusRow(Record):
    __slots__ = ("id", "kind", "state", "reason", "detail", "last_run", "shape", "deps", "inputs",
                 "partitions", "last_materialization", "extra", "current")
    _defaults = {"partitions": None, "last_materialization": None, "extra": None,
                 "current": None}
    id: str
    kind: str
    state: str                 # JSON value: cached, stale, never_run, partial, unknown, always_runs
    reason: str
    detail: str                # the WHY cell
    last_run: str
    shape: dict[str, Any] | str | None  # the object status --json shows (store.shapes); a
    # str is an older barca's short text, or "-" for none (tolerated where rows are built by hand)
    deps: tuple[str, ...]
    inputs: tuple[str, ...]
    partitions: dict[str, Any] | None
    last_materialization: dict[str, Any] | None
    extra: dict[str, Any] | None  # keys the node's JSON has only when they apply (schedule)
    # a node of one key: the run hash its step has now and, when cached, the result's path
    # (``cache.run_hash``, ``cache.artifact``, as barca 0.30.2's status says them)
    current: dict[str, str] | None

    @property
    def name(self) -> str:
        return short_name(self.id)


SUMMARY_ORDER = (("cached", "cached"), ("stale", "stale"), ("never_run", "never run"),
                 ("partial", "partial"), ("unknown", "unknown"), ("always_runs", "always run"))


class StatusReport(_NodeTable, _Displayable, Record):
    """``barca status``: ``rows`` are the nodes shown (after ``--state``/``--problems`` and a
    limit); ``counts`` is the summary of every node of the cones read, ``total`` the number of
    nodes the filters kept (before the limit). See barca.present.statusview for the options."""
    __slots__ = ("rows", "targets", "root", "counts", "total", "fields", "filter", "table_limit",
                 "note")
    _defaults = {"targets": (), "root": "", "counts": None, "total": None, "fields": None,
                 "filter": None, "table_limit": 100, "note": ""}
    rows: tuple[StatusRow, ...]
    targets: tuple[str, ...]           # as named (comma-separated on the command line)
    root: str                          # the project root
    counts: dict[str, int] | None      # None: counted from rows
    total: int | None                  # None: len(rows)
    fields: tuple[str, ...] | None     # --fields: the node keys JSON keeps
    filter: dict[str, Any] | None      # --state / --problems, as JSON says them
    table_limit: int | None            # rows a table shows (JSON shows every row of ``rows``)
    note: str                          # e.g. other environments hold results (see statusview)

    def summary(self) -> dict[str, int]:
        if self.counts is not None:
            return dict(self.counts)
        counts = {k: 0 for k, _ in SUMMARY_ORDER}
        for r in self.rows:
            counts[r.state] += 1
        return counts

    def summary_line(self) -> str:
        s = self.summary()
        return ", ".join(f"{s[k]} {label}" for k, label in SUMMARY_ORDER)

    def _node(self, r: StatusRow) -> dict[str, Any]:
        from barca.store import shapes
        node = {"id": r.id, "name": r.name, "kind": r.kind, "inputs": list(r.inputs),
                "partitioned": r.partitions is not None,
                "cache": {"state": r.state, "reason": r.reason, "detail": r.detail,
                          **(r.current or {})}}
        if r.partitions is not None:  # as a step: no key when the node has no partitions
            node["partitions"] = r.partitions
        node["last_materialization"] = r.last_materialization
        node["shape"] = shapes.decode(r.shape)
        node.update(r.extra or {})  # last_bytes_change, env; undeclared_env, schedule if any
        if self.fields is not None:
            return {k: node[k] for k in self.fields if k in node}
        return node

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "target": self.targets[0] if len(self.targets) == 1 else None,
            "targets": list(self.targets),
            "nodes": [self._node(r) for r in self.rows],
            "summary": self.summary(), "total": self.matched,
            "truncated": self.matched > len(self.rows), "root": self.root}
        if self.filter:
            doc["filter"] = self.filter
        if doc["truncated"]:
            doc["hint"] = more_hint(self.matched, "nodes")
        if self.note:
            doc["note"] = self.note
        return doc

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        from barca.core.render import cell_label
        from barca.store import shapes
        rows = [[r.name, r.kind, cell_label(r.state), r.detail, r.last_run, shapes.label(r.shape),
                 ", ".join(short_name(d) for d in r.deps) or "-"] for r in self._shown()]
        summary = self.summary_line()
        for extra in (self.cut_note(), self.note):
            if extra:
                summary += f"\n{extra}"
        return (["NAME", "KIND", "STATE", "WHY", "LAST RUN", "SHAPE", "DEPS"], rows, 2, summary)

    def _html_table(self) -> tuple[list[str], list[list[str]], int | None, str, int | None]:
        from barca.core.render import short_names
        headers, rows, col, summary = self._table()
        short = short_names([r.id for r in self.rows])
        for row, r in zip(rows, self._shown(), strict=False):
            row[0] = short[r.id]
            row[6] = ", ".join(short.get(d, d) for d in r.deps) or "-"
        return headers, rows, col, summary, 3

    def __str__(self) -> str:
        from barca.core.render import text_table
        headers, rows, _, summary = self._table()
        return text_table(headers, rows) + "\n\n" + summary


# ---------------------------------------------------------------------------- runs

# the keys a step entry of get/run (and --dry-run) JSON may have, as barca 0.30.2 lists them:
# what --fields takes
STEP_FIELDS = ("id", "kind", "action", "status", "reason", "detail", "changed", "run_hash",
               "artifact", "warning", "artifact_mismatch", "bytes_changed", "elapsed_seconds",
               "attempts", "import_seconds", "partitions", "env", "undeclared_env", "weight")


def keep_step_fields(doc: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """A run's (or a dry run's) JSON with only ``fields`` of each step (``--fields``)."""
    doc["steps"] = [{k: s[k] for k in fields if k in s} for s in doc.get("steps", ())]
    return doc


class StepSummary(Record):
    __slots__ = ("id", "kind", "action", "reason", "detail", "run_hash", "partitions", "extra",
                 "artifact")
    _defaults = {"partitions": None, "extra": None, "artifact": None}
    id: str
    kind: str
    action: str                # ran | cached | partial | failed | skipped
    reason: str
    detail: str
    run_hash: str | None
    partitions: dict[str, Any] | None
    extra: dict[str, Any] | None  # keys a step entry has only when they apply (attempts, ...)
    artifact: str | None       # a node of one key: its result's path (ran or cached)

    def __init__(self, id: str, kind: str, action: str, reason: str,  # noqa: A002
                 detail: str, run_hash: str | None, partitions: dict[str, Any] | None = None,
                 extra: dict[str, Any] | None = None,
                 artifact: str | None = None) -> None:  # one per node: not generic
        s_id, s_kind, s_action, s_reason, s_detail, s_hash, s_parts, s_extra, s_art = _SUMMARY
        s_id(self, id), s_kind(self, kind), s_action(self, action), s_reason(self, reason)
        s_detail(self, detail), s_hash(self, run_hash), s_parts(self, partitions)
        s_extra(self, extra), s_art(self, artifact)

    def entry(self) -> dict[str, Any]:
        """The step's entry in a run's JSON."""
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "status": self.action,
                               "reason": self.reason,
               "detail": self.detail, "run_hash": self.run_hash}
        if self.partitions is not None:  # an unpartitioned step has no "partitions" key, as
            out["partitions"] = self.partitions  # barca writes it (null breaks .get(...))
        if self.artifact is not None:  # (barca 0.30.2's word for the result's path)
            out["artifact"] = self.artifact
        if self.extra:
            out.update(self.extra)
        return out


class OutputItem(Record):
    __slots__ = ("key", "path", "format", "computed")
    key: str
    path: str | None
    format: str | None
    computed: bool

    def __init__(self, key: str, path: str | None, format: str | None,  # noqa: A002
                 computed: bool) -> None:  # one per key of a target: no generic __init__
        s_key, s_path, s_format, s_computed = _ITEM
        s_key(self, key), s_path(self, path), s_format(self, format), s_computed(self, computed)


class OutputItems:
    """A partitioned target's items: the computed ones at hand, and every key's (read from the
    store when first iterated -- a 200,000-key target printed as JSON never needs them)."""
    __slots__ = ("_n", "_computed", "_load", "_all")

    def __init__(self, n: int, computed: tuple[OutputItem, ...], load: Any) -> None:
        self._n, self._computed, self._load = n, computed, load
        self._all: tuple[OutputItem, ...] | None = None

    def _items(self) -> tuple[OutputItem, ...]:
        if self._all is None:
            self._all, self._load = tuple(self._load()), None
            self._n = len(self._all)
        return self._all

    def computed(self) -> tuple[OutputItem, ...]:
        return self._computed

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Any:
        return iter(self._items())

    def __getitem__(self, i: Any) -> Any:
        return self._items()[i]

    def __bool__(self) -> bool:
        return self._n > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (OutputItems, tuple)):
            return self._items() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._items())

    def __repr__(self) -> str:
        return repr(self._items())

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self._items(),))


class Output(Record):
    __slots__ = ("target", "partitioned", "items", "values", "preview", "root")
    _defaults = {"values": None, "preview": "", "root": ""}
    target: str
    partitioned: bool
    items: tuple[OutputItem, ...]
    values: Any                 # filled by the API when it loads values (JSON-able or None)
    preview: str | None         # None: the text of ``values``, a small JSON value, once shown
    root: str                   # the project root, where a table is read for --pretty

    def __init__(self, target: str, partitioned: bool, items: tuple[OutputItem, ...],
                 values: Any = None, preview: str | None = "", root: str = "") -> None:
        # one per target (500 on a wide get): not the generic Record.__init__
        s_target, s_partitioned, s_items, s_values, s_preview, s_root = _OUTPUT
        s_target(self, target), s_partitioned(self, partitioned), s_items(self, items)
        s_values(self, values), s_preview(self, preview), s_root(self, root)

    def shown_preview(self) -> str:
        """``preview``: a small JSON value's text, or a table's (parquet, csv) shape and first
        rows, made only when shown (JSON output never pays for it)."""
        if self.preview is None:
            from barca.core.render import json_preview
            return json_preview(self.values)
        if self.preview or self.partitioned or not self.items or not self.root:
            return self.preview
        item = self.items[0]
        if item.format not in ("parquet", "csv") or not item.path:
            return ""
        from pathlib import Path

        from barca.present.tablepreview import table_preview
        return table_preview(Path(self.root) / item.path, item.format)


_SUMMARY, _ITEM, _OUTPUT = map(slot_setters, (StepSummary, OutputItem, Output))
MAX_KEYS_IN_OUTPUT = 1000


class RunResult(_Displayable, Record):
    __slots__ = ("command", "run_id", "status", "elapsed", "steps_executed", "steps_total",
                 "phases", "steps", "outputs", "warnings", "failed_node", "error",
                 "skipped_downstream", "verb", "failures", "cache")
    _defaults = {"warnings": (), "failed_node": None, "error": None, "skipped_downstream": 0,
                 "verb": "got", "failures": (), "cache": None}
    command: str
    run_id: str
    status: str                # success | failed | cancelled
    elapsed: float
    steps_executed: int
    steps_total: int
    phases: int
    steps: tuple[StepSummary, ...]
    outputs: tuple[Output, ...]
    warnings: tuple[dict[str, Any], ...]  # {kind, node, param, message} (present.notices)
    failed_node: str | None
    error: str | None
    skipped_downstream: int
    verb: str
    failures: tuple[tuple[str, str, str], ...]  # (step, error, traceback)
    cache: dict[str, Any] | None                 # what the cache size limit evicted after it

    def to_json(self, entries: bool = True) -> dict[str, Any]:
        # (entries=False: "steps" holds the StepSummaries, for present.compact to write)
        out: dict[str, Any] = {
            "status": self.status, "run_id": self.run_id,
            "elapsed_seconds": round(self.elapsed, 4), "steps_executed": self.steps_executed,
            "steps_total": self.steps_total, "phases": self.phases,
            "steps": [s.entry() for s in self.steps] if entries else self.steps,
            "final_output": self.final_output(),
            "warnings": list(self.warnings),
        }
        if self.cache is not None:
            out["cache"] = self.cache
        if self.status != "success":
            out["failed_node"] = self.failed_node
            out["error"] = self.error
        return out

    def json_line(self) -> str:
        from barca.present.compact import run_line  # (its steps written one by one)
        return run_line(self)

    def final_output(self) -> Any:
        def one(o: Output) -> Any:
            if not o.partitioned:
                return o.values if o.values is not None or not o.items else {
                    "path": o.items[0].path, "format": o.items[0].format}
            items = o.items
            out: dict[str, Any] = {}
            if len(items) > MAX_KEYS_IN_OUTPUT:
                items = items.computed() if isinstance(items, OutputItems) else tuple(
                    i for i in items if i.computed)
            vals = o.values or {}
            for i in items:
                out[i.key] = vals.get(i.key, {"path": i.path, "format": i.format})
            if len(o.items) > MAX_KEYS_IN_OUTPUT:
                return {"keys": out, "total_keys": len(o.items), "computed_keys": len(items),
                        "not_shown": len(o.items) - len(items)}
            return out
        if not self.outputs:  # nothing to get (a file of tasks only): no value, not an empty one
            return None
        if len(self.outputs) == 1:
            return one(self.outputs[0])
        return {o.target: one(o) for o in self.outputs}

    def value(self, as_type: str | None = None) -> Any:
        """What ``barca.get`` returns: the target's value (key -> value when partitioned), a
        dict by node id for several; a stored table in ``as_type`` (pandas, polars...)."""
        if as_type is None:
            vals = {o.target: o.values for o in self.outputs}
        else:
            from barca.store.frames import as_type as convert
            vals = {o.target: convert(o.values, as_type, o.partitioned) for o in self.outputs}
        if not vals:  # nothing to get: no value, as final_output says
            return None
        return next(iter(vals.values())) if len(vals) == 1 else vals

    def headline(self) -> str:
        from barca.core.render import plural
        names = ", ".join(f"'{short_name(o.target)}'" for o in self.outputs)
        what = f"{self.verb} {names}" if names else f"nothing to {self.command}"
        return (f"Run {self.run_id} | {what} in {round(self.elapsed, 4):.3f}s "  # as the JSON
                f"({plural(self.steps_executed, 'step')}, {plural(self.phases, 'phase')})")

    def __str__(self) -> str:
        lines = [self.headline()]
        for o in self.outputs:
            lines.append("")
            if o.partitioned:
                lines.extend(f"{i.key}: {i.path}" for i in sorted(o.items, key=lambda i: i.key))
            elif o.items or o.preview:  # a server's answer may carry the value, not the path
                if o.items:
                    lines.append(str(o.items[0].path))
                preview = o.shown_preview()
                if preview:
                    lines.append(preview)
        return "\n".join(lines)

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        return (["STATUS", "STEP", "WHY"], [[s.action, s.id, s.detail] for s in self.steps], 0,
                self.headline())

    def _html_table(self) -> tuple[list[str], list[list[str]], int | None, str, int | None]:
        from barca.core.render import short_names
        headers, rows, col, summary = self._table()
        short = short_names([s.id for s in self.steps])
        return headers, [[a, short[s], w] for a, s, w in rows], col, summary, 2


# ---------------------------------------------------------------------------- sql

def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _json_cell(v: Any) -> Any:
    """A DuckDB value as valid JSON: NaN and +-Infinity have no JSON form (null), a DECIMAL is
    a number, a LIST or STRUCT is converted item by item."""
    if isinstance(v, float):
        import math  # (sql's cells only)
        return v if math.isfinite(v) else None
    if type(v).__name__ == "Decimal":  # decimal is not imported on the cold path
        if not v.is_finite():
            return None
        return int(v) if v.as_tuple().exponent >= 0 else float(v)
    if isinstance(v, (list, tuple)):
        return [_json_cell(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_cell(x) for k, x in v.items()}
    return v


def _unique(columns: tuple[str, ...]) -> list[str]:
    """Column names as object keys: a name the query gave twice (``select 1 as a, 2 as a``)
    is ``a``, then ``a_1``, so no value is lost to a repeated key."""
    seen: set[str] = set()
    out = []
    for name in columns:
        key, n = name, 0
        while key in seen:
            n += 1
            key = f"{name}_{n}"
        seen.add(key)
        out.append(key)
    return out


class SqlResult(_Displayable, Record):
    __slots__ = ("query", "columns", "rows", "total")
    query: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total: int

    @property
    def truncated(self) -> bool:
        return self.total > len(self.rows)

    def to_json(self) -> dict[str, Any]:
        """``{"columns", "rows", "total", "truncated"}``: each row an object keyed by column
        (``row["n"]`` reads as the query says), ``total`` the rows before the limit."""
        names = _unique(self.columns)
        return {"columns": names,
                "rows": [dict(zip(names, map(_json_cell, r), strict=True)) for r in self.rows],
                "total": self.total, "truncated": self.truncated}

    def to_pandas(self) -> Any:
        import pandas as pd
        return pd.DataFrame.from_records(list(self.rows), columns=list(self.columns))

    @property
    def note(self) -> str:
        """What the table leaves out ("" when nothing): the CLI says it on stderr."""
        return (f"showing {len(self.rows)} of {self.total} rows (--all for every row)"
                if self.truncated else "")

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        return (list(self.columns), [[_cell(v) for v in r] for r in self.rows], None,
                self.note)

    def __str__(self) -> str:
        from barca.core.render import text_table
        headers, rows, _, _ = self._table()
        return text_table(headers, rows)
