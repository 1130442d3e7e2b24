"""``barca serve``: check the flags, open (and migrate) the metadata database, bind the port,
start the queue and the scheduler, serve until a signal; drain on the first signal, cancel on
the second (``barca docs serve``)."""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from barca.api.server import API_VERSION  # one number, for the server and its clients
from barca.core.errors import InfrastructureError, UsageError

LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def zone(text: str) -> dt.tzinfo:
    """``local`` (this machine's zone), ``utc`` in any case, or an IANA name (case as
    written); anything else is a usage error naming it."""
    if text.lower() == "local":
        return dt.datetime.now().astimezone().tzinfo or dt.UTC
    if text.lower() == "utc":
        return dt.UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(f"--timezone '{text}' is not a time zone.",
                         "Use local, utc or an IANA name such as Europe/Paris.") from None


class _Stopped:
    """The scheduler's stand-in while ``barca.faces.serve.scheduler`` is not there: nothing
    fires, ``/schedule`` is empty."""

    def __init__(self, *a: Any, **kw: Any) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...
    def reload(self, nodes: list[dict[str, Any]]) -> None: ...
    def entries(self) -> list[dict[str, Any]]:
        return []
    def pause(self, ident: str, until: Any) -> dict[str, Any]:
        raise KeyError(ident)
    def resume(self, ident: str) -> dict[str, Any]:
        raise KeyError(ident)
    def run_finished(self, schedule_id: str, ok: bool) -> None: ...
    def database_replaced(self) -> None: ...


class Server:
    """What the routes read: settings, project files, queue, scheduler, switches."""

    def __init__(self, args: Any, settings: Any) -> None:
        self.args, self.settings = args, settings
        self.root: Path = settings.root
        self.read_only = bool(args.read_only)
        self.started_at = time.time()
        self.draining = False
        self.cancelling = False
        self.exit_code = 0
        self.token: str | None = None
        self.db_path = self.root / settings.store_prefix / "metadata.db"
        self.project: Any = None    # barca.faces.serve.project.Project
        self.queue: Any = None      # barca.faces.serve.queue.Queue
        self.scheduler: Any = None  # barca.faces.serve.scheduler.Scheduler
        self.scheduler_enabled = not (args.no_schedule or self.read_only)
        self.metadata_error: str | None = None

    def health(self) -> dict[str, Any]:
        from barca import __version__
        from barca.faces.serve.render import rfc3339
        from barca.store import serverq
        from barca.store.database import DatabaseError
        q = self.queue
        queued = None
        try:
            with q.lock:
                queued = len(serverq.pending(q.conn))
        except DatabaseError as exc:  # still 200: /health says what is wrong
            self.metadata_error = str(exc)
        return {"status": "draining" if self.draining else "ok", "version": __version__,
                "api_version": API_VERSION, "env": self.settings.env or "default",
                "started_at": rfc3339(self.started_at), "read_only": self.read_only,
                "scheduler": "stopped" if self.draining or not self.scheduler_enabled
                else "running",
                "scheduler_enabled": self.scheduler_enabled, "metadata_error": self.metadata_error,
                "load_errors": self.project.errors,
                "queue": {"paused": q.paused, "queued": queued, "running": len(q.running),
                          "max_runs": q.max_runs},
                "cache": str(self.root / self.settings.store_prefix),
                "store_uri": self.settings.remote_uri}

    def nodes(self) -> list[dict[str, Any]]:
        from barca.queries.listing import list_nodes
        try:
            return list_nodes(*self.project.files, settings=self.settings).to_json()["nodes"]
        except UsageError:
            return []


def _config(settings: Any) -> dict[str, Any]:
    from barca.core.settings import project_file
    return project_file(settings.root).get("server", {})


