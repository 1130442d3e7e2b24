"""The one decision function behind ``get``, ``status`` and ``--dry-run``: for every step of a
node (one per key), run / cached / unknown / skipped, with a reason and a detail."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from barca.errors import UsageError
from barca.discovery import PSEUDO_ABSPATH
from barca.topology import Graph, combine, validate_keys
from barca.hashing import DefinitionHasher, definition_hash, digest, run_hash, sha
from barca.store import NodeHistory, Row, Store
from barca.types import NodeId, parse_key, short_name, step_id

PART_ORDER = ("code", "decorator", "helper:", "module:", "env:", "input:", "key", "value")


class _Lazy:
    """A field of a StepState that a cached step reads from the store on first use (its
    ``_resolve``); setting it makes the value explicit."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, st: Any, owner: type | None = None) -> Any:
        if st is None:
            return self
        if st._hist is not None:
            st._resolve()
        return getattr(st, self.slot)

    def __set__(self, st: Any, value: Any) -> None:
        st._hist = st._src = None
        setattr(st, self.slot, value)


class StepState:
    """One key of one node as the planner and the executor see it.

    A step found cached by its run hash alone (in the node's snapshot) reads its row -- path,
    format, SHA-256, shape -- from the store only when one of those is first asked for."""
    __slots__ = ("node", "key", "action", "reason", "detail", "run_hash", "parts", "value_hash",
                 "error", "traceback", "elapsed", "kwargs", "adopted", "_path", "_format",
                 "_sha256", "_shape", "_row", "_hist", "_src")

    def __init__(self, node: NodeId, key: str, action: str = "run", reason: str = "",
                 detail: str = "", run_hash: str | None = None) -> None:
        self.node, self.key = node, key
        self.action = action          # run | cached | unknown | skipped | ran | failed
        self.reason, self.detail, self.run_hash = reason, detail, run_hash
        self.parts: dict[str, str] | None = None
        self.value_hash: str | None = None
        self.error: str | None = None
        self.traceback: str | None = None
        self.elapsed: float | None = None
        self.kwargs: dict[str, Any] | None = None   # built when the step is executed
        self.adopted = False          # an artifact on disk under this run hash with no record
        self._path: str | None = None
        self._format: str | None = None
        self._sha256: str | None = None
        self._shape: str | None = None
        self._row: Row | None = None
        self._hist: NodeHistory | None = None   # where path/format/sha256/shape are read
        self._src: NodeHistory | None = None    # where the whole row is read, if asked for

    @classmethod
    def cached(cls, node: NodeId, key: str, run_hash: str, hist: NodeHistory) -> "StepState":
        """A step whose run hash is known to have a successful row (read on demand)."""
        st = cls(node, key, "cached", "materialized", "-", run_hash)
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

    path = _Lazy()
    format = _Lazy()
    sha256 = _Lazy()
    shape = _Lazy()

    @property
    def id(self) -> str:
        return step_id(self.node, self.key)

    @property
    def available(self) -> bool:
        """A value exists (or will, for a prediction) under a known run hash."""
        return self.run_hash is not None and self.action in ("cached", "ran", "run")

    def __repr__(self) -> str:
        return (f"StepState({self.id!r}, action={self.action!r}, reason={self.reason!r}, "
                f"run_hash={self.run_hash!r})")


