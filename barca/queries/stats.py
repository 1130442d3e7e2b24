"""``barca stats TARGET`` / ``barca.stats``: a node's execution history summed up from the
store (cache hits are not recorded, so only executions count)."""
from __future__ import annotations

import math
from typing import Any

from barca.core.errors import UsageError
from barca.core.settings import Settings, settings_of
from barca.core.when import utc_text
from barca.present.statsreport import RUN_FIELDS, StatsReport

RECENT = 10


def _p95(values: list[float]) -> float:
    """The 95th percentile, interpolated between the closest ranks (as numpy's default)."""
    s = sorted(values)
    at = (len(s) - 1) * 0.95
    lo, hi = math.floor(at), math.ceil(at)
    return s[lo] + (s[hi] - s[lo]) * (at - lo)


def _fields(fields: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...] | None:
    if fields is None:
        return None
    names = [f.strip() for f in (fields.split(",") if isinstance(fields, str) else fields)]
    names = [f for f in names if f]
    unknown = [f for f in names if f not in RUN_FIELDS]
    if unknown or not names:
        raise UsageError(f"--fields: unknown field {', '.join(unknown) or '(none)'}",
                         f"Fields of a recent run: {', '.join(RUN_FIELDS)}.")
    return tuple(names)


def stats_report(target: str, *files: str, fields: Any = None,
                 settings: Settings | None = None, **flags: Any) -> StatsReport:
    """The report of one node (a usage error for no target or an unknown one)."""
    if not target or not str(target).strip():
        raise UsageError("barca stats needs a target.", "Write: barca stats TARGET [files]")
    keep = _fields(fields)
    settings = settings_of(settings, **flags)
    from barca.model.topology import load_graph
    graph = load_graph(tuple(str(f) for f in files if f is not None), settings)
    nid = graph.resolve(str(target).strip(), "Asset", "stats")
    from barca.store.metadata import Store
    store = Store(settings.root, create=False, prefix=settings.store_prefix)
    try:
        rows = store.executions(nid)
    finally:
        store.close()
    seen: set[str] = set()
    hits = 0
    for _, _, _, _, run_hash, _ in rows:
        hits += run_hash in seen
        seen.add(run_hash)
    ok = [float(e) for status, e, *_ in rows if status == "success" and e is not None]
    import statistics  # only for `barca stats`: barca.api re-exports stats, imported at start
    recent = tuple({
        "elapsed_seconds": round(e, 4) if status == "success" and e is not None else None,
        "status": status,
        "created_at": utc_text(at),
        "error_message": error if status != "success" else None,
        "attempts": tries if tries is not None else 1,
    } for status, e, at, error, _, tries in reversed(rows[-RECENT:]))
    return StatsReport(
        nid, len(rows), round(statistics.fmean(ok), 4) if ok else None,
        round(statistics.median(ok), 4) if ok else None, round(_p95(ok), 4) if ok else None,
        round(max(ok), 4) if ok else None, round(hits / len(rows), 4) if rows else 0.0,
        recent, keep)


def stats(target: str, *files: str, fields: Any = None, settings: Settings | None = None,
          **flags: Any) -> dict[str, Any]:
    """``barca.stats("report", "pipeline.py")``: the same dict as ``barca stats --json``."""
    return stats_report(target, *files, fields=fields, settings=settings, **flags).to_json()
