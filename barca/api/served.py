"""The commands ``--server`` sends to a ``barca serve`` (``barca.api.server`` talks to it):
each asks the routes the spec names and turns the answer into the result object the local
command returns (``barca.present.fromjson``), so it is printed and returned the same way."""
from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import quote

from barca.api.server import Server, error_of  # Server: the callers' one import
from barca.core import events as ev
from barca.core.errors import Cancelled, StepFailed, UsageError


def _names(value: Any) -> list[str]:
    if value is None:
        return []
    items = [value] if isinstance(value, str) else list(value)
    return [n.strip() for item in items for n in str(item).split(",") if n.strip()]


def materialize(server: Server, target: Any = None, *files: str, command: str = "get",
                refresh: Any = None, refresh_all: bool = False, no_cascade: bool = False,
                partition: Any = None, dry_run: bool = False, values: bool = False,
                fetch: bool = False, on_event: ev.EventCallback = ev.ignore) -> Any:
    """A ``get`` / ``run`` on the server: its RunResult (a Plan for a dry run), raising
    StepFailed (with the result) when a step failed and Cancelled when it was cancelled.
    ``values``: the values as JSON in the document (``-o value``); ``fetch``: one target's
    artifact the document only names read into the result (a Python caller's value)."""
    from barca.present.fromjson import plan_from_json
    server.check()
    targets = _names(target)
    body: dict[str, Any] = {"command": command}
    if targets:
        body["targets"] = targets
    if files:
        body["files"] = list(files)
    if _names(refresh):
        body["refresh"] = _names(refresh)
    if refresh_all:
        body["refresh_all"] = True
    if no_cascade:
        body["cascade"] = False
    if partition not in (None, "", {}):
        body["partition"] = partition
    if dry_run:
        body["dry_run"] = True
    if values:
        body["values"] = True
    start = time.perf_counter()
    answer = server.submit(body)
    if dry_run and "run_id" not in answer:  # the plan itself, no run queued
        return plan_from_json(answer)
    run = server.wait(answer["run_id"], on_event)
    if dry_run:
        return plan_from_json(run.get("outcome") or {})
    result = _finished(server, run, command, targets, on_event, start)
    return _with_value(server, result) if fetch else result


def _finished(server: Server, run: dict[str, Any], command: str, targets: list[str],
              on_event: ev.EventCallback, start: float) -> Any:
    from barca.present.fromjson import run_from_json
    status = run.get("status")
    outcome = run.get("outcome") or {}
    envelope = outcome.get("envelope") if isinstance(outcome, dict) else None
    if status == "cancelled":
        raise Cancelled(f"run {run.get('run_id')} was cancelled on the server",
                        "Run the command again to finish.")
    if not outcome.get("steps") and (envelope or run.get("error")) and status != "success":
        # refused before any step ran (a usage error found by the worker): its own error
        raise error_of(envelope or {"error": run.get("error"), "code": 3}, 500, server.url)
    if isinstance(outcome, dict) and "steps_total" not in outcome and run.get("steps_total"):
        outcome = {**outcome, "steps_total": run["steps_total"]}  # an outcome without it
    result = run_from_json(outcome, command, targets)
    if result.steps_executed or result.failures:
        on_event(ev.RunEnded(result.steps_executed, result.steps_total,  # the server's time
                             result.elapsed or time.perf_counter() - start,
                             bool(result.failures)))
    if status != "success" or result.failures:
        env = envelope or {}
        first = result.failures[0] if result.failures else (result.failed_node or "", "", "")
        raise StepFailed(env.get("error") or f"step '{first[0]}' failed: {result.error}",
                         env.get("remediation") or "Fix the cause and run the same command "
                         "again: finished keys are cached.", result=result,
                         node=env.get("node") or first[0],
                         traceback=env.get("traceback") or "")
    return result


