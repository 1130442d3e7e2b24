"""``barca sql``: DuckDB views over cached results. A view per node, named after its function;
a partitioned asset is one view over its current keys, with a leading ``partition`` column."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from barca.errors import UsageError, did_you_mean
from barca.planner import Context, keys_from_row, source_dim
from barca.store import Row
from barca.types import NodeId, short_name

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class ViewSource:
    node: NodeId
    rows: list[tuple[str, Row]] | None   # (key, latest successful row) for the current keys
    problem: str = ""


def current_rows(ctx: Context, nid: NodeId) -> ViewSource:
    """The latest successful result of each current key of a node."""
    hist = ctx.history(nid)
    src = source_dim(ctx.graph, nid)
    if src is not None and src[1]:
        got = keys_from_row(ctx, ctx.history(src[0]).latest_success.get(""))
        if got is None:
            return ViewSource(nid, None, f"the keys of '{short_name(nid)}' come from the output "
                              f"of '{short_name(src[0])}', which has not run yet: run "
                              f"`barca get {short_name(nid)}` first")
        keys = got[0]
    else:
        keys = ctx.static_keys(nid) or []
    rows = [(k, hist.latest_success[k]) for k in sorted(keys) if k in hist.latest_success]
    return ViewSource(nid, rows)


def _records(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    if isinstance(value, list):
        return [{"value": v} for v in value]
    return [{"value": value}]


def frame(ctx: Context, vs: ViewSource) -> Any:
    """A pandas DataFrame holding a view's rows."""
    import pandas as pd

    root = ctx.graph.root
    partitioned = ctx.graph.nodes[vs.node].partitioned
    records: list[dict[str, Any]] = []
    frames: list[Any] = []
    for key, row in vs.rows or []:
        path = root / (row.path or "")
        if row.format == "parquet":
            df = pd.read_parquet(path)
            if partitioned:
                df.insert(0, "partition", key)
            frames.append(df)
            continue
        if row.format != "json":
            raise UsageError(f"'{short_name(vs.node)}' is stored as a pickle, which barca sql "
                             "does not read.",
                             f"Return JSON-like values or a DataFrame from "
                             f"'{short_name(vs.node)}', or read it in Python with "
                             f"barca.get('{short_name(vs.node)}').")
        value = json.loads(path.read_bytes())
        for rec in _records(value):
            records.append({"partition": key, **rec} if partitioned else rec)
    if records:
        frames.insert(0, pd.DataFrame.from_records(records))
    if not frames:
        return pd.DataFrame()
    return frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)


def query(ctx: Context, sql: str, limit: int | None) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """Run ``sql`` over the views it names; (columns, rows, total row count)."""
    import duckdb

    graph = ctx.graph
    by_name: dict[str, NodeId] = {}
    for nid in graph.order:
        by_name.setdefault(short_name(nid), nid)
    con = duckdb.connect(":memory:")
    words = set(_WORD.findall(sql))
    for name in sorted(words & set(by_name)):
        vs = current_rows(ctx, by_name[name])
        if vs.rows is None:
            raise UsageError(f"view '{name}' is not available: {vs.problem}", "")
        if not vs.rows:
            raise UsageError(f"view '{name}' has no result yet.",
                             f"Run `barca get {name}` first.")
        con.register(f"__barca_{name}", frame(ctx, vs))
        con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "__barca_{name}"')
    if "barca" in words:
        import pandas as pd
        con.execute("CREATE SCHEMA barca")
        for table in ("runs", "materializations"):
            if ctx.store.conn is not None:
                df = pd.read_sql_query(f"SELECT * FROM {table}", ctx.store.conn)
            else:
                df = pd.DataFrame()
            con.register(f"__barca_{table}", df)
            con.execute(f'CREATE VIEW barca.{table} AS SELECT * FROM "__barca_{table}"')
    try:
        cur = con.execute(sql)
    except duckdb.CatalogException as exc:
        text = str(exc)
        m = re.search(r"Table with name (\S+) does not exist", text)
        if m:
            bad = m.group(1)
            views = sorted(by_name) + ["barca.runs", "barca.materializations"]
            raise UsageError(f"No view named '{bad}'.{did_you_mean(bad, views)}",
                             f"Views: {', '.join(views)}") from None
        raise UsageError(f"SQL error: {text}", "Fix the query; `barca list` names the views.") from None
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {exc}", "Fix the query.") from None
    columns = [d[0] for d in cur.description or []]
    rows = cur.fetchall()
    total = len(rows)
    if limit is not None:
        rows = rows[:limit]
    return columns, rows, total
