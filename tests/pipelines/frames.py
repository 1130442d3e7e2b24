"""Tables of every kind, and consumers asking for each reader (tests/test_frames.py)."""
import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
from polars import LazyFrame

from barca import asset, collect, partitions

ROWS = {"a": [1, 2, 3], "b": ["x", "y", "z"]}


@asset()
def from_pandas() -> pd.DataFrame:
    return pd.DataFrame(ROWS)


@asset()
def from_polars():
    return pl.DataFrame(ROWS)


@asset()
def from_lazy() -> pl.LazyFrame:
    return pl.DataFrame(ROWS).lazy().with_columns(pl.col("a") * 10)


@asset()
def from_arrow():
    return pa.table(ROWS)


@asset()
def from_duckdb():
    return duckdb.sql("SELECT range + 1 AS a, chr(120 + range::INT) AS b FROM range(3)")


def describe(value) -> dict:
    if isinstance(value, (pl.LazyFrame, duckdb.DuckDBPyRelation)):
        table = value.collect() if isinstance(value, pl.LazyFrame) else value.pl()
    elif isinstance(value, pd.DataFrame):
        table = pl.from_pandas(value)
    elif isinstance(value, pa.Table):
        table = pl.from_arrow(value)
    else:
        table = value
    return {"type": f"{type(value).__module__.split('.')[0]}.{type(value).__name__}",
            "rows": table.sort("a").to_dicts()}


@asset(inputs={"plain": from_polars, "pandas": from_polars, "polars": from_pandas,
               "lazy": from_arrow, "arrow": from_duckdb, "rel": from_lazy,
               "quoted": from_pandas, "imported": from_pandas, "optional": from_arrow})
def readers(plain, pandas: pd.DataFrame, polars: pl.DataFrame, lazy: pl.LazyFrame,
            arrow: pa.Table, rel: duckdb.DuckDBPyRelation, quoted: "pa.Table",
            imported: LazyFrame, optional: pl.DataFrame | None) -> dict:
    return {name: describe(v) for name, v in
            [("plain", plain), ("pandas", pandas), ("polars", polars), ("lazy", lazy),
             ("arrow", arrow), ("rel", rel), ("quoted", quoted), ("imported", imported),
             ("optional", optional)]}


@asset(partitions={"region": partitions(["emea", "amer"])})
def sales(region: str) -> pl.DataFrame:
    return pl.DataFrame({"a": [1, 2] if region == "emea" else [3], "b": [region] * (
        2 if region == "emea" else 1)})


@asset(inputs={"frames": collect(sales)})
def eager_list(frames: list[pl.DataFrame]) -> list:
    return [describe(f) for f in frames]


@asset(inputs={"frames": collect(sales)})
def arrow_list(frames: list[pa.Table]) -> list:
    return [describe(f) for f in frames]


@asset(inputs={"frames": collect(sales)})
def lazy_all(frames: pl.LazyFrame) -> dict:
    return {"type": type(frames).__name__,
            "rows": frames.sort("a").collect().to_dicts()}


@asset(inputs={"frames": collect(sales)})
def relation_all(frames: duckdb.DuckDBPyRelation) -> dict:
    return {"type": type(frames).__name__,
            "rows": frames.order("a").pl().to_dicts()}
