"""Which reader a parameter's annotation asks for, read from the syntax tree (nothing imported).

A reader is one of ``pandas``, ``polars``, ``lazy`` (a polars LazyFrame), ``pyarrow`` or
``duckdb`` (a relation); ``list[X]`` asks for a list of X's reader, written ``X[]``. An
annotation barca does not know asks for nothing (a table is then read as pandas).
"""
from __future__ import annotations

import ast

# (module, class) -> reader. Modules are found through the file's imports, or, for a name the
# file does not import at module level, through the conventional aliases below.
READER = {("pandas", "DataFrame"): "pandas", ("polars", "DataFrame"): "polars",
          ("polars", "LazyFrame"): "lazy", ("pyarrow", "Table"): "pyarrow",
          ("duckdb", "DuckDBPyRelation"): "duckdb"}
ALIASES = {"pd": "pandas", "pandas": "pandas", "pl": "polars", "polars": "polars",
           "pa": "pyarrow", "pyarrow": "pyarrow", "duckdb": "duckdb"}


def reader(annotation: ast.expr | None, imports: dict[str, tuple[str, str | None]]) -> str | None:
    """``pl.LazyFrame`` -> ``lazy``; ``list[pa.Table]`` -> ``pyarrow[]``; ``pl.DataFrame | None``
    -> ``polars``; ``int`` -> None."""
    if annotation is None:
        return None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:  # a string annotation: "pl.DataFrame"
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [s for s in (annotation.left, annotation.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return reader(sides[0], imports) if len(sides) == 1 else None  # ``X | None``
    if isinstance(annotation, ast.Subscript):
        base = annotation.value
        name = base.id if isinstance(base, ast.Name) else (
            base.attr if isinstance(base, ast.Attribute) else "")
        if name == "Optional":
            return reader(annotation.slice, imports)
        if name in ("list", "List", "Sequence"):
            inner = reader(annotation.slice, imports)
            return None if inner is None or inner.endswith("[]") else inner + "[]"
        return None
    if isinstance(annotation, ast.Attribute) and isinstance(annotation.value, ast.Name):
        alias = annotation.value.id
        module = imports.get(alias, (ALIASES.get(alias, ""), None))
        if module[1] is not None:  # ``from duckdb import duckdb``: not a module alias we know
            return None
        return READER.get((module[0].split(".")[0], annotation.attr))
    if isinstance(annotation, ast.Name):
        name, attr = imports.get(annotation.id, ("", None))
        return READER.get((name.split(".")[0], attr or ""))
    return None


def readers(fn: ast.FunctionDef | ast.AsyncFunctionDef,
            imports: dict[str, tuple[str, str | None]]) -> dict[str, str]:
    """parameter -> reader, for the parameters whose annotation names one."""
    a = fn.args
    out: dict[str, str] = {}
    for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs):
        got = reader(arg.annotation, imports)
        if got is not None:
            out[arg.arg] = got
    return out
