"""The ``definitions`` table of the metadata database: the memo of each node's definition
parts (barca.engine.defcache decides what a row means and when it holds; this reads and
writes the rows)."""
from __future__ import annotations

from barca.store.driver import sqlite3

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from barca.store.metadata import Store


def read_definitions(store: Store | None) -> dict[str, tuple[str, str, str]]:
    """node -> (file_sha, deps, parts) of every row; none from a closed store or one written
    before the table existed."""
    out: dict[str, tuple[str, str, str]] = {}
    if store is None or store.conn is None:
        return out
    try:
        for node, file_sha, deps, parts in store.conn.execute(
                "SELECT node, file_sha, deps, parts FROM definitions"):
            out[node] = (file_sha, deps, parts)
    except sqlite3.DatabaseError:  # an older store without the table
        pass
    return out


def write_definitions(store: Store, rows: list[tuple[str, str, str, str]]) -> None:
    """(node, file_sha, deps, parts) rows, replacing a node's older row, in one transaction
    (nothing on a closed store)."""
    if rows and store.conn is not None:
        store._write("INSERT OR REPLACE INTO definitions (node, file_sha, deps, parts) "
                     "VALUES (?, ?, ?, ?)", rows)
