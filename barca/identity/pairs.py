"""A node's run hashes held as the very text its combined digest is made of, so that a walk
where one key of 200,000 moved splices that text, not a list of 200,000 run hashes.

The combined digest (engine.md §2, ``hashing.combined_digest``) is the SHA-256 of
``k1=h1 NUL k2=h2 NUL ...`` over a node's keys in sorted order. A snapshot stores that text
(snapchunks, field ``c``) when the node's keys are sorted and unique in their own order, so the
text *is* the digest's input: a one-key change replaces 64 characters of it at the key's
place and hashes it again -- the same bytes the rule hashes, found without splitting and
joining every key's run hash (~80 ms a node at 200,000 keys).

``Pairs`` reads as the sequence of run hashes in key order (``len``, ``[i]``, iteration); the
``i``-th entry is found from the keys' lengths (each entry is ``len(key) + 66`` characters)
and checked against the key it must begin with, so a text that is not what it claims is
never read as a run hash: ``replaced`` falls back to a plain list, and ``of`` refuses it."""
from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from itertools import islice

from barca.core.sha import sha256

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

WIDTH = 64  # hex digits of a run hash


def text_of(keys: Sequence[str], hashes: Sequence[str]) -> str | None:
    """The combined digest's text of these keys and run hashes (in their order): None unless
    the keys are strictly increasing (sorted and unique, as the digest takes them) and there
    is a run hash for each."""
    if isinstance(hashes, Pairs) and hashes.keys is keys:
        return hashes.text
    n = len(keys)
    if not n or len(hashes) != n or not _increasing(keys):
        return None
    pieces = [""] * (4 * n)  # one list of the pieces: no "k=h" string per key first
    pieces[0::4], pieces[1::4], pieces[2::4], pieces[3::4] = keys, ["="] * n, hashes, \
        ["\x00"] * n
    return "".join(pieces)


