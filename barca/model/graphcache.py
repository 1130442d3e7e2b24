"""The kept graph: a pipeline's built graph (references resolved, checked, ordered, phased)
in ``.barca/discovery/``, so a cached command does not build it again from the node models.

It is an early exit of the one build, keyed by what the build reads: barca's one memo salt,
every file's path and text (the text read now compared with the one the kept model holds, byte
for byte) and every project-file lookup the walk made (a file created or removed may change
where an import points). Anything else is a miss, and a graph is kept only after a build that
raised nothing. It keeps each text's digest too (modelcache.text_digest, which the definitions
table and the settle record are keyed by): a text found the same is not hashed again (~2.5 M
instructions for a 50 kB pipeline file)."""
from __future__ import annotations

import os

from barca.model.modelcache import ModelCache, _later, _pickle, remember, text_digest

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

    from barca.model.discovery import FileModel

    Graph = Any  # barca.model.topology.Graph (which imports this module)

Lookups = list  # per file: [(ref, by_id, the project file it points at or None)]


def imported_file(fm: FileModel, ref: str, root: str) -> str | None:
    """The project file a reference like ``prices`` or ``mod.prices`` is imported from."""
    head, *rest = ref.split(".")
    imp = fm.imports.get(head)
    if imp is None:
        return None
    module, attr = imp
    if attr is None and rest:            # import mod [as m]; m.prices / pkg.mod.prices
        module = ".".join([module, *rest[:-1]]) if len(rest) > 1 else module
    for base in (os.path.dirname(fm.abspath), root):
        stem = os.path.join(base, *module.split("."))
        for cand in (stem + ".py", os.path.join(stem, "__init__.py")):
            if os.path.isfile(cand):
                return cand
    return None


def referenced_file(node_id: str, root: str) -> str | None:
    """The project file an ``asset_ref("file.py:fn")`` names (relative to the root)."""
    file = node_id.rpartition(":")[0]
    p = os.path.join(root, file) if file else None
    return p if p is not None and os.path.splitext(p)[1] == ".py" and os.path.isfile(p) else None


def lookups(fm: FileModel, root: str) -> list[tuple[str, bool, str | None]]:
    """The project files ``fm``'s nodes name, as the walk of load_graph looks them up: the
    only part of the build that reads the file system besides the files' texts."""
    out = []
    for node in fm.nodes:
        refs = [(i.ref, i.by_id) for i in node.inputs]
        refs += [(d.source_ref, False) for d in node.dims if d.source_ref]
        for ref, by_id in refs:
            if not by_id and ref.partition(".")[0] not in fm.imports:
                continue  # a name of this file (or none): no other file to read
            out.append((ref, by_id, referenced_file(ref, root) if by_id
                        else imported_file(fm, ref, root)))
    return out


def _real(other: str | None) -> str | None:
    # the file itself (a symlink retargeted points elsewhere: another answer); the walk reads
    # the path as found, so node ids are the same whether or not the graph was kept
    return None if other is None else os.path.realpath(other)


def _answer(fm: FileModel, ref: str, by_id: bool, root: str) -> str | None:
    return _real(referenced_file(ref, root) if by_id else imported_file(fm, ref, root))


def _file(root: str, entries: list[str]) -> str:
    from barca.core.sha import sha256
    name = sha256("\0".join([root, *entries]).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return os.path.join(root, ".barca", "discovery", f"{name}.graph")


def _same_texts(graph: Graph, files: list[tuple[str, str]]) -> list[str] | None:
    """Each file's text now (read again, by its real path: what parse_file reads), if every
    one is the text its kept model was read from; else None (one that cannot be read too:
    the build says why)."""
    out = []
    for rel, abspath in files:
        fm = graph.files.get(rel)
        try:
            with open(abspath, encoding="utf-8") as f:
                source = f.read()
        except (OSError, UnicodeDecodeError):
            return None
        if fm is None or fm.abspath != abspath or source != fm.source:
            return None
        out.append(source)
    return out


def get(root: str, entries: list[str]) -> Graph | None:
    """The graph kept for these entry files (absolute paths, in the order given), if every
    file it read has the same key and every lookup the same answer."""
    file = _file(root, entries)
    try:
        with open(file, "rb") as f:
            kept: Any = _pickle().loads(f.read())
        salt, reals, files, digests, looked, graph = kept
    except Exception:  # noqa: BLE001 - none, or unreadable: a miss
        return None
    if salt != ModelCache.salt() or [os.path.realpath(p) for p in entries] != reals:
        return None
    texts = _same_texts(graph, files)
    if texts is None or len(texts) != len(digests):
        return None
    # which references look a file up is the same for the same texts (the keys held): only
    # the answers are asked again (a file created or removed since)
    fms = graph.files
    if any(_answer(fms[rel], ref, by_id, root) != other
           for rel, refs in looked.items() for ref, by_id, other in refs):
        return None
    for source, digest in zip(texts, digests, strict=True):
        remember(source, digest)  # (the same salt, the same text: the digest kept with it)
    return graph


def put(root: str, entries: list[str], graph: Graph, looked: dict[str, Lookups]) -> None:
    """Keep ``graph`` (just built, no error) beside the file models; never the first thing
    written into a project (no ``.barca/``: kept once a run has made the store, see
    modelcache.keep_pending)."""
    if graph.groups:
        return  # (groups resolve names across files: built each time)
    if not os.path.isdir(os.path.join(root, ".barca")):
        _later(root, _file(root, entries), _Later(root, entries, looked), graph)
        return
    files = [(rel, fm.abspath) for rel, fm in graph.files.items()]
    if set(looked) != set(graph.files):
        return
    # the digests of the texts the models were read from (not read again: a file saved since
    # is another text, a miss next time)
    digests = [text_digest(fm.source) for fm in graph.files.values()]
    looked = {rel: [(ref, by_id, _real(other)) for ref, by_id, other in refs]
              for rel, refs in looked.items()}
    file = _file(root, entries)
    tmp = f"{file}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(file), exist_ok=True)
        reals = [os.path.realpath(p) for p in entries]  # (a symlink's file, as parse_file reads)
        data = _pickle().dumps((ModelCache.salt(), reals, files, digests, looked, graph),
                               protocol=5)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, file)
    except Exception:  # noqa: BLE001 - a graph that cannot be kept is only built again
        import contextlib
        with contextlib.suppress(OSError):
            os.unlink(tmp)


class _Later:
    """``put`` of a graph built before its project had a store (modelcache.keep_pending)."""

    def __init__(self, root: str, entries: list[str], looked: dict[str, Lookups]) -> None:
        self.root, self.entries, self.looked = root, entries, looked

    def put(self, graph: Graph) -> None:
        put(self.root, self.entries, graph, self.looked)
