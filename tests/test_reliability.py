"""Reliability promises (../shared/spec/reliability.md): each fault injected for real."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from conftest import Project
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SLOW = """
import time
from barca import asset, collect, partitions


@asset(partitions={"k": partitions([f"k{i:03d}" for i in range(200)])})
def item(k: str) -> dict:
    time.sleep(0.02)
    return {"k": k}


@asset(inputs={"items": collect(item)})
def total(items: list) -> int:
    return len(items)
"""


def _workers_of(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True, text=True).stdout
    return [int(line.split()[0]) for line in out.splitlines()[1:]
            if "barca-worker" in line or (line.split()[1:2] == [str(pid)])]


def _start(project: Project, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, BARCA_POOL_SIZE="2")
    return subprocess.Popen([sys.executable, "-m", "barca", *args], cwd=project.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_rows(project: Project, n: int, timeout: float = 30) -> None:
    db = project.path / ".barca" / "metadata.db"
    end = time.time() + timeout
    while time.time() < end:
        if db.exists():
            try:
                got = sqlite3.connect(db).execute(
                    "select count(*) from materializations").fetchone()[0]
                if got >= n:
                    return
            except sqlite3.DatabaseError:
                pass
        time.sleep(0.05)
    raise AssertionError("the run did not record steps in time")


def _executed(project: Project) -> int:
    r = project.barca("get", "total", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == 200
    return r.json()["steps_executed"]


def test_kill_9_mid_run_keeps_finished_steps(project: Project) -> None:
    project.write("pipeline.py", SLOW)
    proc = _start(project, "get", "total", "pipeline.py", "--json")
    _wait_for_rows(project, 20)
    proc.kill()
    proc.wait(10)
    time.sleep(0.5)
    assert not [p for p in _workers_of(proc.pid) if p != proc.pid], "workers outlived the kill"
    finished = len(list((project.path / ".barca" / "artifacts").glob("*/*.json")))
    assert 20 <= finished < 200
    ran = _executed(project)
    assert ran == 200 - finished + 1  # every finished key was served from cache, plus total


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_exits_130_and_records_a_cancelled_run(project: Project, sig: int) -> None:
    project.write("pipeline.py", SLOW)
    proc = _start(project, "get", "total", "pipeline.py", "--pretty")
    _wait_for_rows(project, 20)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "cancelled" in err
    db = sqlite3.connect(project.path / ".barca" / "metadata.db")
    assert db.execute("select status from runs").fetchall() == [("cancelled",)]
    done = db.execute("select count(*) from materializations where status='success'").fetchone()[0]
    assert done >= 20
    assert _executed(project) <= 200 - done + 1


WORKER_DEATHS = {
    "os_exit": "os._exit(1)",
    "sigkill": "os.kill(os.getpid(), signal.SIGKILL)",
    "segfault": "ctypes.string_at(0)",
    "memory_error": "raise MemoryError()",
}


@pytest.mark.parametrize("how", sorted(WORKER_DEATHS))
def test_a_dying_worker_fails_its_step_only(project: Project, how: str) -> None:
    project.write("pipeline.py", f"""
import ctypes, os, signal
from barca import asset, partitions


@asset(partitions={{"k": partitions(["a", "b", "c", "d"])}})
def item(k: str) -> str:
    if k == "b":
        {WORKER_DEATHS[how]}
    return k
""")
    start = time.time()
    r = project.barca("get", "item", "pipeline.py", "--json", "--agent", timeout=60)
    assert r.code == 1, r.err
    assert time.time() - start < 30
    err = r.error()  # the run-failed line follows it (--agent)
    assert err["node"] == "pipeline.py:item[k=b]"
    if how == "memory_error":
        assert "MemoryError" in err["error"]
    else:
        assert "worker process running pipeline.py:item[k=b]" in err["error"]
    assert sorted(r.completed()) == ["pipeline.py:item[k=a]", "pipeline.py:item[k=c]",
                                     "pipeline.py:item[k=d]"]


@pytest.mark.parametrize("hang", ["time.sleep(60)", "while True: pass",
                                  "os.read(os.pipe()[0], 1)"])
def test_timeout_kills_a_hanging_step(project: Project, hang: str) -> None:
    project.write("pipeline.py", f"""
