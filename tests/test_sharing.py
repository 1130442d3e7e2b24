"""Concurrent runs share work (#31): a step another live run is computing is waited for and
served from its row; a claim left by a killed process is taken over."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter

import pytest

PIPELINE = '''
import os
import time
from barca import asset, collect, partitions

KEYS = [f"k{i}" for i in range(8)]

def note(what):
    with open("executions.log", "a") as f:
        f.write(what + "\\n")

@asset(partitions={"key": partitions(KEYS)})
def item(key: str) -> dict:
    note(f"item {key}")
    while os.path.exists("hang"):   # the test kills the run while it is here
        time.sleep(0.05)
    time.sleep(0.3)
    return {"key": key}

@asset(inputs={"items": collect(item)})
def total(items) -> int:
    note("total")
    return len(items)
'''


def _start(project, *args):
    env = dict(os.environ, BARCA_POOL_SIZE="2")
    env.pop("BARCA_OUTPUT", None)
    return subprocess.Popen([sys.executable, "-m", "barca", *args], cwd=project.path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def _executions(project) -> Counter:
    log = project.path / "executions.log"
    return Counter(log.read_text().splitlines()) if log.exists() else Counter()


@pytest.mark.slow
def test_two_concurrent_gets_execute_each_step_once(project):
    project.write("pipeline.py", PIPELINE)
    procs = [_start(project, "get", "total", "pipeline.py", "--json") for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out)["final_output"] == 8
    runs = _executions(project)
    assert runs == Counter([f"item k{i}" for i in range(8)] + ["total"]), runs
    # both printed the value; between them every step ran once
    executed = sum(json.loads(out)["steps_executed"] for out, _ in outs)
    assert executed == 9


@pytest.mark.slow
def test_a_claim_of_a_killed_run_is_taken_over(project):
    project.write("pipeline.py", PIPELINE)
    project.write("hang", "")
    first = _start(project, "get", "total", "pipeline.py", "--json")
    deadline = time.monotonic() + 60
    while not _executions(project) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _executions(project), "the first run never started a step"
    db = project.path / ".barca" / "metadata.db"
    with sqlite3.connect(db) as conn:   # the run holds its steps' claims while computing them
        claims = conn.execute("SELECT count(*) FROM claims WHERE pid=?",
                              (first.pid,)).fetchone()[0]
    assert claims >= 1
    os.killpg(first.pid, signal.SIGKILL)   # the run and its workers, no chance to clean up
    first.wait(timeout=30)
    (project.path / "hang").unlink()
    started = time.monotonic()
    second = _start(project, "get", "total", "pipeline.py", "--json")
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert json.loads(out)["final_output"] == 8
    assert time.monotonic() - started < 60   # not waiting on a dead holder
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM claims").fetchone()[0] == 0


CHAIN = '''
import time
from barca import asset


def note(what):
    with open("executions.log", "a") as f:
        f.write(what + "\\n")


@asset
def s0() -> int:
    note("s0")
    time.sleep(0.3)
    return 0
''' + "".join(f'''

@asset(inputs={{"prev": s{i - 1}}})
def s{i}(prev: int) -> int:
    note("s{i}")
    time.sleep(0.3)
    return prev + {i}
''' for i in range(1, 5))


@pytest.mark.slow
def test_three_concurrent_gets_of_a_chain_execute_each_step_once(project):
    """Steps decided one node at a time: a step another run finished while this one was
    deciding is served, one it is computing is waited for -- never computed twice."""
    project.write("pipeline.py", CHAIN)
    procs = []
    for _ in range(3):
        procs.append(_start(project, "get", "s4", "pipeline.py", "--json"))
        time.sleep(0.15)
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out)["final_output"] == 10
    assert _executions(project) == Counter(f"s{i}" for i in range(5))