class NodeState:
    """Every step of one node, in one of two forms.

    *Full*: a StepState per key. *Compact*: every key's run hash, in key order, plus the few
    steps that are not simply cached (to run, adopted, ...); a cached step's StepState is made
    only when something asks for it (``step``), and ``steps`` turns the node into the full form.
    A *settled* node (its snapshot matched) is compact with nothing but cached keys."""
    __slots__ = ("node", "keys", "unknown_detail", "out_keys", "out_values", "out_raw",
                 "ident", "combined", "settled", "_steps", "_hashes", "_odd", "_made", "_hist",
                 "_map")

    def __init__(self, node: NodeId, keys: list[str] | None, unknown_detail: str = "") -> None:
        self.node, self.keys, self.unknown_detail = node, keys, unknown_detail
        # a key source's output: its keys, and for a dict source each key's value and digest
        self.out_keys: list[str] | None = None
        self.out_values: dict[str, str] | None = None
        self.out_raw: dict[str, Any] | None = None
        self.ident: str | None = None      # the digest its snapshot is keyed by (see identity)
        self.combined: str | None = None   # digest of every key's run hash, once all are known
        self.settled = False
        self._steps: dict[str, StepState] | None = {}
        self._hashes: list[str] | None = None        # compact: every key's run hash
        self._odd: dict[str, StepState] = {}         # compact: the steps not simply cached
        self._made: dict[str, StepState] = {}        # compact: cached StepStates made so far
        self._hist: NodeHistory | None = None
        self._map: dict[str, int] | None = None    # compact: key -> index in keys

    @classmethod
    def compact(cls, node: NodeId, keys: list[str], hashes: list[str],
                odd: dict[str, StepState], hist: NodeHistory) -> "NodeState":
        ns = cls(node, keys)
        ns._steps, ns._hashes, ns._odd, ns._hist = None, hashes, odd, hist
        return ns

    @classmethod
    def from_snapshot(cls, node: NodeId, keys: list[str], ident: str, combined: str,
                      hashes: list[str], hist: NodeHistory) -> "NodeState":
        ns = cls.compact(node, keys, hashes, {}, hist)
        ns.ident, ns.combined, ns.settled = ident, combined, True
        return ns

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
            got = self._made[key] = StepState.cached(
                self.node, key, self._hashes[i], self._hist)  # type: ignore[index, arg-type]
        return got

    def _index(self, key: str) -> int | None:
        if self._map is None:
            self._map = {k: i for i, k in enumerate(self.keys or ())}
        return self._map.get(key)

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
                           for k, h in zip(self.keys, self._hashes)}
            self._odd, self._made = {}, {}
        return self._steps

    def run_hashes(self) -> list[str] | None:
        """Every key's run hash in key order, or None while one is unknown or unavailable."""
        if self.keys is None:
            return None
        if self._steps is None:
            if any(s.run_hash is None or s.action not in ("cached", "ran", "run")
                   for s in self._odd.values()):
                return None
            return self._hashes
        steps, out = self._steps, []
        for k in self.keys:
            s = steps.get(k)
            if s is None or s.run_hash is None or s.action not in ("cached", "ran", "run"):
                return None
            out.append(s.run_hash)
        return out

    def located(self, where: dict[str, tuple[str, str, str, str]]) -> Any:
        """A compact node's (key, path, format, ran) per key with a value, in key order; a
        cached key's path and format from ``where`` (run hash -> Store.success_locations)."""
        odd = self._odd
        for k, h in zip(self.keys or (), self._hashes or ()):
            s = odd.get(k)
            if s is not None and s.action != "cached":
                if s.path:
                    yield k, s.path, s.format, s.action == "ran"
                continue
            got = where.get(h)
            if got is not None:
                yield k, got[0], got[1], False

    def hash_map(self) -> dict[str, str] | None:
        """key -> run hash, when every key has one (for a downstream node's per-key inputs)."""
        hashes = self.run_hashes()
        if hashes is None or self.keys is None:
            return None
        return dict(zip(self.keys, hashes))

    def seal(self) -> None:
        """Once every step is decided (and run): the combined digest, if every key has a run
        hash -- what a fan-in reading all keys, or a downstream snapshot, depends on."""
        if self.combined is None and self.keys is not None:
            hashes = self.run_hashes()
            if hashes is not None:
                self.combined = combined_digest(self.keys, hashes)

    def tally(self) -> "Tally":
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


