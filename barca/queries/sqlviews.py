"""``barca sql`` with a server: the server says which result each view reads (``views``, behind
``GET /sql/views``: the same current results a local ``barca sql`` reads, by the same rules),
and the query runs on the client (``query``) over the store's copies of those results, each
checked against the digest the server recorded before DuckDB reads it. The server never runs
SQL: a query reads and writes files (``COPY ... TO``), which would be remote file access."""
from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from barca.core.errors import InfrastructureError, UsageError, did_you_mean
from barca.core.types import NodeId, short_name
from barca.engine.planner import Context
from barca.queries.sql import _records, _sql_name, _sql_str, current_rows, fetch, identifiers
from barca.queries.sqltables import AS_WRITTEN

TABLES = ("runs", "materializations")  # barca.<table>: the server's records
# the routes' words for a few columns -> this barca's own word a local barca.<table> also has
# (beside barca 0.30.2's, which are the routes'): a query reads the same names with or without
# a server
LOCAL_NAMES = {"runs": {},
               "materializations": {"node_id": "node", "node": "asset", "digest": "sha256",
                                    "size_bytes": "size", "elapsed_seconds": "elapsed"}}


def views(ctx: Context, names: set[str] | None) -> dict[str, Any]:
    """Which result each view of ``names`` (None: every view) reads: ``views`` (name, node,
    kind, partitioned, files with their store path, key, format, size and digest), ``missing``
    (a view with no current result: why, and the command that makes one), ``duplicates``
    (two nodes of one name: the view is the first, as locally) and ``names`` (every view)."""
    from barca.engine.current import walk
    graph = ctx.graph
    by_name: dict[str, list[NodeId]] = {}
    for nid in graph.order:
        by_name.setdefault(short_name(nid), []).append(nid)
    asked = sorted(set(by_name) if names is None else names & set(by_name))
    states = walk(ctx, [by_name[n][0] for n in asked]) if asked else {}
    out: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for name in asked:
        nid = by_name[name][0]
        node = graph.nodes[nid]
        head = {"name": name, "node": nid, "kind": node.kind, "partitioned": node.partitioned}
        vs = current_rows(ctx, nid, states[nid])
        if vs.rows is None or not vs.rows:
            missing.append(dict(head, problem=vs.problem or "no result yet",
                                command=f"barca get {name}"))
            continue
        fmts = {row.format for _, row in vs.rows}
        out.append(dict(head, format=fmts.pop() if len(fmts) == 1 else None,
                        run_hash=None if node.partitioned else vs.rows[0][1].run_hash,
                        stale=False,  # a result that is not current is no view (missing)
                        files=[{"partition": key if node.partitioned else None,
                                "path": row.path, "format": row.format, "size_bytes": row.size,
                                "digest": row.sha256, "run_hash": row.run_hash}
                               for key, row in vs.rows]))
    return {"views": out, "missing": missing,
            "duplicates": [{"name": n, "ids": ids} for n, ids in sorted(by_name.items())
                           if len(ids) > 1],
            "names": sorted(by_name)}


