"""Warm state: what a fully cached ``get`` found, kept in the process that asked (a notebook's
kernel), so that asking again in the same state costs a few ``stat`` calls and one query.

A command keeps its outcome only when a settle record (barca.engine.settle) vouches for the state it
ran in: every node of its cone settled by its snapshot, nothing ran, nothing was said. The state
is then stamped the cheap way: ``(device, inode, size, mtime, ctime)`` of every pipeline file
of the graph, of every file and folder the definitions were read from (the record's own
dependencies), of ``barca.toml`` and of the folders holding them, the identity of the store's
database, and the store's generation (moved by every write of a result, snapshot, eviction or
definition, from any process). A folder whose stamp moved still holds if its listing, as
module resolution sees it (barca.engine.defcache), did not change: saving a notebook beside the
pipeline renames a hidden file over it.

The next identical ask -- same target, files, working folder, resolved settings -- whose stamps
and generation all match is served from the kept outcome: its targets' artifacts are read and
checked against their SHA-256 as every run does, the run is recorded, the value is read back
from disk. Anything that does not match drops the entry and takes the normal path, which keeps
a new one.

What a stamp cannot see: a file rewritten in place with the same size within the filesystem
clock's resolution of the stamp. Such a file would also have a ctime within that window, so an
outcome is kept only when every stamp is older than ``RACY_NS`` at the command's start (as git
does with its index): a change after that moves the ctime. A clock set backwards, or a
filesystem whose timestamps lie (some network mounts), defeats it.

Never kept: ``--refresh``, ``--refresh-all``, ``--partition``, ``--no-cascade``, a remote
store, notebook-defined assets, anything the settle record does not cover (sensors, tasks,
env values, keys from imports or outputs, evicted results), a directory passed as a file."""
from __future__ import annotations

import os
import time
from collections import OrderedDict

from barca.core import events as ev
from barca.engine.integrity import read_digest
from barca.present.outputs import node_output
from barca.store.process import new_run_id

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:  # (nor pathlib, loaded by a kept entry's folders: see _entry)
    from pathlib import Path
    from typing import Any

RACY_NS = 2_000_000_000  # a stamp younger than this at the command's start is not trusted
MAX_ENTRIES = 16

_ENTRIES: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
_STORES: dict[tuple[str, str], tuple[Any, tuple[int, int]]] = {}