def combined_digest(keys: list[str], hashes: list[str]) -> str:
    """``sha("k1=h1", "k2=h2", ...)`` over keys in sorted order: the input digest of a fan-in
    that reads every key (the same bytes as ``sha(*parts)``, hashed in one call)."""
    text = "".join([f"{k}={h}\x00" for k, h in sorted(zip(keys, hashes))])
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Context:
    """Everything the planner reads, memoised for one command."""

    def __init__(self, graph: Graph, store: Store) -> None:
        self.graph = graph
        self.store = store
        self.hasher = DefinitionHasher(graph.root, graph.files)
        self._defs: dict[NodeId, tuple[str, dict[str, str]]] = {}
        self._hist: dict[NodeId, NodeHistory] = {}
        self._keys: dict[NodeId, list[str] | None] = {}
        self._modules: dict[str, Any] = {}
        self._input_names: dict[NodeId, str] | None = None
        self.remote: Any = None   # the remote store, if one is configured (barca.remote)
        self.fetch = False        # take what it holds (get/run), or only list it (predictions)
        self._artifact_dirs: set[str] | None = None
        from barca.defcache import DefinitionCache
        self.defcache = DefinitionCache(store.conn, graph.root)
        self.key_sources: set[NodeId] = {
            d.source for n in graph.nodes.values() for d in n.dims
            if d.kind == "from" and d.source is not None and not graph.nodes[d.source].partitioned}

    def definition(self, nid: NodeId) -> tuple[str, dict[str, str]]:
        if nid not in self._defs:
            m = self.graph.nodes[nid]
            shape = {
                "kind": m.kind,
                "inputs": sorted([i.param, i.target, i.collect] for i in m.inputs),
                "dims": sorted([d.name, d.kind, d.source] for d in m.dims),
                "serializer": m.serializer,
            }
            fm = self.graph.files[m.file]
            if fm.abspath == PSEUDO_ABSPATH:
                from barca.notebook import parts as notebook_parts
                parts = notebook_parts(self.graph.root, m, shape)
            else:
                parts = self.defcache.get(m, fm) if not m.env else None
                if parts is None:
                    parts = self.hasher.parts(m, shape)
                    if not m.env:  # env values are read live, never memoised
                        self.defcache.put(m, fm, parts)
            self._defs[nid] = (definition_hash(parts), parts)
        return self._defs[nid]

    def input_name(self, up: NodeId) -> str:
        """An input's name in a run hash: its node id; for a notebook's node, the id without
        the notebook's name (renaming the notebook keeps every run hash, see notebook.py)."""
        if self._input_names is None:
            from barca.notebook import STEMLESS
            self._input_names = {
                n: f"input:{STEMLESS}:{m.function}" for n, m in self.graph.nodes.items()
                if self.graph.files[m.file].abspath == PSEUDO_ABSPATH}
        return self._input_names.get(up) or f"input:{up}"

    def history(self, nid: NodeId) -> NodeHistory:
        if nid not in self._hist:
            self._hist[nid] = self.store.history(nid)
        return self._hist[nid]

    def forget(self, nid: NodeId) -> None:
        self._hist.pop(nid, None)

    def adoptable(self, nid: NodeId, key: str, run_hash: str) -> Row | None:
        """A finished artifact with no metadata row (a killed run, a deleted metadata.db): its
        name is its run hash and it was written atomically, so it can be adopted."""
        from barca.artifacts import EXT, node_dir
        d = node_dir(nid, key)
        if self._artifact_dirs is None:  # one listing per command, not a stat per key
            try:
                self._artifact_dirs = set(os.listdir(self.store.dir / "artifacts"))
            except OSError:
                self._artifact_dirs = set()
        local = d in self._artifact_dirs
        if not local and self.remote is None:
            return None
        for fmt, ext in EXT.items():
            rel = f"{self.store.prefix}/artifacts/{d}/{run_hash}.{ext}"
            if (local and (self.graph.root / rel).is_file()) or (
                    self.remote is not None
                    and rel in self.remote.listing(d, self.store.prefix)
                    and (not self.fetch or self.remote.fetch(self.graph.root, rel) is not None)):
                return Row(0, nid, nid, key, run_hash, rel, fmt, None, None, None, "success",
                           None, None, None, 0.0, None, None)
        return None

    # ------------------------------------------------------------ keys known before running
    def static_keys(self, nid: NodeId) -> list[str] | None:
        """Keys from the source text (or by evaluating a key expression); None when they come
        from an upstream's output."""
        if nid in self._keys:
            return self._keys[nid]
        m = self.graph.nodes[nid]
        keys: list[str] | None
        if not m.dims:
            keys = [""]
        elif m.dims[0].kind == "from":
            src = m.dims[0].source
            assert src is not None
            keys = self.static_keys(src) if self.graph.nodes[src].partitioned else None
        else:
            dims = {d.name: validate_keys(m, d.name, self._dim_keys(nid, d.name), d.line)
                    for d in m.dims}
            keys = combine(dims)
        self._keys[nid] = keys
        return keys

    def _dim_keys(self, nid: NodeId, dim: str) -> Any:
        m = self.graph.nodes[nid]
        spec = next(d for d in m.dims if d.name == dim)
        if spec.keys is not None:
            return spec.keys
        fm = self.graph.files[m.file]
        if fm.abspath == PSEUDO_ABSPATH:  # a notebook function: its keys are already values
            from barca.notebook import function_for
            fn = function_for(m.function)
            return fn.__barca__["partitions"][dim].keys  # type: ignore[union-attr]
        expr = ast.parse(spec.expr or "", mode="eval").body
        from barca.keyexpr import NotPure, pure_value
        try:  # literals, constants and pure builtins: no import of the pipeline
            return pure_value(fm.tree, expr, spec.line)
        except NotPure:
            pass
        mod = self.import_module(m.file)
        fn = getattr(mod, m.function)
        return fn.__barca__["partitions"][dim].keys

    def import_module(self, rel: str) -> Any:
        """Import a pipeline file in the coordinator: only to evaluate a key expression."""
        if rel in self._modules:
            return self._modules[rel]
        fm = self.graph.files[rel]
        for p in (str(self.graph.root), str(Path(fm.abspath).parent)):
            if p not in sys.path:
                sys.path.insert(0, p)
        import importlib.util
        spec = importlib.util.spec_from_file_location(fm.module, fm.abspath)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[fm.module] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as exc:
            sys.modules.pop(fm.module, None)
            raise UsageError(f"{rel}: importing it to evaluate partition keys raised "
                             f"{type(exc).__name__}: {exc}",
                             "Fix the error in the module (nothing was run).") from None
        self._modules[rel] = mod
        return mod


