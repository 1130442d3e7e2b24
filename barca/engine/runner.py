"""Runs a plan: walks the cone node by node in phase order, decides each node's steps (engine.
decision), adopts unrecorded artifacts (engine.adoption), sends the steps to run to the executor
and records results. The same walk, not executing, predicts ``status`` and ``--dry-run``."""
from __future__ import annotations

import time

from barca.core import events as ev
from barca.core.errors import Cancelled
from barca.core.record import Fields
from barca.core.types import TYPE_CHECKING, NodeId, cast, one_dim_keys, short_name, step_id
from barca.engine import states
from barca.engine.adoption import Adoption, adopted_row
from barca.engine.integrity import Integrity
from barca.engine.planner import Context, keys_from_row
from barca.engine.selection import Selection, check_keys, walk_order
from barca.engine.settle import Settle, settle_batch
from barca.engine.states import NodeState, SourceOutput, StepState, producer_of, result_row
from barca.model.discovery import PSEUDO_ABSPATH

if TYPE_CHECKING:  # (typing is not imported at run time: #31 item 2)
    from collections.abc import Callable, Sequence  # noqa: F401 (Callable: in a cast string)

    from barca.core.types import Any
    from barca.engine.executors import Executor
    from barca.engine.executors.job import StepJob, StepRecord
    from barca.engine.sharing import Sharing


class Walk(Fields):
    """The outcome of walking a cone: one NodeState per node, in walk order."""
    __slots__ = ("order", "states", "forced", "skipped_fanins", "total", "done", "failed",
                 "cached", "phases", "notes", "infra")

    def __init__(self, order: list[NodeId], states: dict[NodeId, NodeState],
                 forced: set[NodeId], skipped_fanins: list[NodeId] | None = None, total: int = 0,
                 done: int = 0, failed: int = 0, cached: int = 0, phases: int = 0,
                 notes: list[str] | None = None, infra: list[str] | None = None) -> None:
        self.order = order
        self.states = states
        self.forced = forced
        self.skipped_fanins = [] if skipped_fanins is None else skipped_fanins
        self.total = total
        self.done = done
        self.failed = failed
        self.cached = cached
        self.phases = phases
        self.notes = [] if notes is None else notes
        self.infra = [] if infra is None else infra   # barca's own writes that failed


