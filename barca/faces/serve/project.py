"""The pipeline files a server reads, and the ones it leaves out: a file that does not load
(a syntax error, a bad reference) is named in ``/health.load_errors`` and the others serve."""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Any

from barca.core.errors import UsageError

_NODE = re.compile(r"@(?:barca\.)?(?:asset|task|sensor)\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*(?:async\s+)?"
                   r"def\s+(\w+)")


class Project:
    """The files to pass to every command: the ``FILES`` given (``()``: discovery, so a new
    file is seen) minus the broken ones. Looked at again at most once a second."""

    def __init__(self, root: Path, given: list[str], settings: Any) -> None:
        # absolute: runs execute in the root, which need not be where serve was started
        self.root, self.settings = root, settings
        self.given = [str(Path(f).resolve()) for f in given]
        self._lock = threading.Lock()
        self._stamp: Any = None
        self._checked = 0.0
        self.files: tuple[str, ...] = tuple(self.given)
        self.errors: list[dict[str, Any]] = []
        self.generation = 0  # moves each time a file changed, appeared or went

    def _paths(self) -> list[Path]:
        from barca.model.discovery import find_files
        s = self.settings
        if not self.given:
            return [Path(p) for p in find_files(self.root, s.include, s.exclude)]
        out: list[Path] = []
        for f in self.given:
            p = Path(f)
            if p.is_dir():
                out.extend(map(Path, find_files(p, s.include, s.exclude)
                                    if p.resolve() == self.root else find_files(p)))
            else:
                out.append(p)
        return out

    def refresh(self, force: bool = False) -> bool:
        """Look at the files again; True when something changed since the last look."""
        with self._lock:
            if not force and time.monotonic() - self._checked < 1.0:
                return False
            self._checked = time.monotonic()
            paths = self._paths()
            stamp = []
            for p in paths:
                try:
                    st = p.stat()
                    stamp.append((str(p), st.st_mtime_ns, st.st_size))
                except OSError:
                    stamp.append((str(p), 0, 0))
            if stamp == self._stamp:
                return False
            self._stamp = stamp
            self.generation += 1
            self._check(paths)
            return True

    def _check(self, paths: list[Path]) -> None:
        from barca.model.topology import load_graph
        try:
            load_graph(tuple(str(p) for p in paths) if self.given else (), self.settings)
            self.files, self.errors = tuple(self.given), []
            return
        except UsageError:
            pass
        good, errors = [], []
        for p in paths:
            try:
                load_graph((str(p),), self.settings)
                good.append(p)
            except UsageError as exc:
                rel = _rel(p, self.root)
                try:
                    names = _NODE.findall(p.read_text(encoding="utf-8", errors="replace"))
                except OSError:
                    names = []
                errors.append({"file": rel, "error": exc.message,
                               "affected_nodes": [f"{rel}:{n}" for n in names]})
        self.files = tuple(_rel(p, self.root) for p in good)
        self.errors = errors
        if not good:  # nothing loads: commands say why themselves
            self.files = tuple(self.given)


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(p)