# ---------------------------------------------------------------------------- the decision

def explain(parts: dict[str, str], old: dict[str, str]) -> str:
    """``changed: input pipeline.py:signal`` -- the first part that differs, ``(+N more)``."""
    names = [n for n in set(parts) | set(old) if parts.get(n) != old.get(n)]

    def order(n: str) -> tuple[int, str]:
        for i, p in enumerate(PART_ORDER):
            if n == p or (p.endswith(":") and n.startswith(p)):
                return i, n
        return len(PART_ORDER), n

    names.sort(key=order)
    if not names:
        return "changed"
    first = names[0]
    kind, _, rest = first.partition(":")
    text = f"changed: {kind} {rest}" if rest else f"changed: {kind}"
    return text + (f" (+{len(names) - 1} more)" if len(names) > 1 else "")


def source_dim(graph: Graph, nid: NodeId) -> tuple[NodeId, bool] | None:
    """The partitions_from source of a node, and whether its keys come from its output."""
    for d in graph.nodes[nid].dims:
        if d.kind == "from" and d.source is not None:
            return d.source, not graph.nodes[d.source].partitioned
    return None


def identity(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState]
             ) -> str | None:
    """The digest every run hash of an asset node is a function of: its definition, its keys,
    and the combined run hashes of what it reads (a dict source: the SHA-256 of its output).
    None while something it reads is not wholly available, or a key holds a NUL."""
    graph = ctx.graph
    m = graph.nodes[nid]
    joined = "\x00".join(keys)
    if joined.count("\x00") != len(keys) - 1:
        return None
    parts = ["snapshot-1", ctx.definition(nid)[0], m.freshness or "", str(len(keys)), joined]
    for inp in sorted(m.inputs, key=lambda i: i.param):
        up = states.get(inp.target)  # type: ignore[arg-type]
        if up is None or up.combined is None:
            return None
        parts.append(f"input:{inp.param}:{'all' if inp.collect else 'key'}:{up.combined}")
    src = source_dim(graph, nid)
    if src is not None:
        up = states.get(src[0])
        if up is None or up.combined is None:
            return None
        if src[1]:  # keys (and values) from an output: what that output holds
            step = up.step("")
            if step is None or not step.sha256:
                return None
            parts.append(f"source:{step.sha256}")
        else:
            parts.append(f"source:{up.combined}")
    return sha(*parts)


