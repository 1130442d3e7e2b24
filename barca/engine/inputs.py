"""Input planning: where each input of a node's steps comes from -- an upstream step's run hash,
the combined digest of every key of a fan-in, a dict source's value -- or why a step cannot
have one yet (an upstream failed, its keys or its value are not known). Read by the decision
(run hashes) and by the runner (the arguments a worker passes)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from barca.core.record import Tuple
from barca.core.types import NodeId, cast, parse_key, short_name, step_id
from barca.engine.keyindex import KeyIndex
from barca.engine.states import (  # all_parts: re-exported
    NodeState,
    SourceOutput,
    StepState,
)
from barca.identity.hashing import combined_digest
from barca.model.topology import Graph

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any, NoReturn


class Hold(Tuple):
    """Why a step has no input yet (each None when it is not the reason)."""
    blocked: StepState | None = None   # an upstream step that failed or was skipped
    keys_unknown: str | None = None    # why an upstream's keys are not known
    unknown: str | None = None         # why an upstream value is not known


NO_HOLD = Hold()


class Entry(Tuple):
    """One input of a node, as planned: a constant run hash (the same for every key), or a
    partitioned upstream's run hashes by key (``by_key``, when every key has one, else its
    ``state``, asked key by key), or why it has none yet (``hold``)."""
    name: str
    const: str | None
    by_key: ByKey | None
    state: NodeState | None
    hold: Hold | None


def source_dim(graph: Graph, nid: NodeId) -> tuple[NodeId, bool] | None:
    """The partitions_from source of a node, and whether its keys come from its output."""
    return graph.source_dim(nid)


def hold_of(graph: Graph, up: StepState | None, up_id: NodeId) -> Hold | None:
    """Why an upstream step gives no run hash (None: it gives one)."""
    if up is None:
        raise_missing(up_id, "a downstream step")
    if up.action in ("failed", "skipped"):
        return Hold(blocked=up)
    if up.action == "unknown" and up.reason == "partitions_unknown":
        return Hold(keys_unknown=up.detail)
    if up.run_hash is None:
        if up.node in graph.nodes and graph.nodes[up.node].kind == "sensor":
            return Hold(unknown=f"sensor '{short_name(up_id)}' has no recorded value")
        return Hold(unknown=up.detail or f"'{short_name(up_id)}' is not known yet")
    return None


def sensor_code(input_name: str) -> str:
    """The input name of a sensor's code, for a node whose keys come from its value."""
    return input_name + ":code"


def merge(a: Hold, b: Hold) -> Hold:
    """Two holds in input order: the first of each kind (an empty reason gives way to a later
    one, and stays when there is none)."""
    return Hold(_first(a.blocked, b.blocked), _first(a.keys_unknown, b.keys_unknown),
                _first(a.unknown, b.unknown))


def _first(a: Any, b: Any) -> Any:
    return a if a or b is None else b


