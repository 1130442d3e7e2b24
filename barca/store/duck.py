"""DuckDB in a step: the process's default connection (the one ``duckdb.sql`` uses), shared
by the step's relation inputs, its own queries and whatever the pipeline file ran on it when
it was imported (macros, ``SET threads``) (``barca docs dataframes``)."""
from __future__ import annotations

from typing import Any


def duckdb_connection() -> Any:
    """``barca.duckdb_connection()``: duckdb's default connection; the same object on every
    call, in a step or outside a run."""
    import duckdb
    dc = duckdb.default_connection
    return dc() if callable(dc) else dc  # a function in duckdb >= 1.1, an object before


def name_relations(kwargs: dict[str, Any]) -> None:
    """A DuckDB-relation input is also a view named after its parameter, so SQL text in the
    step can name it (``duckdb.sql("SELECT * FROM prices")``, ``con.sql(...)``)."""
    for param, value in kwargs.items():
        if type(value).__name__ == "DuckDBPyRelation":
            value.create_view(param, replace=True)
