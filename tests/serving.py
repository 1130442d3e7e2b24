"""A real ``barca serve`` in a subprocess on a free port, driven over HTTP (tests only): the
server, scheduler, client and web UI tests all start it this way."""
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

# a pipeline for the client and web UI tests: output with markup, a failure, a table, slow steps
PIPELINE = '''
import time

from barca import asset


@asset()
def numbers() -> list:
    print("making numbers <b>not bold</b>")
    return [1, 2, 3]


@asset(inputs={"numbers": numbers})
def total(numbers: list) -> int:
    print(f"adding {len(numbers)} numbers")
    return sum(numbers)


@asset()
def boom() -> int:
    print("about to fail")
    raise ValueError("kaput")


@asset()
def table():
    import pandas as pd
    return pd.DataFrame({"city": ["Lyon", "Oslo"], "people": [522_000, 709_000]})


@asset()
def nap() -> int:
    time.sleep(4)
    return 4


@asset()
def slow() -> int:
    print("slow started", flush=True)
    time.sleep(120)
    return 1
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environ(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test's environment without what would point a command at another server."""
    env = dict(os.environ)
    for name in ("BARCA_OUTPUT", "BARCA_SERVER", "BARCA_SERVER_TOKEN"):
        env.pop(name, None)
    env.update(extra or {})
    return env


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a: Any, **k: Any) -> None:
        return None  # a test sees the 303 itself


class Served:
    """``barca serve ARGS`` in ``root`` until ``stop()`` (or the ``with`` block ends). Its
    stdout and stderr go to a file (a pipe nobody reads would block a chatty server)."""

    def __init__(self, root: Path, *args: str, env: dict[str, str] | None = None,
                 wait: bool = True, port: int | None = None) -> None:
        self.root, self.port = root, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = (env or {}).get("BARCA_SERVER_TOKEN")
        self.log_path = root / f"serve-{self.port}.log"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "barca", "serve", "-p", str(self.port), *args], cwd=root,
            env=environ(env), stdout=self.log, stderr=subprocess.STDOUT, text=True)
        if wait:
            self.wait_up()

    def output(self) -> str:
        """What the server printed so far (stdout and stderr together)."""
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text()

    def wait_up(self, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"barca serve exited {self.proc.returncode}: "
                                     f"{self.output()}")
            try:
                self.call("GET", "/health")
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError(f"barca serve did not answer /health within {timeout:.0f} s")

    def call(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None
             = None, raw: bool = False) -> tuple[int, Any, dict[str, str]]:
        """(status, the JSON body or text, headers); ``raw``: the body as bytes."""
        data = None if body is None else (body if isinstance(body, bytes)
                                          else json.dumps(body).encode())
        h = {"Content-Type": "application/json", **(headers or {})}
        if self.token and "Authorization" not in h:
            h["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=h)
        try:
            with urllib.request.build_opener(_NoRedirect).open(req, timeout=30) as r:
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
        """The run once its status is one of ``statuses`` (a finished one with its outcome)."""
        end = time.monotonic() + timeout
        body: Any = None
        while time.monotonic() < end:
            code, body, _ = self.get(f"/runs/{run_id}")
            assert code == 200, body
            if body["status"] in statuses and (body["outcome"] is not None
                                               or body["status"] in ("pending", "running",
                                                                     "cancelled")):
                return body
            time.sleep(0.1)
        raise AssertionError(f"run {run_id} never reached {statuses}: {body}")

    def wait_run(self, run_id: str, timeout: float = 90) -> dict[str, Any]:
        """The run once it is neither pending nor running."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            status, run, _ = self.get(f"/runs/{run_id}")
            if status == 200 and run["status"] not in ("pending", "running"):
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {run_id} did not finish")

    def stop(self, sig: int | None = None, timeout: float = 60) -> int:
        import signal
        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()
        return self.proc.returncode

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
