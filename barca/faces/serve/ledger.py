"""The ledger routes: laptops working against the server's records. ``GET /sql/views`` (which
result each ``barca sql`` view reads; the query runs on the client), ``GET /materializations``
(the step records), ``POST /ledger/lookup`` (which run hashes the ledger holds, with their
store path and digest) and ``POST /ledger/runs`` (a client's run recorded, once every object it
names is checked to be in the server's store with the digest posted)."""
from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from barca.core.errors import UsageError
from barca.faces.serve import render
from barca.faces.serve.render import Answer, error
from barca.store import ledger, serverq
from barca.store.database import Connection

MAT_LIMIT, MAT_MAX = 1000, 10_000
LOOKUP_MAX = 10_000     # pairs in one lookup
_HEX = re.compile(r"^[0-9a-f]{16,128}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
RUN_KEYS = {"run_id", "command", "target", "status", "started_at", "finished_at",
            "steps_cached", "steps_total", "elapsed_seconds"}
STEP_KEYS = {"node_id", "partition", "run_hash", "status", "path", "format", "size_bytes",
             "digest", "elapsed_seconds", "attempts", "parts", "shape", "created_at"}


def _bad(message: str, remediation: str) -> Answer:
    return Answer(400, error(message, remediation))


async def _body(request: Request, example: str) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        raise _bad("The request body is not JSON.", f"Send {example}.") from None
    if not isinstance(body, dict):
        raise _bad("The request body is not a JSON object.", f"Send {example}.")
    return body


def _conn(server: Any) -> Connection:
    return serverq.connect(server.db_path, server.read_only)


def _number(q: Any, name: str, default: int, most: int | None = None) -> int:
    text = q.get(name, str(default))
    if not text.isdigit():
        raise _bad(f"{name}='{text}' is not a whole number.", f"Write {name}={default}.")
    n = int(text)
    return min(n, most) if most is not None else n


def routes(server: Any, call: Any, writable: Any, json_answer: Any) -> list[Route]:

    def sql_views(request: Request) -> Response:
        from barca import api
        q = request.query_params
        from pathlib import Path
        root = Path(server.root).resolve()
        given = [f for v in q.getlist("files") for f in v.split(",") if f]
        for f in given:  # the project's own files only: a client names no other code
            if f.startswith("-") or not (root / f).resolve().is_relative_to(root):
                raise _bad(f"'{f}' is not a file of this project.",
                           "Name pipeline files by their path in the project.")
        files = [str((root / f).resolve()) for f in given] or list(server.project.files)
        # names=: only those views (none given: none); no names=: every view
        names = ({n for v in q.getlist("names") for n in v.split(",") if n}
                 if "names" in q else None)
        doc = call(api.sql_views, *files, names=names, settings=server.settings)
        return json_answer(request, dict(doc, store_uri=server.settings.remote_uri,
                                         env=server.settings.env or "default"))

    def materializations(request: Request) -> Response:
        q = request.query_params
        limit = _number(q, "limit", MAT_LIMIT, MAT_MAX)
        offset = _number(q, "offset", 0)
        status = q.get("status")
        if status is not None and status not in ("success", "failed", "skipped", "cancelled"):
            raise _bad(f"status='{status}' is not a step status.",
                       "Statuses: success, failed, skipped, cancelled.")
        try:
            since = render.parse_time(q["since"]) if q.get("since") else None
        except UsageError as exc:
            raise Answer(400, render.envelope(exc)) from None
        conn = _conn(server)
        try:
            rows, total = ledger.materializations(conn, q.get("node"), q.get("run_id"), status,
                                                  q.get("run_hash"), since, limit, offset)
        finally:
            conn.close()
        for r in rows:
            r["created_at"] = render.rfc3339(r["created_at"])
            r["partition"] = r["partition"] or None  # '' is an unpartitioned node's key
        return json_answer(request, {"materializations": rows, "total": total,
                                     "limit": limit, "offset": offset,
                                     "truncated": offset + len(rows) < total})

    async def lookup(request: Request) -> Response:
        example = '{"hashes": [{"node_id": "pipeline.py:report", "run_hash": "..."}]}'
        body = await _body(request, example)
        hashes = body.get("hashes")  # other fields are ignored: a newer client may send more
        if not isinstance(hashes, list):
            raise _bad("The lookup has no list 'hashes'.", f"Send {example}.")
        if len(hashes) > LOOKUP_MAX:
            raise _bad(f"{len(hashes)} hashes in one lookup: at most {LOOKUP_MAX}.",
                       "Split the lookup.")
        pairs = []
        for h in hashes:
            if not (isinstance(h, dict) and isinstance(h.get("node_id"), str)
                    and isinstance(h.get("run_hash"), str)):
                raise _bad(f"Not a node and run hash: {json.dumps(h)[:200]}.",
                           f"Send {example}.")
            pairs.append((h["node_id"], h["run_hash"]))
        conn = _conn(server)
        try:
            found = ledger.lookup(conn, pairs)
        finally:
            conn.close()
        results = [{"node_id": n, "run_hash": rh, "exists": f is not None, **(f or {})}
                   for (n, rh), f in zip(pairs, found, strict=True)]
        return json_answer(request, {"results": results,
                                     "store_uri": server.settings.remote_uri})

    async def post_run(request: Request) -> Response:
        writable()
        if server.draining:
            raise Answer(503, error("The server is shutting down: it records no run now.",
                                    "Post the run again once the server is back.",
                                    code=3, kind="infrastructure"))
        if not server.settings.remote_uri:
            raise _bad("This server has no artifact store: a run posted to it could not be "
                       "read from anywhere.", "Start the server with [remote] uri (or "
                       "BARCA_REMOTE_URI) set to the store its clients use.")
        example = '{"run": {"run_id", "command", "target", "status"}, "steps": [...]}'
        body = await _body(request, example)
        run, steps = _check_post(body, example)
        from starlette.concurrency import run_in_threadpool
        return await run_in_threadpool(_record, request, run, steps)

    def _record(request: Request, run: dict[str, Any], steps: list[dict[str, Any]]
                ) -> Response:
        conn = serverq.connect(server.db_path)
        try:
            done = ledger.client_run(conn, run["run_id"])
            if done is not None:  # posted before (an answer that never arrived): the same run
                return json_answer(request, {"run_id": done, "client_run_id": run["run_id"],
                                             "bytes_changed": [], "recorded": False}, 201)
            rows = [_row(server, run, s) for s in steps]
            _check_objects(server, run, rows)
            held = ledger.digests(conn, [(r["asset"], r["partition"], r["run_hash"])
                                         for r in rows])
            changed = [r["node"] for r in rows
                       if held.get((r["asset"], r["partition"], r["run_hash"]),
                                   r["sha256"]) != r["sha256"]]
            # the ledger keeps the row it holds: one result per run hash
            keep = [r for r in rows if r["node"] not in changed]
            from barca.store.process import new_run_id
            run_id = new_run_id()
            ledger.record_client_run(conn, run_id, run, keep)
        finally:
            conn.close()
        return json_answer(request, {"run_id": run_id, "client_run_id": run["run_id"],
                                     "bytes_changed": changed, "recorded": True}, 201)

    return [
        Route("/sql/views", sql_views, methods=["GET"]),
        Route("/materializations", materializations, methods=["GET"]),
        Route("/ledger/lookup", lookup, methods=["POST"]),
        Route("/ledger/runs", post_run, methods=["POST"]),
    ]


def _check_post(body: dict[str, Any], example: str) -> tuple[dict[str, Any],
                                                              list[dict[str, Any]]]:
    """The post's run and steps, every field's type checked (a 400 naming the first wrong)."""
    # fields it does not know are left out (a newer client may send more); those it knows
    # are checked
    run, steps = body.get("run"), body.get("steps")
    if not isinstance(run, dict) or not isinstance(steps, list):
        raise _bad("The post needs an object 'run' and a list 'steps'.", f"Send {example}.")
    run = {k: v for k, v in run.items() if k in RUN_KEYS}
    run.setdefault("target", "all")
    for key in ("run_id", "command", "target", "status"):
        if not isinstance(run.get(key), str) or not run[key]:
            raise _bad(f"run.{key} must be a non-empty string.", f"Send {example}.")
    if run["status"] != "success":
        raise _bad(f"run.status is '{run['status']}': only successful runs are recorded.",
                   "Post a run once it succeeded; a failed one stays on its machine.")
    for key in ("started_at", "finished_at"):
        if run.get(key) is not None:
            run[key] = _time(run[key], f"run.{key}")
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            raise _bad(f"steps[{i}] is not an object.", f"Send {example}.")
        steps[i] = s = {k: v for k, v in s.items() if k in STEP_KEYS}
        for key in ("node_id", "run_hash", "path", "digest"):
            if not isinstance(s.get(key), str) or not s[key]:
                raise _bad(f"steps[{i}].{key} must be a non-empty string.",
                           "Each step names its node, run hash, store path and digest.")
        if s.get("status", "success") != "success":
            raise _bad(f"steps[{i}].status is '{s['status']}': only results are recorded.",
                       "Post the steps that succeeded.")
        if not _HEX.match(s["run_hash"]) or not _DIGEST.match(s["digest"]):
            raise _bad(f"steps[{i}]: run_hash and digest are lowercase hex (the digest a "
                       "SHA-256).", "Post them as barca recorded them.")
        for key in ("size_bytes", "attempts"):
            if s.get(key) is not None and (not isinstance(s[key], int) or s[key] < 0):
                raise _bad(f"steps[{i}].{key} must be a whole number.", "Post a number.")
        if s.get("parts") is not None and not isinstance(s["parts"], dict):
            raise _bad(f"steps[{i}].parts must be an object.", "Post it as recorded.")
    return run, steps


def _time(value: Any, name: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return render.parse_time(value)
        except UsageError:
            pass
    raise _bad(f"{name} is not a time.", "Send RFC 3339 (2026-01-31T05:00:00Z) or Unix seconds.")


def _row(server: Any, run: dict[str, Any], s: dict[str, Any]) -> dict[str, Any]:
    """A step as the materialization row the server records. Its path must be where this
    server's store keeps that node's result under that run hash, in the server's environment:
    anything else is an object outside its store (409)."""
    from barca.store.artifacts import EXT, artifact_relpath
    asset, key = ledger.base_node(s["node_id"])
    key = s.get("partition") or key
    prefix = server.settings.store_prefix
    path = s["path"]
    uri = (server.settings.remote_uri or "").rstrip("/")
    if uri and path.startswith(uri + "/"):  # a store URI: its path in the store
        path = ".barca/" + path[len(uri) + 1:]
    ext = path.rsplit(".", 1)[-1] if "." in path.rsplit("/", 1)[-1] else ""
    fmt = next((f for f, e in EXT.items() if e == ext), None)
    if fmt is None or path != artifact_relpath(asset, key, s["run_hash"], ext, prefix):
        raise Answer(409, error(
            f"{s['node_id']}: {s['path']} is not where this server's store "
            f"({server.settings.remote_uri}, environment {server.settings.env or 'default'}) "
            f"keeps its result {s['run_hash'][:16]}...; nothing from run {run['run_id']} was "
            "recorded.", "Point [remote] uri (and --env) at the server's store and "
            "environment, then post again.", reason="outside_store", node=s["node_id"]))
    if s.get("format") not in (None, fmt):
        raise _bad(f"{s['node_id']}: format '{s['format']}' but its path ends .{ext}.",
                   "Post the format barca recorded.")
    return {"node": s["node_id"] if not key or "[" in s["node_id"] else f"{asset}[{key}]",
            "asset": asset, "partition": key, "run_hash": s["run_hash"], "path": path,
            "format": fmt, "size": s.get("size_bytes"), "sha256": s["digest"],
            "parts": json.dumps(s["parts"], sort_keys=True) if s.get("parts") else None,
            "status": "success", "elapsed": s.get("elapsed_seconds"),
            "created_at": _time(s["created_at"], "created_at") if s.get("created_at") else None,
            "shape": s.get("shape"), "remote": 1, "attempts": s.get("attempts") or 1}


def _check_objects(server: Any, run: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    """Every object the post names is in the server's store with the digest posted (its
    bytes read and hashed: a store's word is not enough), or a 409 naming the first that is
    not; nothing is recorded then."""
    import tempfile
    from pathlib import Path

    from barca.store.remote import open_store
    store = open_store(server.settings)
    assert store is not None  # post_run answered 400 without one
    with tempfile.TemporaryDirectory(prefix="barca-ledger-") as tmp:
        for r in rows:
            size = store.fetch(Path(tmp), r["path"], r["sha256"])
            if size is None and store.fetch(Path(tmp), r["path"]) is not None:
                raise Answer(409, error(
                    f"{r['node']}: the store's object {r['path']} has another digest than "
                    f"the post's {r['sha256']}; nothing from run {run['run_id']} was "
                    "recorded.", "Upload this machine's result to the store again (or take "
                    "the store's), then post again.", reason="digest_differs",
                    node=r["node"]))
            if size is None:
                raise Answer(409, error(
                    f"{r['node']}: the store {server.settings.remote_uri} has no object "
                    f"{r['path']} with digest {r['sha256']}; nothing from run "
                    f"{run['run_id']} was recorded.", "Upload the result to the store first "
                    "(the next barca command on that machine does), then post again.",
                    reason="object_missing", node=r["node"]))
            if r["size"] is not None and r["size"] != size:
                raise Answer(409, error(
                    f"{r['node']}: the object {r['path']} holds {size} bytes, the post says "
                    f"{r['size']}; nothing from run {run['run_id']} was recorded.",
                    "Post the size barca recorded.", reason="object_differs", node=r["node"]))
            r["size"] = size
            (Path(tmp) / r["path"]).unlink(missing_ok=True)
