"""The settle record: one row per cone (``settle_records``) saying "in this exact state, every
node of the cone was settled by its snapshot", so that the next command in the same state
settles each node without hashing its definition again.

The state is everything a node's identity (engine.decision) is a function of: the text of every
pipeline file, the files and folders its definition parts were read from (the definition
cache's own dependencies), the command's settings (flags, ``BARCA_*``, ``barca.toml``), the
walk order, and the store's generation (moved by every write of a result, snapshot, eviction
or definition, see Store.generation). The snapshots themselves are checked too: the record
holds the digests of the ones the full decision matched, compared as they are (not hashed
again: 500 of them were ~1.5 M instructions of SHA-256 a command).

The record is only an early exit of ``decide`` (its ``settled`` argument); anything else --
a sensor or a task in the cone, keys that come from an output or from importing a module, env
values read live, a notebook, evicted results, ``--refresh``, ``--partition``, memo layers off
-- is decided the normal way, and so is every command whose state does not match. On a match
the keys are the ones the snapshots were made of: they were evaluated from the same text.

A match also says where each one-key node's result is (``where``: the path, format, SHA-256
and shape of the newest success of the run hash its snapshot holds, which the record's walk
read): the store's generation has not moved since, so neither have its rows. Each is used only
for the run hash the node's snapshot holds now, and its file is still read and checked against
its SHA-256 (engine.integrity) before its value is returned."""
from __future__ import annotations

from barca.core import events as ev
from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.core.settings import Settings
from barca.core.types import NodeId, step_id
from barca.engine.states import NodeState
from barca.identity.digests import sha
from barca.model.discovery import PSEUDO_ABSPATH
from barca.store.metadata import Snapshot

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

# records kept in a store, the last written (a cone each: a target set of a pipeline): one
# keyed by an older barca's salt is never read again, and one dropped costs a full decision
KEEP = 64
_OUTPUT = Settings.__slots__.index("output")  # (a value of Settings.values(), by position)


def _own() -> str:
    """barca's one memo salt (barca.core.salt): a changed barca is a miss."""
    from barca.core.salt import salt
    return salt()


class Settle:
    """The settle record of one walk: looked up before it, written after it."""
    __slots__ = ("ctx", "order", "cone", "key", "hit", "generation")

    def __init__(self, ctx: Any, order: list[NodeId], forced: set[NodeId],
                 selection: Any) -> None:
        self.ctx, self.order = ctx, order
        self.cone: str | None = None
        self.key: str | None = None
        self.hit = False
        self.generation: int | None = None
        if not _eligible(ctx, order, forced, selection):
            return
        self.generation = ctx.store.generation()
        if self.generation is None:
            return
        graph = ctx.graph
        # the command's resolved settings (flags, BARCA_*, barca.toml): passed, not read again;
        # all but the output mode, which only the face reads (how a result is printed): a
        # --json command and a --pretty one are in the same state
        values = ctx.settings.values()
        settings = repr(values[:_OUTPUT] + values[_OUTPUT + 1:])
        self.cone = sha(_own(), graph.root_dir, *order)
        self.key = sha(self.cone, str(self.generation), settings,
                       *(f"{rel}\x00{ctx.defcache.fingerprint(fm)}"
                         for rel, fm in sorted(graph.files.items())))

    def check(self, snapshots: dict[NodeId, Snapshot | None] | None) -> bool:
        """True when the record matches this state: every node may be settled by its snapshot."""
        if self.key is None or snapshots is None:
            return False
        got = self.ctx.store.settle_record(self.cone)
        if got is None or got[0] != self.key:
            return False
        text, _, where = got[1].partition("\n")
        try:
            value = jsontext.loads(text)
            files, dirs, snaps = value["files"], value["dirs"], value["snaps"]
        except (ValueError, KeyError, TypeError):
            return False
        defcache = self.ctx.defcache
        if any(defcache._file(f) != h for f, h in files.items()):
            return False
        if any(defcache._dir(d) != h for d, h in dirs.items()):
            return False
        got_snaps = [s for s in map(snapshots.get, self.order) if s is not None]
        if len(got_snaps) != len(self.order):
            return False
        self.hit = snaps == "\x00".join([s.digest for s in got_snaps])
        if self.hit:  # the keys each digest was made of: no key expression evaluated again
            for n, snap in zip(self.order, got_snaps, strict=True):
                self.ctx.settled_keys(n, snap.keys.split("\x00"))
            self.ctx.view.located = _located(where, self.order, got_snaps)
        return self.hit

    def record(self, states: dict[NodeId, Any]) -> None:
        """After a walk that settled every node by its snapshot, in a store nothing wrote to
        meanwhile: the record of this state (never fails a command)."""
        if self.key is None or self.hit or self.cone is None:
            return
        ctx = self.ctx
        if ctx.imported or any(not getattr(states.get(n), "settled", False) for n in self.order):
            return
        deps = ctx.defcache.deps_of(self.order)
        if deps is None:
            return
        idents = [states[n].ident for n in self.order]
        if any(not isinstance(i, str) for i in idents):
            return
        snaps = "\x00".join(idents)
        try:
            if ctx.store.generation() != self.generation:
                return
            # the JSON, then where the results are: apart, not a JSON string (whose escaped
            # NULs made reading it cost more than the query it saves)
            ctx.store.put_settle_record(self.cone, self.key, jsontext.dumps(
                {"files": deps[0], "dirs": deps[1], "snaps": snaps}, sort_keys=True)
                + "\n" + _where_known(self.order, states), KEEP)
        except Exception:  # noqa: BLE001 - a record only saves work next time
            return


