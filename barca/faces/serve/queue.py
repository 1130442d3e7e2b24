"""The run queue: accepted runs wait as ``pending`` rows of the metadata database, start first
come first served (at most ``max_runs`` together), and each runs as a ``python -m barca get|run
--json`` child in its own process group, so its run row and JSON outcome are the CLI's."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from barca.core.errors import UsageError
from barca.store import serverq

BODY_KEYS = {"command", "targets", "files", "refresh", "refresh_all", "cascade", "dry_run",
             "agent", "values", "partition"}
SCHEDULE_KEYS = {"triggered_by", "scheduled_at", "schedule_id"}
EXIT_STATUS = {0: "success", 1: "failed", 2: "failed", 3: "error", 130: "cancelled"}


def check_body(body: Any, internal: bool = False) -> dict[str, Any]:
    """A ``POST /runs`` body, its keys and types checked (a ``UsageError`` naming the first
    wrong one); the targets and files normalised to lists."""
    if not isinstance(body, dict):
        raise UsageError("The request body is not a JSON object.",
                         'Send {"command": "get", "targets": ["NAME"]}.')
    allowed = BODY_KEYS | (SCHEDULE_KEYS if internal else set())
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise UsageError(f"Unknown field '{unknown[0]}' in the run request.",
                         f"Fields: {', '.join(sorted(BODY_KEYS))}.")
    out = dict(body)
    if out.get("command") not in ("get", "run"):
        raise UsageError(f"command must be \"get\" or \"run\", not {body.get('command')!r}.",
                         'Send {"command": "get", ...} or {"command": "run", ...}.')
    for key in ("targets", "files", "refresh"):
        v = out.get(key)
        if v is None:
            out[key] = []
        elif isinstance(v, str):
            out[key] = [v]
        elif isinstance(v, list) and all(isinstance(x, str) for x in v):
            out[key] = list(v)
        else:
            raise UsageError(f"{key} must be a list of names.", f'Send "{key}": ["NAME"].')
    for key in ("refresh_all", "cascade", "dry_run", "agent", "values"):
        if key in out and not isinstance(out[key], bool):
            raise UsageError(f"{key} must be true or false.", f'Send "{key}": true.')
    p = out.get("partition")
    if p is not None and not isinstance(p, str | dict):
        raise UsageError("partition must be DIM=VALUE[,VALUE] or an object.",
                         'Send "partition": "region=emea".')
    return out


def child_argv(body: dict[str, Any], run_id: str, files: tuple[str, ...],
               env: str | None) -> list[str]:
    """The command line a person would type for this request, plus the run's id."""
    argv = [sys.executable, "-m", "barca", body["command"]]
    if body["targets"]:
        argv.append(",".join(body["targets"]))
    argv += list(body["files"] or files)
    argv += ["--json", "--run-id", run_id]
    if body["refresh"]:
        argv += ["--refresh", ",".join(body["refresh"])]
    if body.get("refresh_all"):
        argv.append("--refresh-all")
    if body.get("cascade") is False:
        argv.append("--no-cascade")
    if body.get("agent"):
        argv.append("--agent")
    if body.get("values"):
        argv += ["-o", "value"]
    p = body.get("partition")
    if p not in (None, "", {}):
        argv += ["--partition", p if isinstance(p, str) else json.dumps(p)]
    if env:
        argv += ["--env", env]
    return argv


def _libc() -> Any:
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except (OSError, ImportError):
        return None


_LIBC = _libc()  # loaded here: a forked child must import nothing (another thread may hold
# the import lock at the fork)


def _die_with_parent() -> None:
    """In the child, before it runs: killed when the server dies (Linux), so a server killed
    outright leaves its runs ``running`` with a dead pid, marked ``interrupted`` at the next
    start, rather than runs nobody watches. Only the queue's own thread starts children: the
    signal follows the thread that forked."""
    if _LIBC is not None:
        with contextlib.suppress(AttributeError):  # no prctl: not Linux
            _LIBC.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


class Child:
    """One run's process, its output read as it comes."""

    def __init__(self, run_id: str, argv: list[str], root: Path, body: dict[str, Any]) -> None:
        self.run_id, self.body = run_id, body
        self.stdout: list[str] = []
        self.stderr: list[str] = []   # the lines a local run prints on stderr (SSE "line")
        self.stop_as: str | None = None  # cancelled | requeue | shutdown, once asked to stop
        self.proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True,  # its own group: one signal stops
                                     preexec_fn=_die_with_parent)
        self._readers = [threading.Thread(target=self._read, args=(s, out), daemon=True)
                         for s, out in ((self.proc.stdout, self.stdout),
                                        (self.proc.stderr, self.stderr))]
        for t in self._readers:
            t.start()

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def wait(self) -> int:
        code = self.proc.wait()
        for t in self._readers:
            t.join(timeout=5)
        return code


