"""What barca keeps for a node that is no longer in the pipeline, for ``barca gc`` to remove:
its memo of a dict source's values (``<store>/values/``, store.valuememo) and its snapshot
(``snapshots``, with the parts of a large one, store.snapchunks). Neither is a result, neither
can serve a node that is gone, and a node of that id added again only computes them again
(both are memos). The node's results are not touched here: the cache tiers decide those.

Which nodes are gone is the caller's to say (``gone``): one whose file was read and no longer
defines it, or whose file is no longer there; a node of a file the command did not read is
not gone."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from barca.store import valuememo
from barca.store.driver import sqlite3
from barca.store.metadata import Store
from barca.store.schema import db_error


class Removed:
    """One store's nodes that are gone and the memo files they left (paths from the root)."""
    __slots__ = ("store", "nodes", "files")

    def __init__(self, store: Store, nodes: list[str], files: list[tuple[str, int, str]]) -> None:
        self.store, self.nodes, self.files = store, nodes, files


def find(store: Store, gone: Callable[[str], bool]) -> Removed:
    """The nodes of ``store`` that are gone (by the ids its snapshots and results name) and
    the memo files of theirs that exist, with their sizes."""
    conn = store.conn
    if conn is None:
        return Removed(store, [], [])
    try:
        ids = {a for (a,) in conn.execute("SELECT asset FROM snapshots UNION "
                                          "SELECT DISTINCT asset FROM materializations")}
    except sqlite3.DatabaseError as exc:
        raise db_error(store.db_path, exc) from None
    nodes = sorted(a for a in ids if gone(a))
    files: list[tuple[str, int, str]] = []   # (path from the root, bytes, node)
    for n in nodes:
        where = valuememo.path(str(store.root), store.prefix, n)
        with contextlib.suppress(OSError):
            files.append((Path(os.path.relpath(where, store.root)).as_posix(),
                          os.stat(where).st_size, n))
    return Removed(store, nodes, files)


def remove(found: Removed) -> tuple[int, list[str]]:
    """Delete the memo files and the snapshots (and their parts) of the gone nodes: (bytes
    freed, memo files that could not be deleted)."""
    freed, failed = 0, []
    for rel, size, _ in found.files:
        try:
            os.unlink(found.store.root / rel)
            freed += size
        except FileNotFoundError:
            pass
        except OSError:
            failed.append(rel)
    if found.nodes and found.store.conn is not None:
        rows = [(n,) for n in found.nodes]
        found.store._write_all([("DELETE FROM snapshot_parts WHERE asset=?", rows),
                                ("DELETE FROM snapshots WHERE asset=?", rows)])
    return freed, failed

