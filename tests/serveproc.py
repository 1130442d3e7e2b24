"""A real ``barca serve`` in a subprocess on a free port, for the client and web UI tests."""
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
    env = dict(os.environ)
    for name in ("BARCA_OUTPUT", "BARCA_SERVER", "BARCA_SERVER_TOKEN"):
        env.pop(name, None)
    env.update(extra or {})
    return env


class Served:
    """``barca serve --no-schedule`` in ``root`` until ``stop()``."""

    def __init__(self, root: Path, env: dict[str, str] | None = None, *args: str,
                 port: int | None = None) -> None:
        self.root, self.port = root, port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = (env or {}).get("BARCA_SERVER_TOKEN")
        self.log = open(root / f"serve-{self.port}.log", "w")  # noqa: SIM115 - until stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "barca", "serve", "-p", str(self.port), "--no-schedule",
             *args],
            cwd=root, env=environ(env), stdout=self.log, stderr=subprocess.STDOUT)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise AssertionError(f"barca serve exited {self.proc.returncode}: "
                                     f"{(root / f'serve-{self.port}.log').read_text()}")
            try:
                if self.call("GET", "/health")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError("barca serve did not answer /health within 60 s")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def wait_run(self, run_id: str, timeout: float = 90) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            status, run = self.call("GET", f"/runs/{run_id}")
            if status == 200 and run["status"] not in ("pending", "running"):
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {run_id} did not finish")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