import os, time
from barca import asset


@asset(timeout_seconds=1)
def stuck() -> int:
    {hang}
    return 1
""")
    start = time.time()
    r = project.barca("get", "stuck", "pipeline.py", "--json", timeout=60)
    assert r.code == 1
    assert time.time() - start < 15
    assert "timeout_seconds=1" in json.loads(r.err.strip().splitlines()[-1])["error"]


def test_retries(project: Project) -> None:
    project.write("pipeline.py", """
from pathlib import Path
from barca import asset


@asset(retries=2)
def flaky() -> int:
    p = Path("attempts")
    n = int(p.read_text()) + 1 if p.exists() else 1
    p.write_text(str(n))
    if n < 3:
        raise RuntimeError(f"attempt {n}")
    return n
""")
    r = project.barca("get", "flaky", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == 3


def test_concurrent_runs_agree(project: Project) -> None:
    project.write("pipeline.py", SLOW)
    procs = [_start(project, "get", "total", "pipeline.py", "-o", "value") for _ in range(3)]
    results = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [e for _, e in results]
    assert [json.loads(o) for o, _ in results] == [200, 200, 200]
    assert all("locked" not in e for _, e in results)


def _seed_run(seed: Project) -> None:
    r = seed.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0, r.err


def test_corrupted_artifact_is_detected_and_recomputed(seed: Project) -> None:
    _seed_run(seed)
    art = next((seed.path / ".barca/artifacts/pipeline.py--signal_ticker_AAPL").glob("*.json"))
    art.write_text('{"ticker": "AAPL", "buy": true}')   # edited behind barca's back
    report = next((seed.path / ".barca/artifacts/pipeline.py--report").glob("*.json"))
    report.write_text("{trunc")                          # truncated
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"buys": ["GOOG", "MSFT"], "tickers": 3}
    assert f"artifact corrupt (SHA-256 differs from the one recorded): .barca/artifacts/" \
           f"pipeline.py--signal_ticker_AAPL/{art.name}" in r.err
    assert "pipeline.py:signal[ticker=AAPL]" in r.completed()
    assert json.loads(art.read_text()) == {"ticker": "AAPL", "buy": False}


def test_deleted_artifact_recomputed_only_when_needed(seed: Project) -> None:
    _seed_run(seed)
    art = next((seed.path / ".barca/artifacts/pipeline.py--prices_ticker_MSFT").glob("*.json"))
    art.unlink()
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent")
    assert r.completed() == ["pipeline.py:feed_version"]   # nothing read prices: still cached
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent", "--refresh", "signal")
    assert r.code == 0, r.err
    assert "artifact missing" in r.err and art.name in r.err
    assert "pipeline.py:prices[ticker=MSFT]" in r.completed()
    assert art.is_file()


def test_directory_in_place_of_an_artifact_is_moved_aside(seed: Project) -> None:
    _seed_run(seed)
    art = next((seed.path / ".barca/artifacts/pipeline.py--report").glob("*.json"))
    art.unlink()
    art.mkdir()
    (art / "keep.txt").write_text("mine")
    r = seed.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"]["tickers"] == 3
    assert art.is_file()
    aside = [p for p in art.parent.iterdir() if "moved-aside" in p.name]
    assert len(aside) == 1 and (aside[0] / "keep.txt").read_text() == "mine"


def test_deleted_metadata_db_is_rebuilt_and_results_adopted(seed: Project) -> None:
    _seed_run(seed)
    for p in (seed.path / ".barca").glob("metadata.db*"):
        p.unlink()
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    assert r.completed() == ["pipeline.py:feed_version"]
    st = seed.barca("status", "pipeline.py", "--json").json()
    assert st["summary"]["cached"] == 3


def test_garbage_metadata_db_exit_3_and_kept(seed: Project) -> None:
    _seed_run(seed)
    db = seed.path / ".barca" / "metadata.db"
    for p in (seed.path / ".barca").glob("metadata.db-*"):
        p.unlink()
    db.write_bytes(b"this is not sqlite" * 100)
    arts = sorted(p.name for p in (seed.path / ".barca/artifacts").rglob("*"))
    r = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert r.code == 3
    assert str(db) in r.err and "mv " in r.err and "Traceback" not in r.err
    assert db.read_bytes() == b"this is not sqlite" * 100
    assert sorted(p.name for p in (seed.path / ".barca/artifacts").rglob("*")) == arts


def test_failed_write_of_own_files_is_exit_3(project: Project) -> None:
    project.write("pipeline.py", """
