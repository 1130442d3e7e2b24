"""The decision: for every step of a node (one per key), run / cached / unknown / skipped, with
a reason and a detail -- behind ``get``, ``status`` and ``--dry-run``.

A node's steps are decided in four phases, in this order, each a function here and the only
place that sets the actions it is about (the runner calls them; tests/test_decisions.py calls
them alone):

1. ``keys_unknown`` -- a node whose keys are not known yet (they come from an output that does
   not exist yet): one step, ``unknown`` (``partitions_unknown``), or ``skipped``
   (``upstream_failed``) when the step its keys come from failed or was skipped.
2. ``decide`` -- every key: its run hash now (definition, inputs, key, value), compared with
   what the store said of the node (``StoreSays``: its history, its evicted results, its
   snapshot; read before, by ``store_says``), gives ``run`` or ``cached`` and the reason; a
   step whose inputs are not known yet is ``skipped`` or ``unknown`` (``_held``). The
   snapshot (a whole node settled by one digest) and a key whose run hash equals the
   snapshot's are early exits of it, over the same data. It writes nothing and reads no store.
3. ``adopted`` -- a step to run for want of any record (``adoptable``) whose artifact exists
   under its run hash (a killed run, a deleted metadata.db; engine.adoption finds it) is
   ``cached``, ``materialized``, adopted.
4. ``repaired`` -- a cached step whose artifact is missing or damaged (engine.integrity finds
   it, when the value is read) is ``run`` again under the same run hash.

Fetching, recording and running are the runner's work."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence, Set

from barca.core.record import Tuple
from barca.core.types import Action, NodeId, Reason, step_id
from barca.engine.inputs import Hold, InputPlan, raise_missing, source_dim
from barca.engine.states import NodeState, StepState, all_parts, values_name
from barca.identity.hashing import run_hash, run_hashes, snapshot_digest
from barca.identity.pairs import Pairs, picked, spliced
from barca.model.discovery import NodeModel
from barca.store.metadata import Row, Snapshot
from barca.store.view import NodeHistory, StoreView

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

    from barca.engine.planner import Context

PART_ORDER = ("code", "decorator", "helper:", "module:", "path:", "untracked:", "env:", "input:",
              "key", "value")


class StoreSays(Tuple):
    """What the store said of one node, read before its decision (``store_says``): the decision
    reads nothing else of the store."""
    history: NodeHistory          # its rows: by key (newest, newest success), by run hash
    evicted: Set[str]             # paths of its results the cache size limit evicted
    snapshot: Snapshot | None     # its last complete walk (None: none, or not to be used)
    # a node whose keys and values come from a dict source: that source's value digests when
    # its snapshot was made (see values_row), so that only the keys whose value moved are
    # hashed again
    values: Snapshot | None = None


def store_says(view: StoreView, nid: NodeId, kind: str, forced: bool,
               dict_source: bool = False) -> StoreSays:
    """What ``decide`` reads of the store for one node: a forced node, and a node with
    evicted results (decided key by key: the snapshot does not know of them), read no
    snapshot; only an asset has evicted results or a snapshot (and, with keys from a dict
    source's output, ``dict_source``, the values row beside it)."""
    hist = view.history(nid)
    asset = kind == "asset"
    evicted = view.evicted(nid) if asset else set()
    snap = view.snapshot(nid) if asset and not forced and not evicted else None
    values = view.snapshot(values_name(nid)) if snap is not None and dict_source else None
    return StoreSays(hist, evicted, snap, values)


def keys_unknown(nid: NodeId, why: str, src_step: StepState | None) -> NodeState:
    """Phase 1: a node whose keys are not known yet (``why``): one step, skipped when the step
    its keys come from (``src_step``) failed or was skipped, else unknown."""
    ns = NodeState(nid, None, unknown_detail=why)
    if src_step is not None and src_step.action in ("failed", "skipped"):
        ns.keys = [""]
        ns.steps[""] = StepState(nid, "", action=Action.SKIPPED, reason=Reason.UPSTREAM_FAILED,
                                 detail=f"upstream {src_step.id} failed")
    else:
        ns.steps[""] = StepState(nid, "", action=Action.UNKNOWN, reason=Reason.PARTITIONS_UNKNOWN,
                                 detail=why)
    return ns


def decide(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
           said: StoreSays, forced: bool = False, predict: bool = False, settled: bool = False,
           why: str = Reason.REFRESH, lazy: bool = False) -> NodeState:
    """Phase 2: decide every step of one node, given the states of its upstream nodes and what
    the store said of it (``ctx`` gives the graph and the definitions, never the store).

    An asset whose snapshot digest (see identity) is unchanged is settled at once: every key
    cached under the run hash the snapshot records, with no per-key work. ``settled`` says a
    settle record (engine.settle) vouches that the whole cone is in a state whose full decision
    found every digest unchanged: the digest is then not computed again. Otherwise each key's
    run hash is computed (all at once when every key has its inputs; only the keys whose
    upstream run hashes changed when the snapshot was made from the upstreams' snapshots, see
    _delta); one equal to the snapshot's for that key is cached without reading its row, and
    only the rest are looked up in the store's history. A ``lazy`` task (an Always task a
    schedule's tick reaches) is decided as an asset is: it runs only when no successful run
    of it has its run hash (its code or an input's version moved, or it never ran)."""
    m = ctx.graph.nodes[nid]
    hist, evicted = said.history, said.evicted
    asset = m.kind == "asset"
    # (store_says reads none then; one given anyway is not used)
    snap = said.snapshot if asset and not forced and not evicted else None
    if settled and snap is not None:
        hashes = stored_hashes(snap, keys)
        if len(hashes) == len(keys):
            return NodeState.from_snapshot(nid, keys, snap.digest, snap.combined, hashes, hist)
    jk = "\x00".join(keys)  # the keys as the snapshot holds them: joined once per decision
    ident = identity(ctx, nid, keys, states, joined=jk) if asset else None
    prev: tuple[str, Sequence[str]] | None = None  # the snapshot's keys (joined), run hashes
    if snap is not None:
        hashes = stored_hashes(snap, keys, jk)
        if ident is not None and snap.digest == ident and len(hashes) == len(keys):
            return NodeState.from_snapshot(nid, keys, ident, snap.combined, hashes, hist)
        prev = (snap.keys, hashes)
    def_hash, def_parts = ctx.definition(nid)
    plan = InputPlan(ctx.graph, nid, states, ctx.input_name,
                     lambda up: ctx.definition(up)[0])
    kind = m.kind
    odd: dict[str, StepState] = {}

    def one(key: str, rh: str, inputs: dict[str, str], value: str | None) -> str:
        st = odd[key] = StepState(nid, key, run_hash=rh)
        if (kind == "task" and not lazy) or forced:
            st.parts_from(def_parts, inputs, key, value)
            st.reason, st.detail = (Reason.TASK, "tasks always run") if kind == "task" \
                else (why, "refresh" if why == Reason.REFRESH else "upstream refreshed")
        else:
            _settle(m, st, rh, hist, def_parts, inputs, value, evicted, predict)
        return st.run_hash or ""

    compared: list[int] | None = None  # positions not settled by the snapshot, key for key
    if plan.clean and kind != "sensor":
        delta = _delta(ctx, nid, keys, states, plan, snap, jk) \
            if snap is not None and m.freshness != "manual" and asset and not forced else None
        if delta is None and snap is not None and m.freshness != "manual" and asset \
                and not forced:
            delta = _value_delta(ctx, nid, keys, states, plan, snap, said.values, jk)
        new: dict[int, str] | None = None  # the run hashes that may move, by position
        if delta is not None and prev is not None:
            # the snapshot was made from the upstream run hashes its upstreams' snapshots
            # hold (or the dict source's values its values row holds): a key whose upstream
            # run hash and value are still those keeps its run hash
            old = prev[1]
            cols = {n: c if isinstance(c, str) else picked(c, delta)
                    for n, c in plan.columns(keys).items()}
            sub = [keys[i] for i in delta]
            vals = None if plan.source is None else [plan.value(k) for k in sub]
            new = dict(zip(delta, run_hashes(def_hash, cols, sub, vals), strict=True))
            todo: Any = [i for i, h in zip(delta, picked(old, delta), strict=True)
                         if new[i] != h]
            compared = todo
            col: Any = new
        else:
            # every key has its inputs: all run hashes at once, then only the keys whose run
            # hash is not the one they were cached under at the last walk, one by one
            col = run_hashes(def_hash, plan.columns(keys), keys, plan.value_column(keys))
            if kind != "asset" or forced:
                todo = range(len(keys))
            else:
                todo, positional = _differing(keys, col, prev, jk)
                compared = todo if positional else None
        for i in todo:
            key = keys[i]
            inputs = plan.inputs(key)[0]
            assert inputs is not None  # a clean plan: every key has its inputs
            col[i] = one(key, col[i], inputs, plan.value(key))
        # (the snapshot's run hashes with those that moved: its text spliced, identity.pairs)
        out: Sequence[str] = col if new is None or prev is None else spliced(prev[1], new)
    else:
        old_at: dict[str, str] = dict(zip(prev[0].split("\x00"), prev[1], strict=False)) \
            if prev is not None else {}
        prev_get = old_at.get
        lst: list[str] = []
        for key in keys:
            inputs, hold = plan.inputs(key)
            if inputs is None:
                assert hold is not None  # no inputs: the hold says why
                odd[key] = _held(nid, key, hold, predict)
                lst.append("")
                continue
            value = plan.value(key)
            if kind == "sensor":
                st = odd[key] = _sensor(nid, key, def_parts, inputs, value, hist, predict)
                lst.append(st.run_hash or "")
                continue
            rh = run_hash(def_hash, inputs, key, value)
            if kind == "asset" and not forced and prev_get(key) == rh:
                lst.append(rh)  # cached at the last walk under this very run hash
                continue
            lst.append(one(key, rh, inputs, value))
        out = lst
    ns = NodeState.compact(nid, keys, out, odd, hist)
    ns.ident, ns.joined = ident, (keys, jk)
    if compared is not None and snap is not None:  # (compared only against a snapshot)
        ns.since = (snap.combined, compared)
    return ns


def adopted(ns: NodeState, find: Callable[[NodeId, str, str], Row | None]) -> list[StepState]:
    """Phase 3: among a node's steps to run for want of any record (``adoptable``), those
    whose artifact ``find`` finds under their run hash (engine.adoption) are cached, adopted:
    the runner records the row. The adopted steps."""
    out = []
    for s in ns.odd_steps():
        if s.adoptable and s.action == "run" and s.run_hash is not None:
            row = find(s.node, s.key, s.run_hash)
            if row is not None:
                s.action, s.reason, s.detail = Action.CACHED, Reason.MATERIALIZED, "-"
                s.row, s.adopted = row, True
                out.append(s)
    return out


def repaired(steps: Iterable[StepState]) -> None:
    """Phase 4: cached steps whose artifact is missing or damaged run again, under the same run
    hash (their reason is what engine.integrity found: ``artifact_missing``,
    ``artifact_corrupt``, or ``evicted`` kept)."""
    for s in steps:
        s.action = Action.RUN


def _differing(keys: list[str], hashes: Sequence[str], prev: tuple[str, Sequence[str]] | None,
               joined: str) -> tuple[list[int], bool]:
    """The positions of the keys whose run hash is not the one the last walk recorded for that
    key (``prev``: the snapshot's keys joined by NUL, and their run hashes), and whether the
    snapshot holds the same keys in the same order."""
    if prev is None:
        return list(range(len(keys))), False
    old_keys, old = prev
    if len(old) == len(keys) and old_keys == joined:  # the same keys, in order
        return [i for i, (a, b) in enumerate(zip(hashes, old, strict=True)) if a != b], True
    got = dict(zip(old_keys.split("\x00"), old, strict=False)).get
    return [i for i, (k, h) in enumerate(zip(keys, hashes, strict=True)) if got(k) != h], False


def _delta(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
           plan: InputPlan, snap: Snapshot, joined: str) -> list[int] | None:
    """The positions of the only keys whose run hash can differ from the snapshot's, when
    every other part of the node is what the snapshot was made from: the snapshot digest,
    made with each per-key upstream's combined digest as its own snapshot held it, is this
    node's snapshot digest; then a key whose upstream run hashes are the ones those snapshots
    hold (``NodeState.since``) has the snapshot's run hash. None: not so."""
    if plan.source is not None or snap.keys != joined:
        return None
    then: dict[NodeId, str] = {}
    changed: set[int] = set()
    for _, _, by_key, _, _ in plan.entries:
        if by_key is None:
            continue
        up = by_key.state
        if up.since is None or by_key.keys != keys:
            return None
        then[up.node] = up.since[0]
        changed.update(up.since[1])
    if not then:
        return None
    if identity(ctx, nid, keys, states, then, joined=joined) != snap.digest:
        return None
    return sorted(changed)


def _value_delta(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
                 plan: InputPlan, snap: Snapshot, values: Snapshot | None, joined: str
                 ) -> list[int] | None:
    """The positions of the only keys whose run hash can differ from the snapshot's, for a
    node whose keys and values come from a dict source: its values row (written with the
    snapshot, see values_row) holds the source's value digests then and the source part of
    the snapshot digest then. When the snapshot digest made with that source part is the
    snapshot's (the same keys, definition, inputs and barca's salt), a key whose value digest
    is still the one then has the snapshot's run hash. None: not so."""
    if values is None or values.digest != snap.digest or values.keys \
            or snap.keys != joined:
        return None
    new = plan.source_digests(keys, joined)
    old = values.hashes
    if new is None or len(old) != len(new):
        return None
    if identity(ctx, nid, keys, states, source=values.combined, joined=joined) != snap.digest:
        return None
    return differing_digests(old, new)


def differing_digests(old: str, new: str, width: int = 64) -> list[int]:
    """The positions where two strings of ``width``-character digests differ, comparing
    blocks first (one value of 200,000 moved: a few block compares, not 200,000)."""
    out: list[int] = []
    block = width * 1024
    for start in range(0, len(new), block):
        if old[start:start + block] == new[start:start + block]:
            continue
        for i in range(start, min(start + block, len(new)), width):
            if old[i:i + width] != new[i:i + width]:
                out.append(i // width)
    return out


def values_row(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
               ident: str) -> tuple[str, str, str, str, str] | None:
    """The values row stored beside a node's snapshot (made under ``ident``) when its keys
    and values come from a dict source, in the source's key order: the source part of that
    snapshot digest, and each key's value digest (see _value_delta)."""
    src = source_dim(ctx.graph, nid)
    if src is None or not src[1]:
        return None
    plan = InputPlan(ctx.graph, nid, states, ctx.input_name, lambda up: ctx.definition(up)[0])
    # (the node's own keys text: no second one made, nor kept by the source's check)
    ns = states.get(nid)
    digests = plan.source_digests(keys, ns.joined_keys() if ns is not None and ns.keys is keys
                                  else None)
    source = _source_part(ctx, nid, states, src)
    if digests is None or source is None:
        return None
    return (values_name(nid), ident, source, "", digests)


def _held(nid: NodeId, key: str, hold: Hold, predict: bool) -> StepState:
    """A step with no inputs yet: skipped below a failure, unknown while keys or a sensor's
    value are not known (a real run has every value by now: anything else is a bug)."""
    blocked, keys_unknown, unknown = hold
    st = StepState(nid, key)
    if blocked is not None:
        st.action, st.reason = Action.SKIPPED, Reason.UPSTREAM_FAILED
        st.detail = f"upstream {blocked.id} failed" if blocked.action == "failed" \
            else f"upstream {blocked.id} skipped"
    elif keys_unknown is not None:
        st.action, st.reason, st.detail = Action.UNKNOWN, Reason.PARTITIONS_UNKNOWN, keys_unknown
    else:
        if not predict:
            raise_missing(str(unknown), step_id(nid, key))
        # a prediction never runs a sensor: without its value, no run hash is knowable
        st.action, st.reason = Action.UNKNOWN, Reason.SENSOR_OUTPUT_UNKNOWN
        st.detail = unknown or ""
    return st


def _sensor(nid: NodeId, key: str, def_parts: dict[str, str], inputs: dict[str, str],
            value: str | None, hist: NodeHistory, predict: bool) -> StepState:
    """A sensor always runs; a prediction shows its last recorded value, if its code is
    unchanged."""
    st = StepState(nid, key, Action.RUN, Reason.SENSOR, "sensors always re-run")
    st.parts = all_parts(def_parts, inputs, key, value)
    if predict:
        for row in reversed(hist.all_success()):
            rp = row.part_digests()
            if all(rp.get(k) == v for k, v in def_parts.items()):
                st.run_hash, st.row = row.run_hash, row
                break
    return st


def _settle(m: NodeModel, st: StepState, rh: str, hist: NodeHistory, def_parts: dict[str, str],
            inputs: dict[str, str], value: str | None,
            evicted: Set[str] = frozenset(),
            predict: bool = False) -> None:
    """An asset step whose run hash is not the snapshot's: cached if a successful row has it
    (or, for a manual asset, any row), else to run -- with the part that changed. A step with
    no successful row at all is ``adoptable``: the runner looks for an artifact under its run
    hash before running it."""
    key = st.key
    row = hist.success(rh)
    old = hist.newest_success(key) if row is None else None
    if row is None and m.freshness == "manual" and old is not None:
        row = old
    if row is not None and row.path in evicted:
        # evicted by the cache size limit: a prediction says it runs; a run computes it
        # again only if something reads it (as for any missing artifact)
        st.row, st.run_hash = row, row.run_hash
        st.reason, st.detail = Reason.EVICTED, "evicted by the cache size limit"
        st.action = Action.RUN if predict else Action.CACHED
        if predict:
            st.parts = all_parts(def_parts, inputs, key, value)
        return
    if row is not None:  # an artifact that went missing is recomputed when it is read
        st.action, st.reason, st.detail = Action.CACHED, Reason.MATERIALIZED, "-"
        st.row = row
        st.run_hash = row.run_hash
        return
    st.action = Action.RUN
    if old is not None:
        st.parts = all_parts(def_parts, inputs, key, value)
        st.reason, st.detail = Reason.CHANGED, explain(st.parts, old.part_digests())
        return
    st.parts_from(def_parts, inputs, key, value)  # made when its row is written
    st.adoptable = True
    last = hist.newest(key)
    if last is not None and last.status == "failed":
        st.reason, st.detail = Reason.FAILED, f"last run failed: {last.error}"
    else:
        st.reason, st.detail = Reason.NO_RECORD, "never run"


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


def identity(ctx: Context, nid: NodeId, keys: list[str], states: dict[NodeId, NodeState],
             then: dict[NodeId, str] | None = None, source: str | None = None,
             joined: str | None = None) -> str | None:
    """The digest every run hash of an asset node is a function of: its definition, its keys,
    and the combined run hashes of what it reads (a dict source: the SHA-256 of its output).
    None while something it reads is not wholly available, or a key holds a NUL. ``then``:
    another combined digest for some upstreams, read key by key (see _delta); ``source``:
    another source part of a dict source (see _value_delta); ``joined``: the keys joined by
    NUL, when made already."""
    graph = ctx.graph
    m = graph.nodes[nid]
    if joined is None:
        joined = "\x00".join(keys)
    if joined.count("\x00") != len(keys) - 1:
        return None
    inputs: list[str] = []
    for inp in sorted(m.inputs, key=lambda i: i.param):
        up = states.get(inp.target)
        if up is None or up.combined is None:
            return None
        combined = up.combined if then is None or inp.collect else then.get(up.node, up.combined)
        inputs.append(f"input:{inp.param}:{'all' if inp.collect else 'key'}:{combined}")
    src = source_dim(graph, nid)
    if src is not None:
        up = states.get(src[0])
        if up is None or up.combined is None:
            return None
        if src[1]:  # keys (and values) from an output: what that output holds
            now = _source_part(ctx, nid, states, src)
            if now is None:
                return None
            source = now if source is None else source
        else:
            source = up.combined if then is None else then.get(up.node, up.combined)
    else:
        source = None
    return snapshot_digest(ctx.definition(nid)[0], m.freshness or "", keys, inputs, source,
                           joined)


def _source_part(ctx: Context, nid: NodeId, states: dict[NodeId, NodeState],
                 src: tuple[NodeId, bool]) -> str | None:
    """The part of a node's snapshot digest its keys' output gives: that output's SHA-256 (and
    a sensor's code: it counts too, see InputPlan); None while it is not known."""
    up = states.get(src[0])
    step = up.step("") if up is not None else None
    if step is None or not step.sha256:
        return None
    if ctx.graph.nodes[src[0]].kind == "sensor":
        return f"{step.sha256}:{ctx.definition(src[0])[0]}"
    return step.sha256


def split_hashes(text: str) -> list[str]:
    """A snapshot's run hashes, stored concatenated (64 hex digits each; none, when the text
    is not so)."""
    if len(text) % 64:
        return []
    return [text] if len(text) == 64 else [text[i:i + 64] for i in range(0, len(text), 64)]


def stored_hashes(snap: Snapshot, keys: list[str], joined: str | None = None
                  ) -> Sequence[str]:
    """A snapshot's run hashes, in its keys' order: stored concatenated, or as the text of its
    combined digest (store.snapchunks), read in place as the run hashes of ``keys`` when they
    are its keys (identity.pairs: a one-key change splices it); ``joined``: ``keys`` joined
    by NUL, when made already."""
    text = snap.hashes
    if not text.endswith("\x00"):
        return split_hashes(text)
    if joined is None:
        joined = "\x00".join(keys)
    if snap.keys == joined:
        got = Pairs.of(keys, text, joined)
        if got is not None:
            return got
    return Pairs(snap.keys.split("\x00"), text).every()  # (its own keys: the slow path)
