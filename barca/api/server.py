"""``--server``: a command run on a ``barca serve`` instead of here, and its answer turned back
into the result object the local command returns (``barca.present.fromjson``), so the CLI,
``barca.get(..., server=URL)`` and ``%barca ... --server`` print and return what they would
locally.

The standard library only (``http.client``): talking to a server must not import the server's
own libraries (starlette, uvicorn), and a plain command never imports this module.

A server that cannot be reached, or that answers as something other than a barca server, is
an infrastructure error (exit 3) naming its URL: there is no fallback to running locally,
which would run different code against a different ``.barca/``."""
from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

from barca.core import events as ev
from barca.core.errors import (
    BarcaError,
    Cancelled,
    InfrastructureError,
    StepFailed,
    UsageError,
)

API_VERSION = 1  # the HTTP API barca serve speaks and --server expects (GET /health)
TOKEN_ENV = "BARCA_SERVER_TOKEN"
RECONNECT_ENV = "BARCA_SERVER_RECONNECT"  # seconds a dropped event stream waits (default 60)
_ERRORS = {1: StepFailed, 2: UsageError, 3: InfrastructureError, 130: Cancelled}


def _server_section(root: Any = None) -> dict[str, Any]:
    from barca.core.settings import project_file
    if root is None:
        from barca.core.root import find_root
        root = find_root()
    return project_file(root).get("server", {})


def server_url(given: str | None, root: Any = None) -> str:
    """The server a command talks to: ``given`` (``--server URL``), else for a bare
    ``--server`` the ``BARCA_SERVER`` variable, else ``[server] url`` in barca.toml. A URL
    without a scheme is ``http://``."""
    url = (given or "").strip() or os.environ.get("BARCA_SERVER", "").strip() or str(
        _server_section(root).get("url") or "").strip()
    if not url:
        raise UsageError("--server names no server.",
                         "Give the URL (--server http://HOST:8274), or set BARCA_SERVER, or "
                         "[server] url in barca.toml.")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--server {url}: not an http(s) URL.",
                         "Write --server http://HOST:PORT (8274 is barca serve's port).")
    return url.rstrip("/")


def server_token(root: Any = None) -> str | None:
    """The bearer token sent to the server: ``BARCA_SERVER_TOKEN`` (or the variable that
    ``[server] token_env`` names)."""
    name = TOKEN_ENV
    with contextlib.suppress(BarcaError):  # an invalid barca.toml: the default variable
        name = str(_server_section(root).get("token_env") or TOKEN_ENV)
    return os.environ.get(name, "").strip() or None


def error_of(doc: Any, status: int, url: str) -> BarcaError:
    """The error a server's envelope describes (its ``code`` is the exit code), or an
    infrastructure error naming ``url`` for an answer that is no envelope."""
    if isinstance(doc, dict) and isinstance(doc.get("error"), str) and "code" in doc:
        cls = _ERRORS.get(doc.get("code"), BarcaError)  # type: ignore[arg-type]
        extra = {k: v for k, v in doc.items() if k not in ("error", "code", "kind",
                                                          "remediation")}
        extra.setdefault("server", url)
        if cls is StepFailed:
            return StepFailed(doc["error"], str(doc.get("remediation") or ""), **extra)
        return cls(doc["error"], str(doc.get("remediation") or ""), **extra)
    return InfrastructureError(f"{url} answered HTTP {status}, not as a barca server.",
                               "Check the URL: `barca serve` answers JSON on its port "
                               "(default 8274).", server=url)


