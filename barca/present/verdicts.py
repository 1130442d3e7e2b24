"""Node-level verdicts for ``status``, ``--dry-run`` and run results, summarised from the
planner's per-step decisions (one row per node, never per key)."""
from __future__ import annotations

import time

from barca.core.types import PREVIEW_KEYS, NodeId, Reason, State, key_preview, short_name
from barca.engine.planner import Context, NodeState
from barca.engine.states import StepState
from barca.model.topology import Graph
from barca.present.results import RunResult, StatusRow, StepSummary
from barca.store.metadata import Row

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

    from barca.present.plans import PlanRow


def _keys_text(keys: list[str]) -> str:
    shown = ", ".join(key_preview(keys))
    return shown + (f" (+{len(keys) - PREVIEW_KEYS} more)" if len(keys) > PREVIEW_KEYS else "")


def _sensor_inputs(graph: Graph, nid: NodeId) -> list[str]:
    """Sensors a node reads directly: as an input, or as the source of its keys."""
    ups = [i.target for i in graph.nodes[nid].inputs] + [
        d.source for d in graph.nodes[nid].dims if d.kind == "from"]
    return [short_name(u) for u in dict.fromkeys(ups)
            if graph.nodes[u].kind == "sensor"]


def _assumption(graph: Graph, nid: NodeId) -> str:
    sensors = _sensor_inputs(graph, nid)
    if not sensors:
        return ""
    names = ", ".join(f"'{s}'" for s in sensors)
    verb = "returns" if len(sensors) == 1 else "return"
    return f"assumes sensor {names} {verb} the same value as its last run"


def partition_counts(ns: NodeState) -> dict[str, Any]:
    t = ns.tally()
    cached = t.count("cached")
    missing = [] if cached == t.total else [
        s.key for s in ns.odd_steps() if s.action != "cached"]
    return {"cached": cached, "missing": len(missing), "missing_keys": key_preview(missing),
            "total": t.total}


# ---------------------------------------------------------------------------- dry run

def plan_row(ctx: Context, ns: NodeState, weight: int | None = None,
             undeclared: list[str] | None = None) -> PlanRow:
    """A node's line in ``--dry-run`` (``weight``: shown when above 1; ``undeclared``: the
    environment variables it reads without declaring them)."""
    from barca.present.plans import PlanRow
    graph = ctx.graph
    m = graph.nodes[ns.node]
    t = ns.tally()
    run, unknown, skipped = t.steps("run"), t.steps("unknown"), t.steps("skipped")
    n_cached = t.count("cached")
    parts = None
    if m.partitioned and ns.keys is not None:
        parts = {"cached": n_cached, "total": t.total, "will_run": len(run),
                 "will_run_keys": key_preview(s.key for s in run)}
    first = t.first("run", "unknown", "skipped", "cached")
    reason = first.reason if first else "materialized"
    assume = _assumption(graph, ns.node)
    if ns.keys is None or (unknown and not run and not n_cached):
        action, detail = "unknown", unknown[0].detail if unknown else ns.unknown_detail
    elif skipped and not run and not n_cached:
        action, detail = "skipped", skipped[0].detail
    elif run and n_cached:
        action = "partial"
        detail = (f"{n_cached} of {t.total} keys cached; will run: "
               f"{_keys_text([s.key for s in run])}")
    elif run:
        action = "will run"
        detail = run[0].detail
        if m.partitioned:
            detail = f"{len(run)} key{'s' if len(run) != 1 else ''}; {detail}"
    else:
        action = "cached"
        if m.partitioned:
            n = n_cached
            detail = f"{n} key{'s' if n != 1 else ''}; {assume}" if assume else \
                f"{n} key{'s' if n != 1 else ''} cached"
        else:
            detail = assume or "-"
    # a node of one step: the run hash it has (or will run under), when the walk knows it
    run_hash = first.run_hash if first is not None and not m.partitioned else None
    return PlanRow(ns.node, m.kind, action, reason, detail, parts, len(run), n_cached,
                   len(unknown), _extra(run_hash=run_hash, weight=weight,
                                        undeclared_env=undeclared, env=_env(ctx, m.env)))


