"""What the planner knows of a project for one command: each node's definition (its parts and
hash), its keys when they are known before running, and a read-only view of the store. The
decision itself is ``engine.decision.decide``; the states it makes, ``engine.states``."""
from __future__ import annotations

import os
import sys

from barca.core.errors import UsageError
from barca.core.types import NodeId, cast
from barca.engine.states import NodeState, SourceOutput, StepState
from barca.model.discovery import PSEUDO_ABSPATH
from barca.model.topology import Graph, combine, validate_keys
from barca.store.metadata import Row, Store
from barca.store.view import StoreView

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

    from barca.core.settings import Settings
    from barca.identity.hashing import DefinitionHasher

__all__ = ["Context", "NodeState", "StepState", "keys_from_row"]


class Context:
    """Everything the planner reads, memoised for one command.

    ``memo=False`` switches off the memo layers a decision could lean on -- node snapshots and
    the definition cache (every definition hashed from its source) -- so that a test can show
    that every decision and run hash is the same without them."""

    def __init__(self, graph: Graph, store: Store, settings: Settings, memo: bool = True
                 ) -> None:
        self.graph = graph
        self.settings = settings  # the command's, passed on to the runner and the views
        self.memo = memo
        self.view = StoreView(store, snapshots=memo)
        self._hasher: DefinitionHasher | None = None  # (made by the first definition hashed)
        self._defs: dict[NodeId, tuple[str, dict[str, str]]] = {}
        self._keys: dict[NodeId, list[str] | None] = {}
        self._modules: dict[str, Any] = {}
        self._input_names: dict[NodeId, str] | None = None
        self.orders: dict[tuple[NodeId, ...], list[NodeId]] = {}  # walk orders (selection)
        from barca.engine.defcache import DefinitionCache
        self.defcache = DefinitionCache(store, graph.root_dir)
        self.key_sources: set[NodeId] = {
            d.source for n in graph.nodes.values() for d in n.dims
            if d.kind == "from" and d.source is not None and not graph.nodes[d.source].partitioned}

    @property
    def hasher(self) -> DefinitionHasher:
        """The definition hasher (barca.identity.hashing: not loaded by a settled command,
        which hashes no definition)."""
        if self._hasher is None:
            from barca.identity.hashing import DefinitionHasher
            self._hasher = DefinitionHasher(self.graph.root_dir, self.graph.files)
        return self._hasher

    @property
    def imported(self) -> bool:
        """Whether a key expression needed importing a pipeline module (its keys may then
        depend on anything that module reads)."""
        return bool(self._modules)

    @property
    def store(self) -> Store:
        return self.view.store

    def reopen_for_writing(self) -> Store:
        """The command's store, opened again for writing before a run: it was read-only until
        now, so that a usage error leaves no ``.barca/`` behind. The writer opens before the
        reader closes (the last connection to close checkpoints the WAL: once is enough); the
        view and the definitions table read through the new one. The connection already open
        is the writer when there is one (Store.for_writing: the schema parsed once)."""
        old = self.view.store
        store = old.for_writing()
        if store is not old:
            old.close(last=False)  # (not the last connection: it never checkpoints)
            # a new project's store: what discovery could not keep before it, kept now
            from barca.model.modelcache import keep_pending
            keep_pending(store.root_dir)
        self.view.store = store
        self.defcache.store = store
        return store

    def input_name(self, up: NodeId) -> str:
        """An input's name in a run hash: its node id; for a notebook's node, the id without
        the notebook's name (renaming the notebook keeps every run hash, see notebook.py)."""
        if self._input_names is None:
            from barca.identity.notebook import STEMLESS
            self._input_names = {
                n: f"input:{STEMLESS}:{m.function}" for n, m in self.graph.nodes.items()
                if self.graph.files[m.file].abspath == PSEUDO_ABSPATH}
        return self._input_names.get(up) or f"input:{up}"

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
            parts: dict[str, str] | None
            if fm.abspath == PSEUDO_ABSPATH:
                from barca.identity.notebook import parts as notebook_parts
                from barca.model.notebook import function_for, namespace
                parts = notebook_parts(self.graph.root, m, shape, function_for(m.function),
                                       namespace())
            else:
                parts = self.defcache.get(m, fm) if self.memo and not m.env else None
                if parts is None:
                    parts = self.hasher.parts(m, shape)
                    if self.memo and not m.env:  # env values are read live, never memoised
                        self.defcache.put(m, fm, parts, self.hasher.project.parsed())
            from barca.identity.hashing import definition_hash
            self._defs[nid] = (definition_hash(parts), parts)
        return self._defs[nid]

    def untracked(self, nids: list[NodeId], only_known: bool = False
                  ) -> dict[str, list[NodeId]]:
        """The imports the cones of these nodes reach that resolve to neither the project nor
        an installed package (``untracked_import``), each with the nodes that reach it.
        ``only_known``: of the definitions this command has computed, no more."""
        out: dict[str, list[NodeId]] = {}
        for nid in nids:
            if only_known and nid not in self._defs:
                continue
            for name in self.definition(nid)[1]:
                if name.startswith("untracked:"):
                    out.setdefault(name[len("untracked:"):], []).append(nid)
        return out

    def history(self, nid: NodeId) -> Any:
        """The node's rows as this command read them (see StoreView)."""
        return self.view.history(nid)

    # ------------------------------------------------------------ keys known before running
    def settled_keys(self, nid: NodeId, keys: list[str]) -> None:
        """The node's keys as its snapshot holds them, when a settle record vouches that the
        source they are evaluated from is the text they were evaluated from (engine.settle)."""
        self._keys.setdefault(nid, keys)

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
            keys = cast(list[str], combine(dims))
        self._keys[nid] = keys
        return keys

    def _dim_keys(self, nid: NodeId, dim: str) -> Any:
        import ast
        m = self.graph.nodes[nid]
        spec = next(d for d in m.dims if d.name == dim)
        if spec.keys is not None:
            return spec.keys
        fm = self.graph.files[m.file]
        if fm.abspath == PSEUDO_ABSPATH:  # a notebook function: its keys are already values
            from barca.model.notebook import function_for
            meta: dict[str, Any] = getattr(function_for(m.function), "__barca__", {})
            return meta["partitions"][dim].keys
        expr = ast.parse(spec.expr or "", mode="eval").body
        from barca.model.keyexpr import NotPure, pure_value
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
        for p in (self.graph.root_dir, os.path.dirname(fm.abspath)):
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



def keys_from_row(ctx: Context, row: Row | None) -> SourceOutput | None:
    """A key source's output, read back from its stored artifact."""
    if row is None or not row.path:
        return None
    from barca.engine.executors.worker import source_keys
    from barca.store.artifacts import deserialize
    try:
        with open(os.path.join(ctx.graph.root_dir, row.path), "rb") as f:
            value = deserialize(f.read(), row.format or "json")
        keys, digests, raw = source_keys(value)  # (no memo, raw not asked: hex, never bytes)
        return SourceOutput(keys, cast("str | None", digests), raw)
    except (OSError, ValueError):  # (json.JSONDecodeError is a ValueError)
        return None