def read_output(server: Server, run_id: str, fmt: str | None) -> Any:
    """A run's single output read from ``/runs/{id}/output`` (a value JSON does not carry:
    a table, a pickled object)."""
    import tempfile
    from pathlib import Path
    conn, resp = server._send("GET", f"/runs/{quote(run_id)}/output")
    try:
        raw = resp.read()
    finally:
        conn.close()
    if resp.status >= 400:
        try:
            doc = json.loads(raw)
        except ValueError:
            doc = None
        raise error_of(doc, resp.status, server.url)
    if fmt in ("parquet", "csv"):
        from barca.store import frames
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"output.{fmt}"
            path.write_bytes(raw)
            return frames.read(path, fmt, None)
    from barca.store.artifacts import deserialize
    return deserialize(raw, fmt or "json")


def _with_value(server: Server, result: Any) -> Any:
    """``result`` with its single output's value read from the server when the JSON named
    the artifact instead (a table, a pickled object)."""
    out = result.outputs[0] if len(result.outputs) == 1 else None
    if out is None or out.partitioned or out.values is not None or not out.items:
        return result
    from barca.present.results import Output
    got = read_output(server, result.run_id, out.items[0].format)
    fields = {f: getattr(result, f) for f in type(result).__slots__}
    fields["outputs"] = (Output(out.target, False, out.items, got),)
    return type(result)(**fields)


def value(server: Server, target: Any = None, *files: str, command: str = "get",
          as_type: str | None = None, **kw: Any) -> Any:
    """What ``barca.get(..., server=URL)`` returns: the value the run on the server left (a
    dry run's Plan with ``dry_run=True``). The run document carries small JSON values inline
    and names the other artifacts: one target's is read from ``/runs/{id}/output`` in the
    type it was written; keys of a partitioned one the document only names are asked for as
    JSON (``values``), by a second request."""
    result = materialize(server, target, *files, command=command, fetch=True, **kw)
    if hasattr(result, "rows"):  # a dry run's plan
        return result
    if any(o.partitioned and any(i.path is not None for i in o.items) for o in result.outputs):
        result = materialize(server, target, *files, command=command, values=True, **kw)
    return result.value(as_type)


def on_server(command: str, call: dict[str, Any]) -> Any:
    """``barca.get``/``barca.run`` called with ``server=URL`` (``call``: their arguments): the
    value of the run the server made."""
    flags = dict(call["flags"])
    url = flags.pop("server")
    if call.get("env") is not None or call.get("executor") is not None or flags:
        raise UsageError("server= takes no settings of this machine (env=, executor=, ...): "
                         "the server runs with its own.", "Drop them, or drop server=.")
    as_type = call.get("as_type")
    if as_type is not None:
        from barca.store.frames import check_type
        check_type(as_type)
    return value(Server.at(url), call.get("target", call.get("task")), *call["files"],
                 command=command, as_type=as_type, refresh=call["refresh"],
                 refresh_all=call["refresh_all"], no_cascade=bool(call.get("no_cascade")),
                 partition=call["partition"], dry_run=call["dry_run"],
                 on_event=call["on_event"])


def status(server: Server, target: Any = None) -> Any:
    from barca.present.fromjson import status_cone, status_from_json
    server.check()
    report = status_from_json(server.get("/nodes"))
    names = _names(target)
    return status_cone(report, names) if names else report


def list_nodes(server: Server, groups: bool = False) -> Any:
    from barca.present.fromjson import listing_from_json
    server.check()
    return listing_from_json(server.get("/groups" if groups else "/list"))


def history(server: Server, limit: int | None = 20, fields: str | None = None,
            **filters: str | None) -> Any:
    """The server's ``/history``: ``limit`` runs (None: every one) that ``filters`` keep
    (status, triggered_by, target: one value each; since: as ``barca history --since``)."""
    from barca.present.fromjson import history_from_json
    from barca.present.journal import History
    from barca.present.statusview import field_names
    from barca.queries.runlog import FIELDS, since_time
    keep = field_names("--fields", fields, FIELDS) if fields is not None else None
    query = {k: v for k, v in filters.items() if v is not None}
    if "since" in query:  # (the server reads an RFC 3339 time)
        import datetime as dt
        query["since"] = dt.datetime.fromtimestamp(since_time(query["since"]), dt.UTC).isoformat()
    server.check()
    got = history_from_json(server.get("/history", limit=10**9 if limit is None else limit,
                                       **query))
    return History(got.runs, got.total, keep)