def _env(ctx: Context, names: list[str]) -> dict[str, str | None] | None:
    from barca.core.dotenv import values
    return values(names, ctx.graph.root) if names else None


def _extra(**keys: Any) -> dict[str, Any] | None:
    """The keys of a step entry that apply (not None, not empty)."""
    return {k: v for k, v in keys.items() if v} or None


# ---------------------------------------------------------------------------- status

def _when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ts))


def _last_row(ctx: Context, ns: NodeState) -> Row | None:
    """The row LAST RUN and SHAPE describe: the newest current result when every key has one
    (after a revert, the earlier result, not the newer row of the reverted code); else the
    newest row (a failure of the last run first), which tells why the node is not current."""
    from barca.engine.current import newest_current  # status only: never a run's result
    current = newest_current(ctx, ns)
    if current is not None:
        return current
    hist = ctx.history(ns.node)
    keys = ns.keys if ns.keys is not None else list(hist.latest)
    rows = [hist.latest[k] for k in keys if k in hist.latest]
    if not rows:
        return None
    newest = max(rows, key=lambda r: r.id)
    failed = [r for r in rows if r.run_id == newest.run_id and r.status == "failed"]
    return max(failed, key=lambda r: r.id) if failed else newest


def status_row(ctx: Context, ns: NodeState) -> StatusRow:
    graph = ctx.graph
    m = graph.nodes[ns.node]
    hist = ctx.history(ns.node)
    t = ns.tally()
    last = _last_row(ctx, ns)
    last_failed = last is not None and last.status == "failed"
    parts = partition_counts(ns) if m.partitioned and ns.keys is not None else None
    n_cached = t.count("cached")
    unknown, run = t.steps("unknown"), t.steps("run")
    keys = ns.keys or []
    has_record = n_cached > 0 or any(k in hist.latest_success for k in keys)
    if m.kind in ("sensor", "task"):
        state, reason, detail = State.ALWAYS_RUNS, m.kind, m.kind
    elif ns.keys is None or (unknown and unknown[0].reason == "partitions_unknown"):
        state, reason = State.UNKNOWN, Reason.PARTITIONS_UNKNOWN
        detail = unknown[0].detail if unknown else ns.unknown_detail
    elif m.partitioned and n_cached and run + unknown:
        state, reason = State.PARTIAL, Reason.PARTITIONS_MISSING
        detail = f"{n_cached} of {t.total} keys cached; partitions_missing"
        if last_failed and last is not None:  # (last_failed says so; mypy needs it said)
            detail += f"; last run failed: {last.error}"
    elif t.total and n_cached == t.total:
        state, reason, detail = State.CACHED, Reason.MATERIALIZED, "materialized"
    elif unknown:
        state, reason, detail = State.UNKNOWN, unknown[0].reason, unknown[0].detail
    elif not has_record:
        state = State.NEVER_RUN
        if last_failed and last is not None:
            reason, detail = Reason.FAILED, f"last run failed: {last.error}"
        else:
            reason, detail = Reason.NO_RECORD, "no_record"
    elif not t.total:
        state, reason, detail = State.CACHED, Reason.MATERIALIZED, "materialized"
    else:
        first = run[0] if run else next(iter(ns.steps.values()))
        state, reason, detail = State.STALE, first.reason, first.detail
        if first.reason == "failed":
            detail = first.detail
    if last is None:
        last_run, shape, lm = "-", None, None
    elif last.status == "success":
        last_run = f"success {_when(last.created_at)} {last.elapsed or 0:.2f}s"
        from barca.store import shapes
        shape = shapes.decode(last.shape)   # recorded when written: no file is opened
        lm = _materialization(last)
    else:
        last_run, shape, lm = f"failed {_when(last.created_at)}", None, _materialization(last)
    deps = tuple(graph.upstream[ns.node])
    extra: dict[str, Any] = {"last_bytes_change": _bytes_changed(ctx, last), "env": list(m.env)}
    undeclared = sorted(set(m.env_reads) - set(m.env))
    if undeclared:  # read, not declared in env=, so not hashed (barca docs env)
        extra["undeclared_env"] = undeclared
    if m.schedule is not None:
        from barca.present.schedules import schedule_state
        rows = ctx.store.rows(ns.node, order="id DESC LIMIT 1000")
        from barca.store.schedstate import kept_state
        extra["schedule"] = schedule_state(m, [r.status for r in rows],
                                           kept_state(ctx.store, ns.node))
    current = None
    if not m.partitioned and len(ns.steps) == 1:
        (step,) = ns.steps.values()
        if step.run_hash:
            current = {"run_hash": step.run_hash}
            if state == State.CACHED and step.path:
                current["artifact"] = step.path
    return StatusRow(ns.node, m.kind, state, reason, detail, last_run, shape, deps,
                     _read_inputs(graph, m), parts, lm, extra or None, current)


