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
from barca.present.journal import History, LogLine, RunRow, StepLog
from barca.store.metadata import Store

if TYPE_CHECKING:
    from barca.core.settings import Settings


def _store(settings: Settings | None, flags: dict[str, Any]) -> Store:
    """The command's store, read-only."""
    from barca.core.settings import settings_of
    settings = settings_of(settings, **flags)
    return Store(settings.root, create=False, prefix=settings.store_prefix)


def history(limit: int = 20, settings: Settings | None = None, **flags: Any) -> History:
    """The most recent runs, newest first."""
    store = _store(settings, flags)
    try:
        return History(tuple(RunRow(**r) for r in store.runs(limit)), store.run_count())
    finally:
        store.close()


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
        run = runs[0] if run_id is None else store.run(run_id)
        if run is None:
            from barca.core.errors import did_you_mean
            ids = [r["run_id"] for r in runs]
            raise UsageError(f"No run '{run_id}'.{did_you_mean(run_id or '', ids)}",
                             "`barca history` lists the runs and their ids.")
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