def stats(server: Server, target: str, fields: Any = None) -> Any:
    from barca.present.fromjson import stats_from_json
    from barca.queries.stats import _fields
    _fields(fields)  # an unknown field: exit 2 before asking
    server.check()
    return stats_from_json(server.get(f"/stats/{quote(target, safe='')}"), fields)


def logs(server: Server, run_id: str | None = None, step: str | None = None,
         stream: str | None = None, timestamps: bool = False) -> Any:
    """``barca logs`` of a run on the server (default: its most recent run), kept to one
    step or stream as locally."""
    from barca.core.types import short_name
    from barca.present.fromjson import logs_from_json
    if stream not in (None, "stdout", "stderr"):
        raise UsageError(f"--stream {stream!r}: a stream is stdout or stderr.",
                         "Write --stream stdout or --stream stderr.")
    server.check()
    if run_id is None:
        runs = server.get("/history", limit=1).get("runs") or []
        if not runs:
            raise UsageError("No run is recorded yet, so there are no logs.",
                             "Run `barca get` first; `barca history` lists the runs.")
        run_id = runs[0]["run_id"]
    run = server.get(f"/runs/{quote(run_id)}")
    lines = server.get(f"/runs/{quote(run_id)}/logs").get("logs") or []
    if step is not None:
        def named(node: str) -> bool:
            base = node.split("[", 1)[0]
            return step in (node, base, short_name(base), short_name(node))
        lines = [x for x in lines if named(str(x.get("node_id", "")))]
    if stream is not None:
        lines = [x for x in lines if x.get("stream") == stream]
    return logs_from_json(run, lines, timestamps)


# ---------------------------------------------------------------------------- sql and doctor

def _same_store(a: str | None, b: str | None) -> bool:
    return bool(a) and bool(b) and str(a).rstrip("/") == str(b).rstrip("/")


def sql(server: Server, query: str, *files: str, limit: int | None = 100,
        settings: Any = None) -> Any:
    """``barca sql --server``: the views the server's ledger says (``GET /sql/views``), the
    query run here with DuckDB over the store's copies of their results, each checked against
    the digest the server recorded. The server never runs SQL. A SqlResult, as locally."""
    from barca.core.settings import Settings
    from barca.present.results import SqlResult
    from barca.queries.sql import identifiers
    from barca.queries.sqlviews import TABLES
    from barca.queries.sqlviews import query as run_query
    from barca.store.remote import Remote
    settings = settings or Settings.resolve()
    health = server.check()
    theirs, ours = health.get("store_uri"), settings.remote_uri
    if not theirs:
        raise UsageError(f"The server {server.url} has no artifact store: its results cannot "
                         "be read here.", "Start it with [remote] uri (or BARCA_REMOTE_URI) "
                         "set, or query on the server's machine with --local there.")
    if not _same_store(theirs, ours):
        raise UsageError(f"The server {server.url} keeps its results in {theirs}, this "
                         f"project in {ours or 'no store'}: they could not be read here.",
                         f"Set [remote] uri (or BARCA_REMOTE_URI) to {theirs}, or run with "
                         "--local.")
    words = identifiers(query)
    q: dict[str, Any] = {"names": ",".join(sorted(words)) or ","}
    if files:
        q["files"] = ",".join(files)
    doc = server.get("/sql/views", **q)
    tables: dict[str, list[dict[str, Any]]] = {}
    if "barca" in words:
        tables["runs"] = server.get("/history", limit=10_000).get("runs") or []
        tables["materializations"] = server.get(
            "/materializations", limit=10_000).get("materializations") or []
    assert set(tables) <= set(TABLES)
    store = Remote(theirs, key_file=settings.store_key_file)
    from barca.store.cachelimit import COPIES
    cache = settings.root / ".barca" / COPIES
    cache.mkdir(parents=True, exist_ok=True)
    ignore = settings.root / ".barca" / ".gitignore"
    if not ignore.exists():  # a machine that never ran a step: .barca/ is barca's, not git's
        ignore.write_text("*\n")
    columns, rows, total = run_query(doc, tables, query, limit, store, cache, server.url)
    return SqlResult(query, tuple(columns), tuple(tuple(r) for r in rows), total)


