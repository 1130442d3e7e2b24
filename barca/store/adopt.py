"""A renamed notebook keeps its results: the successful rows of its former asset recorded again
under its new name (``Store.adopt``), when the rows were made by this very definition."""
from __future__ import annotations

import json

from barca.store.driver import sqlite3

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def adopt_rows(conn: Any, columns: tuple[str, ...], new: str, olds: Callable[[str], bool],
               definition: Callable[[], dict[str, str]]) -> list[str]:
    """Successful rows of other assets recorded again under ``new``, when ``new`` has no row
    at all: only the assets ``olds`` accepts, and only the rows made by this very
    definition (each of its parts equal; asked for only then), so that a renamed notebook
    keeps its results and an unrelated function of the same name adopts nothing. The
    artifacts stay where they are. Returns the assets adopted from; a busy or read-only
    store adopts nothing. ``columns``: the results table's (store.metadata.COLUMNS)."""
    def made_by(row: str | None) -> bool:  # the row's parts hold every part unchanged
        try:
            got = json.loads(row or "")
        except ValueError:
            return False
        return isinstance(got, dict) and all(got.get(k) == v for k, v in parts.items())
    adopted: list[str] = []
    try:
        if conn.execute("SELECT 1 FROM materializations WHERE asset=? LIMIT 1",
                        (new,)).fetchone():
            return []
        suffix = ":" + new.rsplit(":", 1)[-1]
        found = [a for (a,) in conn.execute(
            "SELECT DISTINCT asset FROM materializations WHERE status='success' AND "
            "substr(asset, -?) = ?", (len(suffix), suffix)) if a != new and olds(a)]
        cols = ", ".join(columns)
        parts = definition() if found else {}
        for old in found:
            ids = [i for i, row_parts in conn.execute(
                "SELECT id, parts FROM materializations WHERE asset=? AND status='success' "
                "ORDER BY id", (old,)) if made_by(row_parts)]
            if not ids:
                continue
            picked = ", ".join(":new" if c == "asset" else
                               ":new || substr(node, :rest)" if c == "node" else c
                               for c in columns)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(f"INSERT INTO materializations ({cols}) SELECT {picked} FROM "
                             "materializations WHERE id=:id",
                             [{"new": new, "rest": len(old) + 1, "id": i} for i in ids])
            conn.execute("COMMIT")
            adopted.append(old)
    except sqlite3.DatabaseError:  # read-only or busy: the results are found another time
        import contextlib
        with contextlib.suppress(sqlite3.DatabaseError):
            conn.execute("ROLLBACK")
    return adopted