class Queue:
    """Accepts runs (``submit``), starts them in order, stops them (``cancel``, ``drain``)."""

    def __init__(self, root: Path, db_path: Path, max_runs: int, env: str | None,
                 files: Callable[[], tuple[str, ...]], read_only: bool = False) -> None:
        self.root, self.max_runs, self.env, self.files = root, max_runs, env, files
        self.conn = serverq.connect(db_path, read_only)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.running: dict[str, Child] = {}
        self.draining = False
        self.on_finished: Callable[[dict[str, Any], bool], None] = lambda row, ok: None
        self.read_only = read_only
        if not read_only:
            serverq.ensure_state_table(self.conn)
        self.paused = bool(self.state("queue_paused"))
        self.paused_at = self.state("queue_paused_at")
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ persisted switches
    def state(self, name: str) -> Any:
        with self.lock:
            try:
                return serverq.get_state(self.conn, name)
            except Exception:  # noqa: BLE001 - a read-only store without the table
                return None

    def pause(self, paused: bool) -> None:
        from barca.faces.serve.render import rfc3339
        with self.lock:
            self.paused = paused
            self.paused_at = rfc3339(time.time()) if paused else None
            serverq.set_state(self.conn, "queue_paused", paused)
            serverq.set_state(self.conn, "queue_paused_at", self.paused_at)
        self.wake.set()

    # ------------------------------------------------------------------ the scheduler's calls
    def submit(self, body: dict[str, Any], triggered_by: str = "api") -> str:
        """Queue a checked request (``check_body``): its row is committed before this
        returns; the run id. The scheduler passes ``triggered_by``/``scheduled_at``/
        ``schedule_id`` in the body."""
        from barca.store.process import new_run_id
        body = check_body(body, internal=True)
        trig = body.pop("triggered_by", triggered_by)
        at, sid = body.pop("scheduled_at", None), body.pop("schedule_id", None)
        run_id = new_run_id()
        target = ",".join(body["targets"]) or "all"
        with self.lock:
            serverq.enqueue(self.conn, run_id, body["command"], target, body, trig, at, sid)
        self.wake.set()
        return run_id

    def in_flight(self, node_id: str) -> str | None:
        """The id of a run of ``node_id`` that is pending or running (queued here, running
        here, or a command typed on this machine: a live ``running`` row), or None. The
        scheduler names it in ``skipped_for``."""
        short = node_id.rsplit(":", 1)[-1]
        with self.lock:
            if not self.read_only:
                serverq.reap_crashed(self.conn)
            live = serverq.live_node_runs(self.conn)
            labels = serverq.live_targets(self.conn)
        for run_id, _status, request in live:
            targets = json.loads(request)["targets"] if request else None
            if targets is None:  # a CLI run: its row's target label
                targets = (labels.get(run_id) or "all").split(",")
            if not targets or "all" in targets or node_id in targets or short in targets:
                return str(run_id)
        return None

    # ------------------------------------------------------------------ reads
    def position(self, run_id: str) -> int | None:
        with self.lock:
            ids = [r["run_id"] for r in serverq.pending(self.conn)]
        return ids.index(run_id) + 1 if run_id in ids else None

    def snapshot(self) -> dict[str, Any]:
        from barca.faces.serve.render import run_summary
        with self.lock:
            queued = serverq.pending(self.conn)
            running = [serverq.row(self.conn, r) for r in list(self.running)]
        return {"paused": self.paused, "paused_at": self.paused_at, "draining": self.draining,
                "max_runs": self.max_runs,
                "running": [run_summary(r) for r in running if r],
                "queued": [dict(run_summary(r), position=i + 1) for i, r in enumerate(queued)]}

    # ------------------------------------------------------------------ starting runs
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="barca-queue", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            self.wake.wait(0.5)
            self.wake.clear()
            with contextlib.suppress(Exception):  # a busy database: the next turn tries again
                self.start_ready()

    def starts_now(self, run_id: str) -> bool:
        """Whether the queue's thread is about to start ``run_id`` (first in line, a free
        slot): ``POST /runs`` answers ``running`` for it."""
        with self.lock:
            if run_id in self.running:  # the queue's thread was quicker than this answer
                return True
            if self.paused or self.draining or self.read_only:
                return False
            free = self.max_runs - len(self.running)
            return run_id in [r["run_id"] for r in serverq.pending(self.conn)[:max(free, 0)]]

    def start_ready(self) -> None:
        """Start what may start; only the queue's thread calls it (see _die_with_parent)."""
        with self.lock:
            if self.paused or self.draining or self.read_only:
                return
            while len(self.running) < self.max_runs:
                queued = serverq.pending(self.conn)
                if not queued:
                    return
                self._launch(queued[0])

    def _launch(self, row: dict[str, Any]) -> None:
        from barca.store.process import process_token
        try:
            body = check_body(json.loads(row["request"] or "{}"), internal=True)
            argv = child_argv(body, row["run_id"], self.files(), self.env)
            if row.get("schedule_id"):  # a tick: its targets, run as a tick runs them
                argv += ["--schedule-id", row["schedule_id"]]
            child = Child(row["run_id"], argv, self.root, body)
        except (ValueError, UsageError, OSError) as exc:  # never retried forever
            serverq.mark(self.conn, row["run_id"], "error", f"could not start the run: {exc}")
            return
        self.running[row["run_id"]] = child
        serverq.start(self.conn, row["run_id"], child.proc.pid, process_token(child.proc.pid))
        threading.Thread(target=self._watch, args=(child, row), daemon=True).start()

    def _watch(self, child: Child, row: dict[str, Any]) -> None:
        code = child.wait()
        outcome: Any = None
        for line in reversed(child.stdout):
            with contextlib.suppress(ValueError):
                outcome = json.loads(line)
                break
        envelope = None
        for line in reversed(child.stderr):
            if line.startswith("{"):
                with contextlib.suppress(ValueError):
                    envelope = json.loads(line)
                    break
        if code != 0 and envelope is not None:
            outcome = dict(outcome if isinstance(outcome, dict) else {}, envelope=envelope)
        status = EXIT_STATUS.get(code, "error")
        stopped = child.stop_as if code != 0 else None  # a run that finished first finished
        with self.lock:
            try:
                if stopped == "requeue":
                    serverq.requeue_at_head(self.conn, child.run_id)
                else:
                    if stopped is not None:
                        serverq.mark(self.conn, child.run_id, "cancelled",
                                     "server shutdown" if stopped == "shutdown" else None)
                    err = envelope.get("error") if isinstance(envelope, dict) else None
                    serverq.finish(self.conn, child.run_id, status, err, outcome,
                                   130 if stopped is not None else code)
            finally:  # a database error must not hold the run's slot for ever
                del self.running[child.run_id]
        if stopped != "requeue":
            with contextlib.suppress(Exception):  # the scheduler's bookkeeping never stops us
                self.on_finished(row, code == 0)
        self.wake.set()

    # ------------------------------------------------------------------ stopping runs
    def cancel(self, run_id: str) -> str | None:
        """Stop a run: a queued one is dropped (``cancelled``), a running one is signalled;
        None when it is no longer pending or running."""
        with self.lock:
            child = self.running.get(run_id)
            if child is None:
                got = serverq.row(self.conn, run_id)
                if got is None or got["status"] != "pending":
                    return None
                serverq.mark(self.conn, run_id, "cancelled", "cancelled before it started")
                return "cancelled"
            child.stop_as = child.stop_as or "cancelled"
        self._stop(child)
        return "cancelling"

    def _stop(self, child: Child, grace: float = 5.0) -> None:
        """SIGTERM to the run's group (the CLI ends as cancelled, 130), then SIGKILL."""
        child.signal(signal.SIGTERM)

        def kill_later() -> None:
            try:
                child.proc.wait(grace)
            except subprocess.TimeoutExpired:
                child.signal(signal.SIGKILL)
        threading.Thread(target=kill_later, daemon=True).start()

    def stop_all(self, how: str) -> None:
        """Stop every run in flight: ``requeue`` (drain deadline) or ``shutdown``."""
        with self.lock:
            children = list(self.running.values())
            for c in children:
                c.stop_as = how
        for c in children:
            self._stop(c)

    def reset(self, db_path: Path) -> str:
        """``POST /state/reset``: the metadata database moved aside (kept, renamed) and a new
        one made; refused (``RuntimeError``) while a run is pending or running."""
        from barca.store.metadata import Store
        with self.lock:
            if self.running or serverq.live_node_runs(self.conn):
                raise RuntimeError("a run is pending or running")
            self.conn.close()
            aside = db_path.with_name(f"metadata.db.reset-{time.strftime('%Y%m%dT%H%M%S')}")
            for suffix in ("", "-wal", "-shm"):
                src = db_path.with_name(db_path.name + suffix)
                if src.exists():
                    src.rename(aside.with_name(aside.name + suffix))
            Store(self.root, create=True, prefix=str(db_path.parent.relative_to(self.root))
                  ).close()
            self.conn = serverq.connect(db_path)
            serverq.ensure_state_table(self.conn)
            self.paused, self.paused_at = False, None
        return str(aside)

    def idle(self) -> bool:
        with self.lock:
            return not self.running

    def recover(self) -> list[str]:
        """At start: runs this server's previous process started and that died with it
        (``interrupted``); queued runs stay queued, to start under their ids."""
        from barca.store.process import process_alive
        with self.lock:
            rows = serverq.running(self.conn, served_only=True)
            gone = [r["run_id"] for r in rows
                    if r["pid"] is None or not _alive(process_alive, self.conn, r)]
            for run_id in gone:
                serverq.mark(self.conn, run_id, "interrupted",
                             "the server stopped before the run finished")
        return gone


def _alive(process_alive: Any, conn: Any, row: dict[str, Any]) -> bool:
    proc = serverq.run_proc(conn, row["run_id"])
    return proc is not None and process_alive(row["pid"], proc)