from barca import asset


@asset()
def a() -> int:
    return 1
""")
    arts = project.path / ".barca" / "artifacts"
    arts.mkdir(parents=True)
    (arts / "pipeline.py--a").write_text("a file where a folder must go")
    r = project.barca("get", "a", "pipeline.py", "--pretty")
    assert r.code == 3, r.err
    assert "cannot write .barca/artifacts/pipeline.py--a/" in r.err
    assert not list(arts.rglob(".tmp-*"))


VALUES = """
import math, threading
from barca import asset


@asset()
def floats() -> list:
    return [math.nan, math.inf, -math.inf, 1.5]


@asset()
def big() -> str:
    return "x" * (10 * 1024 * 1024)


@asset()
def unicode_value() -> dict:
    return {"clé": "värde ✓ 日本"}


@asset()
def gen():
    return (i for i in range(3))


@asset()
def lam():
    return lambda x: x


@asset()
def lock():
    return threading.Lock()
"""


def test_values_round_trip_or_fail_clearly(project: Project) -> None:
    project.write("pipeline.py", VALUES)
    code = """
import barca, math, json
f = barca.get("floats", "pipeline.py")
assert math.isnan(f[0]) and f[1] == math.inf and f[2] == -math.inf and f[3] == 1.5
assert len(barca.get("big", "pipeline.py")) == 10 * 1024 * 1024
assert barca.get("unicode_value", "pipeline.py") == {"clé": "värde ✓ 日本"}
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=project.path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for name, tname in (("gen", "generator"), ("lam", "function"), ("lock", "lock")):
        r = project.barca("get", name, "pipeline.py", "--json")
        assert r.code == 1
        err = json.loads(r.err.strip().splitlines()[-1])
        assert f"pipeline.py:{name}" in err["error"] and tname in err["error"], err
    r = project.barca("get", "floats", "pipeline.py", "--json", "--agent")
    assert r.completed() == []   # cached


def test_syntax_error_then_fix_keeps_the_cache(seed: Project) -> None:
    _seed_run(seed)
    good = (seed.path / "pipeline.py").read_text()
    seed.write("pipeline.py", good.replace("def signal(ticker: str, prices: dict) -> dict:",
                                           "def signal(ticker: str, prices: dict) -> dict"))
    r = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert r.code == 2
    assert "pipeline.py:19:46: SyntaxError" in r.err and "^" in r.err and "Traceback" not in r.err
    seed.write("pipeline.py", good)
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent")
    assert r.completed() == ["pipeline.py:feed_version"]


def test_a_long_held_lock_is_exit_3(seed: Project) -> None:
    _seed_run(seed)
    db = sqlite3.connect(seed.path / ".barca" / "metadata.db", isolation_level=None)
    db.execute("BEGIN EXCLUSIVE")
    try:
        r = seed.barca("get", "report", "pipeline.py", "--json", env={"BARCA_DB_TIMEOUT": "1"})
    finally:
        db.execute("ROLLBACK")
    assert r.code == 3
    err = json.loads(r.err.strip().splitlines()[-1])
    assert "locked by another program" in err["error"] and err["kind"] == "infrastructure"



