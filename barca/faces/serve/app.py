"""The HTTP routes: runs (``POST /runs`` and friends), the inspection routes that answer the
CLI's ``--json`` bodies, the queue and schedules, the web UI's files. Handlers only translate:
the work is ``barca.api``'s, ``barca.queries``' and the queue's."""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from barca.core.errors import BarcaError, UsageError
from barca.faces.serve import graph, ledger, render, runs
from barca.faces.serve.render import Answer, error

UI = Path(__file__).parent / "ui"


def usage_status(exc: BarcaError) -> int:
    if exc.extra.get("reason") == "unknown_target":
        return 404
    return 400 if isinstance(exc, UsageError) else 500


def json_answer(request: Request, body: Any, status: int = 200) -> Response:
    """A JSON body with an ETag; 304 when the client already holds it."""
    data = json.dumps(body, default=str, ensure_ascii=False).encode()
    tag = '"' + hashlib.sha256(data).hexdigest()[:32] + '"'
    if status == 200 and request.headers.get("if-none-match") in (tag, "W/" + tag):
        return Response(status_code=304, headers={"ETag": tag})
    return Response(data, status_code=status, media_type="application/json",
                    headers={"ETag": tag})


def build(server: Any) -> Starlette:
    """The app for ``server`` (``barca.faces.serve.main.Server``)."""
    api_lock = threading.Lock()  # one in-process command at a time: each loads the graph

    def call(fn: Any, *a: Any, **kw: Any) -> Any:
        with api_lock:
            try:
                return fn(*a, **kw)
            except BarcaError as exc:
                raise Answer(usage_status(exc), render.envelope(exc)) from None

    def files() -> tuple[str, ...]:
        return server.project.files

    def writable() -> None:
        if server.read_only:
            raise Answer(403, error("This server is read-only: it runs, cancels and pauses "
                                    "nothing.", "Start it without --read-only to change things."))

    # ------------------------------------------------------------------ inspection
    def health(request: Request) -> Response:
        return json_answer(request, server.health())

    def listing(request: Request) -> Response:
        from barca.queries.listing import list_nodes
        return json_answer(request, call(list_nodes, *files(), settings=server.settings
                                         ).to_json())

    def assets(request: Request) -> Response:
        from barca.queries.listing import list_nodes
        return json_answer(request, call(list_nodes, *files(), settings=server.settings
                                         ).to_json()["nodes"])

    def groups(request: Request) -> Response:
        from barca.queries.listing import list_nodes
        return json_answer(request, call(list_nodes, *files(), settings=server.settings,
                                         groups=True).to_json())

    def nodes(request: Request) -> Response:
        from barca import api
        body = call(api.status, None, *files(), settings=server.settings).to_json()
        state = request.query_params.get("state")
        problems = request.query_params.get("problems", "").lower() in ("1", "true", "yes")
        def state_of(n: dict[str, Any]) -> Any:
            return (n.get("cache") or {}).get("state", n.get("state"))
        if state:
            body["nodes"] = [n for n in body["nodes"] if state_of(n) == state]
        if problems:
            body["nodes"] = [n for n in body["nodes"] if state_of(n) != "cached"]
        return json_answer(request, body)

    def state(request: Request) -> Response:
        from barca import api
        body = call(api.status, None, *files(), settings=server.settings).to_json()
        working = runs.working_on(server)
        # a run names its targets by id (the UI) or by name (the CLI)
        return json_answer(request, [dict(n, running=working.get(n["id"]) or
                                          working.get(n["name"])) for n in body["nodes"]])

    def plan(request: Request) -> Response:
        from barca import api
        return json_answer(request, call(api.plan, *files(), settings=server.settings,
                                         target=request.query_params.get("target")).to_json())

    def stats(request: Request) -> Response:
        from barca.queries.stats import stats_report
        try:
            with api_lock:
                body = stats_report(request.path_params["name"], *files(),
                                    settings=server.settings).to_json()
        except UsageError as exc:
            raise Answer(404, render.envelope(exc)) from None
        return json_answer(request, body)

    def history(request: Request) -> Response:
        return json_answer(request, runs.history(server, request.query_params))

    # ------------------------------------------------------------------ queue and schedules
    def queue(request: Request) -> Response:
        return json_answer(request, server.queue.snapshot())

    def queue_switch(request: Request) -> Response:
        writable()
        server.queue.pause(request.url.path.endswith("/pause"))
        return json_answer(request, server.queue.snapshot())

    def schedule(request: Request) -> Response:
        return json_answer(request, server.scheduler.entries())

    def schedule_switch(request: Request) -> Response:
        writable()
        ident = request.path_params["ident"]
        try:
            if request.url.path.endswith("/pause"):
                until = request.query_params.get("until")
                from datetime import UTC, datetime
                when = (datetime.fromtimestamp(render.parse_time(until), UTC)
                        if until else None)
                body = server.scheduler.pause(ident, when)
            else:
                body = server.scheduler.resume(ident)
        except UsageError as exc:
            raise Answer(400, render.envelope(exc)) from None
        except KeyError:
            raise Answer(404, error(f"No schedule '{ident}'.",
                                    "GET /schedule lists the schedules.")) from None
        return json_answer(request, body)

    def reset(request: Request) -> Response:
        writable()
        try:
            moved = server.queue.reset(server.db_path)
            server.scheduler.database_replaced()
        except RuntimeError:
            raise Answer(409, error("A run is pending or running: the metadata database stays.",
                                    "Wait for the runs (GET /queue) or cancel them, then "
                                    "reset.")) from None
        return json_answer(request, {"reset": True, "moved_to": moved})

    def root(request: Request) -> Response:
        return RedirectResponse("/ui/", status_code=303)

    routes = [
        Route("/", root, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/list", listing, methods=["GET"]),
        Route("/assets", assets, methods=["GET"]),
        Route("/groups", groups, methods=["GET"]),
        Route("/nodes", nodes, methods=["GET"]),
        Route("/state", state, methods=["GET"]),
        Route("/plan", plan, methods=["GET"]),
        Route("/stats/{name:path}", stats, methods=["GET"]),
        Route("/history", history, methods=["GET"]),
        Route("/queue", queue, methods=["GET"]),
        Route("/queue/pause", queue_switch, methods=["POST"]),
        Route("/queue/resume", queue_switch, methods=["POST"]),
        Route("/schedule", schedule, methods=["GET"]),
        Route("/state/reset", reset, methods=["POST"]),
        Route("/schedule/{ident:path}/pause", schedule_switch, methods=["POST"]),
        Route("/schedule/{ident:path}/resume", schedule_switch, methods=["POST"]),
        *runs.routes(server, call, writable, json_answer),
        *ledger.routes(server, call, writable, json_answer),  # server mode: laptops' records
        *graph.routes(server, call, files),  # the web UI's picture (barca graph's SVG)
        Mount("/ui", app=StaticFiles(directory=UI, html=True), name="ui"),
    ]

    async def on_answer(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Answer)
        return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 404:
            body = error(f"no such endpoint: {request.method} {request.url.path}",
                         "GET /health, /list, /nodes, /runs, /history, /queue, /schedule; "
                         "see `barca docs serve`.")
        elif exc.status_code == 405:
            body = error(f"{request.method} is not allowed on {request.url.path}.",
                         f"Allowed: {headers.get('Allow', headers.get('allow', ''))}.")
        else:
            body = error(str(exc.detail))
        return JSONResponse(body, status_code=exc.status_code, headers=headers)

    async def on_database(request: Request, exc: Exception) -> Response:
        server.metadata_error = str(exc)  # /health says so until the next start
        return JSONResponse(error(f"the metadata database cannot be used: {exc}",
                                  f"Check {server.db_path} (move it aside if it is damaged), "
                                  "then restart the server.", code=3, kind="infrastructure",
                                  reason="metadata_unusable"), status_code=500)

    from barca.store.database import DatabaseError
    app = Starlette(routes=routes, exception_handlers={Answer: on_answer,
                                                       HTTPException: on_http,
                                                       DatabaseError: on_database})
    token = server.token
    return Guard(app, token) if token else app  # type: ignore[return-value]


class Guard:
    """Every route but ``/health`` (and the UI's static shell, which holds no data) wants
    ``Authorization: Bearer <token>``, compared in constant time."""

    OPEN = ("/health", "/ui/", "/ui")

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self._open(scope["path"]):
            await self.app(scope, receive, send)
            return
        given = b""
        for k, v in scope.get("headers", []):
            if k == b"authorization" and v[:7].lower() == b"bearer ":
                given = v[7:].strip()
        if hmac.compare_digest(given, self.token):
            await self.app(scope, receive, send)
            return
        body = json.dumps(error("Missing or wrong token.",
                                "Send Authorization: Bearer <token> (the value of "
                                "BARCA_SERVER_TOKEN on the server).")).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"www-authenticate", b"Bearer"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    def _open(self, path: str) -> bool:
        return path == "/health" or path == "/" or path.startswith("/ui/") or path == "/ui"


def now() -> float:
    return time.time()