def serve(args: Any, settings: Any) -> int:
    if args.server is not None or args.local:
        raise UsageError("barca serve takes neither --server nor --local: it is the server.",
                         "Start it with: barca serve [FILES] [--port N]")
    tz = zone(args.timezone)
    conf = _config(settings)
    max_runs = args.max_runs if args.max_runs is not None else conf.get(
        "max_runs", os.cpu_count() or 1)
    if max_runs < 1:
        raise UsageError(f"--max-runs {max_runs}: at least one run must be able to run.",
                         "Give --max-runs 1 or more.")
    drain = args.drain_timeout if args.drain_timeout is not None else conf.get(
        "drain_timeout", 30)
    if drain < 0:
        raise UsageError(f"--drain-timeout {drain} is negative.", "Give seconds, 0 or more.")
    if not 0 < args.port < 65536:
        raise UsageError(f"--port {args.port} is not a TCP port.", "Give 1 to 65535.")
    token_var = conf.get("token_env") or "BARCA_SERVER_TOKEN"
    token = os.environ.get(token_var, "").strip() or None
    if args.host not in LOOPBACK and token is None and not args.insecure:
        raise UsageError(f"Refusing to listen on {args.host} without a token: anyone who can "
                         "reach it could run and cancel.",
                         f"Set {token_var} (clients send it as a Bearer token), listen on "
                         "127.0.0.1, or pass --insecure.")
    server = Server(args, settings)
    server.token = token
    if not server.read_only:  # a read-only server creates and migrates nothing
        from barca.store.metadata import Store
        Store(settings.root, create=True, prefix=settings.store_prefix).close()
    from barca.faces.serve.project import Project
    from barca.faces.serve.queue import Queue
    server.project = Project(settings.root, list(args.args), settings)
    server.project.refresh(force=True)
    sock = _bind(args.host, args.port)
    queue = Queue(settings.root, server.db_path, max_runs, settings.env,
                  lambda: server.project.files, read_only=server.read_only)
    server.queue = queue
    interrupted = [] if server.read_only else queue.recover()
    try:
        from barca.faces.serve.scheduler import Scheduler
    except ImportError:
        Scheduler = _Stopped  # type: ignore[misc,assignment]  # noqa: N806
    scheduler = Scheduler(settings.root, server.nodes(), tz, queue.submit, queue.in_flight,
                          server.scheduler_enabled, server.db_path)
    server.scheduler = scheduler

    def finished(row: dict[str, Any], ok: bool) -> None:
        if row.get("schedule_id"):
            scheduler.run_finished(row["schedule_id"], ok)
    queue.on_finished = finished
    from barca.faces.serve.app import build
    app = build(server)
    _announce(server, args, sock, interrupted)
    queue.start()
    scheduler.start()
    threading.Thread(target=_watch, args=(server, args.watch), daemon=True).start()
    return _run(server, app, sock, drain)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise InfrastructureError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                                  "Stop what uses the port, or pick another with --port N."
                                  ) from None
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def say(text: str, **fields: Any) -> None:
    """A server line: ``[barca] text`` on stderr, or with ``BARCA_LOG=json`` one JSON object
    per line on stdout (for a log collector)."""
    if os.environ.get("BARCA_LOG", "").lower() == "json":
        import json

        from barca.faces.serve.render import rfc3339
        sys.stdout.write(json.dumps({"ts": rfc3339(time.time()), "msg": text, **fields}) + "\n")
        sys.stdout.flush()
    else:
        sys.stderr.write(f"[barca] {text}\n")
        sys.stderr.flush()


def _announce(server: Any, args: Any, sock: socket.socket, interrupted: list[str]) -> None:
    s = server.settings
    prefix = s.store_prefix
    say(f"env {s.env or 'default'} | artifacts {prefix}/artifacts | metadata "
        f"{prefix}/metadata.db (SQLite, WAL){' | read-only' if server.read_only else ''}",
        event="store", env=s.env or "default", metadata=f"{prefix}/metadata.db")
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    say(f"serving on http://{shown}:{port}", event="serving", url=f"http://{shown}:{port}")
    if args.host not in LOOPBACK and server.token is None:
        say("warning: listening on a public address without a token (--insecure)",
            event="warning")
    for e in server.project.errors:
        say(f"warning: {e['file']} left out: {e['error']}", event="load_error", **e)
    for run_id in interrupted:
        say(f"run {run_id} was interrupted when the server stopped", event="interrupted",
            run_id=run_id)
    nodes = [n for n in server.nodes() if n.get("schedule")]
    if not nodes:
        say("no schedules", event="schedules", schedules=[])
    for n in nodes:
        state = "" if server.scheduler_enabled else " (not firing: --no-schedule)"
        say(f"schedule {n['name']} \"{n['schedule']}\" next {n.get('next_fire')} UTC{state}",
            event="schedule", node_id=n["id"], cron=n["schedule"])


def _watch(server: Any, reload: bool) -> None:
    """Look at the files every second: new files are read, broken ones named; with
    ``--watch`` the scheduler takes the edited schedules."""
    while not server.draining:
        time.sleep(1.0)
        with contextlib.suppress(Exception):  # a file half written: the next look sees it
            if server.project.refresh() and reload:
                server.scheduler.reload(server.nodes())


def _run(server: Any, app: Any, sock: socket.socket, drain: float) -> int:
    import uvicorn

    class _Uvicorn(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:  # ours: drain first, cancel on the second
            yield

    config = uvicorn.Config(app, log_level="warning", lifespan="off",
                            timeout_graceful_shutdown=2, access_log=False)
    web = _Uvicorn(config)

    def drain_then_exit() -> None:
        deadline = time.monotonic() + drain
        while not server.queue.idle() and not server.cancelling:
            if time.monotonic() >= deadline:
                n = len(server.queue.running)
                server.queue.stop_all("requeue")
                _wait_idle(server)
                say(f"drain timeout: {n} run(s) put back at the head of the queue for the "
                    "next start", event="requeued", runs=n)
                break
            time.sleep(0.1)
        _wait_idle(server)
        web.should_exit = True

    def on_signal(signum: int, frame: Any) -> None:
        if not server.draining:
            server.draining = True
            server.queue.draining = True
            with contextlib.suppress(Exception):
                server.scheduler.stop()
            say("draining: waiting for runs in flight (signal again to cancel them)",
                event="draining")
            threading.Thread(target=drain_then_exit, daemon=True).start()
        elif not server.cancelling:
            server.cancelling = True
            server.exit_code = 1
            say("cancelling runs in flight", event="cancelling")
            server.queue.stop_all("shutdown")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    web.run(sockets=[sock])
    _wait_idle(server)
    with contextlib.suppress(Exception):
        server.scheduler.stop()
    say(f"stopped (exit {server.exit_code})", event="stopped", exit=server.exit_code)
    return server.exit_code


def _wait_idle(server: Any, limit: float = 15.0) -> None:
    end = time.monotonic() + limit
    while not server.queue.idle() and time.monotonic() < end:
        time.sleep(0.05)
