"""Whether the process that began a run is still the one running: its pid and its start
time (``/proc``), so a reused pid is told apart from the process that began the run."""
from __future__ import annotations

import os
from pathlib import Path


def _proc_stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (Linux); None elsewhere or gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def process_token(pid: int) -> str:
    """What names one process beyond its pid, which the system reuses: the host and, where
    the system tells (Linux), the process's start time."""
    fields = _proc_stat(pid)
    start = fields[19] if fields and len(fields) > 19 else ""
    return f"{os.uname().nodename}|{start}"  # the host name, without importing socket


def process_alive(pid: int, token: str) -> bool:
    """Whether the process ``token`` (see process_token) names is still running. A process on
    another host counts as alive: it cannot be checked from here."""
    host, _, start = token.partition("|")
    if host != os.uname().nodename:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    except OSError:
        return True
    fields = _proc_stat(pid)
    if fields is None:
        return not Path("/proc/self/stat").exists()  # no /proc: the pid exists, trust it
    if fields[0] in ("Z", "X"):  # a zombie: dead, not yet waited for
        return False
    return not start or (len(fields) > 19 and fields[19] == start)


def new_run_id() -> str:
    """A run's id: the time in milliseconds (so ids sort roughly by start) and 16 random bits."""
    import time
    return f"{int(time.time() * 1000) & 0xFFFFFFFF:08x}{os.urandom(2).hex()}"
