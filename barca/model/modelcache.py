"""The discovery cache: a pipeline file's model kept in ``.barca/discovery/``, so a file is
parsed again only when its text (or a discovery rule) changes."""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:  # (nor pathlib: str paths, see barca.core.root.root_dir)
    from pathlib import Path
    from typing import Any, TypeVar

    T = TypeVar("T")


def _pickle() -> Any:
    """The C pickler alone: ``import pickle`` also loads its pure-Python twin and its helpers,
    which a start that only reads the discovery cache never uses."""
    try:
        import _pickle
        return _pickle
    except ImportError:  # pragma: no cover - not CPython
        import pickle
        return pickle


_TEXTS: dict[str, tuple[str, str]] = {}  # a pipeline file's text -> (salt, text_digest)


def text_digest(source: str) -> str:
    """SHA-256 of a pipeline file's text under barca's one memo salt (barca.core.salt): the
    model cache's key and the definitions table's fingerprint (barca.engine.defcache) hash it,
    so a big file is hashed once per command (the same text, read twice, is found by value)."""
    from barca.core.salt import salt
    now = salt()
    got = _TEXTS.get(source)
    if got is None or got[0] != now:  # (another salt: another digest)
        from barca.core.sha import sha256
        if len(_TEXTS) >= 64:  # a server or a kernel reads many texts over its life
            _TEXTS.clear()
        got = _TEXTS[source] = now, sha256(
            now.encode() + b"\0" + source.encode("utf-8", "surrogatepass")).hexdigest()
    return got[1]


def remember(source: str, digest: str) -> None:
    """``text_digest(source)`` is ``digest``: said by a memo that holds this very text beside
    its digest under this salt (barca.model.graphcache, which compared the text read now with
    the one it kept), so that the text is not hashed again."""
    from barca.core.salt import salt
    if len(_TEXTS) >= 64:
        _TEXTS.clear()
    _TEXTS[source] = salt(), digest


class ModelCache:
    """A file's model, kept in ``.barca/discovery/`` while its text (and this module) is the
    same: a big pipeline file is parsed only when it changes. The syntax tree is not kept; it
    is parsed again only where one is needed (a definition to hash, a key expression).
    Written only into an existing ``.barca/``; anything unreadable is a miss."""

    def __init__(self, root: str | Path, rel: str, abspath: str, source: str) -> None:
        self.dir = os.path.join(root, ".barca", "discovery")
        self.rel, self.abspath, self.source = rel, abspath, source
        self._key: bytes | None = None

    @property
    def file(self) -> str:
        from barca.core.sha import sha256
        name = sha256(self.rel.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return os.path.join(self.dir, name + ".pickle")

    @property
    def key(self) -> bytes:
        if self._key is None:
            from barca.core.sha import sha256
            self._key = sha256("\0".join(
                [text_digest(self.source), self.rel, self.abspath]).encode(
                "utf-8", "surrogatepass")).hexdigest().encode()
        return self._key

    @classmethod
    def salt(cls) -> str:
        """barca's one memo salt (barca.core.salt): a changed model class or discovery rule is a
        new cache."""
        from barca.core.salt import salt
        return salt()

    def get(self, kind: type[T]) -> T | None:
        """The model kept for this text, if it is a ``kind`` (the caller's model class: this
        module imports no model)."""
        if not os.path.isdir(self.dir):  # no store here yet (or never): nothing to read, no hashing
            return None
        try:
            with open(self.file, "rb") as f:
                data = f.read()
        except OSError:
            return None
        if not data.startswith(self.key + b"\n"):
            return None
        try:
            fm = _pickle().loads(data[len(self.key) + 1:])
        except Exception:  # noqa: BLE001 - a damaged cache file is a miss
            return None
        return fm if isinstance(fm, kind) else None

    def put(self, fm: object) -> None:
        if not os.path.isdir(os.path.dirname(self.dir)):  # never the first thing written
            _later(os.path.dirname(os.path.dirname(self.dir)), self.file, self, fm)  # into a
            return  # project: kept once a run has made its store
        file = self.file
        tmp = f"{file}.{os.getpid()}.tmp"
        try:
            os.makedirs(self.dir, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(self.key + b"\n" + _pickle().dumps(fm, protocol=5))
            os.replace(tmp, file)
        except Exception:  # noqa: BLE001 - a cache that cannot be written is only slower
            import contextlib
            with contextlib.suppress(OSError):
                os.unlink(tmp)


# what could not be kept yet (no ``.barca/`` until a run makes the store), by project root,
# the newest per file it would be written to: kept by ``keep_pending`` once the store is there
# (a model is keyed by its text, a graph by every text it read: never served stale)
_PENDING: dict[str, dict[str, tuple[Any, Any]]] = {}


def _later(root: str, file: str, cache: Any, value: Any) -> None:
    got = _PENDING.setdefault(os.path.normpath(root), {})
    got.pop(file, None)
    got[file] = (cache, value)
    while len(got) > 64:  # (a long-lived process that never makes a store holds few)
        del got[next(iter(got))]


def keep_pending(root: str) -> None:
    """The store of ``root`` exists now: what discovery read before it is kept (the file
    models; the kept graph, barca.model.graphcache), so that the second command of a new
    project reads them rather than parsing again."""
    for cache, value in _PENDING.pop(os.path.normpath(root), {}).values():
        cache.put(value)