def _hashes(text: str) -> list[str]:
    return [text[i:i + 64] for i in range(0, len(text), 64)]


def decide(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
           forced: bool = False, predict: bool = False) -> NodeState:
    """Decide every step of one node, given the states of its upstream nodes.

    An asset whose snapshot digest (see identity) is unchanged is settled at once: every key
    cached under the run hash the snapshot records, with no per-key work. Otherwise each key's
    run hash is computed; one equal to the snapshot's for that key is cached without reading
    its row, and only the rest are looked up in the store."""
    graph = ctx.graph
    m = graph.nodes[nid]
    def_hash, def_parts = ctx.definition(nid)
    hist = ctx.history(nid)
    ident = identity(ctx, nid, keys, states) if m.kind == "asset" else None
    snap = ctx.store.snapshot(nid) if m.kind == "asset" and not forced else None
    prev: dict[str, str] = {}
    if snap is not None:
        hashes = _hashes(snap[3])
        if ident is not None and snap[0] == ident and len(hashes) == len(keys):
            return NodeState.from_snapshot(nid, keys, ident, snap[1], hashes, hist)
        prev = dict(zip(snap[2].split("\x00"), hashes))
    plan = _input_plan(ctx, nid, states) if m.kind == "asset" and not forced else None
    if plan is not None:
        ns = _decide_compact(ctx, nid, keys, plan, prev, hist)
        ns.ident = ident
        return ns
    ns = NodeState(nid, keys)
    ns.ident = ident
    steps = ns.steps
    src = source_dim(graph, nid)
    src_state = states.get(src[0]) if src else None
    dim0 = m.dims[0].name if m.dims else ""
    check = _Upstream(graph)
    need = check.need
    for key in keys:
        st = StepState(nid, key)
        steps[key] = st
        inputs: dict[str, str] = {}
        check.reset()
        for inp in m.inputs:
            up_id = inp.target
            assert up_id is not None
            up_ns = states.get(up_id)
            if up_ns is None:
                raise_missing(up_id, step_id(nid, key))
                continue
            if up_ns.keys is None:
                check.keys_unknown = check.keys_unknown or up_ns.unknown_detail
                continue
            if inp.collect:
                if up_ns.combined is not None:  # every key available: their combined digest
                    inputs[ctx.input_name(up_id)] = up_ns.combined
                    continue
                ups = [need(up_ns.step(k), up_id) for k in sorted(up_ns.keys)]
                if all(u is not None for u in ups):
                    inputs[ctx.input_name(up_id)] = sha(*(f"{u.key}={u.run_hash}" for u in ups))  # type: ignore[union-attr]
                continue
            up = need(up_ns.step(key if graph.nodes[up_id].partitioned else ""), up_id)
            if up is not None:
                inputs[ctx.input_name(up_id)] = up.run_hash  # type: ignore[assignment]
        value_digest = None
        if src is not None:
            src_id, dynamic = src
            if dynamic:
                if src_state is None:
                    raise_missing(src_id, step_id(nid, key))
                elif src_state.out_values is not None:  # a dict source: this key's value
                    value_digest = src_state.out_values.get(_dim_value(key, dim0))
            else:
                up = need(src_state.step(key) if src_state else None, src_id)
                if up is not None:
                    inputs[ctx.input_name(src_id)] = up.run_hash  # type: ignore[assignment]

        blocked, unknown, keys_unknown = check.blocked, check.unknown, check.keys_unknown
        if blocked is not None:
            st.action, st.reason = "skipped", "upstream_failed"
            st.detail = f"upstream {blocked.id} failed" if blocked.action == "failed" \
                else f"upstream {blocked.id} skipped"
            continue
        if keys_unknown is not None:
            st.action, st.reason, st.detail = "unknown", "partitions_unknown", keys_unknown
            continue
        if unknown is not None:
            if not predict:
                raise_missing(unknown, step_id(nid, key))
            if hist.newest_success(key) is None:
                st.action, st.reason, st.detail = "run", "no_record", "never run"
            else:
                st.action, st.reason, st.detail = "unknown", "sensor_output_unknown", unknown
            continue
        if m.kind == "sensor":
            st.parts = _all_parts(def_parts, inputs, key, value_digest)
            st.action, st.reason, st.detail = "run", "sensor", "sensors always re-run"
            if predict:  # its last recorded value, if the sensor's code is unchanged
                for row in reversed(hist.all_success()):
                    rp = row.part_digests()
                    if all(rp.get(k) == v for k, v in def_parts.items()):
                        st.run_hash, st.row = row.run_hash, row
                        break
            continue
        rh = st.run_hash = run_hash(def_hash, inputs, key, value_digest)
        if m.kind == "task":
            st.parts = _all_parts(def_parts, inputs, key, value_digest)
            st.action, st.reason, st.detail = "run", "task", "tasks always run"
            continue
        if forced:
            st.parts = _all_parts(def_parts, inputs, key, value_digest)
            st.action, st.reason, st.detail = "run", "refresh", "refresh"
            continue
        if prev.get(key) == rh:  # cached at the last walk under this very run hash
            st.action, st.reason, st.detail = "cached", "materialized", "-"
            st._hist = hist
            continue
        _settle(ctx, m, st, rh, hist, _parts_of(def_parts, inputs, key, value_digest))
    return ns


