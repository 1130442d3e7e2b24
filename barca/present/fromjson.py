"""Result objects rebuilt from their own ``to_json()``: what a command run on a ``barca serve``
answers (``--server``) becomes the object a local command returns, so it is printed by the
same renderings (text, JSON, ``-o value``, HTML) -- there is no second renderer.

Each ``*_from_json`` is the inverse of the class's ``to_json()`` on the keys that document
has; what the JSON does not carry (a run's artifact paths when the value came inline) is left
out of the text rather than guessed."""
from __future__ import annotations

import time
from typing import Any

from barca.core.types import short_name
from barca.present.grouping import GroupListing
from barca.present.journal import History, LogLine, RunRow, StepLog
from barca.present.listview import Listing, ListRow
from barca.present.plans import Plan, PlanRow
from barca.present.results import (
    SUMMARY_ORDER,
    Output,
    OutputItem,
    RunResult,
    StatusReport,
    StatusRow,
    StepSummary,
)
from barca.present.statsreport import RUN_FIELDS, StatsReport
from barca.store import shapes


def _rest(entry: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any] | None:
    return {k: v for k, v in entry.items() if k not in known} or None


# ---------------------------------------------------------------------------- listing

_LIST_KEYS = ("id", "name", "kind", "freshness", "deps", "partitions")


def listing_from_json(doc: dict[str, Any]) -> Any:
    """``barca list --json`` (or ``--groups``)."""
    if "groups" in doc:
        return GroupListing(tuple(doc["groups"]))
    return Listing(tuple(
        ListRow(n["id"], n.get("kind", ""), n.get("freshness", ""), tuple(n.get("deps") or ()),
                tuple(n.get("partitions") or ()), _rest(n, _LIST_KEYS) or {})
        for n in doc.get("nodes", [])), doc.get("root", ""), doc.get("total"))


# ---------------------------------------------------------------------------- status

_STATUS_KEYS = ("id", "name", "kind", "inputs", "cache", "partitions", "last_materialization",
                "shape")


def _last_run(lm: dict[str, Any] | None) -> str:
    """The LAST RUN cell, from the materialization the JSON names (as ``status_row`` words it)."""
    if not lm:
        return "-"
    at = lm.get("created_at")  # UTC, as the JSON writes it (an older server: with " UTC")
    when = at if at is None or str(at).endswith(" UTC") else f"{at} UTC"
    if lm.get("status") == "success":
        return f"success {when} {lm.get('elapsed_seconds') or 0:.2f}s"
    return f"failed {when}"


_STATES = {k for k, _ in SUMMARY_ORDER}


def status_from_json(doc: dict[str, Any]) -> StatusReport:
    """``barca status --json``."""
    rows = []
    for n in doc.get("nodes", []):
        cache = n.get("cache") or {}
        inputs = tuple(n.get("inputs") or ())
        state = cache.get("state", "unknown")
        rows.append(StatusRow(
            n["id"], n.get("kind", ""), state if state in _STATES else "unknown",
            cache.get("reason", ""), cache.get("detail", ""),
            _last_run(n.get("last_materialization")),
            shapes.decode(n.get("shape")), tuple(n.get("deps") or inputs),
            inputs, n.get("partitions"), n.get("last_materialization"),
            _rest(n, _STATUS_KEYS),
            {k: cache[k] for k in ("run_hash", "artifact") if k in cache} or None))
    return StatusReport(tuple(rows), targets=tuple(doc.get("targets") or ()),
                        root=doc.get("root") or "", total=doc.get("total"),
                        filter=doc.get("filter"), note=doc.get("note") or "")


def status_cone(report: StatusReport, names: list[str]) -> StatusReport:
    """``status TARGET``: the named nodes and what they read, as a local status shows them."""
    by_id = {r.id: r for r in report.rows}
    want = [r.id for r in report.rows if r.id in names or r.name in names]
    seen: set[str] = set()
    while want:
        nid = want.pop()
        if nid not in seen and nid in by_id:
            seen.add(nid)
            want.extend(by_id[nid].deps)
    return StatusReport(tuple(r for r in report.rows if r.id in seen), targets=tuple(names),
                        root=report.root, note=report.note)


# ---------------------------------------------------------------------------- runs

_STEP_KEYS = ("id", "kind", "status", "reason", "detail", "run_hash", "partitions",
              "artifact")
_PATH = ("path", "format")


def _is_ref(v: Any) -> bool:
    """An output the JSON names by its artifact rather than its value."""
    return isinstance(v, dict) and set(v) == set(_PATH)


def _output(target: str, partitioned: bool, fo: Any) -> Output:
    if partitioned and isinstance(fo, dict) and "total_keys" not in fo:
        items = tuple(OutputItem(k, v["path"] if _is_ref(v) else None,
                                 v["format"] if _is_ref(v) else None, False)
                      for k, v in fo.items())
        return Output(target, True, items, {k: v for k, v in fo.items() if not _is_ref(v)})
    if _is_ref(fo):
        return Output(target, partitioned, (OutputItem("", fo["path"], fo["format"], False),))
    import json
    preview = "" if fo is None else "\n".join(
        "  " + line for line in json.dumps(fo, indent=2, sort_keys=True,
                                          ensure_ascii=False).splitlines())
    return Output(target, partitioned, (), fo, preview)


