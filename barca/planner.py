"""The one decision function behind ``get``, ``status`` and ``--dry-run``: for every step of a
node (one per key), run / cached / unknown / skipped, with a reason and a detail."""
from __future__ import annotations

import ast
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barca.errors import UsageError
from barca.discovery import PSEUDO_ABSPATH
from barca.topology import Graph, combine, validate_keys
from barca.hashing import DefinitionHasher, definition_hash, digest, run_hash, sha
from barca.store import NodeHistory, Row, Store
from barca.types import NodeId, parse_key, short_name, step_id

PART_ORDER = ("code", "decorator", "helper:", "module:", "env:", "input:", "key", "value")


@dataclass
class StepState:
    """One key of one node as the planner and the executor see it."""
    node: NodeId
    key: str
    action: str = "run"           # run | cached | unknown | skipped | ran | failed
    reason: str = ""
    detail: str = ""
    run_hash: str | None = None
    parts: dict[str, str] | None = None
    path: str | None = None
    format: str | None = None
    sha256: str | None = None
    value_hash: str | None = None
    row: Row | None = None
    error: str | None = None
    traceback: str | None = None
    elapsed: float | None = None
    shape: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    adopted: bool = False         # an artifact on disk under this run hash with no record

    @property
    def id(self) -> str:
        return step_id(self.node, self.key)

    @property
    def available(self) -> bool:
        """A value exists (or will, for a prediction) under a known run hash."""
        return self.run_hash is not None and self.action in ("cached", "ran", "run")


@dataclass
class NodeState:
    node: NodeId
    keys: list[str] | None                  # None: not knowable yet
    steps: dict[str, StepState] = field(default_factory=dict)
    unknown_detail: str = ""
    # a key source's output: its keys, and for a dict source each key's value and digest
    out_keys: list[str] | None = None
    out_values: dict[str, str] | None = None
    out_raw: dict[str, Any] | None = None


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
        self.remote: Any = None   # the remote store, while executing (see barca.remote)
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
                    and self.remote.fetch(self.graph.root, rel) is not None):
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
        if isinstance(expr, ast.Name):  # a module-level constant written as a literal
            from barca.cone import build_index
            idx = build_index(fm.tree)
            stmts = [] if expr.id in idx.conservative else (idx.defs.get(expr.id) or [])
            stmt = stmts[0] if len(stmts) == 1 else None
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                try:
                    return ast.literal_eval(stmt.value)
                except (ValueError, TypeError, SyntaxError):
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


def decide(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
           forced: bool = False, predict: bool = False) -> NodeState:
    """Decide every step of one node, given the states of its upstream nodes."""
    graph = ctx.graph
    m = graph.nodes[nid]
    def_hash, def_parts = ctx.definition(nid)
    hist = ctx.history(nid)
    ns = NodeState(nid, keys)
    src = source_dim(graph, nid)
    src_state = states.get(src[0]) if src else None
    params = {p for p, _ in m.params}
    dim_params = [d.name for d in m.dims if d.name in params]
    check = _Upstream(graph)
    for key in keys:
        st = StepState(nid, key)
        ns.steps[key] = st
        inputs: dict[str, str] = {}
        check.reset()
        need = check.need
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
                ups = [need(up_ns.steps.get(k), up_id) for k in sorted(up_ns.keys)]
                if all(u is not None for u in ups):
                    inputs[f"input:{up_id}"] = sha(*(f"{u.key}={u.run_hash}" for u in ups))  # type: ignore[union-attr]
                    st.kwargs[inp.param] = ("none",) if inp.param.startswith("_") else (
                        "collect", [(u.path, u.format, u.sha256) for u in ups])  # type: ignore[union-attr]
                continue
            up = need(up_ns.steps.get(key if graph.nodes[up_id].partitioned else ""), up_id)
            if up is not None:
                inputs[f"input:{up_id}"] = up.run_hash  # type: ignore[assignment]
                st.kwargs[inp.param] = ("none",) if inp.param.startswith("_") else (
                    "artifact", up.path, up.format, up.sha256)
        value_digest = None
        if src is not None:
            src_id, dynamic = src
            src_fn = graph.nodes[src_id].function
            if dynamic:
                if src_state is None:
                    raise_missing(src_id, step_id(nid, key))
                elif src_state.out_values is not None:  # a dict source: this key's value
                    raw_key = _dim_value(key, m.dims[0].name)
                    value_digest = src_state.out_values.get(raw_key)
                    if src_fn in params:
                        st.kwargs[src_fn] = ("value", (src_state.out_raw or {}).get(raw_key))
            else:
                up = need(src_state.steps.get(key) if src_state else None, src_id)
                if up is not None:
                    inputs[f"input:{src_id}"] = up.run_hash  # type: ignore[assignment]
                    if src_fn in params:
                        st.kwargs[src_fn] = ("artifact", up.path, up.format, up.sha256)
        if dim_params:
            kv = parse_key(key)
            for d in dim_params:
                st.kwargs[d] = ("value", kv.get(d, ""))

        def all_parts() -> dict[str, str]:
            return _all_parts(def_parts, inputs, key, value_digest)

        blocked, unknown, keys_unknown = check.blocked, check.unknown, check.keys_unknown
        old = hist.latest_success.get(key)
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
            if old is None:
                st.action, st.reason, st.detail = "run", "no_record", "never run"
            else:
                st.action, st.reason, st.detail = "unknown", "sensor_output_unknown", unknown
            continue
        if m.kind == "sensor":
            st.parts = all_parts()
            st.action, st.reason, st.detail = "run", "sensor", "sensors always re-run"
            if predict:  # its last recorded value, if the sensor's code is unchanged
                for row in reversed(hist.all_success()):
                    rp = row.part_digests()
                    if all(rp.get(k) == v for k, v in def_parts.items()):
                        st.run_hash, st.path, st.format = row.run_hash, row.path, row.format
                        st.sha256, st.row = row.sha256, row
                        break
            continue
        st.run_hash = run_hash(def_hash, inputs, key, value_digest)
        if m.kind == "task":
            st.parts = all_parts()
            st.action, st.reason, st.detail = "run", "task", "tasks always run"
            continue
        if forced:
            st.parts = all_parts()
            st.action, st.reason, st.detail = "run", "refresh", "refresh"
            continue
        row = hist.success(st.run_hash)
        if row is None and m.freshness == "manual" and old is not None:
            row = old
        if row is None and old is None:
            row = ctx.adoptable(nid, key, st.run_hash)
            st.adopted = row is not None
            if st.adopted:
                st.parts = all_parts()
        if row is not None:  # an artifact that went missing is recomputed when it is read
            st.action, st.reason, st.detail = "cached", "materialized", "-"
            st.row, st.path, st.format, st.sha256 = row, row.path, row.format, row.sha256
            st.run_hash = row.run_hash
            st.shape = row.shape
            continue
        st.action = "run"
        st.parts = all_parts()
        last = hist.latest.get(key)
        if old is not None:
            st.reason, st.detail = "changed", explain(st.parts, old.part_digests())
        elif last is not None and last.status == "failed":
            st.reason, st.detail = "failed", f"last run failed: {last.error}"
        else:
            st.reason, st.detail = "no_record", "never run"
    return ns


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
    from barca.types import parse_key
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