def _read_inputs(graph: Graph, m: Any) -> tuple[str, ...]:
    """The nodes whose results a node's function receives: its inputs, and the node its keys
    come from when a parameter is named after it (``signal(ticker, prices)`` reads prices)."""
    ups = [i.target for i in m.inputs]
    names = {p for p, _ in m.params}
    ups += [d.source for d in m.dims if d.kind == "from" and d.source is not None
            and graph.nodes[d.source].function in names and d.source not in ups]
    return tuple(ups)


def _bytes_changed(ctx: Context, last: Row | None) -> str | None:
    """When the bytes of the result status shows last changed: the oldest of the newest run
    of results of its key with the same content (a re-run that wrote the same bytes is not a
    change). None when there is no successful result."""
    if last is None or last.status != "success" or not last.sha256:
        return None
    when = last.created_at
    for r in ctx.store.rows(last.asset, "partition=? AND status='success' AND id<=?",
                            (last.partition, last.id), order="id DESC LIMIT 1000"):
        if r.sha256 != last.sha256:
            break
        when = r.created_at
    from barca.core.when import utc_text  # (status only: not loaded by a cached get)
    return utc_text(when)


def _materialization(r: Row) -> dict[str, Any]:
    from barca.core.when import utc_text  # (status only: not loaded by a cached get)
    # artifact, size_bytes and content_hash: barca 0.30.2's words for the path, its size and
    # its SHA-256, for a script written for it
    return {"status": r.status, "run_id": r.run_id, "run_hash": r.run_hash, "path": r.path,
            "format": r.format, "size": r.size, "created_at": utc_text(r.created_at),
            "elapsed_seconds": r.elapsed, "partition": r.partition or None, "error": r.error,
            "artifact": r.path, "size_bytes": r.size, "content_hash": r.sha256}


# ---------------------------------------------------------------------------- run results