def run_from_json(doc: dict[str, Any], command: str, targets: list[str]) -> RunResult:
    """``barca get/run --json`` of a run asked for ``targets`` (names or ids; empty: all)."""
    steps = tuple(StepSummary(s["id"], s.get("kind", ""), s.get("status", ""),
                              s.get("reason", ""), s.get("detail", ""), s.get("run_hash"),
                              s.get("partitions"), _rest(s, _STEP_KEYS), s.get("artifact"))
                  for s in doc.get("steps", []))
    parted = {s.id: s.partitions is not None for s in steps}
    ids = {short_name(s.id): s.id for s in steps}
    fo = doc.get("final_output")
    outputs: tuple[Output, ...] = ()
    if len(targets) == 1:
        nid = ids.get(targets[0], targets[0])
        outputs = (_output(nid, parted.get(nid, False), fo),)
    elif isinstance(fo, dict):  # several targets (or all): by node id
        outputs = tuple(_output(k, parted.get(k, False), v) for k, v in fo.items())
    failed = [s for s in steps if s.action == "failed"]
    error = doc.get("error")
    return RunResult(
        command, doc.get("run_id", ""), doc.get("status", ""),
        float(doc.get("elapsed_seconds") or 0), int(doc.get("steps_executed") or 0),
        int(doc.get("steps_total") or 0), int(doc.get("phases") or 0), steps, outputs,
        tuple(doc.get("warnings") or ()), doc.get("failed_node"), error,
        verb="ran" if command == "run" else "got",
        failures=tuple((s.id, s.detail, "") for s in failed), cache=doc.get("cache"))


def plan_from_json(doc: dict[str, Any]) -> Plan:
    """``--dry-run --json``."""
    rows = []
    for s in doc.get("steps", []):
        p = s.get("partitions")
        action = s.get("action", "")
        action = "will run" if action == "run" else action  # (the JSON's word, see Plan)
        if p:
            will, cached = int(p.get("will_run") or 0), int(p.get("cached") or 0)
            unknown = max(0, int(p.get("total") or 0) - will - cached)
        else:
            will, cached = int(action == "will run"), int(action == "cached")
            unknown = int(action == "unknown")
        rows.append(PlanRow(s["id"], s.get("kind", ""), action, s.get("reason", ""),
                            s.get("detail", ""), p, will, cached, unknown,
                            _rest(s, ("id", "kind", "action", "reason", "detail",
                                      "partitions"))))
    command = str(doc.get("command", ""))
    return Plan(command, doc.get("target", ""), tuple(rows), doc.get("capacity"),
                tuple(doc.get("warnings") or ()))


# ---------------------------------------------------------------------------- history, logs

def _epoch(ts: Any) -> float | None:
    """Unix seconds from a number or an RFC 3339 / ``YYYY-MM-DD HH:MM:SS`` UTC time."""
    if ts is None or isinstance(ts, (int, float)):
        return ts
    from barca.core.when import utc_seconds
    try:
        return utc_seconds(str(ts))
    except ValueError:
        return None


def history_from_json(doc: dict[str, Any]) -> History:
    """``barca history --json``."""
    runs = []
    for r in doc.get("runs", []):
        row = {f: r.get(f) for f in RunRow.__slots__}
        row["started_at"] = _epoch(row["started_at"]) or 0.0
        row["finished_at"] = _epoch(row["finished_at"])
        row["elapsed"] = r.get("elapsed_seconds")  # (the times are to the second)
        runs.append(RunRow(**row))
    return History(tuple(runs), doc.get("total"))


def logs_from_json(run: dict[str, Any], lines: list[dict[str, Any]],
                   timestamps: bool = False) -> StepLog:
    """``barca logs``: the run's row (command, target, status) and its lines."""
    return StepLog(run.get("run_id", ""), run.get("command") or "", run.get("target") or "",
                   run.get("status") or "",
                   tuple(LogLine(int(x.get("seq", i)), x.get("node_id", ""),
                                 x.get("stream", "stdout"), _epoch(x.get("ts")) or time.time(),
                                 x.get("line", ""))
                         for i, x in enumerate(lines)), timestamps)


def stats_from_json(doc: dict[str, Any], fields: str | None = None) -> StatsReport:
    """``barca stats NAME --json`` (``--fields``: only those keys of each recent run)."""
    keep = tuple(f.strip() for f in fields.split(",") if f.strip()) if fields else None
    recent = tuple({k: r.get(k) for k in RUN_FIELDS} for r in doc.get("recent_runs", []))
    return StatsReport(doc.get("id", ""), int(doc.get("total_runs") or 0),
                       doc.get("avg_elapsed_seconds"), doc.get("median_elapsed_seconds"),
                       doc.get("p95_elapsed_seconds"), doc.get("max_elapsed_seconds"),
                       float(doc.get("cache_hit_rate") or 0), recent, keep)