class Server:
    """One barca server: JSON requests with the token, errors as barca errors."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        self.url, self.token, self.timeout = url, token, timeout
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host, self._port = parts.hostname or "", parts.port
        self._base = parts.path.rstrip("/")

    @classmethod
    def at(cls, given: str | None, root: Any = None) -> Server:
        """The server of ``--server [URL]``, with the token from the environment."""
        return cls(server_url(given, root), server_token(root))

    def _connection(self, timeout: float | None) -> Any:
        import http.client
        kind = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return kind(self._host, self._port, timeout=timeout)

    def _unreachable(self, exc: BaseException) -> InfrastructureError:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        return InfrastructureError(f"cannot reach the barca server at {self.url}: {why}",
                                   "Start it (`barca serve` on that machine), check the URL, "
                                   "or run the command locally with --local.", server=self.url)

    def _send(self, method: str, path: str, body: Any = None,
              timeout: float | None = None) -> Any:
        import http.client
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, self._base + path, body=data, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self._unreachable(exc) from None

    def request(self, method: str, path: str, body: Any = None,
                query: dict[str, Any] | None = None) -> tuple[int, Any]:
        """``(status, JSON)``; an error status raises the envelope's error."""
        import http.client
        if query:
            path += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        conn, resp = self._send(method, path, body)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(exc) from None
        finally:
            conn.close()
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        if resp.status >= 400 or doc is None:
            raise error_of(doc, resp.status, self.url)
        return resp.status, doc

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query or None)[1]

    def check(self) -> dict[str, Any]:
        """``/health``, which every barca server answers (without a token): anything else at
        the URL is not one."""
        doc = self.get("/health")
        if not isinstance(doc, dict) or "api_version" not in doc or "version" not in doc:
            raise InfrastructureError(f"{self.url} is not a barca server (its /health is not "
                                      "barca's).", "Check the URL and the port.",
                                      server=self.url)
        return doc

    # ------------------------------------------------------------------------ runs

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", "/runs", body)[1]

    def cancel(self, run_id: str) -> None:
        """``DELETE /runs/{id}``; a run that already ended is no error here."""
        with contextlib.suppress(BarcaError):
            self.request("DELETE", f"/runs/{quote(run_id)}")

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        """The run's events (``/runs/{id}/events``), each once, until ``run_finished``; a
        dropped stream is opened again (it replays from the start: events already seen are
        skipped) for up to ``BARCA_SERVER_RECONNECT`` seconds."""
        import http.client
        seen = -1
        wait = float(os.environ.get(RECONNECT_ENV, "") or 60)
        lost: float | None = None
        while True:
            try:
                conn, resp = self._send("GET", f"/runs/{quote(run_id)}/events", timeout=None)
            except InfrastructureError:
                if lost is None or time.monotonic() - lost < wait:
                    lost = lost or time.monotonic()
                    time.sleep(0.5)
                    continue
                raise
            try:
                if resp.status >= 400:
                    raw = resp.read()
                    try:
                        doc = json.loads(raw)
                    except ValueError:
                        doc = None
                    raise error_of(doc, resp.status, self.url)
                lost = None
                for n, event in _sse(resp):
                    if n is not None and n <= seen:
                        continue
                    seen = n if n is not None else seen + 1
                    yield event
                    if event.get("type") == "run_finished":
                        return
            except (OSError, http.client.HTTPException):
                pass  # the stream dropped: open it again
            finally:
                conn.close()
            lost = lost or time.monotonic()
            if time.monotonic() - lost > wait:
                raise InfrastructureError(f"lost the barca server at {self.url} while run "
                                          f"{run_id} was going on.",
                                          f"`barca logs {run_id} --server {self.url}` shows it "
                                          "once the server is back.", server=self.url)
            time.sleep(0.5)

    def wait(self, run_id: str, on_event: ev.EventCallback = ev.ignore) -> dict[str, Any]:
        """Follow the run to its end, reporting its steps as local progress events; its row
        (``GET /runs/{id}``, with ``outcome``). Ctrl-C cancels it on the server."""
        try:
            progress = _Progress(on_event)
            try:
                for event in self.events(run_id):
                    progress(event)
            except UsageError:  # no event stream held for it (a 404): read its row
                pass
            while True:
                run = self.get(f"/runs/{quote(run_id)}")
                if run.get("status") not in ("pending", "running", "queued") or run.get(
                        "outcome"):
                    return run
                time.sleep(0.3)
        except KeyboardInterrupt:
            self.cancel(run_id)
            raise


def _sse(resp: Any) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """``(id, data)`` of each server-sent event on the response."""
    n: int | None = None
    data: list[str] = []
    while True:
        raw = resp.readline()
        if not raw:
            return
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                try:
                    doc = json.loads("\n".join(data))
                except ValueError:
                    doc = None
                if isinstance(doc, dict):
                    yield n, doc
            n, data = None, []
        elif line.startswith("id:"):
            try:
                n = int(line[3:].strip())
            except ValueError:
                n = None
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


_COUNT = re.compile(r"\((\d+)/(\d+)\)")
# the lines this side prints itself, from the steps' events and the outcome
_OWN = re.compile(r"^\[barca\] (\d+/\d+ steps \||step:|importing |run failed:)")


class _Progress:
    """A run's server-sent events as the engine's progress events: a step's lines are given
    with its end (as a local run prints them), the server's notes as notes; the end line is
    the caller's."""

    def __init__(self, on_event: ev.EventCallback) -> None:
        self.on_event = on_event
        self.out: dict[str, list[tuple[str, str]]] = {}  # step -> (stream, line) so far
        self.done = self.total = 0

    def __call__(self, e: dict[str, Any]) -> None:
        kind = e.get("type")
        if kind == "log":
            self.out.setdefault(str(e.get("node_id")), []).append(
                (str(e.get("stream", "stdout")), str(e.get("line", ""))))
        elif kind == "line":
            text = str(e.get("line", ""))
            m = _COUNT.search(text)
            if m:
                self.total = int(m.group(2))
            if e.get("when") == "always" and not _OWN.match(text):
                body = text.removeprefix("[barca] ")
                if body.startswith("warning: "):
                    self.on_event(ev.Note(body.removeprefix("warning: "), "warning"))
                else:
                    self.on_event(ev.Note(body, "info"))
        elif kind == "step_finished":
            node = str(e.get("node_id"))
            if e.get("key") and "[" not in node:
                node += f"[{e['key']}]"
            said = self.out.pop(node, None) or self.out.pop(str(e.get("node_id")), [])
            output = "".join(line + "\n" for _, line in said)
            if e.get("cached"):
                self.on_event(ev.StepCached(node))
            elif e.get("ok", True):
                self.done += 1
                self.on_event(ev.StepCompleted(node, float(e.get("elapsed_seconds") or 0),
                                               self.done, max(self.total, self.done), output))
            else:
                # the error, else the last line the step wrote on stderr (a traceback's last)
                errs = [line for stream, line in said if stream == "stderr" and line.strip()]
                error = str(e.get("error") or (errs[-1] if errs else "failed")).split("\n")[0]
                self.on_event(ev.StepFailedEvent(node, error, "", output))
