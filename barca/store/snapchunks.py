"""A large snapshot stored in parts, so that a walk where one key moved rewrites one part.

A node's snapshot row (``snapshots``) holds its keys joined by NUL and their run hashes
(concatenated; a large node's as its combined digest's text, see FIELDS): at 200,000 keys
about 15 MB, written again whole by every walk that changed one key (a dict source's tick:
three rows, ~43 MB). A row whose text is longer than ``PART``
characters is stored here instead, cut at every ``PART`` characters into ``snapshot_parts``
rows, each written once under a generation token that is never reused; the snapshot row's
``hashes`` then says ``@`` and, for its keys and its hashes, the generation of each part (its
``keys`` is empty). A write keeps the parts whose text is the one it read (``Seen``) and writes
the others under a new generation; the parts no row refers to are deleted in the same
transaction.

A part that is missing (another process replaced the row between our two reads, or a damaged
table) makes the snapshot a miss, never a partial text: a miss is decided key by key. Run
hashes (``hashes``) are hex, so ``@`` never begins a row written inline."""
from __future__ import annotations

import os

from barca.store.driver import sqlite3
from barca.store.rows import Snapshot

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

PART = 131_072  # characters: 2,048 run hashes
MARK = "@"
# the keys, and their run hashes: concatenated (``h``), or as the text of the node's combined
# digest, ``key=hash NUL`` per key (``c``, see identity.pairs: a one-key change splices it).
# A barca that knows only ``h`` reads a ``c`` row as a miss (decided key by key), never wrongly
FIELDS = ("k", "h", "c")

# what a Store read of each chunked row: its parts' generations and texts, by field
Seen = dict[str, tuple[dict[str, list[str]], dict[str, str]]]


def whole(conn: sqlite3.Connection, asset: str, snap: Snapshot, seen: Seen | None
          ) -> Snapshot | None:
    """A snapshot row as the whole snapshot it stands for (None: a part is missing)."""
    return expand(conn, asset, snap, seen) if snap.hashes.startswith(MARK) else snap


def _refs(hashes: str) -> dict[str, list[str]] | None:
    out: dict[str, list[str]] = {}
    for item in hashes[len(MARK):].split(";"):
        field, sep, gens = item.partition(":")
        if not sep or field not in FIELDS:
            return None
        out[field] = gens.split(",") if gens else []
    return out if set(out) in ({"k", "h"}, {"k", "c"}) else None


def expand(conn: sqlite3.Connection, asset: str, snap: Snapshot, seen: Seen | None
           ) -> Snapshot | None:
    """A chunked row as the whole snapshot it stands for (None: a part is missing)."""
    refs = _refs(snap.hashes)
    if refs is None:
        return None
    want = {(f, i): g for f in refs for i, g in enumerate(refs[f])}
    got: dict[tuple[str, int], str] = {}
    try:
        for field, idx, gen, text in conn.execute(
                "SELECT field, idx, gen, text FROM snapshot_parts WHERE asset=?", (asset,)):
            if want.get((field, idx)) == gen:
                got[(field, idx)] = text
    except sqlite3.OperationalError:  # no such table: a row that cannot be read is a miss
        return None
    if len(got) != len(want):
        return None
    texts = {f: "".join([got[(f, i)] for i in range(len(refs[f]))]) for f in refs}
    if seen is not None:
        seen[asset] = (refs, texts)
    # (a ``c`` text ends with a NUL, never a hex one: the reader tells them apart so)
    return snap._replace(keys=texts["k"], hashes=texts["c" if "c" in texts else "h"])


def big(row: tuple[str, str, str, str, str]) -> bool:
    return len(row[3]) > PART or len(row[4]) > PART


def pairs_text(hashes: str) -> bool:
    """Whether a row's run hashes are given as the combined digest's text (``c``)."""
    return hashes.endswith("\x00")


def _hex(text: str) -> str:
    """A ``c`` text's run hashes concatenated (a row stored inline holds them so)."""
    return "".join([e[-64:] for e in text.split("\x00")[:-1]])


def put(conn: sqlite3.Connection, rows: list[tuple[str, str, str, str, str]],
        seen: Seen) -> None:
    """Store snapshot rows in one transaction: inline rows as before (and any parts of theirs
    deleted), large rows in parts. Raises sqlite3.DatabaseError (rolled back)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        for sql, values in _writes(conn, rows, seen):
            conn.executemany(sql, values)
        conn.execute("COMMIT")
        # what was read of the rows written is no longer what is stored; what was read of the
        # others still is (a generation is never reused): a later put this walk (another
        # node's snapshot) keeps its unchanged parts
        for r in rows:
            seen.pop(r[0], None)
    except sqlite3.DatabaseError:
        import contextlib
        with contextlib.suppress(sqlite3.DatabaseError):
            conn.execute("ROLLBACK")
        raise


def _writes(conn: sqlite3.Connection, rows: list[tuple[str, str, str, str, str]],
            seen: Seen) -> Iterator[tuple[str, Iterable[tuple[Any, ...]]]]:
    """The statements, each made when the one before has run (its parts are cut as SQLite
    takes them: never a second copy of a whole text)."""
    inline = [r if not pairs_text(r[4]) else (*r[:4], _hex(r[4])) for r in rows if not big(r)]
    if inline:
        yield "DELETE FROM snapshot_parts WHERE asset=?", [(r[0],) for r in inline]
        yield ("INSERT OR REPLACE INTO snapshots (asset, digest, combined, keys, hashes) "
               "VALUES (?, ?, ?, ?, ?)", inline)
    for asset, digest, combined, keys, hashes in (r for r in rows if big(r)):
        old_refs, old_texts = seen.pop(asset, ({}, {}))
        have = {(f, i, g): rid for rid, f, i, g in conn.execute(
            "SELECT rowid, field, idx, gen FROM snapshot_parts WHERE asset=?", (asset,))}
        gen = os.urandom(8).hex()
        refs: dict[str, list[str]] = {}
        todo: list[tuple[str, str, int]] = []  # (field, text, index) of the parts to write
        fields = ("k", "c" if pairs_text(hashes) else "h")
        for field, text in zip(fields, (keys, hashes), strict=True):
            prev_refs, prev = old_refs.get(field, []), old_texts.get(field, "")
            gens = refs[field] = []
            for i in range(0, -(-len(text) // PART)):
                g = prev_refs[i] if i < len(prev_refs) else None
                if g is not None and (field, i, g) in have \
                        and prev[i * PART:(i + 1) * PART] == text[i * PART:(i + 1) * PART]:
                    gens.append(g)  # the part as it is stored: kept
                    continue
                gens.append(gen)
                todo.append((field, text, i))
        keep = {(f, i, g) for f in fields for i, g in enumerate(refs[f])}
        yield "DELETE FROM snapshot_parts WHERE rowid=?", [
            (rid,) for k, rid in have.items() if k not in keep]
        yield ("INSERT INTO snapshot_parts (asset, field, idx, gen, text) VALUES (?, ?, ?, ?, ?)",
               ((asset, f, i, gen, t[i * PART:(i + 1) * PART]) for f, t, i in todo))
        ref = ";".join(f"{f}:{','.join(refs[f])}" for f in fields)
        yield ("INSERT OR REPLACE INTO snapshots (asset, digest, combined, keys, hashes) "
               "VALUES (?, ?, ?, ?, ?)", [(asset, digest, combined, "", MARK + ref)])