KEYS = st.lists(st.one_of(st.text(min_size=0, max_size=40), st.integers(-5, 5), st.none(),
                          st.booleans(), st.floats(allow_nan=False)), max_size=6)
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                      lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                           max_size=3),
                      max_leaves=8)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(keys=KEYS, value=JSON_VALUES)
def test_fuzz_keys_and_values(tmp_path_factory: pytest.TempPathFactory, keys: list, value) -> None:
    project = Project(tmp_path_factory.mktemp("fuzz"))
    project.write("pipeline.py", f"""
from barca import asset, collect, partitions


@asset(partitions={{"k": partitions({keys!r})}})
def item(k: str):
    return {{"k": k, "v": {value!r}}}


@asset(inputs={{"items": collect(item)}})
def total(items: list) -> int:
    return len(items)
""")
    before = {p for p in project.path.parent.rglob("*")}
    r = project.barca("get", "total", "pipeline.py", "--json")
    valid = (all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in keys)
             and len({str(k) for k in keys}) == len(keys))
    if valid:
        assert r.code == 0, r.err
        assert r.json()["final_output"] == len(keys)
        again = project.barca("get", "total", "pipeline.py", "--json")
        assert again.json()["steps_executed"] == 0
    else:
        assert r.code == 2, r.err
        assert not (project.path / ".barca" / "artifacts").exists()
    after = {p for p in project.path.parent.rglob("*")} - before
    outside = [p for p in after if not p.resolve().is_relative_to(project.path.resolve())]
    assert not outside
    arts = project.path / ".barca" / "artifacts"
    for p in after:
        if p.is_file() and p.suffix == ".json" and "artifacts" in p.parts:
            assert p.resolve().is_relative_to(arts.resolve())


@pytest.mark.parametrize("bad", ["..", "../x", "a/b", "/tmp", ".hidden", "", "x" * 65, "a b"])
def test_env_names_must_be_plain_folder_names(seed: Project, bad: str) -> None:
    r = seed.barca("get", "report", "pipeline.py", "--env", bad, "--pretty")
    if bad == "":  # an empty name is the default store
        assert r.code == 0, r.err
        return
    assert r.code == 2, r.err
    assert "is not a plain folder name" in r.err and "Traceback" not in r.err
    assert not (seed.path / ".barca" / "envs").exists()


def test_an_environment_is_a_cache_of_its_own(seed: Project) -> None:
    _seed_run(seed)
    r = seed.barca("get", "report", "pipeline.py", "--env", "staging", "--json", "--agent")
    assert r.code == 0, r.err
    assert len(r.completed()) == 8                     # nothing shared with the default store
    assert (seed.path / ".barca/envs/staging/artifacts/pipeline.py--report").is_dir()
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent",
                   env={"BARCA_ENV": "staging"})
    assert r.completed() == ["pipeline.py:feed_version"]
    st = seed.barca("status", "pipeline.py", "--env", "staging", "--json").json()
    assert st["summary"]["cached"] == 3


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_a_worker_finds_a_bad_input_and_it_is_recomputed(seed: Project, damage: str) -> None:
    _seed_run(seed)
    art = next((seed.path / ".barca/artifacts/pipeline.py--prices_ticker_AAPL").glob("*.json"))
    if damage == "corrupt":
        art.write_text('{"ticker": "AAPL", "close": 999.0, "feed": "v1"}')
    else:
        art.unlink()
    seed.edit("pipeline.py", 'prices["close"] > 470}', 'prices["close"] > 470, "v": 2}')
    r = seed.barca("get", "report", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    word = "corrupt (SHA-256 differs" if damage == "corrupt" else "missing"
    assert f"artifact {word}" in r.err and art.name in r.err
    assert "pipeline.py:prices[ticker=AAPL]" in r.completed()
    assert r.json()["final_output"] == {"buys": ["GOOG", "MSFT"], "tickers": 3}
    assert json.loads(art.read_text())["close"] == 465.0   # never served the edited value
