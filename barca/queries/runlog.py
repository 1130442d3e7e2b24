"""What the store remembers of past runs besides their results: the runs themselves (``barca
history``), the lines their steps wrote (``barca logs``, the widget's last lines), and a stamp
that changes whenever a run may have changed the status (what the widget watches)."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from barca.core.errors import UsageError
from barca.core.record import Record
from barca.core.types import short_name
from barca.present.journal import (
    RUN_FIELDS,
    History,
    LogLine,
    RunDetail,
    RunRow,
    StepLog,
    StepRow,
)
from barca.store.metadata import Store

if TYPE_CHECKING:
    from barca.core.settings import Settings


def _store(settings: Settings | None, flags: dict[str, Any]) -> Store:
    """The command's store, read-only."""
    from barca.core.settings import settings_of
    settings = settings_of(settings, **flags)
    return Store(settings.root, create=False, prefix=settings.store_prefix)


# what --status and --triggered-by take (barca serve's /history too); interrupted: a run whose
# process died, which barca records as crashed
STATUSES = ("pending", "running", "success", "failed", "cancelled", "crashed", "error",
            "interrupted")
TRIGGERS = ("manual", "api", "schedule", "client")
FIELDS = RUN_FIELDS
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def history(limit: int | None = 20, settings: Settings | None = None, *,
            status: str | None = None, triggered_by: str | None = None,
            target: str | None = None, since: str | float | None = None,
            fields: str | None = None, **flags: Any) -> History:
    """The most recent runs, newest first: ``limit`` of them (None: every one) among those
    the filters keep -- ``status`` and ``triggered_by`` (comma-separated: any of them),
    ``target`` (a node's name or id that the run was asked for), ``since`` (a duration back
    from now like ``30m``, ``24h``, ``7d``, ``2w``; an RFC 3339 time or a UTC date; or Unix
    seconds). ``fields``: the keys kept of each run's JSON. Bad values are usage errors."""
    if limit is not None and limit < 0:
        raise UsageError(f"--limit {limit}: a limit is 0 or more runs.",
                         "Write --limit 20, or --all for every run.")
    from barca.present.statusview import field_names
    states = field_names("--status", status, STATUSES) if status is not None else None
    if states is not None and "interrupted" in states:
        states = (*states, "crashed")
    triggers = (field_names("--triggered-by", triggered_by, TRIGGERS)
                if triggered_by is not None else None)
    keep = field_names("--fields", fields, FIELDS) if fields is not None else None
    name = short_name(target) if target else None
    when = since if since is None or isinstance(since, float | int) else since_time(since)
    store = _store(settings, flags)
    try:
        from barca.store.serverq import store_history
        rows, total = store_history(store, limit, None if states is None else list(states),
                                    None if triggers is None else list(triggers), name, when)
        return History(tuple(RunRow(**r) for r in rows), total, keep)
    finally:
        store.close()


def run_detail(run_id: str, limit: int | None = 1000, settings: Settings | None = None,
               **flags: Any) -> RunDetail:
    """``barca history RUN_ID``: one run (``run_id`` may be a unique prefix) and the steps it
    recorded: the first ``limit`` (None: all) and every failed one."""
    if limit is not None and limit < 0:
        raise UsageError(f"--limit {limit}: a limit is 0 or more steps.",
                         "Write --limit 20, or --all for every step.")
    store = _store(settings, flags)
    try:
        run = _run_named(store, run_id)
        from barca.store.serverq import store_history, store_steps
        (row,), _ = store_history(store, 1, run_id=run["run_id"])
        steps = [StepRow(s["asset"], s["partition"] or None, s["run_hash"], s["status"],
                         s["attempts"], s["elapsed"], s["path"], s["format"], s["size"],
                         s["error"], s["traceback"])
                 for s in store_steps(store, run["run_id"])]
        shown = steps if limit is None else [s for i, s in enumerate(steps)
                                             if i < limit or s.status == "failed"]
        return RunDetail(RunRow(**row), tuple(shown), len(steps))
    finally:
        store.close()


def _run_named(store: Store, run_id: str) -> dict[str, Any]:
    """The run ``run_id`` names (all of its id, or a unique start of it); a usage error that
    says why otherwise: no such run, or a start several run ids share."""
    run = store.run(run_id)
    if run is not None:
        return run
    from barca.core.errors import did_you_mean
    ids = [r["run_id"] for r in store.runs(20)]
    several = [i for i in ids if i.startswith(run_id)]
    if len(several) > 1:
        raise UsageError(f"'{run_id}' is the start of several run ids: "
                         f"{', '.join(several[:5])}.", "Write more of the id.")
    raise UsageError(f"No run '{run_id}'.{did_you_mean(run_id, ids)}",
                     "`barca history` lists the runs and their ids.")


def since_time(text: str, now: float | None = None) -> float:
    """``--since``: a duration back from now (``30m``, ``24h``, ``7d``, ``2w``; ``s`` too), an
    RFC 3339 time (``Z`` or an offset) or a date (midnight UTC), as Unix seconds."""
    t = text.strip()
    if t[:-1].isdigit() and t[-1:] in _UNITS:
        return (time.time() if now is None else now) - int(t[:-1]) * _UNITS[t[-1]]
    from barca.core.when import utc_seconds
    try:
        return utc_seconds(t)
    except ValueError:
        raise UsageError(f"--since {text!r} is not a duration or a time.",
                         "Write --since 7d (30m, 24h, 2w), --since 2026-10-22 or "
                         "--since 2026-10-22T05:00:00Z.") from None


