"""``barca sql``: DuckDB views over cached results. A view per node, named after its function;
a partitioned asset is one view over its current keys, with a leading ``partition`` column."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from barca.core.errors import UsageError, did_you_mean
from barca.core.types import NodeId, short_name
from barca.engine.current import rows_of, walk
from barca.engine.inputs import source_dim
from barca.engine.integrity import VerifiedFiles
from barca.engine.planner import Context, NodeState
from barca.store.metadata import Row

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class ViewSource:
    node: NodeId
    rows: list[tuple[str, Row]] | None   # (key, latest successful row) for the current keys
    problem: str = ""


def current_rows(ctx: Context, nid: NodeId, ns: NodeState) -> ViewSource:
    """The current result (engine.current) of each current key of a decided node. A key whose
    result is not current (its code or an input changed since) makes the view unavailable:
    a view never shows a value that ``barca get`` would not return."""
    name = short_name(nid)
    if ns.keys is None:
        src = source_dim(ctx.graph, nid)
        up = f" come from the output of '{short_name(src[0])}', which" if src else ""
        return ViewSource(nid, None, f"the keys of '{name}'{up} are not known yet "
                          f"({ns.unknown_detail or 'not run yet'}): run `barca get {name}` first")
    cur = rows_of(ctx, ns)
    hist = ctx.history(nid)
    stale = [k for k in ns.keys if k not in cur and hist.newest_success(k) is not None]
    if stale:
        st = ns.step(stale[0])
        why = f" ({st.detail})" if st is not None and st.detail else ""
        what = "its result is" if stale == [""] else \
            f"{len(stale)} of {len(ns.keys)} keys' results are"
        return ViewSource(nid, None, f"{what} not current{why}: run `barca get {name}` first")
    return ViewSource(nid, [(k, cur[k]) for k in sorted(ns.keys) if k in cur])


_LITERAL = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S)
_SHOW_TABLES = re.compile(r"\s*show\s+tables\s*;?\s*", re.I)
BARCA_TABLES = ("barca.materializations", "barca.nodes", "barca.runs")  # barca's own records


def identifiers(sql: str) -> set[str]:
    """The words of a query that can name a view: outside string literals and comments (a
    double-quoted identifier counts, by its content)."""
    return set(_WORD.findall(_LITERAL.sub(" ", sql)))


def _records(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return value
    if isinstance(value, list):
        return [{"value": v} for v in value]
    return [{"value": value}]


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def consolidated(ctx: Context, vs: ViewSource, checked: VerifiedFiles
                 ) -> tuple[str, list[str]] | None:
    """One newline-delimited JSON file holding a view's rows, kept in ``.barca/views/`` and
    reused while the view's results are the same, so a query opens one file, not one per key.
    None when the view has parquet results (they are read in place)."""
    name = short_name(vs.node)
    rows = vs.rows or []
    if any(r.format in ("parquet", "csv") for _, r in rows):
        return None
    for _, r in rows:
        if r.format != "json":
            raise UsageError(f"'{name}' is stored as a pickle, which barca sql does not read.",
                             f"Return JSON-like values or a DataFrame from '{name}', or read it "
                             f"in Python with barca.get('{name}').")
    from barca.core.salt import salt
    from barca.identity.hashing import sha
    from barca.store.artifacts import node_dir
    # a memo that outlives the command: keyed by barca's one salt too (a barca that builds
    # view rows otherwise never reads an older file)
    tag = sha(salt(), *(f"{k}\0{r.run_hash}\0{r.sha256}" for k, r in rows))[:16]
    folder = ctx.store.dir / "views"
    path = folder / f"{node_dir(vs.node)}-{tag}.ndjson"
    columns_path = path.with_suffix(".columns")
    if path.is_file() and columns_path.is_file():
        return str(path), json.loads(columns_path.read_text())
    partitioned = ctx.graph.nodes[vs.node].partitioned
    columns: dict[str, None] = {"partition": None} if partitioned else {}
    lines: list[str] = []
    for key, row in rows:
        value = json.loads(_local(ctx, name, row, checked).read_bytes())
        for rec in _records(value):
            if partitioned:
                rec = {"partition": key, **rec}
            columns.update(dict.fromkeys(rec))
            lines.append(json.dumps(rec, ensure_ascii=False))
    from barca.store.artifacts import write_atomic
    for old in folder.glob(f"{node_dir(vs.node)}-*"):
        old.unlink(missing_ok=True)
    write_atomic(path, ("\n".join(lines) + "\n").encode("utf-8"))
    write_atomic(columns_path, json.dumps(list(columns)).encode("utf-8"))
    return str(path), list(columns)


def _local(ctx: Context, name: str, row: Row, checked: VerifiedFiles) -> Path:
    """Where a view's result is on disk, its bytes checked against their record (once per file
    state: engine.integrity.VerifiedFiles): fetched from the remote store (when one is
    configured) if this machine lacks it; a usage error when neither has it, or when the bytes
    on disk are not the bytes recorded."""
    path = ctx.graph.root / (row.path or "")
    if not path.is_file():
        from barca.store import remote
        store = remote.open_store(ctx.settings)
        if store is None or store.fetch(ctx.graph.root, row.path or "", row.sha256) is None:
            raise _missing(name, row)
    try:
        ok = not row.sha256 or checked.intact(str(path), row.sha256)
    except FileNotFoundError:
        raise _missing(name, row) from None
    if not ok:
        raise UsageError(f"view '{name}': the result of {row.node} on disk ({row.path}) is not "
                         "the one recorded: it was changed after barca wrote it.",
                         f"Run `barca get {name}` to check and compute it again.")
    return path


_LISTED = 64   # up to this many files, a key is found by position in a list (no join, no sort)


def scan(ctx: Context, vs: ViewSource, checked: VerifiedFiles) -> str | None:
    """The SELECT of a view whose results are all parquet files: one DuckDB scan of the files
    in place, the ``partition`` column told by DuckDB from each row's file; rows in key order,
    then file order, as a frame of them would be. None when not every result is parquet."""
    rows = vs.rows or []
    if not rows or any(r.format != "parquet" for _, r in rows):
        return None
    name = short_name(vs.node)
    files = [str(_local(ctx, name, row, checked)) for _, row in rows]
    if any(c in f for f in files for c in "*?[{"):  # DuckDB would take the path for a glob
        return None
    import duckdb
    modern = tuple(int(x) for x in re.findall(r"\d+", duckdb.__version__)[:2]) >= (1, 3)

    def keep(*hidden: str) -> str:  # every column but these and pandas' unnamed index ones
        test = " AND ".join([*(f"c <> {_sql_str(h)}" for h in hidden),
                             "NOT regexp_full_match(c, '__index_level_[0-9]+__')"])
        return f"COLUMNS(lambda c: {test})" if modern else f"COLUMNS(c -> {test})"

    listed = "[" + ", ".join(_sql_str(f) for f in files) + "]"
    if not ctx.graph.nodes[vs.node].partitioned:
        return f"SELECT {keep()} FROM read_parquet({listed})"
    keys = [k for k, _ in rows]
    if len(files) <= _LISTED:
        return (f"SELECT [{', '.join(map(_sql_str, keys))}][list_position({listed}, filename)] "
                f"AS partition, {keep('filename')} FROM read_parquet({listed}, filename=true, "
                "union_by_name=true)")
    pairs = ", ".join(f"({_sql_str(f)}, {i}, {_sql_str(k)})"
                      for i, (f, k) in enumerate(zip(files, keys, strict=True)))
    inner = (f"SELECT t.* EXCLUDE (filename, file_row_number), __k.partition AS __p, __k.i AS "
             f"__i, t.file_row_number AS __n FROM read_parquet({listed}, filename=true, "
             f"union_by_name=true, file_row_number=true) t JOIN (VALUES {pairs}) "
             "__k(file, i, partition) ON t.filename = __k.file")
    return (f"SELECT __p AS partition, {keep('__p', '__i', '__n')} FROM ({inner}) "
            "ORDER BY __i, __n")


def _table(ctx: Context, vs: ViewSource, key: str, row: Row, checked: VerifiedFiles) -> Any:
    """One result of a table view as a pandas DataFrame. Keys of one asset may be stored in
    different formats: a DataFrame parquet could not hold was pickled (with a warning), and a
    key may have returned a plain list of records."""
    import pandas as pd

    from barca.store import frames
    from barca.store.artifacts import deserialize
    name = short_name(vs.node)
    where = f" (key {key})" if key else ""
    if row.format not in ("parquet", "csv", "json"):  # a pickle is code: never run by a query
        raise UsageError(f"'{name}'{where} is stored as a pickle, which barca sql does not "
                         "read.", f"Return JSON-like values or a DataFrame from '{name}', or "
                         f"read it in Python with barca.get('{name}').")
    path = _local(ctx, name, row, checked)
    if row.format in ("parquet", "csv"):
        return pd.read_parquet(path) if row.format == "parquet" else pd.read_csv(path)
    value = deserialize(path.read_bytes(), "json")
    if frames.kind(value) is not None:
        return frames.convert(value, "pandas")
    return pd.DataFrame(_records(value))


def _missing(name: str, row: Row) -> UsageError:
    return UsageError(f"view '{name}': the result of {row.node} is missing from disk "
                      f"({row.path}).", f"Run `barca get {name}` to compute it again.")


def frame(ctx: Context, vs: ViewSource, checked: VerifiedFiles) -> Any:
    """A pandas DataFrame of a view whose results are tables (parquet or csv files, whatever
    library wrote them)."""
    import pandas as pd

    frames = []
    for key, row in vs.rows or []:
        df = _table(ctx, vs, key, row, checked)
        if ctx.graph.nodes[vs.node].partitioned:
            df.insert(0, "partition", key)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]


def query(ctx: Context, sql: str,
          limit: int | None) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """Run ``sql`` over the views it names; (columns, rows, total row count)."""
    try:
        import duckdb
    except ImportError:
        raise UsageError("barca sql needs DuckDB, which is not installed.",
                         "Install it with: pip install 'barca-pipelines[sql]'") from None

    graph = ctx.graph
    by_name: dict[str, NodeId] = {}
    for nid in graph.order:
        by_name.setdefault(short_name(nid), nid)
    if _SHOW_TABLES.fullmatch(sql):  # the views a query may name (each made only when named)
        rows = [(n,) for n in (*sorted(by_name), *BARCA_TABLES)]
        return ["name"], rows if limit is None else rows[:limit], len(rows)
    con = duckdb.connect(":memory:")
    words = identifiers(sql)
    names = sorted(words & set(by_name))
    states = walk(ctx, [by_name[n] for n in names]) if names else {}
    checked = VerifiedFiles(ctx.store.dir / "views")
    for name in names:
        vs = current_rows(ctx, by_name[name], states[by_name[name]])
        if vs.rows is None:
            raise UsageError(f"view '{name}' is not available: {vs.problem}", "")
        if not vs.rows:
            raise UsageError(f"view '{name}' has no result yet.",
                             f"Run `barca get {name}` first.")
        in_place = scan(ctx, vs, checked)
        if in_place is not None:  # parquet: read where it lies, pandas never imported
            con.execute(f"CREATE VIEW {_sql_name(name)} AS {in_place}")
            continue
        got = consolidated(ctx, vs, checked)
        if got is None:  # csv, or tables in several formats: one frame of them
            con.register(f"__barca_{name}", frame(ctx, vs, checked))
            con.execute(f'CREATE VIEW {_sql_name(name)} AS SELECT * FROM "__barca_{name}"')
            continue
        path, columns = got
        cols = ", ".join(_sql_name(c) for c in columns)
        con.execute(f"CREATE VIEW {_sql_name(name)} AS SELECT {cols} FROM "
                    f"read_json({_sql_str(path)}, format='newline_delimited')")
    checked.save()
    if "barca" in words:
        import tempfile

        from barca.queries import sqltables
        con.execute("CREATE SCHEMA barca")
        tmpdir = tempfile.TemporaryDirectory(prefix="barca-sql-")
        tmp = tmpdir.name
        for table in sqltables.TABLES:
            if table not in words:  # (each made when the query names it, as a view)
                continue
            table_rows = (sqltables.run_rows(ctx.store) if table == "runs" else
                          sqltables.materialization_rows(ctx.store)
                          if table == "materializations" else _node_rows(ctx))
            p = Path(tmp) / f"{table}.ndjson"
            p.write_text("".join(json.dumps(r) + "\n" for r in table_rows) or "{}\n")
            con.execute(f"CREATE VIEW barca.{table} AS SELECT * FROM "
                        f"read_json({_sql_str(str(p))}, {sqltables.AS_WRITTEN})")
    try:
        cur = con.execute(sql)
    except duckdb.CatalogException as exc:
        text = str(exc)
        m = re.search(r"Table with name (\S+) does not exist", text)
        if m:
            bad = m.group(1)
            views = [*sorted(by_name), *BARCA_TABLES]
            there = graph.defined_elsewhere(bad.strip('"'))
            if there:  # a notebook's own scope: the view is a pipeline file's asset
                raise UsageError(
                    f"No view named '{bad}' among this notebook's assets: it is defined in "
                    f"{', '.join(there)}. Without a file, barca reads the notebook's own "
                    "assets once a cell defines one.",
                    f"Name the file: `barca sql \"{sql}\" {there[0]}`.") from None
            raise UsageError(f"No view named '{bad}'.{did_you_mean(bad, views)}",
                             f"Views: {', '.join(views)}") from None
        raise UsageError(f"SQL error: {text}",
                         "Fix the query; `barca list` names the views.") from None
    except duckdb.Error as exc:
        raise UsageError(f"SQL error: {exc}", "Fix the query.") from None
    answer = fetch(cur, limit)
    con.close()  # the views over barca's own tables read temp files: done with them now
    return answer


def _node_rows(ctx: Context) -> list[dict[str, Any]]:
    """``barca.nodes``: what ``barca status`` says of every node, decided as the views are."""
    from barca.present.results import StatusReport
    from barca.present.statusview import mark_upstream
    from barca.present.verdicts import status_row
    from barca.queries.sqltables import node_rows
    states = walk(ctx, list(ctx.graph.order))
    report = StatusReport(mark_upstream(tuple(status_row(ctx, states[n])
                                              for n in ctx.graph.order if n in states)))
    return node_rows(report.to_json())


def fetch(cur: Any, limit: int | None) -> tuple[list[str], list[tuple[Any, ...]], int]:
    """A query's columns, the rows shown (all, or the first ``limit``) and how many rows it
    has: the rest are counted, never all of them held at once."""
    columns = [d[0] for d in cur.description or []]
    if limit is None:
        shown: list[tuple[Any, ...]] = cur.fetchall()
        return columns, shown, len(shown)
    shown = cur.fetchmany(limit) if limit > 0 else []
    total = len(shown)
    while more := cur.fetchmany(10_000):
        total += len(more)
    return columns, shown, total
