"""Where a key is in a node's keys: the position of one key among 200,000, found without a dict
of them all while only a few are asked for (a one-key tick)."""
from __future__ import annotations


class KeyIndex:
    """The position of a key in a list of keys: found by a search while only a few are asked
    for (one key of 200,000 changed; each found once, however often asked), then by a dict of
    them all, made once. ``joined``: the keys joined by NUL, when made already: a key is then
    found by a search of that text (~10 times faster than comparing each key)."""
    __slots__ = ("keys", "joined", "_map", "_scans", "_hits")

    def __init__(self, keys: list[str], joined: str | None = None) -> None:
        self.keys = keys
        # (a key holding a NUL would make the text lie about positions: not used then)
        self.joined = joined if joined is not None and keys \
            and joined.count("\x00") == len(keys) - 1 else None
        self._map: dict[str, int] | None = None
        self._scans = 0
        self._hits: dict[str, int | None] = {}

    def get(self, key: str) -> int | None:
        if self._map is None:
            if key in self._hits:
                return self._hits[key]
            self._scans += 1
            if self._scans <= 16:
                got = self._hits[key] = self._find(key)
                return got
            self._map = {k: i for i, k in enumerate(self.keys)}
        return self._map.get(key)

    def _find(self, key: str) -> int | None:
        text = self.joined
        if text is None or "\x00" in key:
            try:
                return self.keys.index(key)
            except ValueError:
                return None
        if text == key or text.startswith(key + "\x00"):
            return 0
        at = text.find("\x00" + key + "\x00")
        if at >= 0:  # the position: how many keys end before it
            return text.count("\x00", 0, at + 1)
        return len(self.keys) - 1 if text.endswith("\x00" + key) else None