class Stamp(Record):
    """When a run (from anywhere) or an edit may have changed what ``status`` says: the size
    and change time of the store's metadata, its write-ahead log and the pipeline files. Two
    stamps compare equal when none of them changed; cheap enough to take every second."""
    __slots__ = ("store", "files")
    store: str                            # the store's folder: .barca, .barca/envs/NAME
    files: tuple[tuple[str, Any], ...]    # (path, (mtime_ns, size) or None when missing)


def stamp(*files: str, settings: Settings | None = None, **flags: Any) -> Stamp:
    """The project's current ``Stamp``: the store of ``settings`` (its environment's) and the
    pipeline ``files`` named (others, and folders, are not watched)."""
    from barca.core.settings import settings_of
    settings = settings_of(settings, **flags)
    prefix = settings.store_prefix
    db = settings.root / prefix / "metadata.db"
    paths = [db, db.with_name(db.name + "-wal")]
    paths += [Path(f).resolve() for f in files if Path(f).is_file()]
    return Stamp(prefix, tuple((str(p), _stat(p)) for p in paths))


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def logs(run_id: str | None = None, step: str | None = None, stream: str | None = None,
         timestamps: bool = False, after: int = 0, settings: Settings | None = None,
         **flags: Any) -> StepLog:
    """``barca logs``: the lines a run's steps wrote (default: the most recent run), kept to
    one step (a base name selects every key) or one stream."""
    if stream not in (None, "stdout", "stderr"):
        raise UsageError(f"--stream {stream!r}: a stream is stdout or stderr.",
                         "Write --stream stdout or --stream stderr.")
    store = _store(settings, flags)
    try:
        runs = store.runs(20)
        if not runs:
            raise UsageError("No run is recorded yet, so there are no logs.",
                             "Run `barca get` first; `barca history` lists the runs.")
        run = runs[0] if run_id is None else _run_named(store, run_id)
        rows = store.log_lines(run["run_id"], after)
        if step is not None:
            steps = set(store.run_steps(run["run_id"])) | {(r[1], r[2]) for r in rows}
            keep = {st for node, st in steps if _names_step(step, node, st)}
            if not keep:
                other = _recorded_by(store, run["run_id"], step)
                if other is not None:  # cached in this run: its lines are another run's
                    raise UsageError(
                        f"'{step}' was cached in run {run['run_id']}: its output was recorded "
                        f"by run {other}.", f"Read it with: barca logs {other} --step {step}")
                from barca.core.errors import did_you_mean
                names = sorted({short_name(node) for node, _ in steps})
                raise UsageError(f"Run {run['run_id']} has no step '{step}'."
                                 f"{did_you_mean(step, names)}",
                                 f"Steps of that run: {', '.join(names) or 'none'}.")
            rows = [r for r in rows if r[2] in keep]
        if stream is not None:
            rows = [r for r in rows if r[3] == stream]
        return StepLog(run["run_id"], run["command"] or "", run["target"] or "",
                       run["status"] or "", tuple(LogLine(r[0], r[2], r[3], r[4], r[5])
                                                  for r in rows), timestamps)
    finally:
        store.close()


def follow(log: StepLog, every: float = 0.2, settings: Settings | None = None,
           step: str | None = None, stream: str | None = None,
           fetch: Callable[..., StepLog] | None = None) -> Iterator[StepLog]:
    """``logs -f``: ``log`` itself, then the lines recorded after it, every ``every`` seconds
    while its run is waiting or running; ends with the run (a run's lines are all recorded
    before its status changes, so the last look misses none). ``fetch``: where the lines come
    from (a server's), else this project's records."""
    yield log
    after = 0
    while log.status in ("running", "pending"):
        after = log.lines[-1].id if log.lines else after
        time.sleep(every)
        log = (fetch or logs)(log.run_id, step=step, stream=stream, timestamps=log.timestamps,
                              after=after, settings=settings)
        yield log


def _recorded_by(store: Store, run_id: str, step: str) -> str | None:
    """The most recent run before ``run_id`` in which ``step`` ran, or None."""
    later = True
    for r in store.runs(500):
        if later:
            later = r["run_id"] != run_id
            continue
        if any(_names_step(step, node, st) for node, st in store.run_steps(r["run_id"])):
            return r["run_id"]
    return None


def last_lines(node: str, limit: int = 10, settings: Settings | None = None,
               **flags: Any) -> StepLog:
    """The last lines a node's steps wrote, in the most recent run that recorded any (the
    status widget shows them for the selected node)."""
    store = _store(settings, flags)
    try:
        run_id, rows = store.last_lines(node, limit)
        run = store.run(run_id) if run_id else None
    finally:
        store.close()
    return StepLog(run_id, (run or {}).get("command") or "", (run or {}).get("target") or "",
                   (run or {}).get("status") or "",
                   tuple(LogLine(r[0], r[2], r[3], r[4], r[5]) for r in rows))


def _names_step(name: str, node: str, step: str) -> bool:
    """``--step`` as a node id, a base name (every key), or either with ``[key]``."""
    key = step[len(node):]  # "" or "[region=emea]"
    return name in (node, step, short_name(node), short_name(node) + key)