def _settle(ctx: Context, m: Any, st: StepState, rh: str, hist: NodeHistory,
            parts: Any) -> None:
    """An asset step whose run hash is not the snapshot's: cached if a successful row has it
    (or, for a manual asset, any row; or an artifact on disk under it), else to run -- with
    the part that changed."""
    key = st.key
    row = hist.success(rh)
    old = hist.newest_success(key) if row is None else None
    if row is None and m.freshness == "manual" and old is not None:
        row = old
    if row is None and old is None:
        row = ctx.adoptable(st.node, key, rh)
        st.adopted = row is not None
        if st.adopted:
            st.parts = parts()
    if row is not None:  # an artifact that went missing is recomputed when it is read
        st.action, st.reason, st.detail = "cached", "materialized", "-"
        st.row = row
        st.run_hash = row.run_hash
        return
    st.action = "run"
    st.parts = parts()
    if old is not None:
        st.reason, st.detail = "changed", explain(st.parts, old.part_digests())
        return
    last = hist.newest(key)
    if last is not None and last.status == "failed":
        st.reason, st.detail = "failed", f"last run failed: {last.error}"
    else:
        st.reason, st.detail = "no_record", "never run"


def _input_plan(ctx: Context, nid: NodeId, states: dict[NodeId, NodeState]) -> Any:
    """Where each input's run hash comes from when everything the node reads is wholly
    available: (inputs the same for every key, key -> run hash maps, a dict source's value
    digests, the dimension they are keyed by); None otherwise (the per-step path decides)."""
    graph = ctx.graph
    m = graph.nodes[nid]
    const: dict[str, str] = {}
    per_key: dict[str, dict[str, str]] = {}
    for inp in m.inputs:
        up = states.get(inp.target)  # type: ignore[arg-type]
        if up is None or up.combined is None or up.keys is None:
            return None
        name = ctx.input_name(inp.target)  # type: ignore[arg-type]
        if inp.collect:
            const[name] = up.combined
            continue
        hashes = up.hash_map()
        if hashes is None:
            return None
        if graph.nodes[inp.target].partitioned:  # type: ignore[index]
            per_key[name] = hashes
        elif "" in hashes:
            const[name] = hashes[""]
        else:
            return None
    values = None
    src = source_dim(graph, nid)
    if src is not None:
        up = states.get(src[0])
        if up is None or up.combined is None:
            return None
        if src[1]:
            values = up.out_values
        else:
            hashes = up.hash_map()
            if hashes is None:
                return None
            per_key[ctx.input_name(src[0])] = hashes
    return const, per_key, values, (m.dims[0].name if m.dims else "")