_NONE = ""  # (a field of ``where`` that is NULL in the store: none of them is ever empty)


def record_json(value: str) -> str:
    """A record's JSON (files, dirs, snaps): its value's first line (JSON text holds no
    newline); ``where`` (``_where_known``) follows it."""
    return value.partition("\n")[0]


def _where_known(order: list[NodeId], states: dict[NodeId, Any]) -> str:
    """Per node of the walk, the run hash of its one key and where its newest success is, as
    the walk found it (no query made for it: a node no one asked about has none), all joined
    by NUL, five fields a node (an empty run hash: not known)."""
    out: list[str] = []
    for n in order:
        st = states[n]
        hashes = st.run_hashes() if st.keys is not None and len(st.keys) == 1 else None
        run_hash = hashes[0] if hashes else None
        where = st.where(run_hash, ask=False) if run_hash else None
        if not run_hash or where is None or not where[0] \
                or "\x00" in "".join(f or "" for f in where):
            out.extend((_NONE,) * 5)
        else:
            out.append(run_hash)
            out.extend(f or _NONE for f in where)
    return "\x00".join(out)


def _located(text: str, order: list[NodeId], snaps: list[Snapshot]
             ) -> dict[str, tuple[str, str, str, str]]:
    """``_where_known``'s text read back: for each node whose snapshot holds the run hash the
    record says, where its result is (an empty field, NULL in the store: None)."""
    parts = text.split("\x00")
    if len(parts) != 5 * len(order):
        return {}
    out: dict[str, Any] = {}
    five = iter(parts)  # (five fields a node, taken by zip in C)
    for n, snap, h, path, fmt, digest, shape in zip(order, snaps, five, five, five, five,
                                                    five, strict=True):
        if h and h == snap.hashes:
            out[n] = (path, fmt or None, digest or None, shape or None)
    return out


def _eligible(ctx: Any, order: list[NodeId], forced: set[NodeId], selection: Any) -> bool:
    if not ctx.memo or forced or selection is not None or not order:
        return False
    graph = ctx.graph
    for n in order:
        m = graph.nodes[n]
        if m.kind != "asset" or m.env or graph.files[m.file].abspath == PSEUDO_ABSPATH:
            return False
        if n in ctx.key_sources:
            return False
    evicted = ctx.store.evicted_assets()
    return not (evicted and evicted & set(order))


def settle_batch(runner: Any, batch: list[NodeId]) -> list[NodeId]:
    """The nodes of a batch of a walk a record vouches for (``Runner._settled``: every node an
    asset with static keys, nothing forced, no selection, no evicted result), each settled as
    ``decide`` would settle it -- every key cached under its snapshot's run hash -- without the
    general walk's steps (what the store says, adoption, the tally), which find nothing odd in
    it. The nodes left (a snapshot that does not hold the node's keys), in batch order, for the
    general walk to decide. One loop for the batch, its lookups made once: a settled walk of
    500 nodes does this and nothing else per node."""
    ctx, w = runner.ctx, runner.w
    states, nodes, view = w.states, runner.graph.nodes, ctx.view
    snaps = view.snapshots_loaded or {}
    static_keys, history, make = ctx.static_keys, view.history, NodeState.from_snapshot
    located = view.located  # (read with the snapshots: nothing was written since)
    execute, on_event, event = runner.execute, runner.on_event, ev.StepCached
    # a listener may say it ignores StepCached (the CLI's, but with --agent): none made for it
    tell = getattr(on_event, "cached_steps", True)
    left: list[NodeId] = []
    for nid in batch:
        m = nodes[nid]
        # a node partitioned like its upstream has the keys it walked (Runner._keys)
        keys = static_keys(nid) if not m.dims else runner._keys(nid)[0]
        snap = snaps[nid] if nid in snaps else view.snapshot(nid)
        if keys is None or snap is None:
            left.append(nid)
            continue
        hashes = snap.hashes
        one = len(hashes) == 64 and len(keys) == 1
        # (a large node's are the text of its combined digest: read in place, identity.pairs)
        if one:
            run_hashes: Sequence[str] = [hashes]
        else:
            from barca.engine.decision import stored_hashes  # (the decision: not for one key)
            run_hashes = stored_hashes(snap, keys)
        if len(run_hashes) != len(keys):
            left.append(nid)
            continue
        hist = history(nid)
        if one and (where := located.get(nid)) is not None:
            hist.hint(hashes, where)  # where its one result is: not looked up again
        states[nid] = make(nid, keys, snap.digest, snap.combined, run_hashes, hist)
        if execute:  # (a prediction has nothing more to do: the state is sealed)
            w.cached += len(keys)
            if not m.dims:  # (not partitioned)
                if tell:
                    on_event(event(step_id(nid, "")))
            elif m.sinks:  # a Hive dataset sink still holds only the node's current keys
                runner._finish_node(nid)
    return left