def server_checks(server: Server, settings: Any, version: str) -> list[Any]:
    """``barca doctor --server``: the server's checks after this machine's -- reachable and
    barca (the others are skipped when not), its API version, its store against this
    project's, its health, the files it could not load, its schedules. Only reads: nothing
    changes on the server. ``version``: this barca's."""
    from barca.api.server import API_VERSION
    from barca.core.errors import BarcaError, redact
    from barca.queries.doctor import Check
    try:
        health = server.check()
    except BarcaError as exc:
        return [Check("server", False, exc.message, " ".join(exc.remediation.split()))]
    out = [Check("server", True, f"{server.url} answers as barca")]
    theirs = health.get("api_version")
    out.append(Check("server version", True, f"barca {health.get('version')} (API "
                     f"{theirs}), this machine barca {version}") if theirs == API_VERSION
               else Check("server version", False, f"the server speaks API {theirs} (barca "
                          f"{health.get('version')}), this barca API {API_VERSION} (barca "
                          f"{version})", "Install the same barca version here and on "
                          "the server."))
    store, ours = health.get("store_uri"), settings.remote_uri
    if _same_store(store, ours):
        out.append(Check("server store", True, f"the server and this project share "
                         f"{redact(str(store))} (server environment "
                         f"{health.get('env') or 'default'})"))
    else:
        out.append(Check("server store", False, f"the server's store is "
                         f"{redact(str(store)) if store else 'none'}, this project's "
                         f"{redact(str(ours)) if ours else 'none'}: a result one records "
                         "could not be read by the other", "Give both the same [remote] uri "
                         "(or BARCA_REMOTE_URI)."))
    problems = [p for p in (
        "it is draining (shutting down)" if health.get("status") == "draining" else "",
        f"its metadata database cannot be used: {health['metadata_error']}"
        if health.get("metadata_error") else "") if p]
    out.append(Check("server health", not problems, "; ".join(problems) or (
        f"{health.get('status')}{', read-only' if health.get('read_only') else ''}"),
        "Restart it once it has stopped; check its metadata database." if problems else ""))
    errors = health.get("load_errors") or []
    out.append(Check("server sources", not errors, "; ".join(
        f"{e.get('file')}: {e.get('error')}" for e in errors) or "every deployed file loads",
        "Fix those files on the server: their nodes are missing from everything it answers."
        if errors else ""))
    out.append(_schedules(server, health))
    return out


def _schedules(server: Server, health: dict[str, Any]) -> Any:
    from barca.core.errors import BarcaError
    from barca.queries.doctor import Check
    try:
        entries = server.get("/schedule")
    except BarcaError as exc:
        return Check("server scheduler", False, exc.message, exc.remediation)
    entries = entries if isinstance(entries, list) else []
    failing = [str(e.get("id")) for e in entries if e.get("failing")]
    paused = [str(e.get("id")) for e in entries if e.get("paused")]
    state = "running" if health.get("scheduler") == "running" else "not firing"
    detail = (f"{state}; {len(entries)} schedule{'s' if len(entries) != 1 else ''}"
              + (f", {len(paused)} paused ({', '.join(paused)})" if paused else "")
              + (f", {len(failing)} failing ({', '.join(failing)})" if failing else ""))
    return Check("server scheduler", not failing, detail,
                 "Run `barca status --problems --server` for the error and fix it, then run "
                 "the node with --server: a success resets the count." if failing else "")
