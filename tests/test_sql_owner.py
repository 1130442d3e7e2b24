"""One owner of ``.barca/metadata.db`` (issue #27 item 4): every SQL statement run on it is in the
store package (``barca/store``); the other layers call its methods. Read from the source (AST)
of the ``barca`` being tested, so it is fast and names the file and line of a breach."""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

import barca

PACKAGE = Path(barca.__file__).resolve().parent
STORE = PACKAGE / "store"

# Outside the store, these statements run on something other than metadata.db (file, the name
# of the object the call is made on, why):
NOT_METADATA = {
    # barca sql: DuckDB, an in-memory database of its own, over the cached results (the
    # metadata tables reach it as rows read through Store.table_rows)
    ("queries/sql.py", "con"),
    # barca sql with a server: the same DuckDB, over the store's checked copies of the results
    # the server names (the server's records reach it as rows read over HTTP)
    ("queries/sqlviews.py", "con"),
}
EXECUTE = {"execute", "executemany", "executescript"}
# a string that starts a statement (a whole one, or the piece of one a caller hands a store
# helper such as a WHERE clause is caught by its keyword when it starts one)
STATEMENT = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER|PRAGMA|"
                       r"BEGIN|COMMIT|ROLLBACK|WITH)\s")
# the store's own writers: a caller outside the store that uses them hands it SQL
PRIVATE_WRITERS = {"_write", "_write_all"}
# the store's modules: their private helpers (``serverq._rows(conn, where)``) take SQL text
STORE_MODULES = {p.stem for p in STORE.glob("*.py")} - {"__init__"}


@functools.cache  # parsed once for the four tests; they only read the trees
def _outside_store() -> list[tuple[str, ast.Module]]:
    return [(p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text(), str(p)))
            for p in sorted(PACKAGE.rglob("*.py")) if STORE not in p.parents]


def _receiver(call: ast.Call) -> str:
    func = call.func
    assert isinstance(func, ast.Attribute)
    return ast.unparse(func.value).rsplit(".", 1)[-1]


@pytest.mark.slow
def test_no_module_outside_the_store_runs_sql() -> None:
    found = []
    for rel, tree in _outside_store():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in EXECUTE
                    and (rel, _receiver(node)) not in NOT_METADATA):
                found.append(f"barca/{rel}:{node.lineno}: {ast.unparse(node.func)}(...)")
    assert not found, "SQL run outside barca/store (give the store a method):\n" + \
        "\n".join(found)


@pytest.mark.slow
def test_no_module_outside_the_store_reaches_for_its_connection() -> None:
    """``store.conn`` is the store's: a caller asks ``Store.is_open`` or a method."""
    found = [f"barca/{rel}:{node.lineno}: {ast.unparse(node)}"
             for rel, tree in _outside_store() for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and node.attr == "conn"
             and ast.unparse(node.value).rsplit(".", 1)[-1] in ("store", "_store")]
    assert not found, "a Store's connection used outside barca/store:\n" + "\n".join(found)


@pytest.mark.slow
def test_no_module_outside_the_store_writes_sql_text() -> None:
    """Not even a statement (or a WHERE clause) handed to a store function to run."""
    found = []
    duck = {f for f, _ in NOT_METADATA}  # their statements are DuckDB's
    for rel, tree in _outside_store():
        for node in ast.walk(tree):
            text = None
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(
                    node.values[0], ast.Constant):
                text = str(node.values[0].value)
            if text is not None and rel not in duck and STATEMENT.match(text):
                found.append(f"barca/{rel}:{node.lineno}: {text[:60]!r}")
            if isinstance(node, ast.Attribute) and (
                    node.attr in PRIVATE_WRITERS
                    or (node.attr.startswith("_") and not node.attr.startswith("__")
                        and isinstance(node.value, ast.Name)
                        and node.value.id in STORE_MODULES)):
                found.append(f"barca/{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "SQL text outside barca/store:\n" + "\n".join(found)


@pytest.mark.slow
def test_only_the_store_imports_sqlite3() -> None:
    """import-linter's contract (pyproject.toml) checks the layers; this also covers
    ``barca/__init__.py`` and ``__main__.py``."""
    found = []
    for rel, tree in _outside_store():
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "sqlite3" for n in names):
                found.append(f"barca/{rel}:{node.lineno}")
    assert not found, ("sqlite3 imported outside barca/store (use barca.store.database's "
                       "DatabaseError and Connection):\n" + "\n".join(found))