def _decide_compact(ctx: Context, nid: NodeId, keys: list[str], plan: Any,
                    prev: dict[str, str], hist: NodeHistory) -> NodeState:
    """Every key's run hash in one tight loop (the same bytes as ``run_hash``); only keys whose
    hash is not the snapshot's get a StepState."""
    m = ctx.graph.nodes[nid]
    def_hash, def_parts = ctx.definition(nid)
    const, per_key, values, dim0 = plan
    pieces = [(n, const.get(n), per_key.get(n)) for n in sorted(set(const) | set(per_key))]
    head = def_hash + "\x00"
    sha256 = hashlib.sha256
    prev_get = prev.get
    hashes: list[str] = []
    odd: dict[str, StepState] = {}
    for key in keys:
        try:
            joined = "\x1f".join([f"{n}\x1e{c if mp is None else mp[key]}"
                                  for n, c, mp in pieces])
        except KeyError:
            missing = next(n for n, _, mp in pieces if mp is not None and key not in mp)
            raise_missing(missing.partition(":")[2], step_id(nid, key))
        value = values.get(_dim_value(key, dim0)) if values is not None else None
        rh = sha256(f"{head}{joined}\x00{key}\x00{value or ''}".encode(
            "utf-8", "surrogatepass")).hexdigest()
        if prev_get(key) == rh:
            hashes.append(rh)
            continue
        st = StepState(nid, key, run_hash=rh)
        inputs = {n: (c if mp is None else mp[key]) for n, c, mp in pieces}
        _settle(ctx, m, st, rh, hist, _parts_of(def_parts, inputs, key, value))
        hashes.append(st.run_hash)  # type: ignore[arg-type]
        odd[key] = st
    return NodeState.compact(nid, keys, hashes, odd, hist)


def step_kwargs(ctx: Context, nid: NodeId, key: str, states: dict[NodeId, NodeState]
                ) -> dict[str, Any]:
    """What the worker passes to each parameter of one step (see barca.executors.task):
    built only for steps that are executed."""
    graph = ctx.graph
    m = graph.nodes[nid]
    params = {p for p, _ in m.params}
    kwargs: dict[str, Any] = {}
    for inp in m.inputs:
        up_ns = states[inp.target]  # type: ignore[index]
        if inp.param.startswith("_"):
            kwargs[inp.param] = ("none",)
        elif inp.collect:
            ups = [up_ns.step(k) for k in sorted(up_ns.keys or ())]
            kwargs[inp.param] = ("collect", [(u.path, u.format, u.sha256) for u in ups])
        else:
            u = up_ns.step(key if graph.nodes[inp.target].partitioned else "")  # type: ignore[index]
            kwargs[inp.param] = ("artifact", u.path, u.format, u.sha256)
    src = source_dim(graph, nid)
    if src is not None:
        src_id, dynamic = src
        src_fn = graph.nodes[src_id].function
        if src_fn in params:
            src_state = states[src_id]
            if dynamic:
                if src_state.out_values is not None:  # a dict source: this key's value
                    raw = _dim_value(key, m.dims[0].name)
                    kwargs[src_fn] = ("value", (src_state.out_raw or {}).get(raw))
            else:
                u = src_state.step(key)
                kwargs[src_fn] = ("artifact", u.path, u.format, u.sha256)  # type: ignore[union-attr]
    dim_params = [d.name for d in m.dims if d.name in params]
    if dim_params:
        kv = parse_key(key)
        for d in dim_params:
            kwargs[d] = ("value", kv.get(d, ""))
    return kwargs