class InputPlan:
    """The inputs of every key of one node, planned once from its upstream states.

    Each input is *constant* (the same for every key: an unpartitioned upstream, a fan-in's
    combined digest) or *per key* (a partitioned upstream: a key -> run hash map when every key
    has one, else its NodeState, asked key by key). A hold on a constant input holds every key."""
    __slots__ = ("graph", "nid", "entries", "const_hold", "source", "dim0", "clean",
                 "missing_source")

    def __init__(self, graph: Graph, nid: NodeId, states: dict[NodeId, NodeState],
                 input_name: Any = None, code_of: Any = None) -> None:
        self.graph, self.nid = graph, nid
        name_of = input_name or (lambda up: f"input:{up}")  # see Context.input_name
        m = graph.nodes[nid]
        entries: list[Entry] = []
        hold: Hold = NO_HOLD
        self.missing_source: NodeId | None = None
        for inp in m.inputs:
            up_id = inp.target
            name = name_of(up_id)
            up_ns = states.get(up_id)
            if up_ns is None:
                entries.append(Entry(name, None, None, None, None))
                self.missing_source = self.missing_source or up_id
                continue
            if up_ns.keys is None:
                entries.append(Entry(name, None, None, None,
                                     Hold(keys_unknown=up_ns.unknown_detail)))
                continue
            if inp.collect:
                entries.append(Entry(name, *self._collect(up_ns, up_id)))
            elif graph.nodes[up_id].partitioned:
                entries.append(Entry(name, *self._per_key(up_ns)))
            else:
                up = up_ns.step("")
                h = hold_of(graph, up, up_id)
                entries.append(Entry(name, up.run_hash if h is None and up is not None else None,
                                     None, None, h))
        self.source: SourceOutput | None = None  # a dict source's output: each key's value
        self.dim0 = m.dims[0].name if m.dims else ""
        src = source_dim(graph, nid)
        if src is not None:
            src_id, dynamic = src
            src_state = states.get(src_id)
            if src_state is None:
                self.missing_source = self.missing_source or src_id
            elif dynamic:
                out = src_state.output
                self.source = out if out is not None and out.digests is not None else None
                if code_of is not None and graph.nodes[src_id].kind == "sensor":
                    # engine.md §2: what reads a sensor hashes its run hash (code and value).
                    # Keys from its value read the value key by key (a new key runs that key
                    # only); its code counts for every key, as for any other consumer
                    entries.append(Entry(sensor_code(name_of(src_id)), code_of(src_id), None,
                                         None, None))
            else:
                entries.append(Entry(name_of(src_id), *self._per_key(src_state)))
        for e in entries:
            if e.hold is not None and e.state is None:
                hold = merge(hold, e.hold)
        self.const_hold = None if hold == NO_HOLD else hold
        self.entries = entries
        self.clean = self.const_hold is None and self.missing_source is None and all(
            e.state is None for e in entries)

    def _collect(self, up_ns: NodeState, up_id: NodeId
                 ) -> tuple[str | None, ByKey | None, NodeState | None, Hold | None]:
        if up_ns.combined is not None:  # every key available: their combined digest
            return up_ns.combined, None, None, None
        hold: Hold = NO_HOLD
        ups = []
        for k in sorted(up_ns.keys or ()):
            u = up_ns.step(k)
            h = hold_of(self.graph, u, up_id)
            if h is not None:
                hold = merge(hold, h)
            assert u is not None  # (hold_of raised otherwise)
            ups.append(u)
        if hold != NO_HOLD:
            return None, None, None, hold
        # (no hold: every step has its run hash)
        hashes = cast(list[str], [u.run_hash for u in ups])
        return combined_digest([u.key for u in ups], hashes), None, None, None

    @staticmethod
    def _per_key(up_ns: NodeState
                 ) -> tuple[str | None, ByKey | None, NodeState | None, Hold | None]:
        hashes = up_ns.run_hashes()
        if hashes is not None:
            return None, ByKey(up_ns, hashes), None, None
        return None, None, up_ns, None

    def columns(self, keys: list[str]) -> dict[str, str | Sequence[str]]:
        """Every key's inputs at once, for a clean plan: name -> the run hash every key reads,
        or a list of run hashes in key order (see hashing.run_hashes)."""
        assert self.clean
        out: dict[str, str | Sequence[str]] = {}
        for name, c, mp, _, _ in self.entries:
            if mp is None:
                assert c is not None  # a clean plan's every input has a run hash
                out[name] = c
                continue
            try:
                out[name] = mp.column(keys)
            except KeyError:
                missing = next(k for k in keys if k not in mp)
                raise_missing(name.partition(":")[2], step_id(self.nid, missing))
        return out

    def value_column(self, keys: list[str]) -> Iterable[str | None] | None:
        """``value`` of every key, in key order (None: the node reads no dict source)."""
        src = self.source
        if src is None:
            return None
        raw = self._raw_keys(keys)
        if raw is not None:
            if raw == src.keys:  # the source's keys, in its order
                return src.digest_column()
            return [src.digest(r) for r in raw]
        return [self.value(k) for k in keys]

    def _raw_keys(self, keys: list[str]) -> list[str] | None:
        """Each key's dimension value, when every key is ``<dim>=<value>``, unescaped (as
        dim_value reads it); None: not so."""
        prefix = self.dim0 + "="
        joined = "\x00".join(keys)
        if "\\" not in joined and "," not in joined and joined.startswith(prefix) \
                and joined.count("\x00") == joined.count("\x00" + prefix) == len(keys) - 1:
            n = len(prefix)
            return [k[n:] for k in keys]
        return None

    def source_digests(self, keys: list[str], joined: str | None = None) -> str | None:
        """A dict source's value digests as one string (64 hex digits per key), when its keys
        are these keys in this order -- the digest of key i at ``[64 * i:64 * i + 64]``;
        None: another order or other keys, or no dict source. ``joined``: the keys joined by
        NUL, when made already."""
        src = self.source
        if src is None or src.digests is None or len(src.digests) != 64 * len(keys) \
                or len(src.keys) != len(keys):
            return None
        # what _raw_keys(keys) == src.keys says, without a string per key: every key is
        # <dim>=<the source's key>, in its order, none holding a NUL, a backslash or a comma
        prefix = self.dim0 + "="
        if joined is None:
            joined = "\x00".join(keys)
        if src.checked is not None and src.checked[0] == prefix and src.checked[1] == joined:
            return src.digests  # (the very text found so before: one compare)
        if "\\" in joined or "," in joined or joined.count("\x00") != len(keys) - 1:
            return None
        sent = src.joined
        if sent is None:
            return src.digests if joined == prefix + ("\x00" + prefix).join(src.keys) else None
        # every key begins with the prefix (no key holds a NUL): without it, the keys as the
        # worker sent them (one scan of the text, not a string per key)
        same = joined.startswith(prefix) and joined.count("\x00" + prefix) == len(keys) - 1 \
            and joined.replace("\x00" + prefix, "\x00")[len(prefix):] == sent
        if same:
            src.checked = (prefix, joined)
        return src.digests if same else None

    def inputs(self, key: str) -> tuple[dict[str, str] | None, Hold | None]:
        """One key's inputs by name, or why it has none."""
        if self.missing_source is not None:
            raise_missing(self.missing_source, step_id(self.nid, key))
        if self.clean:
            try:
                # (clean: an input without by_key has its constant; see columns)
                return {n: (c if mp is None else mp[key])  # type: ignore[misc]
                        for n, c, mp, _, _ in self.entries}, None
            except KeyError:
                missing = next(n for n, _, mp, _, _ in self.entries
                               if mp is not None and key not in mp)
                raise_missing(missing.partition(":")[2], step_id(self.nid, key))
        inputs: dict[str, str] = {}
        hold: Hold = NO_HOLD
        for name, c, mp, up_ns, h in self.entries:
            if up_ns is not None:
                up = up_ns.step(key)
                if up is None:
                    raise_missing(up_ns.node, step_id(self.nid, key))
                h = hold_of(self.graph, up, up_ns.node)
                if h is None and up.run_hash is not None:  # (no hold: it has one)
                    inputs[name] = up.run_hash
            elif mp is not None:
                if key not in mp:
                    raise_missing(name.partition(":")[2], step_id(self.nid, key))
                inputs[name] = mp[key]
            elif c is not None:
                inputs[name] = c
            if h is not None:
                hold = merge(hold, h)
        return (None, hold) if hold != NO_HOLD else (inputs, None)

    def value(self, key: str) -> str | None:
        """A dict source's value digest for this key."""
        return self.source.digest(dim_value(key, self.dim0)) if self.source is not None \
            else None


