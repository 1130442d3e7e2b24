"""``barca plan``: a run's phases, each step's action, how the steps to run spread over the
pool's workers (streams), and the warnings. Runs nothing, writes nothing."""
from __future__ import annotations

from typing import Any

from barca.api import Session, _predict
from barca.api.check import _targets, parse_partition
from barca.core import events as ev
from barca.core.settings import Settings, settings_of
from barca.core.types import NodeId, key_preview, short_name
from barca.engine.executors.job import chunk_size
from barca.engine.selection import check_selection, walk_order
from barca.model.topology import untracked_message, untracked_warnings
from barca.present.notices import Capacity, announce_warnings, warning_objects
from barca.present.plans import PhasePlan

RUNS = ("run", "unknown")  # the actions of a step that goes to the pool (unknown: keys to come)


def plan(*files: str, target: str | None = None, partition: str | dict[str, Any] | None = None,
         settings: Settings | None = None, on_event: ev.EventCallback = ev.ignore,
         **flags: Any) -> PhasePlan:
    settings = settings_of(settings, **flags)
    sess = Session(files, write=False, settings=settings)
    try:
        graph = sess.graph
        targets = _targets(graph, target, "get") if target else list(graph.order)
        selection = parse_partition(partition)
        if selection is not None:
            label = ",".join(short_name(t) for t in targets) if target else "all"
            check_selection(sess.ctx, walk_order(sess.ctx, targets), selection, label)
        w = _predict(sess, targets, selection=selection)
        for note in w.notes:
            on_event(ev.Note(note))
        skipped = [n for n in w.order if any(s.reason == "partition_selection"
                                             for s in w.states[n].steps.values())]
        phases: dict[int, list[dict[str, Any]]] = {}
        nodes: list[dict[str, Any]] = []
        left_out = set(skipped)
        for n in w.order:
            if n in left_out:
                continue
            ns = w.states[n]
            for s in ns.steps.values():
                phases.setdefault(graph.phase[n], []).append(
                    {"id": s.id, "node": n, "kind": graph.nodes[n].kind,
                     "action": s.action, "reason": s.reason, "run_hash": s.run_hash})
            t = ns.tally()
            known = graph.nodes[n].partitioned and ns.keys is not None
            keys = list(ns.keys) if known else []
            nodes.append({"id": n, "kind": graph.nodes[n].kind, "phase": graph.phase[n],
                          "partitioned": graph.nodes[n].partitioned,
                          "keys": len(keys) if known else None,
                          "key_preview": key_preview(keys), "will_run": t.count("run"),
                          "cached": t.count("cached"), "unknown": t.count("unknown")})
        order = sorted(phases)
        cap = Capacity(settings)
        cap.announce(graph, w.order, on_event)
        said = announce_warnings(graph, w.order, on_event)
        untracked = sess.ctx.untracked(list(w.order))
        for module, nids in sorted(untracked.items()):
            on_event(ev.Note(untracked_message(module, nids), "warning"))
        said = warning_objects(said + untracked_warnings(graph, untracked))
        weights = cap.weights(graph, w.order)
        capacity = cap.pool_size if cap.capacity is None else cap.capacity
        weighed = capacity < cap.pool_size or bool(weights)
        steps = [phases[k] for k in order]
        narrowed = None
        if selection is not None:
            narrowed = {"selection": {d: list(v) for d, v in selection.dims.items()},
                        "nodes": _narrowed(sess, w, selection, skipped),
                        "skipped_nodes": skipped}
        return PhasePlan(cap.pool_size, tuple(map(tuple, steps)),
                         tuple(dict(d, phase=order.index(d["phase"]) + 1) for d in nodes),
                         tuple(said), cap.capacity, cap.source, weights,
                         tuple(_reason(i, p) for i, p in enumerate(steps)),
                         tuple(_streams(i, p, cap.pool_size, weighed)
                               for i, p in enumerate(steps)), narrowed)
    finally:
        sess.close()


def _reason(index: int, steps: list[dict[str, Any]]) -> dict[str, str]:
    """Why a phase starts: the first one, at once; a later one, at the first node of it in
    walk order (its upstream are all in earlier phases, so it is the one whose input, a
    sensor's, a Manual asset's or every key of a collect, had to be complete first)."""
    if index == 0:
        return {"type": "initial"}
    return {"type": "fan_in", "node_id": steps[0]["node"]}


def _streams(index: int, steps: list[dict[str, Any]], size: int,
             weighed: bool) -> tuple[dict[str, Any], ...]:
    """How the phase's steps to run spread over the pool's workers when each takes as long as
    the next: the executor's chunks (``chunk_size``) dealt in turn. Each stream names the
    nodes whose steps it runs, once each, in walk order. (The pool hands a chunk to whichever
    worker is free, so a slow step shifts the rest.)"""
    todo = [s["node"] for s in steps if s["action"] in RUNS]
    per = chunk_size(len(todo), size, weighed)
    lanes: list[list[NodeId]] = [[] for _ in range(size)]
    for n, i in enumerate(range(0, len(todo), per)):
        lanes[n % size].extend(todo[i:i + per])
    return tuple({"stream_id": f"p{index}-w{j}", "steps": list(dict.fromkeys(lane))}
                 for j, lane in enumerate(lanes) if lane)


def _narrowed(sess: Session, w: Any, selection: Any,
              skipped: list[NodeId]) -> list[dict[str, Any]]:
    """Each node a ``--partition`` narrows: its selected keys, and how many it leaves out
    (None while its keys come from an output not yet made)."""
    out = []
    for n in w.order:
        dims = {d.name for d in sess.graph.nodes[n].dims}
        if n in skipped or not dims & set(selection.dims):
            continue
        selected = len(w.states[n].steps)
        every = sess.ctx.static_keys(n)
        out.append({"id": n, "selected": selected,
                    "skipped": None if every is None else len(every) - selected})
    return out
