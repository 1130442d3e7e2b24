"""The scheduler of ``barca serve`` (``barca docs scheduling``): each node with
``freshness=Schedule(cron)`` fires on its cron, in the server's zone, at one-second resolution.
A tick is one run handed to the server's queue (``submit``): the scheduled node and every
``Always`` node below it (``tick_plan``). A tick is skipped, not queued, while a run of the
same node is in flight, while its schedule is paused, and while it is failing (``max_failures``
failed ticks in a row). Failures and pauses are kept in the metadata DB (``schedule_state``),
so a restart keeps them; missed ticks are never caught up (see ``Scheduler.start``).

croniter is imported when a schedule is read, never by the CLI's other commands."""
from __future__ import annotations

import datetime as dt
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from barca.store.schedstate import COLUMNS, StateTable

# the longest sleep between two looks at the clock: a clock set forward, a pause that ends
# or a stop are noticed within it even when no tick is due for hours
MAX_SLEEP = 30.0


# ---------------------------------------------------------------------------- cron

def croniter_expr(cron: str) -> str:
    """Our cron in croniter's order: six fields are seconds FIRST in barca (as in Quartz and
    barca 0.30), while croniter reads a sixth field as seconds LAST; five fields and the
    ``@hourly`` macros are the same in both."""
    fields = cron.split()
    if len(fields) == 1:
        return fields[0].lower()  # @HOURLY: read in any case when the file is read
    if len(fields) == 6:
        fields = fields[1:] + fields[:1]
    return " ".join(fields)


def next_after(cron: str, after: float, tz: dt.tzinfo) -> float | None:
    """The first time (epoch seconds) strictly after ``after`` that ``cron`` matches, read as
    wall-clock time in ``tz`` (a daylight-saving gap or overlap is croniter's to resolve);
    None when it never matches (``0 0 30 2 *``: February 30th), so it never fires."""
    # the [serve] extra, imported by a serving process only
    from croniter import CroniterBadDateError, croniter
    start = dt.datetime.fromtimestamp(int(after), tz)  # whole seconds: the resolution
    try:
        return float(croniter(croniter_expr(cron), start).get_next(float))
    except CroniterBadDateError:
        return None


def last_at(cron: str, now: float, tz: dt.tzinfo) -> float:
    """The latest time at or before ``now`` that ``cron`` matches: the tick a late scheduler
    fires for (the ones before it are dropped)."""
    from croniter import croniter
    start = dt.datetime.fromtimestamp(int(now) + 1, tz)
    return float(croniter(croniter_expr(cron), start).get_prev(float))


# ---------------------------------------------------------------------------- reach

def _by_id(nodes: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n["id"]: n for n in nodes}


def tick_plan(nodes: list[dict[str, Any]], node_id: str) -> tuple[str, list[str]]:
    """What one tick of ``node_id`` runs: (command, targets). ``nodes``: ``barca list --json``
    node objects. The targets are the scheduled node and every node below it whose freshness
    is Always; the walk down crosses a Manual node (which is read as it is, not a target) and
    stops at a node with a Schedule of its own (its own ticks update it and what is below it).
    The command is ``run`` for a scheduled task, else ``get``; the run brings each target up
    to date and forces nothing (no refresh)."""
    by_id = _by_id(nodes)
    if node_id not in by_id:
        raise KeyError(node_id)
    below: dict[str, list[str]] = {}
    for n in nodes:
        for dep in n.get("deps", ()):
            below.setdefault(dep, []).append(n["id"])
    targets, seen, todo = [node_id], {node_id}, list(below.get(node_id, ()))
    while todo:
        nid = todo.pop()
        if nid in seen:
            continue
        seen.add(nid)
        freshness = by_id[nid].get("freshness")
        if freshness == "schedule":
            continue  # its own ticks bring it (and what is below it) up to date
        if freshness != "manual":
            targets.append(nid)
        todo.extend(below.get(nid, ()))
    order = {n["id"]: i for i, n in enumerate(nodes)}  # the listing's order: upstream first
    targets.sort(key=lambda t: order[t])
    return ("run" if by_id[node_id].get("kind") == "task" else "get"), targets