class ByKey:
    """A partitioned upstream's run hashes: a list in its key order, looked up by key (see
    KeyIndex); a downstream node with the same keys reads the list as it is."""
    __slots__ = ("state", "keys", "hashes", "_index")

    def __init__(self, state: NodeState, hashes: Sequence[str]) -> None:
        self.state, self.keys, self.hashes = state, state.keys or [], hashes
        self._index = state.index() if state.keys is not None else KeyIndex(self.keys)

    def __getitem__(self, key: str) -> str:
        i = self._index.get(key)
        if i is None:
            raise KeyError(key)
        return self.hashes[i]

    def __contains__(self, key: str) -> bool:
        return self._index.get(key) is not None

    def column(self, keys: list[str]) -> Sequence[str]:
        """The run hash of each of ``keys``, in that order (KeyError: one has none)."""
        if keys == self.keys:
            return self.hashes
        return [self[k] for k in keys]


def dim_value(key: str, dim: str) -> str:
    """The value of one dimension in a key (``day=d1`` -> ``d1``), without parsing a key of
    one unescaped dimension."""
    if key.startswith(dim) and key[len(dim):len(dim) + 1] == "=" and "\\" not in key \
            and "," not in key:
        return key[len(dim) + 1:]
    return parse_key(key).get(dim, "")