class _Upstream:
    """What one step's upstream steps allow: their run hashes, or why there are none (reset for
    each step; a plain object rather than a closure made per key)."""
    __slots__ = ("graph", "blocked", "unknown", "keys_unknown")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.reset()

    def reset(self) -> None:
        self.blocked: StepState | None = None
        self.unknown: str | None = None
        self.keys_unknown: str | None = None

    def need(self, up: StepState | None, up_id: NodeId) -> StepState | None:
        if up is None:
            raise_missing(up_id, "a downstream step")
        if up.action in ("failed", "skipped"):
            self.blocked = self.blocked or up
            return None
        if up.action == "unknown" and up.reason == "partitions_unknown":
            self.keys_unknown = self.keys_unknown or up.detail
            return None
        if up.run_hash is None:
            if up.node in self.graph.nodes and self.graph.nodes[up.node].kind == "sensor":
                self.unknown = self.unknown or f"sensor '{short_name(up_id)}' has no recorded value"
            else:
                self.unknown = self.unknown or up.detail or f"'{short_name(up_id)}' is not known yet"
            return None
        return up


def _parts_of(def_parts: dict[str, str], inputs: dict[str, str], key: str,
              value_digest: str | None) -> Any:
    """``_all_parts`` for one step, made only if the step needs them (it runs, or is adopted)."""
    return lambda: _all_parts(def_parts, inputs, key, value_digest)


def _all_parts(def_parts: dict[str, str], inputs: dict[str, str], key: str,
               value_digest: str | None) -> dict[str, str]:
    """Each part's digest (stored with a result, compared to explain a miss)."""
    parts = dict(def_parts)
    parts.update({k: digest(v) for k, v in inputs.items()})
    if key:
        parts["key"] = digest(key)
    if value_digest is not None:
        parts["value"] = value_digest[:16]
    return parts


def _dim_value(key: str, dim: str) -> str:
    """The value of one dimension in a key (``day=d1`` -> ``d1``), without parsing a key of
    one unescaped dimension."""
    if key.startswith(dim) and key[len(dim):len(dim) + 1] == "=" and "\\" not in key \
            and "," not in key:
        return key[len(dim) + 1:]
    return parse_key(key).get(dim, "")


def raise_missing(up_id: str, consumer: str) -> None:
    """Every upstream key must have a run hash before a consumer's cache is checked."""
    from barca.errors import InfrastructureError
    raise InfrastructureError(
        f"missing run hash for {up_id}, an input of {consumer}: refusing to check the cache on a "
        "partial input set", "This is a bug in barca's planner or executor; please report it.")


def keys_from_row(ctx: Context, row: Row | None) -> tuple[list[str], dict[str, str] | None,
                                                         dict[str, Any] | None] | None:
    """A key source's keys, read back from its stored artifact."""
    if row is None or not row.path:
        return None
    from barca.artifacts import deserialize
    from barca.executors.worker import source_keys
    try:
        value = deserialize((ctx.graph.root / row.path).read_bytes(), row.format or "json")
        return source_keys(value)
    except (OSError, ValueError, json.JSONDecodeError):
        return None
