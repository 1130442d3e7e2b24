"""The state of a step (one key of one node) and of a node (all its keys), as decided and then
as run: what the runner, the results and the views read."""
from __future__ import annotations

import sys

from barca.core.types import Action, NodeId, Reason, step_id
from barca.identity.digests import digest
from barca.store.metadata import Row
from barca.store.view import NodeHistory

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence, Set
    from typing import Any

    from barca.engine.keyindex import KeyIndex

# a step whose value exists, or will in a prediction
AVAILABLE = (Action.CACHED, Action.RAN, Action.RUN)


class _Lazy:
    """A field of a StepState that a cached step reads from the store on first use (its
    ``_resolve``); setting it makes the value explicit."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name
        # the slot's own descriptor: read without a lookup by name (a walk reads 1,000s)
        self.read = owner.__dict__[self.slot].__get__

    def __get__(self, st: Any, owner: type | None = None) -> Any:
        if st is None:
            return self
        if st._hist is not None:
            st._resolve()
        return self.read(st)

    def __set__(self, st: Any, value: Any) -> None:
        st._hist = st._src = None
        setattr(st, self.slot, value)


class _Shared(_Lazy):
    """A field with few distinct values (a format, a shape): one string object for every step
    that has it, not one per record unpickled (at 400,000 steps, ~40 MB)."""

    def __set__(self, st: Any, value: Any) -> None:
        super().__set__(st, sys.intern(value) if type(value) is str else value)


class _Hex(_Lazy):
    """A SHA-256 kept as its 32 bytes, given and read as its 64 hex digits (at 400,000 steps
    that ran, ~19 MB less held to the walk's end); any other text is kept as it is."""

    def __get__(self, st: Any, owner: type | None = None) -> Any:
        got = super().__get__(st, owner)
        return got.hex() if type(got) is bytes else got

    def __set__(self, st: Any, value: Any) -> None:
        if type(value) is str and len(value) == 64:
            try:
                raw = bytes.fromhex(value)
            except ValueError:
                raw = None
            if raw is not None and raw.hex() == value:  # (lower case: it reads back the same)
                value = raw
        super().__set__(st, value)


class StepState:
    """One key of one node as the planner and the executor see it.

    A step found cached by its run hash alone (in the node's snapshot) reads its row -- path,
    format, SHA-256, shape -- from the store only when one of those is first asked for."""
    __slots__ = ("node", "key", "action", "reason", "detail", "run_hash", "_parts", "value_hash",
                 "error", "traceback", "elapsed", "attempts", "kwargs", "adopted", "adoptable",
                 "_path",
                 "_format",
                 "_sha256", "_shape", "_row", "_hist", "_src")

    def __init__(self, node: NodeId, key: str, action: str = Action.RUN, reason: str = "",
                 detail: str = "", run_hash: str | None = None) -> None:
        self.node, self.key = node, key
        self.action = action          # run | cached | unknown | skipped | ran | failed
        self.reason, self.detail, self.run_hash = reason, detail, run_hash
        self._parts: dict[str, str] | tuple[Any, ...] | None = None
        self.value_hash: str | None = None
        self.error: str | None = None
        self.traceback: str | None = None
        self.elapsed: float | None = None
        self.attempts: int | None = None             # calls of the function, once it ran
        self.kwargs: dict[str, Any] | None = None   # built when the step is executed
        self.adopted = False          # an artifact on disk under this run hash with no record
        self.adoptable = False        # to run, unless such an artifact is found (the runner looks)
        self._path: str | None = None
        self._format: str | None = None
        self._sha256: str | None = None
        self._shape: str | None = None
        self._row: Row | None = None
        self._hist: NodeHistory | None = None   # where path/format/sha256/shape are read
        self._src: NodeHistory | None = None    # where the whole row is read, if asked for

    @classmethod
    def cached(cls, node: NodeId, key: str, run_hash: str, hist: NodeHistory) -> StepState:
        """A step whose run hash is known to have a successful row (read on demand)."""
        st = cls(node, key, Action.CACHED, Reason.MATERIALIZED, "-", run_hash)
        st._hist = hist
        return st

    def _resolve(self) -> None:
        hist, self._hist = self._hist, None
        got = hist.resolve(self.run_hash or "") if hist is not None else None
        if got is not None:
            self._path, self._format, self._sha256, self._shape = got
        self._src = hist

    @property
    def row(self) -> Row | None:
        hist = self._hist or self._src
        if self._row is None and hist is not None:
            self._hist = self._src = None
            row = hist.success(self.run_hash or "")
            if row is not None:
                self.row = row
        return self._row

    @row.setter
    def row(self, row: Row | None) -> None:
        self._hist = self._src = None
        self._row = row
        if row is not None:
            self._path, self._format, self._sha256 = row.path, row.format, row.sha256
            self._shape = row.shape

    @property
    def parts(self) -> dict[str, str] | None:
        """Each part's digest (stored with a result, compared to explain a miss); for a step
        to run, made from what decided it when its row is written (``parts_from``), not held
        per step from the decision on (at 200,000 keys, ~100 MB)."""
        p = self._parts
        if type(p) is tuple:
            return all_parts(*p)
        return p  # type: ignore[return-value]

    @parts.setter
    def parts(self, value: dict[str, str] | None) -> None:
        self._parts = value

    def parts_from(self, def_parts: dict[str, str], inputs: dict[str, str], key: str,
                   value: str | None) -> None:
        self._parts = (def_parts, inputs, key, value)

    path = _Lazy()
    format = _Shared()
    sha256 = _Hex()
    shape = _Shared()

    @property
    def id(self) -> str:
        return step_id(self.node, self.key)

    def __repr__(self) -> str:
        return (f"StepState({self.id!r}, action={str(self.action)!r}, "
                f"reason={str(self.reason)!r}, "
                f"run_hash={self.run_hash!r})")


class SourceOutput:
    """A key source's output, as its step returned it (or the runner read it back): its keys,
    in order, and for a dict source each key's value and that value's digest. The digests are
    one string, 64 hex digits per key in key order: one object to keep, not one per key."""
    __slots__ = ("keys", "digests", "raw", "_index", "checked")

    def __init__(self, keys: list[str], digests: str | None = None,
                 raw: list[Any] | str | None = None, joined: str | None = None) -> None:
        from barca.engine.keyindex import KeyIndex  # (a key source's output: not settled)
        self.keys, self.digests, self.raw = keys, digests, raw
        self._index = KeyIndex(keys, joined)  # joined: the keys as a worker sent them
        # (prefix, keys joined) that InputPlan.source_digests found to be these keys: the same
        # text is not scanned again (a node's decision and its values row ask alike)
        self.checked: tuple[str, str] | None = None

    @property
    def joined(self) -> str | None:
        """The keys joined by NUL, as a worker sent them (None: not sent so)."""
        return self._index.joined

    def digest(self, key: str) -> str | None:
        """A dict source's digest of this key's value (None: no such key, or a list source)."""
        d = self.digests
        i = self._index.get(key) if d is not None else None
        return None if i is None or d is None else d[64 * i:64 * i + 64]

    def value(self, key: str) -> Any:
        """A dict source's value for this key."""
        if isinstance(self.raw, str):  # as a worker sent them (see executors.job.pack_output)
            import json
            self.raw = json.loads(self.raw)
        raw = self.raw
        i = self._index.get(key) if raw is not None else None
        return None if i is None or raw is None else raw[i]

    def digest_column(self) -> Iterator[str]:
        """Every key's digest, in key order."""
        d = self.digests or ""
        return (d[i:i + 64] for i in range(0, len(d), 64))


class NodeState:
    """Every step of one node, in one of two forms.

    *Compact* (what ``decide`` makes): every key's run hash, in key order, plus the steps that
    are not simply cached (to run, unknown, skipped, cached from an older row, ...); a cached
    step's StepState is made only when something asks for it (``step``), and ``steps`` turns
    the node into the *full* form, a StepState per key (as the runner builds a node it cannot
    decide). A *settled* node (its snapshot matched) is compact with nothing but cached keys."""
    __slots__ = ("node", "keys", "unknown_detail", "output", "ident", "combined", "settled",
                 "since", "joined", "_steps", "_hashes", "_odd", "_made", "_hist", "_map")

    def __init__(self, node: NodeId, keys: list[str] | None, unknown_detail: str = "") -> None:
        self.node, self.keys, self.unknown_detail = node, keys, unknown_detail
        self.output: SourceOutput | None = None   # a key source's output (its keys, ...)
        self.ident: str | None = None      # the digest its snapshot is keyed by (see identity)
        self.combined: str | None = None   # digest of every key's run hash, once all are known
        self.settled = False
        # against its snapshot: the snapshot's combined digest, and the positions of the keys
        # whose run hash may not be the snapshot's (None: not compared key by key)
        self.since: tuple[str, list[int]] | None = None
        # the keys joined by NUL, with the list they were made from (see joined_keys)
        self.joined: tuple[list[str], str] | None = None
        self._steps: dict[str, StepState] | None = {}
        self._hashes: Sequence[str] | None = None    # compact: every key's run hash
        self._odd: dict[str, StepState] = {}         # compact: the steps not simply cached
        self._made: dict[str, StepState] = {}        # compact: cached StepStates made so far
        self._hist: NodeHistory | None = None
        self._map: KeyIndex | None = None          # compact: where each key is in keys

    @classmethod
    def compact(cls, node: NodeId, keys: list[str], hashes: Sequence[str],
                odd: dict[str, StepState], hist: NodeHistory) -> NodeState:
        ns = cls(node, keys)
        ns._steps, ns._hashes, ns._odd, ns._hist = None, hashes, odd, hist
        return ns

    @classmethod
    def from_snapshot(cls, node: NodeId, keys: list[str], ident: str, combined: str,
                      hashes: Sequence[str], hist: NodeHistory) -> NodeState:
        # compact, every slot set once (a settled walk makes one per node: not __init__'s
        # fields and then compact's again)
        ns = cls.__new__(cls)
        ns.node, ns.keys, ns.unknown_detail, ns.output = node, keys, "", None
        ns.ident, ns.combined, ns.settled, ns.since = ident, combined, True, (combined, [])
        ns._steps, ns._hashes, ns._odd, ns._made = None, hashes, {}, {}
        ns._hist = hist
        ns._map = ns.joined = None
        return ns

    def joined_keys(self) -> str:
        """The keys joined by NUL (as a snapshot holds them), made once for this keys list
        (``keys`` is replaced, never changed in place: see KeyIndex)."""
        got = self.joined
        if got is None or got[0] is not self.keys:
            got = self.joined = (self.keys or [], "\x00".join(self.keys or ()))
        return got[1]

    @property
    def lazy(self) -> bool:
        """Compact (see Tally): StepStates only for the odd steps, and those asked for."""
        return self._steps is None

    def step(self, key: str) -> StepState | None:
        """One key's step, without making the others."""
        if self._steps is not None:
            return self._steps.get(key)
        got = self._odd.get(key) or self._made.get(key)
        if got is None:
            i = self._index(key)
            if i is None:
                return None
            hashes, hist = self._hashes, self._hist
            assert hashes is not None and hist is not None  # compact: both set (see compact)
            got = self._made[key] = StepState.cached(self.node, key, hashes[i], hist)
        return got

    def _index(self, key: str) -> int | None:
        return self.index().get(key)

    def index(self) -> KeyIndex:
        """Where each key is in keys (one for the node: what one reader found, the next finds
        at once)."""
        got = self._map
        if got is None or got.keys is not self.keys:
            from barca.engine.keyindex import KeyIndex
            j = self.joined
            got = self._map = KeyIndex(self.keys or [], j[1] if j is not None
                                       and j[0] is self.keys else None)
        return got

    def only_cached(self) -> tuple[str, str] | None:
        """(key, run hash) of a compact node of one key whose step is simply cached -- a settled
        node, most of a cached walk -- read without making its StepState; else None."""
        keys, hashes = self.keys, self._hashes
        if self._steps is not None or self._odd or self._made or keys is None \
                or len(keys) != 1 or not hashes:
            return None
        return keys[0], hashes[0]

    def where(self, run_hash: str, ask: bool = True) -> tuple[str, str, str, str] | None:
        """(path, format, sha256, shape) of a successful row of this run hash (see
        NodeHistory.resolve), as a cached step reads them."""
        return self._hist.resolve(run_hash, ask) if self._hist is not None else None

    def odd_steps(self) -> list[StepState]:
        """Every step that is not simply cached, in key order (all steps of a full node)."""
        if self._steps is not None:
            return list(self._steps.values())
        return [self._odd[k] for k in (self.keys or ()) if k in self._odd] \
            if len(self._odd) > 1 else list(self._odd.values())

    @property
    def steps(self) -> dict[str, StepState]:
        if self._steps is None:
            hist, cached, odd, made = self._hist, StepState.cached, self._odd, self._made
            assert self.keys is not None and self._hashes is not None and hist is not None
            self._steps = {k: odd.get(k) or made.get(k) or cached(self.node, k, h, hist)
                           for k, h in zip(self.keys, self._hashes, strict=False)}
            self._odd, self._made = {}, {}
        return self._steps

    def run_hashes(self) -> Sequence[str] | None:
        """Every key's run hash in key order, or None while one is unknown or unavailable."""
        if self.keys is None:
            return None
        if self._steps is None:
            if not self._odd:
                return self._hashes
            odd = self._odd
            if 8 * len(odd) >= len(self.keys):
                # many odd steps (a first run: all of them): one pass in key order, not an
                # index of every key (at 200,000 keys, ~15 MB held to the walk's end)
                col: list[str] = []
                for k, h in zip(self.keys, self._hashes or (), strict=False):
                    s = odd.get(k)
                    if s is not None:
                        if s.run_hash is None or s.action not in AVAILABLE:
                            return None
                        h = s.run_hash
                    col.append(h)
                return col
            new: dict[int, str] = {}
            for k, s in odd.items():  # an odd step's run hash as it is now (a sensor ran)
                if s.run_hash is None or s.action not in AVAILABLE:
                    return None
                i = self._index(k)
                assert i is not None  # an odd step's key is one of keys
                new[i] = s.run_hash
            from barca.identity.pairs import spliced
            return spliced(self._hashes or [], new)
        steps, out = self._steps, []
        for k in self.keys:
            got = steps.get(k)
            if got is None or got.run_hash is None or got.action not in AVAILABLE:
                return None
            out.append(got.run_hash)
        return out

    def step_hashes(self) -> Iterator[tuple[str, str | None, str]]:
        """(key, run hash, action) of every step, in key order, without making a StepState
        for a compact node's cached keys (engine.current reads a node's current results so)."""
        if self._steps is not None:
            for k, s in self._steps.items():
                yield k, s.run_hash, s.action
            return
        odd = self._odd
        for k, h in zip(self.keys or (), self._hashes or (), strict=False):
            st = odd.get(k)
            yield (k, h, "cached") if st is None else (k, st.run_hash, st.action)

    def located(self, where: dict[str, tuple[str, str, str, str]]) -> Any:
        """A compact node's (key, path, format, ran) per key with a value, in key order; a
        cached key's path and format from ``where`` (run hash -> Store.success_locations)."""
        odd = self._odd
        for k, h in zip(self.keys or (), self._hashes or (), strict=False):
            s = odd.get(k)
            if s is not None and s.action != "cached":
                if s.path:
                    yield k, s.path, s.format, s.action == "ran"
                continue
            got = where.get(h)
            if got is not None:
                yield k, got[0], got[1], False

    def seal(self) -> str | None:
        """Once every step is decided (and run): the combined digest, if every key has a run
        hash -- what a fan-in reading all keys, or a downstream snapshot, depends on. The
        text it was made of (identity.pairs), when it made it of one (keys in order)."""
        if self.combined is None and self.keys is not None:
            hashes = self.run_hashes()
            if hashes is not None:
                # (identity.pairs and .hashing: loaded by a node decided, none when settled)
                from barca.identity.hashing import combined_digest
                from barca.identity.pairs import text_digest, text_of
                text = text_of(self.keys, hashes)
                if text is None:
                    self.combined = combined_digest(self.keys, hashes)
                else:
                    self.combined = text_digest(text)
                return text
        return None

    def tally(self) -> Tally:
        return Tally(self)


class Tally:
    """A node's steps grouped by action, in key order (a compact node's cached keys are
    counted, not made)."""
    __slots__ = ("ns", "total", "implicit", "_by")

    def __init__(self, ns: NodeState) -> None:
        self.ns = ns
        by: dict[str, list[StepState]] = {}
        if ns.lazy:
            odd = ns.odd_steps()
            self.total, self.implicit = len(ns.keys or ()), len(ns.keys or ()) - len(odd)
        else:
            odd = list(ns.steps.values())
            self.total, self.implicit = len(odd), 0
        for s in odd:
            by.setdefault(s.action, []).append(s)
        self._by = by

    def count(self, action: str) -> int:
        return len(self._by.get(action, ())) + (self.implicit if action == "cached" else 0)

    def first(self, *actions: str) -> StepState | None:
        """A step of the first of ``actions`` that has any (all cached steps read alike)."""
        for a in actions:
            got = self._by.get(a)
            if got:
                return got[0]
            if a == "cached" and self.implicit:
                ns = self.ns
                k = next(k for k in (ns.keys or ()) if k not in ns._odd)
                return ns.step(k)
        return None

    def explicit(self, action: str) -> list[StepState]:
        """The steps of ``action`` that exist as StepStates (a compact node's odd steps)."""
        return self._by.get(action, [])

    def steps(self, action: str) -> list[StepState]:
        if action == "cached" and self.implicit:
            return [s for s in self.ns.steps.values() if s.action == "cached"]
        return self._by.get(action, [])


def result_row(nid: NodeId, s: StepState, rec: Any, run_id: str) -> dict[str, Any]:
    """The materialization row of a step the executor ran (``rec``: its ``StepRecord``)."""
    import json
    import time
    parts = s.parts  # made from what decided the step: once
    return {
        "node": s.id, "asset": nid, "partition": s.key,
        "run_hash": s.run_hash or "", "path": s.path, "format": s.format,
        "size": rec.size, "sha256": s.sha256,
        "parts": json.dumps(parts, sort_keys=True) if parts else None,
        "status": "success" if rec.status == "success" else "failed",
        "error": rec.error, "traceback": rec.traceback, "elapsed": rec.elapsed,
        "run_id": run_id, "created_at": time.time(), "shape": rec.shape,
        "value_hash": rec.value_hash,
        "remote": None if rec.uploaded is None else int(rec.uploaded),
        "attempts": rec.attempts,
    }


def producer_of(states: dict[NodeId, NodeState], path: str) -> StepState | None:
    """The step behind an artifact of this walk: its file is named by its run hash."""
    # <run hash>.<ext>, or <run hash>-<digest>.<ext> beside another process's file
    run_hash = path.rsplit("/", 1)[-1].split(".", 1)[0].split("-", 1)[0]
    for ns in states.values():
        for s in ns.steps.values():
            if s.run_hash == run_hash and s.path == path:
                return s
    return None


def all_parts(def_parts: dict[str, str], inputs: dict[str, str], key: str,
              value_digest: str | None) -> dict[str, str]:
    """Each part's digest (stored with a result, compared to explain a miss)."""
    parts = dict(def_parts)
    parts.update({k: digest(v) for k, v in inputs.items()})
    if key:
        parts["key"] = digest(key)
    if value_digest is not None:
        parts["value"] = value_digest[:16]
    return parts


def values_name(nid: NodeId) -> NodeId:
    """Where a node's values row is kept among the snapshots (a node id never holds a NUL)."""
    return NodeId(f"{nid}\x00values")


def snap_names(graph: Any, order: list[NodeId], forced: Set[NodeId], values: bool
               ) -> list[NodeId]:
    """The snapshots a walk reads (here, not in engine.decision: a settled walk decides
    no node): each asset's that is not forced, and (``values``) the values row of each of those
    whose keys come from a dict source (decision.store_says reads it beside)."""
    out = [n for n in order if n not in forced and graph.nodes[n].kind == "asset"]
    if values:
        out += [values_name(n) for n in out if (src := graph.source_dim(n)) and src[1]]
    return out