class Runner:
    """One walk over a cone, executing (``get``/``run``) or predicting (``status``/dry run)."""
    window = 10_000  # steps per executor call: 200,000 jobs made at once cost ~150 MB
    snapshot_now = 10_000  # keys: a node's snapshot this big is written once its rows are

    def __init__(self, ctx: Context, targets: list[NodeId], *, execute: bool,
                 refresh: Sequence[NodeId] = (), cascade: bool = True, refresh_all: bool = False,
                 selection: Selection | None = None, on_event: ev.EventCallback = ev.ignore,
                 verify_all: bool = False, lazy_tasks: frozenset[NodeId] = frozenset()) -> None:
        self.ctx = ctx
        self.lazy_tasks = lazy_tasks  # tasks that run only when out of date (a tick's, below)
        self.verify_all = verify_all  # every target key's value will be read (Python get)
        self.graph = ctx.graph
        self.execute = execute
        self.on_event = on_event
        self.selection = selection
        self.settings = ctx.settings  # the command's: executor, pool size, remote store
        order = walk_order(ctx, targets)
        forced: set[NodeId] = set(order) if refresh_all else set(refresh)
        # re-run only because a refreshed upstream re-ran: said as its own reason
        self._named = set(order) if refresh_all else set(refresh)
        if refresh and cascade:
            forced = self.graph.downstream_cone(list(refresh), set(order))
        self.w = Walk(order, {}, forced)
        self.w.phases = len({self.graph.phase[n] for n in order})
        self._pool: Executor | None = None
        self._rows: list[dict[str, Any]] = []
        self._lines: list[tuple[str, str, str, float, str, str]] = []  # what steps wrote
        self.produced: list[str] = []  # written now (the cache limit keeps them); not a set: 16 MB
        self.produced_bytes = 0
        self._last_flush = time.monotonic()
        self.run_id = ""
        self._repairing: set[str] = set()  # steps whose corrupt or missing file is redone
        self.targets = list(targets)
        self._snapshots: list[tuple[str, str, str, str, str]] = []  # written after the rows
        from barca.engine.adoption import open_remote  # its module only where one is set
        self.remote = open_remote(self.settings, self._warn)
        # a prediction reads the store's listings (what `get` would fetch), never its files
        self.adoption = Adoption(ctx.store, self.remote, fetch=execute)
        self.integrity = Integrity(self.graph.root_dir, self.remote, self._warn)
        self.upload_errors: list[str] = []
        self._unknown = 0
        self._settled = False  # a settle record vouches for the whole cone (barca.engine.settle)
        self._sharing: Sharing | None = None  # claims shared with concurrent runs, once executing

    @property
    def small(self) -> dict[str, bytes]:  # verified artifacts small enough to preview, by path
        return self.integrity.small

    # ------------------------------------------------------------------ keys
    def _keys(self, nid: NodeId) -> tuple[list[str] | None, str]:
        """The node's keys now, or None with the reason they are not known."""
        src = self.graph.source_dim(nid)
        keys: list[str] | None
        if src is not None and not src[1]:  # the keys of a partitioned upstream, as walked
            up = self.w.states[src[0]]
            if up.keys is None:
                return None, up.unknown_detail
            keys = list(up.keys)
        elif src is None:
            keys = self.ctx.static_keys(nid)
        else:
            src_state = self.w.states[src[0]]
            step = src_state.step("")
            if src_state.output is None and step is not None and step.row is not None and (
                    step.action == "cached" or not self.execute):  # a sensor's last value
                src_state.output = self._keys_of_cached(src_state, step)
            if src_state.output is None:
                return None, (f"partition keys come from the output of "
                              f"'{short_name(src[0])}', which is not available until it runs")
            dim = self.graph.nodes[nid].dims[0].name
            keys = cast(list[str], one_dim_keys(dim, (o := src_state.output).keys, o.joined))
        assert keys is not None
        if self.selection is not None:
            if self.ctx.static_keys(nid) is None:  # keys known only now: check them now
                check_keys(self.selection, self.graph.nodes[nid].dims, keys, short_name(nid))
            keys = [k for k in keys if self.selection.admits(k)]
        return keys, ""

    def _narrowed(self, nid: NodeId) -> bool:
        if self.selection is None:
            return False
        dims = {d.name for d in self.graph.nodes[nid].dims}
        return bool(dims & set(self.selection.dims))

    # ------------------------------------------------------------------ the walk
    def run(self) -> Walk:
        w = self.w
        skip_below: set[NodeId] = set()
        if self.selection is not None:
            for nid in w.order:
                m = self.graph.nodes[nid]
                if any(i.collect and self._narrowed(i.target) for i in m.inputs):
                    w.skipped_fanins.append(nid)
            skip_below = self.graph.downstream_cone(w.skipped_fanins, set(w.order))
            if w.skipped_fanins:
                names = ", ".join(short_name(n) for n in w.skipped_fanins)
                w.notes.append(f"--partition skips a fan-in that reads every key: {names}. "
                               "Run without --partition to update it.")
        settle = Settle(self.ctx, w.order, w.forced, self.selection)
        later = self.execute and settle.key is None  # (no record: read while the sensor runs)
        self.ctx.view.load_snapshots(states.snap_names(self.graph, w.order, w.forced, later),
                                     later=later)
        self._settled = settle.check(self.ctx.view.snapshots_loaded)
        if self.execute and not self._settled and self.ctx.store.is_open:
            from barca.engine.sharing import Sharing  # a settled cone runs nothing to share
            self._sharing = Sharing(self.ctx.store, self.run_id, w, self.graph, self._repairing,
                                    self.on_event)
        walked = [n for n in w.order if n not in skip_below] if skip_below else w.order
        known = list(map(self.ctx.static_keys, walked))  # (one pass, for the two counts)
        # nodes whose keys come from an output: one step each in the total until walked
        self._unknown = known.count(None)
        admits = self.selection.admits if self.selection is not None else None
        w.total = self._unknown + sum(map(len, filter(None, known)) if admits is None
                                      else (sum(map(admits, k)) for k in known if k))
        if self.execute:
            for note in w.notes:
                self.on_event(ev.Note(note))
        try:
            for batch in self._batches():
                if self._settled:  # each node from its snapshot, in one loop (engine.settle)
                    batch = settle_batch(self, batch)
                ready = []
                for nid in batch:
                    if nid in skip_below:
                        ns = NodeState(nid, [""])
                        ns.steps[""] = StepState(
                            nid, "", action="skipped", reason="partition_selection",
                            detail="--partition skips a fan-in that reads every key")
                        w.states[nid] = ns
                        continue
                    todo = self._walk_node(nid)
                    if todo is not None:
                        ready.append((nid, todo))
                if ready:  # independent nodes: their steps go to the pool together
                    self._execute_many([(n, t) for n, t in ready if t])
                    for nid, _ in ready:
                        self._finish_node(nid)
            if self.execute:
                # an import barca cannot follow is never silent (of the definitions hashed)
                from barca.model.topology import untracked_message
                for module, nids in sorted(self.ctx.untracked(list(w.order), True).items()):
                    self._warn(untracked_message(module, nids))
            if self.execute:  # a value we return (or show) must be intact too
                got = [st for t in self.targets if (st := w.states.get(t)) is not None]
                verify = [st for st in got if self.verify_all or len(st.keys or ()) <= 1000]
                self.ctx.view.locate([st.node for st in verify
                                      if st.settled and len(st.keys or ()) <= 64])
                self._ensure_steps(self.integrity.to_check(verify))
                settle.record(w.states)  # after a repair, the generation moved: no record
        except KeyboardInterrupt:
            raise Cancelled("cancelled: the run was interrupted; finished steps are recorded",
                            "Run the same command again: it computes only what did not finish."
                            ) from None
        finally:
            self.ctx.view.load_snapshots(None)
            self._flush()
            self._put_snapshots()
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            if self._sharing is not None:
                self._sharing.claims.release_all()
        return w

    def _batches(self) -> list[list[NodeId]]:
        """The walk order cut into batches of nodes that do not read each other (each node one
        level below the deepest of what it reads, within its phase): a batch's steps run on the
        pool together, so 500 independent assets are one round of work, not 500."""
        w, graph = self.w, self.graph
        level: dict[NodeId, int] = {}
        batches: dict[tuple[int, int], list[NodeId]] = {}
        upstream, phase = graph.upstream, graph.phase
        for nid in w.order:  # (in walk order: a node's upstream levels are known before it)
            lv = 0
            for u in upstream[nid]:
                if u in level and level[u] >= lv:
                    lv = level[u] + 1
            level[nid] = lv
            batches.setdefault((phase[nid], lv), []).append(nid)
        return [batches[k] for k in sorted(batches)]

    def _walk_node(self, nid: NodeId) -> list[StepState] | None:
        """Decide one node; the steps to execute (None: nothing more to do for it)."""
        from barca.engine.decision import decide, keys_unknown, store_says  # (none if settled)
        w = self.w
        src = self.graph.source_dim(nid)
        keys, why = self._keys(nid)
        if self.ctx.static_keys(nid) is None:
            self._unknown -= 1
        if keys is None:
            src_state = w.states.get(src[0]) if src else None
            w.states[nid] = keys_unknown(nid, why, src_state.step("") if src_state else None)
            return None
        if self.ctx.static_keys(nid) is None:  # keys known now from an output: the total grows
            w.total += len(keys) - 1
        forced = nid in w.forced
        said = store_says(self.ctx.view, nid, self.graph.nodes[nid].kind, forced,
                          dict_source=src is not None and src[1])
        ns = decide(self.ctx, nid, keys, w.states, said, forced=forced,
                    predict=not self.execute, settled=self._settled, lazy=nid in self.lazy_tasks,
                    why="refresh" if nid in self._named else "refresh_cascade")
        w.states[nid] = ns
        self.adoption.apply(ns)
        partitioned = self.graph.nodes[nid].partitioned
        if not self.execute:
            ns.seal()
            return None
        tally = ns.tally()  # a compact node: only its odd steps are looked at one by one
        w.cached += tally.implicit
        if tally.implicit and not partitioned:
            self.on_event(ev.StepCached(step_id(nid, "")))
        for s in tally.explicit("cached"):
            w.cached += 1
            if s.adopted:
                self._adopt(nid, s)
            if not partitioned:
                self.on_event(ev.StepCached(s.id))
        return tally.steps("run")  # workers check each input's SHA-256 (see Worker.load)

    def _finish_node(self, nid: NodeId) -> None:
        """After a node's steps ran: its combined digest, its snapshot, a key source's keys."""
        ns = self.w.states[nid]
        text = ns.seal()  # (the combined digest's text: stored as it is, see snapchunks)
        if not ns.settled and ns.ident is not None and ns.combined is not None \
                and ns.keys is not None:
            from barca.engine.decision import values_row
            self._snapshots.append((nid, ns.ident, ns.combined, ns.joined_keys(),
                                    text or "".join(ns.run_hashes() or ())))
            values = values_row(self.ctx, nid, ns.keys, self.w.states, ns.ident)
            if values is not None:
                self._snapshots.append(values)
            if len(ns.keys) >= self.snapshot_now:  # not held to the walk's end
                self._put_snapshots()
        m = self.graph.nodes[nid]
        if m.dims and ns.keys is not None and self.selection is None \
                and any(k.endswith("/") for k in m.sinks):
            self._prune_sinks(m.sinks, ns.keys)
        if nid in self.ctx.key_sources:
            step = ns.step("")
            if step is not None and step.action == "cached" and ns.output is None:
                ns.output = self._keys_of_cached(ns, step)

    def _put_snapshots(self) -> None:
        """The snapshots made so far, after their nodes' rows (they only save work: no fail)."""
        snaps, self._snapshots = self._snapshots, []
        try:  # noqa: SIM105 - (contextlib: not loaded on a cached command's path, #31)
            self.ctx.store.put_snapshots(snaps)
        except Exception:  # noqa: BLE001
            pass

    def _keys_of_cached(self, ns: NodeState, step: StepState) -> Any:
        """A cached key source's keys, read from its artifact -- checked intact first when
        executing (else computed again, which sets them): a missing or damaged file never
        reads as no keys."""
        if self.execute and step.action == "cached":
            self._ensure_steps([step])
            if ns.output is not None:
                return ns.output
        return keys_from_row(self.ctx, step.row)

    def _prune_sinks(self, sinks: list[str], keys: list[str]) -> None:
        """A Hive dataset sink holds the node's current keys only (every key known, none
        narrowed away by --partition): a removed key's folder goes."""
        from barca.store.sinks import prune_all
        for kind, text in prune_all(self.graph.root, sinks, keys):
            self._warn(text) if kind == "warning" else self.on_event(ev.Note(text, "note"))

    # ------------------------------------------------------------------ integrity
    def _ensure_steps(self, steps: list[StepState]) -> None:
        """Compute again, under the same run hash, every step whose artifact is not intact."""
        broken: dict[NodeId, list[StepState]] = {}
        for s in self.integrity.broken(steps):
            broken.setdefault(s.node, []).append(s)
        for nid in [n for n in self.w.order if n in broken]:
            repair = broken[nid]
            from barca.engine.decision import repaired  # (none, when every artifact is intact)
            repaired(repair)
            self.w.cached -= len(repair)
            self._repairing.update(s.id for s in repair)  # their files are replaced in place
            try:
                self._execute(nid, repair)
            finally:
                self._repairing.difference_update(s.id for s in repair)
            for s in repair:
                if s.action == "ran" and s.path:
                    self.integrity.verified.add(s.path)

    def _warn(self, text: str) -> None:
        self.w.notes.append(text)
        self.on_event(ev.Note(text, "warning"))

    def _adopt(self, nid: NodeId, s: StepState) -> None:
        """Record an artifact found under its run hash with no row (see barca.engine.adoption)."""
        row = adopted_row(self.graph.root, nid, s, self.run_id)
        if row is not None:
            self.integrity.verified.add(s.path or "")
            self._rows.append(row)

    # ------------------------------------------------------------------ the remote store
    def prepare_remote(self) -> None:
        if self.remote is not None:  # (its module only where a remote store is set)
            from barca.store import remotesync
            remotesync.prepare(self.remote, self.ctx.store,
                               any(m.env for m in self.graph.nodes.values()), self._warn)

    def remote_notes(self) -> list[str]:
        if self.remote is None:
            return []
        from barca.store import remotesync
        return remotesync.notes(self.remote, self.upload_errors, self.on_event)

    # ------------------------------------------------------------------ executing
    def pool(self) -> Executor:
        """The executor, started on first use (chosen by barca.engine.executors.start)."""
        if self._pool is None:
            from barca.engine.executors import start
            on_import = lambda path: self.on_event(ev.Importing(path))  # noqa: E731
            on_note = lambda text: self.on_event(ev.Note(text, "info"))  # noqa: E731
            self._pool = start(self.settings, on_import, on_note=on_note)
        return self._pool

    def _execute(self, nid: NodeId, steps: list[StepState], attempt: int = 0) -> None:
        self._execute_many([(nid, steps)], attempt)

    def _execute_many(self, groups: list[tuple[NodeId, list[StepState]]],
                      attempt: int = 0) -> None:
        """Run nodes' steps on the executor, recording each as it lands (engine.sharing)."""
        if not any(steps for _, steps in groups):
            self._flush()  # all a call without steps does (a settled batch): nothing to run
            for nid, _ in groups:
                self.ctx.view.forget(nid)
            return
        from barca.engine import release_gc
        release_gc()  # the CLI holds the collector off while it only reads (faces.commands)
        from barca.engine.executors.job import StepJob, unpack_output  # only when steps run
        from barca.engine.inputs import step_kwargs
        groups, waiting = self._sharing.split(groups) if self._sharing else (groups, [])
        where: list[StepState] = []  # each step to run by index (its node: s.node)
        nodes: dict[NodeId, tuple[Any, dict[str, str], NodeState, Any, str, Any]] = {}
        for nid, steps in groups:
            m = self.graph.nodes[nid]
            fm = self.graph.files[m.file]
            def_hash, def_parts = self.ctx.definition(nid)
            shipped = None
            if fm.abspath == PSEUDO_ABSPATH:
                from barca.model.notebook import function_for, ship
                # (a notebook node's function is in this kernel: the graph was read from it)
                shipped = ship(cast("Callable[..., Any]", function_for(m.function)))
            nodes[nid] = (m, def_parts, self.w.states[nid], fm, def_hash, shipped)
            where.extend(steps)

        def job(i: int) -> StepJob:
            nid = (s := where[i]).node
            m, _, _, fm, def_hash, shipped = nodes[nid]
            if s.kwargs is None:
                s.kwargs = step_kwargs(self.ctx, nid, s.key, self.w.states)
            return StepJob(
                index=i, step=s.id, node=nid, key=s.key, kind=m.kind,
                file=fm.abspath, module=fm.module, function=m.function,
                # (a step to run has its run hash: decide computed it)
                run_hash=def_hash if m.kind == "sensor" else cast(str, s.run_hash),
                serializer=m.serializer if m.serializer != "expr" else None,
                kwargs=s.kwargs, key_source=nid in self.ctx.key_sources,
                timeout=m.timeout, retries=m.retries, sinks=m.sinks, shipped=shipped,
                store_prefix=self.ctx.store.prefix, retry_backoff=m.retry_backoff,
                weight=m.weight, repair=s.id in self._repairing)

        bad_inputs: dict[NodeId, list[tuple[StepState, StepRecord]]] = {}

        def on_record(rec: StepRecord) -> None:
            nid = (s := where[rec.index]).node
            m, def_parts, ns, *_ = nodes[nid]
            s.elapsed, s.attempts = rec.elapsed, rec.attempts
            if rec.warning:
                self._warn(f"{s.id}: {rec.warning}")
            if rec.status == "input" and attempt == 0:  # repaired below, then run again
                bad_inputs.setdefault(nid, []).append((s, rec))
                return
            if rec.status == "success":
                s.action = "ran"
                s.path, s.format, s.sha256, s.shape = rec.path, rec.format, rec.sha256, rec.shape
                if s.path:
                    self.produced.append(s.path)
                    self.produced_bytes += rec.size or 0
                if m.kind == "sensor":
                    s.run_hash, s.value_hash = rec.run_hash, rec.value_hash
                    s.parts = dict(def_parts, value=(rec.value_hash or "")[:16])
                if rec.keys is not None:
                    ns.output = SourceOutput(*unpack_output(rec.keys, rec.key_values, rec.key_raw))
                self.w.done += 1
                env = ""
                if m.env:  # (dotenv's module only where a node reads the environment)
                    from barca.core import dotenv
                    env = dotenv.shown_text(m.env, self.graph.root)
                self.on_event(ev.StepCompleted(s.id, rec.elapsed, self.w.done, self.w.total,
                                               rec.output, env))
            else:
                s.action, s.error, s.traceback = "failed", rec.error, rec.traceback
                if rec.infra:
                    self.w.infra.append(rec.infra)
                self.w.failed += 1
                self.on_event(ev.StepFailedEvent(s.id, rec.error or "", rec.traceback or "",
                                                 rec.output))
            self._rows.append(result_row(nid, s, rec, self.run_id))
            s.kwargs = s.parts = None  # recorded: held to the run's end they cost ~1 kB a key
            if rec.lines:
                self._lines.extend((self.run_id, nid, s.id, ts, stream, line)
                                   for ts, stream, line in rec.lines)
            if rec.uploaded is False:
                self.upload_errors.append(f"{s.path}: {rec.upload_error}")
            if len(self._rows) >= 500 or time.monotonic() - self._last_flush > 0.5:
                self._flush()

        def on_lines(lines: list[tuple[int, float, str, str]]) -> None:
            """Lines steps wrote while running: stored as the pool hands them over (batched)."""
            if self.execute:
                got = []
                for index, ts, stream, line in lines:
                    s = where[index]
                    got.append((self.run_id, s.node, s.id, ts, stream, line))
                self.ctx.store.record((), got)

        if where:  # said before the first one ends: progress is drawn from the start
            self.on_event(ev.StepsStarted(tuple(s.id for s in where), self.w.done,
                                          self.w.cached, self.w.failed, self.w.total,
                                          max(0, self._unknown)))
        for lo in range(0, len(where), self.window):  # jobs made a window at a time
            self.pool().run([job(i) for i in range(lo, min(lo + self.window, len(where)))],
                            on_record, on_lines, meanwhile=self.ctx.view.load_due)
        self._flush()
        for nid, _ in groups:
            self.ctx.view.forget(nid)
        for nid, bad in bad_inputs.items():
            self._repair_inputs(nid, bad)
        if waiting:  # theirs landed (served); what is left is ours to run
            self._execute_many(self._sharing.wait(waiting), attempt)  # type: ignore[union-attr]

    def _repair_inputs(self, nid: NodeId, bad: list[tuple[StepState, StepRecord]]) -> None:
        """Steps whose worker found an input missing or corrupt: compute those inputs again
        (under the same run hash), then run the steps once more."""
        producers: dict[str, StepState] = {}
        for _, rec in bad:
            prod = producer_of(self.w.states, rec.bad_input or "")
            if prod is not None and prod.action == "cached":
                producers[prod.path or ""] = prod
        self.integrity.forget(set(producers))
        # a worker names the first bad input it meets; the others (several keys evicted or
        # deleted at once) are found here, so the second attempt has them all
        for inp in self.graph.nodes[nid].inputs:
            up = self.w.states.get(inp.target)
            if up is not None:
                for st in up.steps.values():
                    if st.action == "cached" and st.path:
                        producers.setdefault(st.path, st)
        self._ensure_steps(list(producers.values()))
        retry = [s for s, _ in bad]
        for s in retry:  # a recomputed input may have other bytes (a uuid, a timestamp) or
            s.kwargs = None  # another file: the second attempt reads what is recorded now
        self._execute(nid, retry, attempt=1)

    def _flush(self) -> None:
        if (self._rows or self._lines) and self.execute:
            rows, self._rows = self._rows, []
            lines, self._lines = self._lines, []
            self.ctx.store.record(rows, lines, also=self._sharing.release_writes(rows)
                                  if self._sharing is not None else ())
        self._last_flush = time.monotonic()

