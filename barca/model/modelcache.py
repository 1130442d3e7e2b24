"""The discovery cache: a pipeline file's model kept in ``.barca/discovery/``, so a file is
parsed again only when its text (or a discovery rule) changes."""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
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


class ModelCache:
    """A file's model, kept in ``.barca/discovery/`` while its text (and this module) is the
    same: a big pipeline file is parsed only when it changes. The syntax tree is not kept; it
    is parsed again only where one is needed (a definition to hash, a key expression).
    Written only into an existing ``.barca/``; anything unreadable is a miss."""

    def __init__(self, root: Path, rel: str, abspath: str, source: str) -> None:
        self.dir = root / ".barca" / "discovery"
        self.rel, self.abspath, self.source = rel, abspath, source
        self._key: bytes | None = None

    @property
    def file(self) -> Path:
        from barca.core.sha import sha256
        return self.dir / (sha256(self.rel.encode("utf-8", "surrogatepass"))
                           .hexdigest()[:24] + ".pickle")

    @property
    def key(self) -> bytes:
        if self._key is None:
            from barca.core.sha import sha256
            self._key = sha256("\0".join(
                [self.salt(), self.rel, self.abspath, self.source]).encode(
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
        if not self.dir.is_dir():  # no store here yet (or never): nothing to read, no hashing
            return None
        try:
            data = self.file.read_bytes()
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
        if not self.dir.parent.is_dir():  # never the first thing written into a project
            return
        file = self.file
        tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp")
        try:
            self.dir.mkdir(exist_ok=True)
            tmp.write_bytes(self.key + b"\n" + _pickle().dumps(fm, protocol=5))
            os.replace(tmp, file)
        except Exception:  # noqa: BLE001 - a cache that cannot be written is only slower
            with contextlib.suppress(OSError):
                tmp.unlink()
