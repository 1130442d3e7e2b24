"""Integrity of cached results: before a value is read or returned, its artifact is checked
against the SHA-256 recorded with it (a missing one is fetched from the remote store if there
is one). A step whose artifact is missing, a directory or corrupt is computed again."""
from __future__ import annotations

import errno
import os
import stat
import time

from barca.core.sha import sha256 as _sha256  # (no OpenSSL for a small one)
from barca.core.types import Reason
from barca.engine.states import NodeState, StepState

_POSIX = os.name == "posix"
TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:  # (nor pathlib: str paths on a cached command's path)
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

SMALL_BYTES = 2048   # an artifact this small is kept in memory once verified (a preview)


class Integrity:
    """What this command has verified (each path read once), and the small artifacts read on
    the way (shown as the run's output without reading them again)."""

    def __init__(self, root: str | Path, remote: Any, warn: Callable[[str], None]) -> None:
        self.root, self.remote, self.warn = os.fspath(root), remote, warn
        # where a result's relative path is found: the root's text and a separator, joined by
        # concatenation (os.path.join per cached result costs more than its open)
        self._prefix = os.path.join(root, "")
        self.verified: set[str] = set()
        self.small: dict[str, bytes] = {}

    def broken(self, steps: list[StepState]) -> list[StepState]:
        """The steps whose artifact is not intact (each marked with why)."""
        out = []
        verified = self.verified
        for s in steps:
            path = s.path  # (read once: a cached step's is read from the store when first asked)
            if path and path not in verified:
                if self.intact(s, path):
                    verified.add(path)
                else:
                    out.append(s)
        return out

    def _fetch(self, path: str, sha256: str | None) -> bool:
        """A missing result downloaded from the remote store, checked (False: none there)."""
        from pathlib import Path
        return self.remote.fetch(Path(self.root), path, sha256) is not None

    def to_check(self, states: list[NodeState]) -> list[StepState]:
        """The cached steps of these nodes for ``broken`` to check. A node of one simply cached
        key (a settled one: NodeState.only_cached) is checked here, from where its row says the
        result is, without a StepState; only if its file is not intact is its step made, for
        ``broken`` to read it again and say why. A small file is read in one call (open, read,
        close: a settled walk of 500 results does only this per result), no symlink followed
        (ELOOP), a directory refused (EISDIR); anything else -- more than SMALL_BYTES, nothing
        read (an empty file or a FIFO), a digest that differs (a short read, possible on some
        network file systems, costs a second look, never a wrong verdict) -- goes the careful
        way (``read_digest``, through ``broken``), which checks what the file is first."""
        out: list[StepState] = []
        verified, small, prefix = self.verified, self.small, self._prefix
        os_open, os_read, os_close, flags = os.open, os.read, os.close, os.O_RDONLY | _NOFOLLOW
        for ns in states:
            one = ns.only_cached()
            where = ns.where(one[1]) if one is not None and _POSIX else None
            # (a row that records no SHA-256 is read the careful way: what it is, first)
            if where is not None and where[0] and where[0][:1] != "/" and where[2]:
                path = where[0]
                if path in verified:
                    continue
                try:
                    fd = os_open(prefix + path, flags)
                    try:
                        data = os_read(fd, SMALL_BYTES + 1)
                    finally:
                        os_close(fd)
                except OSError:  # (a directory, a link) said by broken, below
                    data = b""
                if 0 < len(data) <= SMALL_BYTES and _sha256(data).hexdigest() == where[2]:
                    verified.add(path)
                    small[path] = data
                    continue
            out.extend(s for s in ns.steps.values() if s.action == "cached")
        return out

    def forget(self, paths: set[str]) -> None:
        """These artifacts must be read again (a worker found them wrong)."""
        self.verified -= paths
        for path in paths:
            self.small.pop(path, None)

    def intact(self, s: StepState, path: str | None = None) -> bool:
        if path is None:
            path = s.path or ""
        # a str: no Path made per cached result; a relative path joined by concatenation
        where = self._prefix + path if _POSIX and path[:1] != "/" else os.path.join(self.root,
                                                                                     path)
        sha256 = s.sha256
        kind: str | None = "file"
        try:
            # a result is a regular file, never a link followed: opened without following one
            # and checked on the open file (one call per cached result, not lstat + open)
            digest, data = read_digest(where, bool(sha256), regular=True)
        except _NotRegular as e:
            kind = e.kind
        except FileNotFoundError:
            if self.remote is not None and s.path and self._fetch(s.path, s.sha256):
                return self.intact(s)
            if s.reason == "evicted":
                self.warn(f"{s.path} was evicted by the cache size limit; computing {s.id} "
                          "again")
                return False
            self.warn(f"artifact missing: {s.path}; computing {s.id} again")
            s.reason = Reason.ARTIFACT_MISSING
            return False
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            from barca.store.artifacts import file_kind
            kind = file_kind(where)  # O_NOFOLLOW refused a symlink (or a loop above it)
            if kind in ("file", None):
                raise
        if kind != "file":
            from pathlib import Path
            here = Path(where)
            aside = here.with_name(f"{here.name}.moved-aside-{int(time.time())}")
            here.rename(aside)
            what = {"link": "a symlink", "other": "not a regular file"}.get(kind or "",
                                                                              "a directory")
            self.warn(f"{s.path} was {what}; moved it aside to {aside.name} and computing "
                      f"{s.id} again")
            s.reason = Reason.ARTIFACT_MISSING
            return False
        if sha256 and digest != sha256:
            self.warn(f"artifact corrupt (SHA-256 differs from the one recorded): {s.path}; "
                      f"computing {s.id} again")
            s.reason = Reason.ARTIFACT_CORRUPT
            return False
        if data is not None and path:  # small: shown as the run's output, read once
            self.small[path] = data
        return True