def rfc3339(epoch: float) -> str:
    return dt.datetime.fromtimestamp(int(epoch), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------- state

class _Schedule:
    """One scheduled node: its cron and what the scheduler knows of it."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.id: str = node["id"]
        self.name: str = node.get("name") or self.id.rpartition(":")[2]
        self.kind: str = node.get("kind", "asset")
        self.cron: str = node["schedule"]
        self.max_failures: int = int(node.get("max_failures") or 5)
        self.next_fire: float | None = None
        # kept in the DB
        self.failures = 0
        self.paused = False
        self.paused_until: float | None = None
        self.failed_at: float | None = None   # when the last failed tick ended
        self.last_fired: float | None = None
        self.last_run: str | None = None
        self.last_status: str | None = None
        # in memory only: a restart clears them
        self.last_skipped: float | None = None
        self.skip_reason: str | None = None
        self.skipped_for: str | None = None

    @property
    def failing(self) -> bool:
        return self.failures >= self.max_failures

    def entry(self) -> dict[str, Any]:
        """Its ``GET /schedule`` entry (times in epoch seconds)."""
        def sec(t: float | None) -> int | None:
            return None if t is None else int(t)
        return {"id": self.id, "kind": self.kind, "cron": self.cron,
                "next_fire": sec(self.next_fire), "last_fired": sec(self.last_fired),
                "last_run": self.last_run, "last_status": self.last_status,
                "failures": self.failures, "max_failures": self.max_failures,
                "failing": self.failing, "paused": self.paused,
                "paused_until": sec(self.paused_until), "last_skipped": sec(self.last_skipped),
                "skip_reason": self.skip_reason, "skipped_for": self.skipped_for}


def _say(line: str) -> None:
    print(f"[barca] {line}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- scheduler

class Scheduler:
    """The schedules of the nodes given, firing ``submit`` from a background thread.

    ``submit(request)`` queues a run and answers its id (None: refused, e.g. while draining);
    ``in_flight(node_id)`` is the id of a run of that node that is pending or running (True
    when a test's stand-in cannot tell which), else a falsy value; the server calls
    ``run_finished(schedule_id, ok)`` when a tick's run ends. ``clock`` (epoch seconds) and
    ``log`` are replaceable for tests."""

    def __init__(self, root: Path, nodes: list[dict[str, Any]], tz: dt.tzinfo,
                 submit: Callable[[dict[str, Any]], str | None],
                 in_flight: Callable[[str], Any], enabled: bool, db_path: Path,
                 clock: Callable[[], float] = time.time,
                 log: Callable[[str], None] = _say) -> None:
        self.root, self.tz, self.enabled = root, tz, enabled
        self.submit, self.in_flight, self.clock, self.log = submit, in_flight, clock, log
        self.db_path = db_path
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._table: StateTable | None = None
        self._nodes: list[dict[str, Any]] = []
        self._schedules: dict[str, _Schedule] = {}
        self.reload(nodes)

    def _db(self) -> StateTable:
        """The table, for writing (opened on first use: a server may start before its DB)."""
        if self._table is None or not self._table.writable:
            if self._table is not None:
                self._table.close()
            self._table = StateTable(self.db_path)
        return self._table

    def _kept(self, schedule_id: str) -> dict[str, Any]:
        """What the DB keeps of a schedule. A scheduler that does not fire (``--read-only``,
        ``--no-schedule``) only reads it, and not at all before it exists."""
        if self._table is None and not self.enabled:
            if not self.db_path.exists():
                return {}
            self._table = StateTable(self.db_path, writable=False)
        table = self._table if self._table is not None else self._db()
        return table.load(schedule_id) or {}

    def _save(self, s: _Schedule) -> None:
        self._db().save(s.id, {c: getattr(s, c) for c in COLUMNS})

    def database_replaced(self) -> None:
        """``POST /state/reset`` moved the metadata database aside: the connection still open
        follows the old file, so it is closed (the next write opens the new one), and the
        schedules start over with the new, empty state (no pause, no failures), as the queue
        does."""
        with self._lock:
            if self._table is not None:
                self._table.close()
                self._table = None
            self._schedules = {}
        self.reload(self._nodes)

    # -- the schedule list

    def reload(self, nodes: list[dict[str, Any]]) -> None:
        """Read the schedules again (``--watch``): a schedule whose cron is unchanged keeps its
        next fire time; a new or changed one fires at its next match after now."""
        now = self.clock()
        with self._lock:
            old, self._schedules, self._nodes = self._schedules, {}, list(nodes)
            for node in nodes:
                if node.get("freshness") != "schedule" or not node.get("schedule"):
                    continue
                s = _Schedule(node)
                before = old.get(s.id)
                if before is not None:
                    s.__dict__.update({k: v for k, v in before.__dict__.items()
                                       if k not in ("kind", "cron", "max_failures", "name")})
                    if before.cron != s.cron:
                        s.next_fire = None
                else:
                    s.__dict__.update(self._kept(s.id))
                if s.next_fire is None:
                    s.next_fire = next_after(s.cron, now, self.tz)
                self._schedules[s.id] = s
        self._wake.set()

    def _find(self, ident: str) -> _Schedule:
        s = self._schedules.get(ident)
        if s is None:
            named = [x for x in self._schedules.values() if x.name == ident]
            if len(named) != 1:
                raise KeyError(ident)
            s = named[0]
        return s

    def entries(self) -> list[dict[str, Any]]:
        """``GET /schedule``: one entry per scheduled node, in the listing's order."""
        with self._lock:
            return [s.entry() for s in self._schedules.values()]

    # -- pause / resume / outcomes (persisted)

    def pause(self, ident: str, until: dt.datetime | None = None) -> dict[str, Any]:
        """Hold one schedule back until ``resume`` or ``until`` (aware, or naive UTC); its
        ticks meanwhile are skipped and never caught up. KeyError for an unknown id or name."""
        with self._lock:
            s = self._find(ident)
            s.paused = True
            s.paused_until = None
            if until is not None:
                if until.tzinfo is None:
                    until = until.replace(tzinfo=dt.UTC)
                s.paused_until = until.timestamp()
            self._save(s)
            entry = s.entry()
        self._wake.set()
        return entry

    def resume(self, ident: str) -> dict[str, Any]:
        """End a pause: the next tick is the cron's next match after now."""
        with self._lock:
            s = self._find(ident)
            s.paused, s.paused_until = False, None
            s.next_fire = next_after(s.cron, self.clock(), self.tz)
            self._save(s)
            entry = s.entry()
        self._wake.set()
        return entry

    def run_finished(self, schedule_id: str, ok: bool) -> None:
        """A tick's run ended: a success resets the failure count, a failure adds one; at
        ``max_failures`` in a row the schedule is failing and its ticks are skipped."""
        with self._lock:
            s = self._schedules.get(schedule_id)
            if s is None:
                return  # no longer scheduled (reloaded meanwhile)
            s.last_status = "success" if ok else "failed"
            if ok:
                s.failures, s.failed_at = 0, None
            else:
                s.failures += 1
                s.failed_at = self.clock()
                if s.failures == s.max_failures:
                    self.log(f"{s.id} failing: {s.failures} consecutive failed ticks "
                             f"(max_failures={s.max_failures}); skipped until a run of it "
                             "succeeds")
            self._save(s)

    # -- firing

    def fire_due(self, now: float | None = None) -> list[str]:
        """Fire (or skip) every schedule due at ``now``; the run ids submitted. A schedule
        late by several ticks fires once, for the latest, and moves on to the next match after
        now: missed ticks are not caught up."""
        now = self.clock() if now is None else now
        fired = []
        with self._lock:
            if not self.enabled:
                return []
            for s in list(self._schedules.values()):
                if s.next_fire is None or s.next_fire > now:
                    continue
                s.next_fire = next_after(s.cron, now, self.tz)
                try:
                    run_id = self._tick(s, last_at(s.cron, now, self.tz), now)
                except Exception as exc:  # one schedule's trouble never holds the others
                    self.log(f"scheduled run {s.id} not queued: {type(exc).__name__}: {exc}")
                    continue
                if run_id is not None:
                    fired.append(run_id)
        return fired

    def _tick(self, s: _Schedule, due: float, now: float) -> str | None:
        if s.paused and s.paused_until is not None and s.paused_until <= now:
            s.paused, s.paused_until = False, None  # the pause ran out
            self._save(s)
        if s.paused:
            self._skip(s, now, "paused", None, "paused")
            return None
        if s.failing:
            if s.failed_at is not None and self._db().succeeded_since(s.id, s.failed_at):
                s.failures, s.failed_at = 0, None  # an explicit run of it succeeded since
                self._save(s)
            else:
                # not a skip of the kind GET /schedule reports: ``failing`` says it
                self.log(f"scheduled run {s.id} skipped — failing ({s.failures} consecutive "
                         f"failed ticks, max_failures={s.max_failures})")
                return None
        busy = self.in_flight(s.id)
        if busy:
            run = busy if isinstance(busy, str) else None
            self._skip(s, now, "in_flight", run, f"run {run} of the same node still in flight"
                       if run else "a run of the same node still in flight")
            return None
        command, targets = tick_plan(self._nodes, s.id)
        run_id = self.submit({"command": command, "targets": targets,
                              "triggered_by": "schedule", "scheduled_at": rfc3339(due),
                              "schedule_id": s.id})
        s.last_fired = now
        if run_id is None:
            s.last_status = "refused"
            self.log(f"scheduled run {s.id} not queued (the server refused it)")
        else:
            s.last_run, s.last_status = run_id, "pending"
            self.log(f"scheduled run {s.id} → {run_id}")
        self._save(s)
        return run_id

    def _skip(self, s: _Schedule, now: float, reason: str, run: str | None,
              why: str) -> None:
        s.last_skipped, s.skip_reason, s.skipped_for = now, reason, run
        self.log(f"scheduled run {s.id} skipped — {why}")

    # -- the thread

    def start(self) -> None:
        """Fire in a background thread until ``stop``. The first tick of each schedule is its
        next match after the start: ticks missed while the server was down are not caught up.
        Does nothing when not enabled (``--no-schedule``, ``--read-only``)."""
        if not self.enabled or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="barca-scheduler", daemon=True)
        self._thread.start()

    def _sleep_for(self) -> float:
        with self._lock:
            nxt = min((s.next_fire for s in self._schedules.values()
                       if s.next_fire is not None), default=None)
        if nxt is None:
            return MAX_SLEEP
        return max(0.0, min(MAX_SLEEP, nxt - self.clock()))

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.fire_due()
            except Exception as exc:  # a tick that cannot be queued must not end the thread
                self.log(f"scheduler: {type(exc).__name__}: {exc}")
            self._wake.wait(self._sleep_for())
            self._wake.clear()

    def stop(self) -> None:
        """Stop firing (draining, shutdown); the thread ends within a moment."""
        self._stop.set()
        self._wake.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)
        with self._lock:
            if self._table is not None:
                self._table.close()
                self._table = None
