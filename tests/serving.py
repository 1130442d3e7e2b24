"""A real ``barca serve`` in a subprocess, on a free port, driven over HTTP (tests only)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None,
                 wait: bool = True) -> None:
        self.root = root
        self.port = free_port()
        full = dict(os.environ)
        full.pop("BARCA_SERVER_TOKEN", None)
        full.update(env or {})
        self.token = (env or {}).get("BARCA_SERVER_TOKEN")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "barca", "serve", "-p", str(self.port), *args], cwd=root,
            env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        if wait:
            self.wait_up()

    def wait_up(self, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited {self.proc.returncode}: "
                                     f"{self.proc.stderr.read()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("server did not start")

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None
             = None, raw: bool = False) -> tuple[int, Any, dict[str, str]]:
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        h = dict(headers or {})
        if self.token and "Authorization" not in h:
            h["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *a: Any, **k: Any) -> None:
                return None
        opener = urllib.request.build_opener(NoRedirect)
        try:
            with opener.open(req, timeout=30) as r:
                status, payload, hdrs = r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as e:
            status, payload, hdrs = e.code, e.read(), dict(e.headers)
        if raw:
            return status, payload, hdrs
        try:
            return status, json.loads(payload) if payload else None, hdrs
        except ValueError:
            return status, payload.decode(), hdrs

    def get(self, path: str, **kw: Any) -> tuple[int, Any, dict[str, str]]:
        return self.call("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, Any, dict[str, str]]:
        return self.call("POST", path, body, **kw)

    def until(self, run_id: str, statuses: tuple[str, ...], timeout: float = 60) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            code, body, _ = self.get(f"/runs/{run_id}")
            assert code == 200, body
            if body["status"] in statuses and (body["outcome"] is not None
                                               or body["status"] in ("pending", "running",
                                                                     "cancelled")):
                return body
            time.sleep(0.1)
        raise AssertionError(f"run {run_id} never reached {statuses}: {body}")

    def stop(self, sig: int | None = None, timeout: float = 60) -> int:
        import signal
        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