def text_digest(text: str, chunk: int = 1 << 20) -> str:
    """SHA-256 (hex) of the text's UTF-8 bytes (``surrogatepass``, as ``sha`` encodes), encoded
    a MB at a time: never a second 14 MB copy of a combined digest's text (each code point is
    encoded alone, so the pieces' bytes are the whole text's)."""
    if len(text) <= chunk:
        return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    import hashlib  # (fed in parts: see core.sha)
    h = hashlib.sha256()
    for i in range(0, len(text), chunk):
        h.update(text[i:i + chunk].encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _increasing(keys: Sequence[str]) -> bool:
    return all(map(operator.lt, keys, islice(keys, 1, None)))


def picked(hashes: Sequence[str], positions: list[int]) -> list[str]:
    """The run hashes at these positions (increasing)."""
    if isinstance(hashes, Pairs):
        return hashes.pick(positions)
    return [hashes[i] for i in positions]


def spliced(hashes: Sequence[str], new: dict[int, str]) -> Sequence[str]:
    """``hashes`` with the one at each position of ``new`` replaced (a list is copied)."""
    if not new:
        return hashes
    if isinstance(hashes, Pairs):
        return hashes.replaced(new)
    out = list(hashes)
    for i, h in new.items():
        out[i] = h
    return out


class Pairs(Sequence[str]):
    """The run hashes of ``keys`` (in their order), held as ``text_of(keys, hashes)``."""
    __slots__ = ("keys", "text", "_list", "_at")

    def __init__(self, keys: list[str], text: str) -> None:
        self.keys, self.text = keys, text
        self._list: list[str] | None = None
        self._at: dict[int, int] = {}  # position -> where its entry begins in text

    @classmethod
    def of(cls, keys: list[str], text: str, joined: str) -> Pairs | None:
        """A snapshot's text as the run hashes of ``keys`` (``joined``: the keys joined by NUL,
        equal to the snapshot's keys); None when the text does not have their shape."""
        n = len(keys)
        if not n or joined.count("\x00") != n - 1 or len(text) != len(joined) + 65 * n + 1:
            return None
        # the first and the last entry where they must be (each entry read is checked too:
        # _offsets; counting the NULs of 14 MB cost more than the rest of this)
        got = cls(keys, text)
        last = len(text) - len(keys[-1]) - WIDTH - 2
        if got._offsets([0]) is None or not text.startswith(keys[-1] + "=", last) \
                or text[last - 1:last] not in ("", "\x00") or not text.endswith("\x00"):
            return None
        return got

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: Any) -> Any:  # (a position: no slices are asked of it)
        if self._list is not None:
            return self._list[i]
        if i < 0:
            i += len(self.keys)
        if len(self._at) >= 16:  # many asked one by one (each a pass over the keys): all
            return self.every()[i]
        return self.pick([i])[0]

    def __iter__(self) -> Iterator[str]:
        return iter(self.every())

    def every(self) -> list[str]:
        """Every run hash, in key order (made once: the slow path of a walk that reads all)."""
        if self._list is None:
            entries = self.text.split("\x00")
            entries.pop()  # (the text ends with a NUL)
            if [e[:-WIDTH - 1] for e in entries] != self.keys:
                # not these keys' text (never so for a text ``of`` took): no run hash that
                # matches any, so every key is decided again, never settled by it
                self._list = [""] * len(self.keys)
            else:
                self._list = [e[-WIDTH:] for e in entries]
        return self._list

    def pick(self, positions: list[int]) -> list[str]:
        """The run hashes at these positions (increasing), found in one pass over the keys."""
        if self._list is None and len(positions) <= 64:
            at = self._offsets(positions)
            if at is not None:
                text, keys = self.text, self.keys
                return [text[o + len(keys[i]) + 1:o + len(keys[i]) + 1 + WIDTH]
                        for i, o in zip(positions, at, strict=True)]
        got = self.every()
        return [got[i] for i in positions]

    def replaced(self, new: dict[int, str]) -> Sequence[str]:
        """These run hashes with the one at each position of ``new`` replaced: the text
        spliced (a list, when many move or the text is not what it claims)."""
        where = sorted(new)
        if len(where) <= 64:  # (the unchanged need no splice)
            where = [i for i, h in zip(where, self.pick(where), strict=True) if new[i] != h]
        if not where:
            return self
        at = self._offsets(where) if len(where) <= 64 else None
        if at is None:
            out = list(self.every())
            for i, h in new.items():
                out[i] = h
            return out
        pieces: list[str] = []
        last = 0
        for i, off in zip(where, at, strict=True):
            start = off + len(self.keys[i]) + 1
            h = new[i]
            if len(h) != WIDTH:  # (a run hash is 64 hex digits: anything else, a list)
                out = list(self.every())
                for j, g in new.items():
                    out[j] = g
                return out
            pieces += (self.text[last:start], h)
            last = start + WIDTH
        pieces.append(self.text[last:])
        return Pairs(self.keys, "".join(pieces))

    def _offsets(self, where: list[int]) -> list[int] | None:
        """Where each entry at these positions (increasing) begins, each checked to begin with
        its key and an ``=`` and to end with a NUL (None: one does not)."""
        keys, text, cache = self.keys, self.text, self._at
        out: list[int] = []
        prev, off = 0, 0  # a position and where its entry begins
        for i in where:
            if i < prev:  # (not increasing: counted again from the first key)
                prev, off = 0, 0
            got = cache.get(i)
            if got is None:
                # the entries before i are len(key) + 66 characters each
                off += sum(map(len, keys[prev:i])) + (WIDTH + 2) * (i - prev)
                got = off
                k = keys[i]
                end = off + len(k) + 1 + WIDTH
                if not text.startswith(k + "=", off) or text[end:end + 1] != "\x00":
                    return None
                cache[i] = got
            prev, off = i, got
            out.append(got)
        return out
