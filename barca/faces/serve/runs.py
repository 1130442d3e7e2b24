"""``/runs``: accept a run (``POST``), show it (row, outcome, steps, logs), stream its events
(SSE, replayed from the start), hand out its artifact, cancel it; and ``/history``."""
from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, Response, StreamingResponse
from starlette.routing import Route

from barca.core.errors import BarcaError, UsageError
from barca.faces.serve import render
from barca.faces.serve.queue import check_body
from barca.faces.serve.render import error
from barca.store import serverq
from barca.store.database import Connection

STATUSES = ("pending", "running", "success", "failed", "cancelled", "crashed", "error",
            "interrupted")
TRIGGERS = ("api", "schedule", "manual", "client")


def _read(server: Any) -> Connection:
    if server.read_only and not server.db_path.exists():
        return serverq.connect(server.db_path, True)  # an empty store: nothing to show yet
    return serverq.connect(server.db_path, server.read_only)


def _row(server: Any, conn: Connection, run_id: str) -> dict[str, Any]:
    from barca.faces.serve.render import Answer
    got = serverq.row(conn, run_id)
    if got is None:
        raise Answer(404, error(f"No run '{run_id}'.", "GET /runs lists the recent runs."))
    return got


def working_on(server: Any) -> dict[str, str]:
    """node id or name -> the run working on it now (for ``/state``)."""
    out: dict[str, str] = {}
    conn = _read(server)
    try:
        for r in serverq.running(conn):
            for name in (r["target"] or "").split(","):
                out[name] = r["run_id"]
    finally:
        conn.close()
    return out


def history(server: Any, q: Any) -> dict[str, Any]:
    """``/history``: ``barca history --json``'s runs (with who triggered each), newest first,
    filtered; a filter value that cannot match is a 400."""
    from barca.faces.serve.render import Answer
    status, trig = q.get("status"), q.get("triggered_by")
    try:
        if status is not None:
            if status == "complete":  # the old word for success
                status = "success"
            if status not in STATUSES:
                raise UsageError(f"status='{status}' is not a run status.",
                                 f"Statuses: {', '.join(STATUSES)}.")
        if trig is not None and trig not in TRIGGERS:
            raise UsageError(f"triggered_by='{trig}' is not a trigger.",
                             f"Triggers: {', '.join(TRIGGERS)}.")
        target = q["target"].rsplit(":", 1)[-1] if q.get("target") else None
        since = render.parse_time(q["since"]) if q.get("since") else None
        limit = q.get("limit", "20")
        if not limit.isdigit() or int(limit) < 1:
            raise UsageError(f"limit='{limit}' is not a positive whole number.",
                             "Write limit=20.")
    except UsageError as exc:
        raise Answer(400, render.envelope(exc)) from None
    conn = _read(server)
    try:
        rows = serverq.recent(conn, int(limit), status, trig, target, since)
        total = serverq.recent_count(conn, status, trig, target, since)
    finally:
        conn.close()
    return {"runs": [render.run_summary(r) for r in rows], "total": total,
            "truncated": total > len(rows)}


