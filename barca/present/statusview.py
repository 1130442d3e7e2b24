"""``barca status``'s options on a report: which nodes (``--state``, ``--problems``), how many
(``-l/--limit``, ``--all``) and which keys of each (``--fields``). The summary always counts
every node read, so a filtered or cut report still says how the whole cone stands."""
from __future__ import annotations

from itertools import islice

from barca.core import jsontext  # (json's C half: no re, #31 item 2)
from barca.core.errors import UsageError
from barca.core.types import short_name
from barca.present.results import SUMMARY_ORDER, StatusReport, StatusRow
from barca.store import shapes

TYPE_CHECKING = False  # typing is not imported at run time (#31 item 2)
if TYPE_CHECKING:
    from typing import Any

FIELDS = ("id", "name", "kind", "inputs", "partitioned", "cache", "partitions",
          "last_materialization", "last_bytes_change", "shape", "env", "undeclared_env",
          "schedule")
STATES = tuple(k for k, _ in SUMMARY_ORDER)


def field_names(flag: str, text: str, valid: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    bad = [n for n in names if n not in valid]
    if bad or not names:
        what = ", ".join(repr(b) for b in bad) if bad else "nothing"
        raise UsageError(f"{flag} {text!r} names {what}, which it does not take.",
                         f"{flag} takes: {', '.join(valid)} (comma-separated).")
    return names


NOT_CURRENT = ("stale", "never_run", "partial", "unknown")


def mark_upstream(rows: tuple[StatusRow, ...]) -> tuple[StatusRow, ...]:
    """A stale node whose only change is what it reads, while something it reads is itself
    not current, says so (``upstream_stale``, naming that upstream): running the upstream is
    what will change it. ``rows`` in topological order."""
    state = {r.id: r.state for r in rows}
    out = []
    for r in rows:
        behind = [d for d in r.deps if state.get(d) in NOT_CURRENT]
        if r.state == "stale" and r.reason == "changed" and behind \
                and r.detail.startswith("changed: input "):
            name = short_name(behind[0])
            more = f" (+{len(behind) - 1} more)" if len(behind) > 1 else ""
            fields = {f: getattr(r, f) for f in StatusRow.__slots__}
            fields.update(reason="upstream_stale",
                          detail=f"upstream_stale: '{name}'{more} is not current, so what "
                                 "this node reads will change")
            r = StatusRow(**fields)
        out.append(r)
    return tuple(out)


def needs_attention(r: StatusRow) -> bool:
    """``--problems``: not current (stale, never run, partial, unknown), a task or sensor
    whose last run failed, or a schedule that is failing or paused."""
    if r.state not in ("cached", "always_runs"):
        return True
    if r.state == "always_runs" and (r.last_materialization or {}).get("status") == "failed":
        return True
    schedule = (r.extra or {}).get("schedule") or {}
    return bool(schedule.get("failing") or schedule.get("paused"))


def narrow(report: StatusReport, state: str | None = None, problems: bool = False,
           limit: int | None = None, every: bool = False, fields: str | None = None,
           samples: int | None = None) -> StatusReport:
    """The report as the options ask: ``limit`` rows in JSON and in a table (a table shows
    100 without it, JSON every row), ``every`` (``--all``) no limit at all."""
    if limit is not None and limit < 0:
        raise UsageError(f"--limit {limit}: a limit is 0 or more nodes.",
                         "Write --limit 20, or --all for every node.")
    rows = report.rows
    filt: dict[str, Any] = {}
    if state is not None:
        states = field_names("--state", state, STATES)
        rows = tuple(r for r in rows if r.state in states)
        filt["states"] = list(states)
    if problems:
        rows = tuple(r for r in rows if needs_attention(r))
        filt["problems"] = True
    keep = field_names("--fields", fields, FIELDS) if fields is not None else None
    total = len(rows)
    if limit is not None and not every:
        rows = rows[:limit]
    table_limit = None if every or limit is not None else 100
    if samples is not None:
        if samples < 0:
            raise UsageError(f"--sample {samples}: a sample is 0 or more rows.",
                             "Write --sample 5.")
        rows = tuple(_with_sample(r, report.root, samples) for r in rows)
        keep = keep if keep is None or "shape" in keep else (*keep, "shape")  # the sample's
    return StatusReport(rows, report.targets, report.root, report.summary(), total, keep,
                        filt or None, table_limit, report.note)


def _with_sample(r: StatusRow, root: str, n: int) -> StatusRow:
    """The node's shape with ``sample`` in it (as barca 0.30.2 puts it), when its result is
    one that can be sampled; a node without a recorded shape gets one holding the sample."""
    lm = r.last_materialization or {}
    if lm.get("status") != "success":
        return r
    got = sample(root, lm.get("path"), lm.get("format"), n)
    if got is None:
        return r
    fields = {f: getattr(r, f) for f in StatusRow.__slots__}
    fields["shape"] = dict(shapes.decode(r.shape) or {}, sample=got)
    return StatusRow(**fields)


def sample(root: str, path: str | None, fmt: str | None, n: int) -> Any:
    """``--sample N``: up to ``n`` rows of a json, parquet or csv result (a JSON list's first
    items, a JSON object's first n entries, any other JSON value itself), JSON-safe. None for
    any other format: a pickle is never opened (unpickling runs code), nor is what cannot be
    read."""
    if not path or n <= 0 or fmt not in ("json", "parquet", "csv"):
        return None
    from pathlib import Path  # (--sample only: a plain status loads no pathlib, #31 item 2)
    file = Path(root) / path
    try:
        if fmt == "json":
            value = jsontext.loads(file.read_text(encoding="utf-8"))
            if isinstance(value, dict):
                return dict(islice(value.items(), n))
            return value[:n] if isinstance(value, list) else value
        if fmt == "csv":
            import csv  # (--sample of a csv result only)
            with file.open(newline="", encoding="utf-8") as f:
                return [row for _, row in zip(range(n), csv.DictReader(f), strict=False)]
        import pyarrow.parquet as pq
        batches = pq.ParquetFile(file).iter_batches(batch_size=n)
        first = next(batches, None)
        rows = [] if first is None else first.slice(0, n).to_pylist()
        return jsontext.loads(jsontext.dumps(rows, default=_text))  # dates, decimals: as text
    except (OSError, ValueError, ImportError):
        return None


def _text(v: Any) -> str:
    """A value JSON has no type for: a date or time in ISO 8601, anything else as str()."""
    iso = getattr(v, "isoformat", None)
    return iso() if callable(iso) else str(v)


def other_envs(report: StatusReport, env: str | None, where: str) -> StatusReport:
    """A report of an environment holding no result of its nodes, while another environment
    (the default ``.barca``, or ``.barca/envs/*``) holds some -- as after ``default_env``
    changed -- says which, and how to see them, rather than showing everything unrecorded
    without a word. ``where``: what chose ``env`` (``default_env in barca.toml``...)."""
    if not report.rows or any(r.last_materialization for r in report.rows):
        return report
    from pathlib import Path

    from barca.store.metadata import Store
    root = Path(report.root)
    names = [""] + sorted(d.name for d in (root / ".barca" / "envs").glob("*")
                          if (d / "metadata.db").is_file())
    nodes = [r.id for r in report.rows]
    found = []
    for name in names:
        if name == (env or ""):
            continue
        store = Store(root, create=False, prefix=f".barca/envs/{name}" if name else ".barca")
        try:
            if any(store.rows(n, "status='success'", order="id LIMIT 1") for n in nodes):
                found.append(name)
        finally:
            store.close()
    if not found:
        return report
    where = "default_env in barca.toml" if where == "default_env" else where
    here = f"environment '{env}' ({where})" if env else "the default environment"
    there = ", ".join(f"'{n}'" if n else "the default (.barca)" for n in found)
    see = " or ".join(f"--env {n}" if n else "--env ''" for n in found)
    note = (f"no result of these nodes is recorded in {here}; {there} has results: see them "
            f"with {see}")
    fields = {f: getattr(report, f) for f in StatusReport.__slots__}
    return StatusReport(**dict(fields, note=note))