def raise_missing(up_id: str, consumer: str) -> NoReturn:
    """Every upstream key must have a run hash before a consumer's cache is checked."""
    from barca.core.errors import InfrastructureError
    raise InfrastructureError(
        f"missing run hash for {up_id}, an input of {consumer}: refusing to check the cache on a "
        "partial input set", "This is a bug in barca's planner or executor; please report it.")


def step_kwargs(ctx: Any, nid: NodeId, key: str, states: dict[NodeId, NodeState]
                ) -> dict[str, Any]:
    """What the worker passes to each parameter of one step (see barca.engine.executors.job):
    built only for steps that are executed."""
    from barca.store.frames import require
    graph = ctx.graph
    m = graph.nodes[nid]
    params = {p for p, _ in m.params}
    kwargs: dict[str, Any] = {}
    for inp in m.inputs:
        up_ns = states[inp.target]
        if inp.param.startswith("_"):
            kwargs[inp.param] = ("none",)
            continue
        reader = m.readers.get(inp.param)
        if reader is not None:
            require(reader, f"parameter '{inp.param}' of {nid}")  # not installed: exit 2
        if inp.collect:
            ups = [_step(up_ns, k) for k in sorted(up_ns.keys or ())]
            kwargs[inp.param] = ("collect", [(u.path, u.format, u.sha256, u.key) for u in ups],
                                 reader)
        else:
            u = _step(up_ns, key if graph.nodes[inp.target].partitioned else "")
            kwargs[inp.param] = ("artifact", u.path, u.format, u.sha256, reader)
    src = source_dim(graph, nid)
    if src is not None:
        src_id, dynamic = src
        src_fn = graph.nodes[src_id].function
        if src_fn in params:
            src_state = states[src_id]
            if dynamic:
                out = src_state.output
                if out is not None and out.raw is not None:  # a dict source: this key's value
                    kwargs[src_fn] = ("value", out.value(dim_value(key, m.dims[0].name)))
            else:
                u = _step(src_state, key)
                kwargs[src_fn] = ("artifact", u.path, u.format, u.sha256,
                                  m.readers.get(src_fn))
    dim_params = [d.name for d in m.dims if d.name in params]
    for d in dim_params:  # (a key of one plain dimension is not parsed: see dim_value)
        kwargs[d] = ("value", dim_value(key, d))
    return kwargs


def _step(ns: NodeState, key: str) -> StepState:
    """An upstream step an executed step reads (every one exists by then)."""
    got = ns.step(key)
    if got is None:
        raise_missing(ns.node, f"a step of {short_name(ns.node)}")
    return got