class _NotRegular(OSError):
    """What ``read_digest(regular=True)`` found instead of a regular file: ``kind`` as
    barca.store.artifacts.file_kind names it (``dir``, ``other``)."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(
    os, "O_BINARY", 0)


def read_digest(where: str, hashed: bool = True,
                regular: bool = False) -> tuple[str, bytes | None]:
    """An artifact's SHA-256 (``""`` if not ``hashed`` and too big to keep) and its bytes if it
    is small. Raises OSError (IsADirectoryError, FileNotFoundError) as ``open`` does.
    ``regular``: a symlink is not followed (OSError ELOOP) and anything but a regular file
    raises _NotRegular (a FIFO is opened without blocking, then refused)."""
    # a big artifact is hashed in blocks: a lazy consumer of a 2 GB table must not cost the
    # coordinator 2 GB
    if regular and _NOFOLLOW and _POSIX:
        fd = os.open(where, os.O_RDONLY | _NOFOLLOW)
        try:
            st = os.fstat(fd)
            mode = st.st_mode
            if not stat.S_ISREG(mode):
                raise _NotRegular("dir" if stat.S_ISDIR(mode) else "other")
            head = os.read(fd, SMALL_BYTES + 1)
            # the whole file in one read (a small result, the usual case): no second read to
            # see its end; else a read may return less than asked
            while len(head) != st.st_size and len(head) <= SMALL_BYTES:
                got = os.read(fd, SMALL_BYTES + 1 - len(head))
                if not got:
                    break
                head += got
        finally:
            os.close(fd)
    else:
        if regular:
            from barca.store.artifacts import file_kind
            kind = file_kind(where)
            if kind == "link":
                raise OSError(errno.ELOOP, "a symlink", where)
            if kind not in ("file", None):
                raise _NotRegular(kind or "")
        with open(where, "rb") as f:
            head = f.read(SMALL_BYTES + 1)
    data = head if len(head) <= SMALL_BYTES else None
    if data is not None:
        # (imported once, above: an import statement run per result costs more than its hash)
        return _sha256(data).hexdigest(), data
    if not hashed:
        return "", None
    from barca.store.artifacts import file_sha256  # a big file only: a cached read needs none
    return file_sha256(where), None


class VerifiedFiles:
    """What ``barca sql`` checked of the files it scans in place, kept across commands: a file
    whose bytes matched their recorded SHA-256 is not hashed again while its size, modification
    and change times and inode are the ones seen then (a write, a ``touch``, a replacement all
    move one of them). A memo like the others: keyed by barca's one salt (core.salt), and by
    the digest it vouched for (a row recorded with other bytes is checked again)."""

    NAME = ".verified.json"
    KEEP = 100_000   # past this many files, only those of the last query are kept

    def __init__(self, folder: Path) -> None:
        import json

        from barca.core.salt import salt
        self.path, self.salt = folder / self.NAME, salt()
        self.files: dict[str, list[Any]] = {}
        self.used: set[str] = set()   # the files this command asked about
        self.changed = False
        try:
            doc = json.loads(self.path.read_text())
            if doc.get("salt") == self.salt:
                self.files = doc["files"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # no memo, or not one this barca wrote: every file is hashed

    def intact(self, where: str, sha256: str) -> bool:
        """Whether the regular file ``where`` holds the bytes of ``sha256`` (hashed unless the
        memo vouches for this very file state). Raises FileNotFoundError if it is gone."""
        import os
        import stat

        from barca.store.artifacts import file_sha256
        st = os.lstat(where)
        if not stat.S_ISREG(st.st_mode):  # a link or a folder is never a result
            return False
        seen = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, sha256]
        self.used.add(where)
        if self.files.get(where) == seen:
            return True
        if file_sha256(where) != sha256:
            self.files.pop(where, None)
            return False
        # a file changed within the clock's tick after its hash could keep these times: one
        # written in the last seconds is hashed again next time ("racy" entries, as git does)
        if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > 2_000_000_000:
            self.files[where] = seen
            self.changed = True
        return True

    def save(self) -> None:
        """Keep the memo (best effort: without it the next query hashes again)."""
        if not self.changed:
            return
        import contextlib
        import json

        from barca.store.artifacts import write_atomic
        if len(self.files) > self.KEEP:  # files long gone must not make every query slower
            self.files = {p: v for p, v in self.files.items() if p in self.used}
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps({"salt": self.salt, "files": self.files}).encode())
        self.changed = False
