"""A persistent memo of definition parts (``.barca/metadata.db``, table ``definitions``).

Following a node's dependency cone means parsing and analysing source; for a cached run that
is most of barca's own work. The parts of a node are a pure function of the files they were
read from, so they are stored with a fingerprint of those files — the pipeline file's text,
every project module a part names, and the listing of each folder that module resolution
searched — and of the barca that made them (the one memo salt, barca.core.salt, is part of the
row's ``file_sha``), and reused while the fingerprint holds. Any doubt is a miss: recompute."""
from __future__ import annotations

import os

from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.core.sha import sha256
from barca.model.discovery import FileModel, NodeModel

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from pathlib import Path

    from barca.store.metadata import Store


def _sha(data: bytes) -> str:
    return sha256(data).hexdigest()


def listing(folder: str | Path) -> str:
    """A folder's listing as module resolution sees it (hidden names left out), hashed."""
    try:
        names = sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except OSError:
        names = ["<missing>"]
    return _sha("\0".join(names).encode("utf-8", "surrogatepass"))


def _part_file(name: str) -> str | None:
    """``helper:pkg/util.py:norm`` -> ``pkg/util.py``; ``module:x.py`` -> ``x.py``."""
    kind, _, rest = name.partition(":")
    if kind == "helper":
        return rest.rpartition(":")[0] or None
    if kind == "module":
        return rest or None
    return None


class DefinitionCache:
    def __init__(self, store: Store | None, root: str | Path) -> None:
        self.store = store  # the rows are read through it (the first get)
        self.root = os.fspath(root)  # a str: no pathlib on a cached command's path (#31)
        self._rows: dict[str, tuple[str, str, str]] | None = None
        self._files: dict[str, str | None] = {}
        self._dirs: dict[str, str] = {}
        self._prints: dict[str, str] = {}
        self._new: list[tuple[str, str, str, str]] = []
        self._deps: dict[str, dict[str, dict[str, str | None]]] = {}  # of the parts handed out

    def _load(self) -> dict[str, tuple[str, str, str]]:
        if self._rows is None:
            from barca.store.definitions import read_definitions  # (a settled walk reads none)
            self._rows = read_definitions(self.store)
        return self._rows

    def _file(self, rel: str) -> str | None:
        if rel not in self._files:
            try:
                with open(os.path.join(self.root, rel), "rb") as f:
                    self._files[rel] = _sha(f.read())
            except OSError:
                self._files[rel] = None
        return self._files[rel]

    def _dir(self, rel: str) -> str:
        if rel not in self._dirs:
            self._dirs[rel] = listing(os.path.join(self.root, rel))
        return self._dirs[rel]

    def get(self, node: NodeModel, fm: FileModel) -> dict[str, str] | None:
        row = self._load().get(node.id)
        if row is None or row[0] != self.fingerprint(fm):
            return None
        deps = jsontext.loads(row[1])
        if any(self._file(f) != h for f, h in deps["files"].items()):
            return None
        if any(self._dir(d) != h for d, h in deps["dirs"].items()):
            return None
        self._deps[node.id] = deps
        return jsontext.loads(row[2])

    def deps_of(self, nodes: list[str]
                ) -> tuple[dict[str, str | None], dict[str, str | None]] | None:
        """The files and folders the parts of these nodes were read from, with their digests
        as this command found them (None if one node's parts did not come through here)."""
        files: dict[str, str | None] = {}
        dirs: dict[str, str | None] = {}
        for n in nodes:
            deps = self._deps.get(n)
            if deps is None:
                return None
            files.update(deps["files"])
            dirs.update(deps["dirs"])
        return files, dirs

    def fingerprint(self, fm: FileModel) -> str:
        """The pipeline file's text under barca's one memo salt (barca.core.salt), hashed once
        per command (not once per node): a row made by a barca whose rules differ is a miss."""
        got = self._prints.get(fm.path)
        if got is None:  # (the model cache's key hashed the same text: found, not hashed)
            from barca.model.modelcache import text_digest
            got = self._prints[fm.path] = text_digest(fm.source)
        return got

    def put(self, node: NodeModel, fm: FileModel, parts: dict[str, str],
            modules: list[str] | tuple[str, ...] = ()) -> None:
        """``modules``: every project module the pipelines import, whether a part names it or
        not: one may change another's names when imported (barca.identity.foreign)."""
        files = {f for f in map(_part_file, parts) if f and f != fm.path}
        files |= {f for f in modules if f != fm.path}
        from pathlib import Path  # (a definition made now, not read: not a cached command)
        pipeline_dir = str(Path(fm.path).parent)
        dirs = {pipeline_dir, "."} | {str(Path(f).parent) for f in files}
        # a project folder the pipeline puts on sys.path: imports resolve through its listing
        dirs |= {name[len("path:"):] for name in parts if name.startswith("path:")}
        deps: dict[str, dict[str, str | None]] = {
                "files": {f: self._file(f) for f in sorted(files)},
                "dirs": {d: self._dir(d) for d in sorted(dirs)}}
        self._deps[node.id] = deps
        self._new.append((node.id, self.fingerprint(fm), jsontext.dumps(deps),
                          jsontext.dumps(parts, sort_keys=True)))

    def flush(self, store: Store) -> None:
        """Write what this command computed (only commands that write the store call this)."""
        if self._new and store.is_open:
            from barca.store.definitions import write_definitions
            try:
                write_definitions(store, self._new)
            finally:
                self._new = []