def step_summary(ctx: Context, ns: NodeState,
                 undeclared: list[str] | None = None) -> StepSummary:
    m = ctx.graph.nodes[ns.node]
    # (a settled node with no environment is summed up by run_result's loop, in line)
    one = None if m.dims else ns.only_cached()  # (m.partitioned, without a property call)
    first: StepState | None
    parts = None
    steps = None if ns.lazy or m.partitioned else ns.steps
    if one is not None:  # (the same, with what it says of the environment)
        action, first, tries = "cached", None, []
    elif steps is not None and len(steps) == 1:  # one key (most nodes): no tally to make
        first = next(iter(steps.values()))
        action = first.action
        if action not in ("failed", "ran", "cached", "skipped"):
            action, first = "cached", None
        tries = [first.attempts] if first is not None and first.attempts and action in (
            "ran", "failed") else []
    else:
        t = ns.tally()
        ran, failed = t.steps("ran"), t.steps("failed")
        n_cached = t.count("cached")
        if failed:
            action, first = "failed", failed[0]
        elif ran and n_cached:
            action, first = "partial", ran[0]
        elif ran:
            action, first = "ran", ran[0]
        elif n_cached:
            action, first = "cached", t.first("cached")
        elif t.count("skipped"):
            action, first = "skipped", t.first("skipped")
        else:
            action, first = "cached", None
        if m.partitioned:
            will = ran + failed
            parts = {"cached": n_cached, "total": t.total, "will_run": len(will),
                     "will_run_keys": key_preview(s.key for s in will)}
        tries = [s.attempts for s in ran + failed if s.attempts]
    detail = first.error if first is not None and first.action == "failed" else (
        first.detail if first else "")
    run_hash = first.run_hash if first is not None and not m.partitioned else None
    reason = first.reason if first else ""
    artifact = None
    if one is not None:  # (as StepState.cached says a cached step)
        detail, run_hash, reason = "-", one[1], Reason.MATERIALIZED
        at = ns.where(one[1])
        artifact = at[0] if at is not None else None
    elif first is not None and not m.partitioned and first.action in ("ran", "cached"):
        artifact = first.path  # (a cached step's location is looked up when first asked)
        if artifact is None and first.action == "cached" and first.run_hash:
            at = ns.where(first.run_hash)
            artifact = at[0] if at is not None else None
    extra: dict[str, Any] = {}
    if first is not None and not m.partitioned and first.action in ("ran", "failed") \
            and first.elapsed is not None:  # (as barca 0.30.2's entry: the call's time)
        extra["elapsed_seconds"] = first.elapsed
    if tries:  # how many calls the function took (retries=), the most over its keys
        extra["attempts"] = max(tries)
    if undeclared:
        extra["undeclared_env"] = undeclared
    if m.env:  # the values it ran (or would run) with, secrets redacted
        from barca.core.dotenv import values
        extra["env"] = values(m.env, ctx.graph.root)
    return StepSummary(ns.node, m.kind, action, reason, detail or "", run_hash, parts,
                       extra or None, artifact)


def run_result(ctx: Context, runner: Any, command: str, elapsed: float, outputs: Any,
               warnings: list[dict[str, Any]], cache: dict[str, Any] | None = None) -> RunResult:
    """The result of a run: one summary per node, the failures, what was skipped below them."""
    w = runner.w
    from barca.present.notices import undeclared_env
    env = undeclared_env(warnings)
    failures: list[tuple[str, str, str]] = []
    skipped = 0
    steps = []
    nodes, states, summary, materialized = ctx.graph.nodes, w.states, StepSummary, \
        Reason.MATERIALIZED
    # where each one-key node's result is (its entry's artifact), read in one query for those
    # the walk did not locate (a settled walk's record holds most): not one query per node
    ctx.view.locate([t for t in w.order if not nodes[t].dims])
    for t in w.order:  # one pass over each node's odd steps (none, for a settled node)
        ns, m, undeclared = states[t], nodes[t], env.get(t)
        one = None if m.dims or undeclared or m.env else ns.only_cached()
        if one is not None:  # its one step simply cached (as StepState.cached says it), no
            # StepState made: what step_summary would say, in line (most of a cached walk)
            at = ns.where(one[1])
            steps.append(summary(ns.node, m.kind, "cached", materialized, "-", one[1], None,
                                 None, at[0] if at is not None else None))
            continue  # (simply cached: no odd step)
        for s in ns.odd_steps():
            if s.action == "failed":
                failures.append((s.id, s.error or "", s.traceback or ""))
            elif s.action == "skipped" and s.reason == "upstream_failed":
                skipped += 1
        steps.append(step_summary(ctx, ns, undeclared))
    return RunResult(
        command=command, run_id=runner.run_id, status="failed" if w.failed else "success",
        # executed: the steps whose function was called, whether it then failed or not
        elapsed=elapsed, steps_executed=w.done + w.failed, steps_total=w.total, phases=w.phases,
        steps=tuple(steps),
        outputs=tuple(outputs), warnings=tuple(warnings),
        failed_node=failures[0][0] if failures else None,
        error=failures[0][1] if failures else None, skipped_downstream=skipped,
        verb="ran" if command == "run" else "got", failures=tuple(failures), cache=cache)