def stamp(path: str) -> tuple[int, ...] | None:
    """What a file or folder looks like without reading it (None: absent)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Entry:
    __slots__ = ("stamps", "store", "db", "generation", "result", "targets", "verify", "reads",
                 "events", "graph", "prefix", "pool_size", "label", "cached", "job")
    # (path, stamp, listing digest or None), updated in place as stamps age (see holds)
    stamps: list[tuple[str, tuple[int, ...] | None, str | None]]
    store: Any                      # the kept connection (barca.store.metadata.Store)
    db: tuple[int, int] | None      # _db_id of the store when kept
    generation: int
    result: Any                     # the RunResult served again
    targets: list[Any]              # the targets' NodeStates
    verify: tuple[tuple[Any, Any], ...]  # (path, sha256) of each target result
    reads: set[str]
    events: tuple[Any, ...]
    graph: Any
    prefix: str
    pool_size: int
    label: str | None
    cached: int
    job: str                        # "all", or the node ids asked for (history's job)

    def __init__(self, **kw: Any) -> None:
        for k, v in kw.items():
            setattr(self, k, v)

    def holds(self) -> bool:
        """The store and the stamps are what they were (the store's generation is checked when
        the served run is recorded, under the write lock). A folder whose stamp moved but whose
        listing did not (a notebook saved beside the pipeline: a hidden temporary file renamed
        over it) still holds; its new stamp is kept once it is old enough."""
        if _db_id(self.store) != self.db:  # the store was removed, or made anew
            return False
        for i, (p, s, digest) in enumerate(self.stamps):
            now = stamp(p)
            if now == s:
                continue
            if digest is None or now is None:
                return False
            from barca.engine.defcache import listing
            if listing(p) != digest:
                return False
            if now[4] < time.time_ns() - RACY_NS:
                self.stamps[i] = (p, now, digest)
        return True


def _db_id(store: Any) -> tuple[int, int] | None:
    try:
        st = os.stat(store.db_file)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


class Ask:
    """One ``materialize`` call as the warm state sees it: served from a kept entry, or
    listened to on the normal path and kept afterwards."""

    def __init__(self, target: Any, files: tuple[str, ...], command: str, settings: Any,
                 load_values: bool) -> None:
        self.start_ns = time.time_ns()
        self.target = target
        self.files = files
        self.settings = settings
        self.generation: int | None = None
        self.events: list[Any] | None = []
        from barca.core.salt import salt  # barca's one memo salt: a changed barca is a miss
        self.key = (salt(), command, repr(target), files, os.getcwd(), settings.values(),
                    load_values)

    @staticmethod
    def wanted(files: tuple[str, ...], settings: Any, refresh: Any, refresh_all: bool,
               no_cascade: bool, partition: Any) -> bool:
        """Whether warm state may serve (or keep) this call at all (in a process that keeps it:
        ``barca.api.keeping``)."""
        return bool(files) and not (refresh or refresh_all or no_cascade or partition
                                    or settings.remote_uri)

    def listen(self, on_event: ev.EventCallback) -> ev.EventCallback:
        """``on_event``, with what the normal path emits noted (a kept outcome emits it again)."""
        def hear(e: Any) -> None:
            if self.events is not None:
                if isinstance(e, ev.StepCached):
                    self.events.append(e)
                else:  # a note, a step that ran: not an outcome to keep
                    self.events = None
            on_event(e)
        return hear

    # ------------------------------------------------------------------ serving
    def serve(self, on_event: ev.EventCallback, start: float) -> Any:
        """The RunResult of this ask from a kept entry whose state still holds, else None."""
        entry = _ENTRIES.get(self.key)
        if entry is None:
            return None
        try:
            got = self._serve(entry, on_event, start)
        except Exception:  # noqa: BLE001 - the normal path says what is wrong, if anything
            got = None
        if got is None:
            _ENTRIES.pop(self.key, None)
            _prune()
        else:
            _ENTRIES.move_to_end(self.key)
        return got

    def _serve(self, entry: _Entry, on_event: ev.EventCallback, start: float) -> Any:
        if not entry.holds():
            return None
        root = entry.graph.root_dir
        small: dict[str, bytes] = {}
        for path, sha in entry.verify:  # a deleted or corrupt target: the normal path repairs
            try:
                digest, data = read_digest(os.path.join(root, path), bool(sha))
            except OSError:
                return None
            if sha and digest != sha:
                return None
            if data is not None:
                small[path] = data
        res = entry.result
        # the values first: one that cannot be read leaves no run behind (the normal path runs)
        outputs = tuple(node_output(entry.graph, self.settings, entry.prefix, ns,
                                    self.key[-1], small) for ns in entry.targets)
        from barca.store.metadata import reads_write
        run_id = new_run_id()
        # recorded only if no writer moved the store since the entry was kept; else the normal
        # path (which a moved store may well need)
        if not entry.store.served_run(entry.generation, run_id, res.command, entry.label,
                                      entry.pool_size, entry.cached,
                                      [reads_write(entry.reads)] if entry.reads else [],
                                      sorted(entry.graph.files), entry.job):
            return None
        for e in entry.events:
            on_event(e)
        now = {"run_id": run_id, "elapsed": time.perf_counter() - start, "outputs": outputs}
        return type(res)(*(now[f] if f in now else getattr(res, f) for f in type(res).__slots__))

    # ------------------------------------------------------------------ keeping
    def keep(self, ctx: Any, runner: Any, label: str, result: Any) -> None:
        """After the normal path: keep its outcome if a settle record vouches for the state it
        ran in and nothing ran, failed or was said (never fails a command)."""
        try:
            entry = self._entry(ctx, runner, label, result)
        except Exception:  # noqa: BLE001 - warm state only saves work next time
            entry = None
        if entry is not None:
            _ENTRIES[self.key] = entry
            _ENTRIES.move_to_end(self.key)
            while len(_ENTRIES) > MAX_ENTRIES:
                _ENTRIES.popitem(last=False)
            _prune()

    def _entry(self, ctx: Any, runner: Any, label: str, result: Any) -> _Entry | None:
        w = runner.w
        if (self.events is None or self.generation is None or w.done or w.failed or w.notes
                or w.infra or w.skipped_fanins or result.warnings or result.cache is not None
                or result.status != "success"):
            return None
        if any(not os.path.isfile(f) for f in self.files):  # a folder: its listing may grow
            return None
        import json
        from pathlib import Path

        from barca.engine.settle import Settle, record_json
        settle = Settle(ctx, w.order, set(), None)  # this state's record, as a walk names it
        if settle.key is None or settle.generation != self.generation:
            return None  # not covered by a record, or the store moved since the walk began
        got = ctx.store.settle_record(settle.cone)
        if got is None or got[0] != settle.key:
            return None
        deps = json.loads(record_json(got[1]))
        graph = ctx.graph
        root = graph.root
        from barca.engine.defcache import listing
        files = {fm.abspath for fm in graph.files.values()} | {str(root / f) for f in deps["files"]}
        files.add(str(root / "barca.toml"))
        folders = {str(Path(p).parent) for p in files} | {str(root / d) for d in deps["dirs"]}
        # listed before stamped: a change in between leaves a young stamp, refused below
        digests = {d: listing(Path(d)) for d in folders}
        stamps = [(p, stamp(p), digests.get(p)) for p in sorted(files | folders)]
        limit = self.start_ns - RACY_NS
        if any(s is not None and (s[3] >= limit or s[4] >= limit) for _, s, _ in stamps):
            return None  # changed too recently to trust its stamp (see the module's text)
        store = _store(root, ctx.store.prefix)
        if store is None:
            return None
        from barca.engine.executors import default_pool_size
        targets = [w.states[t] for t in runner.targets]
        verify = tuple((s.path, s.sha256) for s in (
            st for ns in targets for st in ns.steps.values()) if s.path in
            runner.integrity.verified)
        kept = type(result)(*(() if f == "outputs" else getattr(result, f)  # not its values
                              for f in type(result).__slots__))
        return _Entry(stamps=stamps, store=store[0], db=store[1], generation=self.generation,
                      result=kept, targets=targets, verify=verify,
                      reads=runner.integrity.verified.union(runner.produced),
                      events=tuple(self.events), graph=graph, prefix=ctx.store.prefix,
                      pool_size=default_pool_size(self.settings), label=label, cached=w.cached,
                      job=",".join(runner.targets) if self.target else "all")


def _store(root: Path, prefix: str) -> tuple[Any, tuple[int, int]] | None:
    """A connection to the store kept open for the entries of this process (opening and
    closing one per call costs more than the rest of a warm ask)."""
    from barca.store.metadata import Store
    key = (str(root), prefix)
    got = _STORES.get(key)
    if got is not None and _db_id(got[0]) == got[1]:
        return got
    if got is not None:
        got[0].close()
    store = Store(root, create=False, prefix=prefix)
    db = _db_id(store)
    if not store.is_open or db is None:
        store.close()
        return None
    _STORES[key] = (store, db)
    return _STORES[key]


def _prune() -> None:
    """Close the kept connections no entry uses any more."""
    used = {id(e.store) for e in _ENTRIES.values()}
    for key, (store, _) in list(_STORES.items()):
        if id(store) not in used:
            store.close()
            del _STORES[key]

