"""Tables as values: which library a value's table comes from, how a table is written into a
file (parquet or csv) and how a stored table is read back in the type a step asks for.

pandas, polars, pyarrow and duckdb are imported only here, and only when a value or an
annotation needs them: a value can only be a polars frame if polars is already imported.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TABLE_FORMATS = ("parquet", "csv")
LAZY = ("lazy", "duckdb")                # readers that read only what the step's query touches
MODULE = {"pandas": "pandas", "polars": "polars", "lazy": "polars", "pyarrow": "pyarrow",
          "duckdb": "duckdb"}
EXTRA = {"pandas": "parquet", "polars": "polars", "lazy": "polars", "pyarrow": "parquet",
         "duckdb": "sql"}
WRITER = "barca.writer"                  # parquet key-value metadata: the library that wrote it


def kind(value: Any) -> str | None:
    """``pandas``, ``polars`` (a DataFrame or LazyFrame), ``pyarrow`` or ``duckdb`` for a table,
    else None."""
    mods = sys.modules
    pd = mods.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return "pandas"
    pl = mods.get("polars")
    if pl is not None and isinstance(value, (pl.DataFrame, pl.LazyFrame)):
        return "polars"
    pa = mods.get("pyarrow")
    if pa is not None and isinstance(value, pa.Table):
        return "pyarrow"
    dd = mods.get("duckdb")
    if dd is not None and isinstance(value, dd.DuckDBPyRelation):
        return "duckdb"
    return None


def settle(value: Any) -> Any:
    """A LazyFrame is collected when the step ends; every other value is itself."""
    pl = sys.modules.get("polars")
    if pl is not None and isinstance(value, pl.LazyFrame):
        return value.collect()
    return value


def installed(module: str) -> bool:
    if sys.modules.get(module) is not None:
        return True
    import importlib.util
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def can_parquet(k: str) -> bool:
    """pandas and pyarrow tables need pyarrow; polars and duckdb write parquet themselves."""
    return k in ("polars", "duckdb") or installed("pyarrow")


def require(reader: str, asker: str = "") -> None:
    """The library a reader needs is installed, or a usage error naming the extra (exit 2).
    ``asker`` says who asks: "parameter 't' of pipeline.py:report"."""
    base = reader.rstrip("[]")
    module = MODULE[base]
    if not installed(module):
        from barca.core.errors import UsageError
        raise UsageError(f"{asker or 'a table'} is read as {NAMES[base]}, which needs {module}; "
                         f"{module} is not installed.",
                         f"pip install 'barca-pipelines[{EXTRA[base]}]' (or pip install "
                         f"{module}), or change the annotation.")


NAMES = {"pandas": "pd.DataFrame", "polars": "pl.DataFrame", "lazy": "pl.LazyFrame",
         "pyarrow": "pa.Table", "duckdb": "duckdb.DuckDBPyRelation"}


# ---------------------------------------------------------------------------- writers

def write(value: Any, fmt: str, path: Path) -> None:
    """Write a table (settled) to ``path`` as parquet or csv (its shape: store.shapes)."""
    k = kind(value)
    target = str(path)
    if k == "duckdb":
        _write_relation(value, fmt, target)
        return
    if k == "polars":
        if fmt == "parquet":
            value.write_parquet(target, metadata={WRITER: "polars"})
        else:
            value.write_csv(target)
    elif k == "pandas":
        if fmt == "parquet":
            import pyarrow as pa
            _write_arrow(pa.Table.from_pandas(value), "pandas", target)
        else:
            value.to_csv(target, index=False)
    elif k == "pyarrow":
        if fmt == "parquet":
            _write_arrow(value, "pyarrow", target)
        else:
            import pyarrow.csv as pcsv
            pcsv.write_csv(value, target)
    else:
        raise TypeError(f"a {type(value).__name__} is not a table")


def _write_arrow(table: Any, writer: str, target: str) -> None:
    import pyarrow.parquet as pq
    meta = dict(table.schema.metadata or {})
    meta[WRITER.encode()] = writer.encode()
    pq.write_table(table.replace_schema_metadata(meta), target)


def _write_relation(rel: Any, fmt: str, target: str) -> None:
    """A duckdb relation is executed straight into the file (never held in memory whole)."""
    quoted = "'" + target.replace("'", "''") + "'"
    options = (f"FORMAT parquet, KV_METADATA {{'{WRITER}': 'duckdb'}}" if fmt == "parquet"
               else "FORMAT csv, HEADER true")
    rel.query("barca_value", f"COPY (SELECT * FROM barca_value) TO {quoted} ({options})")


# ---------------------------------------------------------------------------- readers

def written_by(path: Path) -> str:
    """The library that wrote a parquet file (pandas for files written before barca said)."""
    try:
        import pyarrow.parquet as pq
        meta = pq.read_metadata(str(path)).metadata or {}
        return (meta.get(WRITER.encode()) or b"pandas").decode()
    except ImportError:
        pass
    try:
        import polars as pl
        return pl.read_parquet_metadata(str(path)).get(WRITER, "pandas")
    except ImportError:
        return "duckdb"


def read(path: Path, fmt: str, reader: str | None) -> Any:
    """A stored table as ``reader`` asks (None: as it was written; csv as pandas)."""
    if reader is None:
        reader = written_by(path) if fmt == "parquet" else "pandas"
    reader = reader.rstrip("[]")
    target = str(path)
    parquet = fmt == "parquet"
    if reader == "pandas":
        import pandas as pd
        return pd.read_parquet(target) if parquet else pd.read_csv(target)
    if reader == "polars":
        import polars as pl
        return pl.read_parquet(target) if parquet else pl.read_csv(target)
    if reader == "lazy":
        import polars as pl
        return pl.scan_parquet(target) if parquet else pl.scan_csv(target)
    if reader == "pyarrow":
        if parquet:
            import pyarrow.parquet as pq
            return pq.read_table(target)
        import pyarrow.csv as pcsv
        return pcsv.read_csv(target)
    if reader == "duckdb":
        import duckdb
        return duckdb.read_parquet(target) if parquet else duckdb.read_csv(target)
    raise ValueError(f"unknown reader {reader!r}")


def read_keys(files: list[tuple[str, Path, str]], reader: str) -> Any:
    """One table over every key's file, with a ``partition`` column first: (key, path,
    format) for each key. A lazy frame or a relation reads the files when queried; a polars,
    pandas or pyarrow table reads them now."""
    if not files:
        return empty_keys(reader)
    if reader in ("lazy", "polars"):
        import polars as pl
        frames = [read(p, f, "lazy").select(pl.lit(k).alias("partition"), pl.all())
                  for k, p, f in files]
        lazy = pl.concat(frames, how="diagonal_relaxed")
        return lazy if reader == "lazy" else lazy.collect()
    if reader == "pandas":
        import pandas as pd
        tables = [read(p, f, "pandas") for _, p, f in files]
        for (k, _, _), t in zip(files, tables, strict=True):
            t.insert(0, "partition", k)
        return pd.concat(tables, ignore_index=True)
    if reader == "pyarrow":
        import pyarrow as pa
        tables = [read(p, f, "pyarrow") for _, p, f in files]
        return pa.concat_tables(
            [t.add_column(0, "partition", pa.array([k] * t.num_rows, pa.string()))
             for (k, _, _), t in zip(files, tables, strict=True)], promote_options="default")
    import duckdb
    parts = []
    for k, p, f in files:
        fn = "read_parquet" if f == "parquet" else "read_csv_auto"
        parts.append(f"SELECT {_sql(k)} AS partition, * FROM {fn}({_sql(str(p))})")
    return duckdb.sql(" UNION ALL BY NAME ".join(parts))


def empty_keys(reader: str | None) -> Any:
    """``collect()`` of no keys in the type its parameter asks for: an empty table with only a
    ``partition`` column for a table type, ``[]`` for a list (or no annotation)."""
    if reader is None or reader.endswith("[]"):
        return []
    if reader in ("lazy", "polars"):
        import polars as pl
        frame = pl.DataFrame({"partition": []}, schema={"partition": pl.String})
        return frame.lazy() if reader == "lazy" else frame
    if reader == "pandas":
        import pandas as pd
        return pd.DataFrame({"partition": pd.Series([], dtype="object")})
    if reader == "pyarrow":
        import pyarrow as pa
        return pa.table({"partition": pa.array([], pa.string())})
    import duckdb
    return duckdb.sql("SELECT NULL::VARCHAR AS partition WHERE false")


def _sql(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def convert(value: Any, reader: str) -> Any:
    """A table held in memory (a pickled one) in the type ``reader`` asks for."""
    reader = reader.rstrip("[]")
    k = kind(value)
    if k is None:
        return value
    value = settle(value)
    if reader == "pandas":
        if k == "pandas":
            return value
        return value.df() if k == "duckdb" else value.to_pandas()
    if reader in ("polars", "lazy"):
        import polars as pl
        if k == "polars":
            df = value
        elif k == "pandas":
            df = pl.from_pandas(value)
        else:
            df = pl.from_arrow(to_arrow(value))
        return df.lazy() if reader == "lazy" else df
    if reader == "pyarrow":
        return to_arrow(value)
    if reader == "duckdb":
        if k == "duckdb":
            return value
        import duckdb
        return duckdb.from_arrow(to_arrow(value))
    return value


AS_TYPES = ("pandas", "polars", "lazy", "pyarrow", "duckdb")


def check_type(name: str) -> None:
    if name not in AS_TYPES:
        from barca.core.errors import UsageError
        raise UsageError(f"as_type={name!r} is not a table type",
                         f"Use one of: {', '.join(AS_TYPES)}.")
    require(name, f"as_type={name!r}")


def as_type(values: Any, name: str, partitioned: bool) -> Any:
    """``barca.get(..., as_type=)`` / ``--as``: a stored table (every key's, for a partitioned
    target) in the type named; values that are not tables are left as they are."""
    check_type(name)
    if partitioned and isinstance(values, dict):
        return {k: convert(v, name) for k, v in values.items()}
    return convert(values, name)


def to_arrow(value: Any) -> Any:
    k = kind(value)
    if k == "pyarrow":
        return value
    if k == "pandas":
        import pyarrow as pa
        return pa.Table.from_pandas(value)
    if k == "polars":
        return settle(value).to_arrow()
    for name in ("to_arrow_table", "fetch_arrow_table", "arrow"):  # duckdb, by version
        if hasattr(type(value), name):
            return getattr(value, name)()
    raise TypeError(f"a {type(value).__name__} is not a table")


def to_rows(value: Any) -> list[dict[str, Any]]:
    """A table as a list of row objects (``-o value``)."""
    k = kind(value)
    if k == "pandas":
        return value.to_dict(orient="records")
    if k == "polars":
        return settle(value).to_dicts()
    if k == "pyarrow":
        return value.to_pylist()
    if k == "duckdb":
        return to_arrow(value).to_pylist()
    raise TypeError(type(value).__name__)