def query(doc: dict[str, Any], tables: dict[str, list[dict[str, Any]]], sql: str,
          limit: int | None, store: Any, cache: Path, url: str
          ) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """Run ``sql`` here over the views ``doc`` (the server's ``/sql/views``) describes, their
    files fetched from ``store`` into ``cache`` and checked against the recorded digests;
    ``tables``: barca.runs and barca.materializations as the server recorded them. (columns,
    rows, total row count), as a local ``barca sql``."""
    try:
        import duckdb
    except ImportError:
        raise UsageError("barca sql needs DuckDB, which is not installed.",
                         "Install it with: pip install 'barca-pipelines[sql]'") from None
    words = identifiers(sql)
    known = {v["name"]: v for v in doc.get("views") or []}
    absent = {v["name"]: v for v in doc.get("missing") or []}
    con = duckdb.connect(":memory:")
    tmp = tempfile.TemporaryDirectory(prefix="barca-sql-")
    try:
        for name in sorted(words & set(absent)):
            m = absent[name]
            raise UsageError(f"view '{name}' has no result on the server {url}: {m['problem']}",
                             f"Run `barca get {name} --server {url}` first.")
        for name in sorted(words & set(known)):
            con.execute(f"CREATE VIEW {_sql_name(name)} AS "
                        f"{_select(known[name], store, cache, Path(tmp.name))}")
        if "barca" in words:
            con.execute("CREATE SCHEMA barca")
            for table in TABLES:
                p = Path(tmp.name) / f"{table}.ndjson"
                also = LOCAL_NAMES[table]  # the server's words, and a local table's beside
                rows = [{**r, **{also[k]: v for k, v in r.items() if k in also}}
                        for r in tables.get(table) or []]
                p.write_text("".join(json.dumps(r) + "\n" for r in rows) or "{}\n")
                con.execute(f"CREATE VIEW barca.{table} AS SELECT * FROM "
                            f"read_json({_sql_str(str(p))}, {AS_WRITTEN})")
        try:
            cur = con.execute(sql)
        except duckdb.CatalogException as exc:
            m = re.search(r"Table with name (\S+) does not exist", str(exc))
            if m:
                bad = m.group(1).strip('"')
                names = list(doc.get("names") or []) + [f"barca.{t}" for t in TABLES]
                raise UsageError(f"No view named '{bad}' on the server {url}."
                                 f"{did_you_mean(bad, names)}",
                                 f"Views: {', '.join(names)}") from None
            raise UsageError(f"SQL error: {exc}", "Fix the query; `barca list --server` "
                             "names the views.") from None
        except duckdb.Error as exc:
            raise UsageError(f"SQL error: {exc}", "Fix the query.") from None
        return fetch(cur, limit)
    finally:
        con.close()
        tmp.cleanup()


def _select(view: dict[str, Any], store: Any, cache: Path, tmp: Path) -> str:
    """The SELECT of one view: parquet read in place, JSON gathered into one file of rows,
    csv read as csv; a partitioned view leads with its ``partition`` column."""
    name, files = view["name"], view.get("files") or []
    fmts = {f.get("format") for f in files}
    if fmts - {"parquet", "json", "csv"}:
        raise UsageError(f"'{name}' is stored as a pickle, which barca sql does not read.",
                         f"Return JSON-like values or a DataFrame from '{name}', or read it "
                         f"in Python with barca.get('{name}').")
    local = [(f.get("partition"), _fetched(name, f, store, cache), f["format"]) for f in files]
    parts = []
    for key, path, fmt in local:
        lead = f"{_sql_str(key)} AS partition, " if view.get("partitioned") else ""
        if fmt == "parquet":
            parts.append(f"SELECT {lead}* FROM read_parquet({_sql_str(str(path))})")
        elif fmt == "csv":
            parts.append(f"SELECT {lead}* FROM read_csv_auto({_sql_str(str(path))})")
        else:
            rows = tmp / f"{name}-{len(parts)}.ndjson"  # a view reads it at each query
            recs = _records(json.loads(path.read_bytes()))
            rows.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
                            or "{}\n")
            parts.append(f"SELECT {lead}* FROM read_json({_sql_str(str(rows))}, "
                         "format='newline_delimited')")
    return " UNION ALL BY NAME ".join(parts)


def _fetched(name: str, f: dict[str, Any], store: Any, cache: Path) -> Path:
    """The store's copy of one result in this machine's sql cache, its bytes checked against
    the digest the server recorded (a copy kept from before is checked again)."""
    from barca.store.artifacts import file_sha256
    rel, digest = f.get("path") or "", f.get("digest") or ""
    if not rel or not digest or ".." in Path(rel).parts or Path(rel).is_absolute():
        raise InfrastructureError(f"view '{name}': the server names no usable object "
                                  f"({rel or 'no path'}, digest {digest or 'none'}).",
                                  "Run `barca doctor --server` to check the server.")
    path = cache / rel
    if path.is_file() and file_sha256(path) == digest:
        os.utime(path)  # used now: `barca gc` keeps a copy a query may be about to read
        return path
    if store.fetch(cache, rel, digest) is None:
        raise InfrastructureError(f"view '{name}': the store {store.uri} has no copy of "
                                  f"{rel} with the digest the server recorded "
                                  f"({digest[:16]}...).",
                                  f"Run `barca get {name} --server` to compute it again, or "
                                  "check that [remote] uri is the server's store.")
    return path
