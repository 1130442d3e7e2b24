"""The plans: what a command would do, shown before anything runs -- ``--dry-run`` (``Plan``)
and ``barca plan`` (``PhasePlan``). Result objects like ``barca.present.results``'s."""
from __future__ import annotations

import json
from typing import Any

from barca.core.record import Record
from barca.core.render import html_table, plural, short_names, text_table
from barca.present.display import _Displayable

# ---------------------------------------------------------------------------- dry run

class PlanRow(Record):
    __slots__ = ("step", "kind", "action", "reason", "detail", "partitions", "will_run", "cached",
                 "unknown", "extra")
    _defaults = {"extra": None}
    step: str
    kind: str
    action: str                # will run | cached | partial | unknown | skipped
    reason: str
    detail: str
    partitions: dict[str, Any] | None
    will_run: int
    cached: int
    unknown: int
    extra: dict[str, Any] | None  # keys a step entry has only when they apply (weight, ...)


WHY_WIDTH = 70  # the dry-run WHY column pads to at most this; longer reasons overflow


class Plan(_Displayable, Record):
    __slots__ = ("command", "target", "rows", "capacity", "warnings")
    _defaults = {"capacity": None, "warnings": ()}
    command: str
    target: str
    rows: tuple[PlanRow, ...]
    capacity: int | None       # how much step weight may run at once
    warnings: tuple[dict[str, Any], ...]

    def summary(self) -> dict[str, int]:
        return {"will_run": sum(r.will_run for r in self.rows),
                "cached": sum(r.cached for r in self.rows),
                "unknown": sum(r.unknown for r in self.rows)}

    def summary_line(self) -> str:
        s = self.summary()
        return f"{s['will_run']} will run, {s['cached']} cached, {s['unknown']} unknown"

    def to_json(self) -> dict[str, Any]:
        out = {"dry_run": True, "command": self.command, "target": self.target,
               # the JSON word for a step that will run is barca 0.30.2's ``run`` (a script
               # written for it keeps working); the table says "will run"
               # (an unpartitioned step has no "partitions" key, as in a run's document)
               "steps": [dict({"id": r.step, "kind": r.kind,
                               "action": "run" if r.action == "will run" else r.action,
                               "reason": r.reason, "detail": r.detail},
                              **({} if r.partitions is None else {"partitions": r.partitions}),
                              **(r.extra or {}))
                         for r in self.rows],
               "summary": self.summary(), "warnings": list(self.warnings)}
        if self.capacity is not None:
            out["capacity"] = self.capacity
        return out

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        return (["STATUS", "WHY", "STEP"], [[r.action, r.detail, r.step] for r in self.rows], 0,
                self.summary_line())

    def title(self) -> str:
        return f"Dry run: {self.command} (nothing executed, nothing written)"

    def _html_table(self) -> tuple[list[str], list[list[str]], int | None, str, int | None]:
        """As every step table of a notebook orders it: STATUS, STEP, WHY (the CLI keeps the
        seed page's STATUS, WHY, STEP)."""
        _, rows, col, summary = self._table()
        short = short_names([r.step for r in self.rows])
        return (["STATUS", "STEP", "WHY"], [[a, short[s], w] for a, w, s in rows], col,
                summary, 2)

    def _repr_html_(self) -> str:
        headers, rows, col, summary, why = self._html_table()
        # a notebook's words, not a command line: "Dry run of get report"
        what = self.command.removeprefix("barca ")
        title = f"Dry run of {what}: nothing executed, nothing written"
        return html_table(headers, rows, col, summary, title=title, why_col=why)

    def __str__(self) -> str:
        headers, rows, _, summary = self._table()
        table = text_table(headers, rows, max_widths={1: WHY_WIDTH})
        return f"{self.title()}\n\n{table}\n\n{summary}"


# ---------------------------------------------------------------------------- barca plan

# the plan document's format (not the package's version): 1, as barca 0.30.2's
PLAN_VERSION = 1


class PhasePlan(_Displayable, Record):
    """``barca plan``: every step by phase, with why the phase starts and how its steps to run
    spread over the pool (streams); one summary per node (with the first twenty keys, in
    lexical order), the warnings (sorted by node, parameter and kind), the pool size, and with
    ``--partition`` what the selection keeps and leaves out."""
    __slots__ = ("pool_size", "phases", "nodes", "warnings", "capacity", "capacity_source",
                 "weights", "reasons", "streams", "selection")
    _defaults = {"nodes": (), "warnings": (), "capacity": None, "capacity_source": "pool size",
                 "weights": None, "reasons": (), "streams": (), "selection": None}
    pool_size: int
    phases: tuple[tuple[dict[str, Any], ...], ...]
    nodes: tuple[dict[str, Any], ...]
    warnings: tuple[dict[str, str], ...]
    capacity: int | None        # None: the pool size
    capacity_source: str        # pool size | BARCA_CAPACITY | [execution] capacity
    weights: dict[str, int] | None  # node id -> weight, for weights above 1
    reasons: tuple[dict[str, str], ...]   # per phase: {type: initial} | {type: fan_in, node_id}
    streams: tuple[tuple[dict[str, Any], ...], ...]  # per phase: {stream_id, steps: [node]}
    selection: dict[str, Any] | None  # --partition: {selection, nodes, skipped_nodes}

    def to_json(self) -> dict[str, Any]:
        total = sum(len(p) for p in self.phases)
        doc = {"plan_version": PLAN_VERSION, "total_steps": total, "pool_size": self.pool_size,
               "capacity": self.pool_size if self.capacity is None else self.capacity,
               "capacity_source": self.capacity_source, "weights": dict(self.weights or {}),
               "phases": [{"phase": i + 1,
                           "reason": self.reasons[i] if self.reasons else None,
                           "streams": list(self.streams[i]) if self.streams else [],
                           "steps": list(p)} for i, p in enumerate(self.phases)],
               "steps_total": total, "nodes": list(self.nodes), "warnings": list(self.warnings)}
        if self.selection is not None:
            doc["partition_selection"] = self.selection
        return doc

    def _table(self) -> tuple[list[str], list[list[str]], int | None, str]:
        rows = [[str(i + 1), s["id"], s["kind"], s["action"]]
                for i, p in enumerate(self.phases) for s in p]
        summary = f"{plural(len(self.phases), 'phase')}, pool size {self.pool_size}"
        if self.warnings:
            summary += f", {plural(len(self.warnings), 'warning')}"
        return (["PHASE", "STEP", "KIND", "ACTION"], rows, 3, summary)

    def _html_table(self) -> tuple[list[str], list[list[str]], int | None, str, int | None]:
        headers, rows, col, summary = self._table()
        short = short_names([r[1] for r in rows])
        return headers, [[p, short[s], k, a] for p, s, k, a in rows], col, summary, None

    def __str__(self) -> str:
        return json.dumps(self.to_json(), indent=2)