def routes(server: Any, call: Any, writable: Any, json_answer: Any) -> list[Route]:
    from barca.faces.serve.render import Answer

    async def post_run(request: Request) -> Response:
        writable()
        try:
            body = check_body(json.loads(await request.body() or b"null"))
        except ValueError:
            raise Answer(400, error("The request body is not JSON.",
                                    'Send {"command": "get", "targets": ["NAME"]}.')) from None
        except UsageError as exc:
            raise Answer(400, render.envelope(exc)) from None
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(_accept, request, body)

    def _accept(request: Request, body: dict[str, Any]) -> Response:
        from pathlib import Path

        from barca.api.check import check_run
        root = Path(server.root).resolve()
        for f in body["files"]:  # the project's own files only: a client names no other code
            if f.startswith("-") or not (root / f).resolve().is_relative_to(root):
                raise Answer(400, error(f"'{f}' is not a file of this project.",
                                        "Name pipeline files by their path in the project."))
        # paths in the project, wherever the server was started (its runs start in the root)
        body["files"] = [str((root / f).resolve()) for f in body["files"]]
        files = tuple(body["files"]) or server.project.files
        kw = {"command": body["command"], "refresh": body["refresh"] or None,
              "no_cascade": body.get("cascade") is False, "partition": body.get("partition"),
              "settings": server.settings}
        call(check_run, body["targets"] or None, *files, **kw)
        if body.get("dry_run"):  # the plan itself, nothing queued
            from barca import api
            kw.pop("no_cascade")
            plan = call(api.plan_run, body["targets"] or None, *files,
                        refresh_all=bool(body.get("refresh_all")),
                        no_cascade=body.get("cascade") is False, **kw)
            return json_answer(request, plan.to_json())
        run_id = server.queue.submit(body)
        if server.queue.starts_now(run_id):
            return json_answer(request, {"run_id": run_id, "status": "running",
                                         "position": None}, 202)
        return json_answer(request, {"run_id": run_id, "status": "pending",
                                     "position": server.queue.position(run_id)}, 202)

    def list_runs(request: Request) -> Response:
        q = request.query_params
        status = q.get("status")
        limit = q.get("limit", "50")
        if (status is not None and status not in STATUSES) or not limit.isdigit():
            raise Answer(400, error(f"Bad filter: status={status!r}, limit={limit!r}.",
                                    f"Statuses: {', '.join(STATUSES)}; limit a number."))
        conn = _read(server)
        try:
            rows = serverq.recent(conn, int(limit), status or None)
            out = []
            for r in rows:
                s = render.run_summary(r)
                if r["status"] == "running":
                    s["steps_finished"] = len(render.steps_of(conn, r["run_id"]))
                out.append(s)
        finally:
            conn.close()
        return json_answer(request, {"runs": out})

    def get_run(request: Request) -> Response:
        q = request.query_params
        given = q.get("limit", "")
        if given and not given.isdigit():
            raise Answer(400, error(f"limit='{given}' is not a whole number.",
                                    "Write ?limit=100, or ?all=true for every step."))
        limit = None if q.get("all") in ("1", "true") else int(given or 0) or render.STEP_LIMIT
        conn = _read(server)
        try:
            row = _row(server, conn, request.path_params["run_id"])
            return json_answer(request, render.run_detail(conn, row, limit))
        finally:
            conn.close()

    def run_logs(request: Request) -> Response:
        conn = _read(server)
        try:
            row = _row(server, conn, request.path_params["run_id"])
            return json_answer(request, {"run_id": row["run_id"], "status": row["status"],
                                         "logs": render.logs_of(conn, row["run_id"])})
        finally:
            conn.close()

    def run_output(request: Request) -> Response:
        from pathlib import Path
        conn = _read(server)
        try:
            row = _row(server, conn, request.path_params["run_id"])
            path = _single_path(conn, row)
        finally:
            conn.close()
        full = Path(server.root) / path if path else None
        if row["status"] != "success" or full is None or not full.is_file():
            raise Answer(404, error(f"Run '{row['run_id']}' has no single artifact to hand out "
                                    f"(status {row['status']}).",
                                    "Ask a finished run of one asset."))
        return FileResponse(full)

    def delete_run(request: Request) -> Response:
        writable()
        run_id = request.path_params["run_id"]
        conn = _read(server)
        try:
            row = _row(server, conn, run_id)
        finally:
            conn.close()
        got = server.queue.cancel(run_id)
        if got is None:
            raise Answer(409, error(f"Run '{run_id}' has finished ({row['status']}): nothing "
                                    "to cancel.", "Cancel a pending or running run."))
        return json_answer(request, {"run_id": run_id, "status": got})

    async def events(request: Request) -> Response:
        conn = _read(server)
        try:
            _row(server, conn, request.path_params["run_id"])
        except BaseException:
            conn.close()
            raise
        return StreamingResponse(_events(server, conn, request.path_params["run_id"]),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    # the routes of barca 0.30's API, for the scripts written against it
    async def post_named(request: Request) -> Response:
        writable()
        raw = await request.body()
        try:
            extra = json.loads(raw) if raw.strip() else {}
            if not isinstance(extra, dict):
                raise ValueError
        except ValueError:
            raise Answer(400, error("The request body is not a JSON object.",
                                    "Send {} or the fields of POST /runs.")) from None
        command = "get" if request.url.path.startswith("/get/") else "run"
        try:
            body = check_body(dict(extra, command=command,
                                   targets=[request.path_params["target"]]))
        except UsageError as exc:
            raise Answer(400, render.envelope(exc)) from None
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(_accept, request, body)

    def old_status(request: Request) -> Response:
        conn = _read(server)
        try:
            row = render.run_summary(_row(server, conn, request.path_params["run_id"]))
        finally:
            conn.close()
        if row["status"] == "success":
            row["status"] = "complete"  # this route's old word
        return json_answer(request, row)

    return [
        Route("/get/{target:path}", post_named, methods=["POST"]),
        Route("/run/{target:path}", post_named, methods=["POST"]),
        Route("/status/{run_id}", old_status, methods=["GET"]),
        Route("/events/{run_id}", events, methods=["GET"]),
        Route("/runs", post_run, methods=["POST"]),
        Route("/runs", list_runs, methods=["GET"]),
        Route("/runs/{run_id}", get_run, methods=["GET"]),
        Route("/runs/{run_id}", delete_run, methods=["DELETE"]),
        Route("/runs/{run_id}/logs", run_logs, methods=["GET"]),
        Route("/runs/{run_id}/events", events, methods=["GET"]),
        Route("/runs/{run_id}/output", run_output, methods=["GET"]),
    ]


def _single_path(conn: Connection, row: dict[str, Any]) -> str | None:
    """The artifact of a successful run of one unpartitioned target: its step's run hash in
    the JSON outcome, its path in the store."""
    outcome = json.loads(row["outcome"]) if row.get("outcome") else None
    target = row.get("target") or ""
    if not isinstance(outcome, dict) or "," in target or target in ("", "all"):
        return None
    steps = [s for s in outcome.get("steps") or []
             if s.get("id") == target or str(s.get("id", "")).rsplit(":", 1)[-1] == target]
    if len(steps) != 1 or not steps[0].get("run_hash"):
        return None
    from barca.store.serverq import result_path
    return result_path(conn, steps[0]["id"], steps[0]["run_hash"])


async def _events(server: Any, conn: Connection, run_id: str) -> AsyncIterator[str]:
    """The run's events from the database, from the first: replayed to every connection,
    live while it runs, closed after ``run_finished``."""
    n = 0
    started = False
    after_log = after_step = 0
    said = 0  # stderr lines already sent (a run this server holds)
    late = 0  # polls since the run ended without the server's outcome (a run it lost)

    def event(body: dict[str, Any]) -> str:
        nonlocal n
        n += 1
        return f"id: {n}\ndata: {json.dumps(body, default=str)}\n\n"
    try:
        while True:
            row = serverq.row(conn, run_id)
            if row is None:
                return
            status = row["status"]
            if not started and status != "pending":
                started = True
                yield event({"type": "run_started", "run_id": run_id,
                             "started_at": render.rfc3339(row["started_at"])})
            for line in render.logs_of(conn, run_id, after_log):
                after_log = line["seq"]
                yield event({"type": "log", "node_id": line["node_id"], "line": line["line"],
                             "stream": line["stream"], "ts": line["ts"]})
            child = server.queue.running.get(run_id)
            if child is not None:
                for text in child.stderr[said:]:
                    said += 1
                    if not text.startswith("{"):
                        yield event({"type": "line", "line": text, "when": "always"})
            for step in render.steps_of(conn, run_id, after_step):
                after_step = step["seq"]
                yield event({"type": "step_finished", "node_id": step["node_id"],
                             "key": step["key"], "ok": step["ok"],
                             "elapsed_seconds": step["elapsed_seconds"]})
            late += status in serverq.FINISHED and child is None
            if status in serverq.FINISHED and child is None and (
                    row["outcome"] is not None or row["request"] is None
                    or row["started_at"] is None or late > 8
                    or status in ("interrupted", "crashed")):
                outcome = json.loads(row["outcome"]) if row["outcome"] else None
                for step in (outcome or {}).get("steps") or []:  # hits write no row: said here
                    if step.get("status") == "cached":
                        yield event({"type": "step_finished", "node_id": step.get("id"),
                                     "ok": True, "elapsed_seconds": 0.0, "cached": True})
                yield event({"type": "run_finished", "run_id": run_id,
                             "ok": status == "success", "status": status,
                             "outcome": outcome})
                return
            await asyncio.sleep(0.25)
    finally:
        conn.close()


__all__ = ["BarcaError", "routes", "history", "working_on"]
