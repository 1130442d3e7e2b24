"""One meaning of "current" (issue 28): a result is current when its run hash is its step's run
hash now, not when it is the newest row. After a revert, `get`, `status`, `sql`, `-o path` and
`gc` all agree on the earlier result; the cache limit measures and evicts every environment;
a run whose process was killed is marked `crashed` and pins nothing; `barca sql` has a view
for an asset at any depth of `partitions_from`, and finds view names as identifiers only."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from conftest import Project, evicted

MONTHLY = """
from barca import asset, collect, partitions

MONTHS = [f"m{i:02d}" for i in range(1, 13)]


@asset(partitions={"month": partitions(MONTHS)})
def monthly(month: str) -> dict:
    return {"month": month}


@asset(inputs={"rows": collect(monthly)})
def report(rows: list) -> dict:
    return {"months": len(rows)}
"""


def test_a_revert_is_current_everywhere(project: Project) -> None:
    """v1 (12 months) -> v2 (11) -> v1: `get` serves v1's cached report, and so do `sql`,
    `status`, `-o path`; `gc` calls v2's report superseded and keeps v1's."""
    v1 = MONTHLY
    v2 = MONTHLY.replace("range(1, 13)", "range(1, 12)")
    project.write("pipeline.py", v1)
    assert project.barca("get", "report", "pipeline.py", "-o", "value").out.strip() \
        == '{"months": 12}'
    v1_path = project.barca("get", "report", "pipeline.py", "-o", "path").out.strip()
    project.write("pipeline.py", v2)
    assert project.barca("get", "report", "pipeline.py", "-o", "value").out.strip() \
        == '{"months": 11}'
    v2_path = project.barca("get", "report", "pipeline.py", "-o", "path").out.strip()
    project.write("pipeline.py", v1)
    r = project.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0 and r.json()["steps_executed"] == 0, r.err
    assert project.barca("get", "report", "pipeline.py", "-o", "path").out.strip() == v1_path
    r = project.barca("sql", "select months from report", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.sql_rows() == [[12]]
    r = project.barca("sql", "select count(*) from monthly", "pipeline.py", "--json")
    assert r.sql_rows() == [[12]]
    nodes = {n["name"]: n for n in project.barca("status", "pipeline.py", "--json")
             .json()["nodes"]}
    assert nodes["report"]["cache"]["state"] == "cached"
    assert nodes["report"]["last_materialization"]["path"] == v1_path
    dry = project.barca("gc", "pipeline.py", "--max-size", "1", "--dry-run", "--json").json()
    superseded = list(evicted(dry, "superseded"))  # paths from the project root (#29)
    assert superseded == [v2_path]
    assert v1_path not in superseded
    lrr = list(evicted(dry, "least_recently_read"))
    assert v1_path in lrr and v2_path not in lrr
    # a budget one report file meets: v2's goes, v1's (current) stays
    r = project.barca("gc", "pipeline.py", "--max-size", "off", "--json")
    assert evicted(r.json()) == [v2_path]
    assert (project.path / v1_path).is_file() and not (project.path / v2_path).exists()
    r = project.barca("get", "report", "pipeline.py", "--json")
    assert r.json()["steps_executed"] == 0 and r.json()["final_output"] == {"months": 12}


def test_a_view_of_results_not_current_is_a_clear_error(project: Project) -> None:
    """Edited and not run again: `get` would recompute the report, so `sql` shows no value
    from the older code."""
    project.write("pipeline.py", MONTHLY)
    assert project.barca("get", "report", "pipeline.py").code == 0
    project.edit("pipeline.py", 'return {"months": len(rows)}', 'return {"months": 0}')
    r = project.barca("sql", "select * from report", "pipeline.py")
    assert r.code == 2 and "not current" in r.err and "barca get report" in r.err, r.err


BIG = """
from barca import asset

VERSION = 1


@asset()
def x() -> str:
    return "x" * 50_000 + str(VERSION)


@asset()
def y() -> str:
    return "y" * 50_000
"""


def _sizes(p: Project, rel: list[str]) -> int:
    return sum((p.path / f).stat().st_size for f in rel)  # gc names files from the root


def test_the_limit_covers_and_evicts_every_environment(project: Project) -> None:
    """Results of the default environment and of `default_env = "dev"`: the limit measures
    both, evicts from both least recently read first (the older environment's results here),
    keeps what the command needs, and its sizes add up."""
    project.write("pipeline.py", BIG)
    assert project.barca("get", "x,y", "pipeline.py").code == 0   # .barca/
    project.write("barca.toml", 'default_env = "dev"\n')
    assert project.barca("get", "x,y", "pipeline.py").code == 0   # .barca/envs/dev/
    assert (project.path / ".barca" / "envs" / "dev" / "metadata.db").is_file()
    size = sum(f.stat().st_size for f in (project.path / ".barca").rglob("*") if f.is_file())
    budget = str(int((size - 60_000) / 0.8))  # two 50 kB files must go
    dry = project.barca("gc", "pipeline.py", "--max-size", budget, "--dry-run", "--json").json()
    assert evicted(dry, "superseded") == []
    dropped = evicted(dry)
    assert len(dropped) == 2 and not any(p.startswith(".barca/envs/") for p in dropped), dropped
    expected = _sizes(project, dropped)
    r = project.barca("gc", "pipeline.py", "--max-size", budget, "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert evicted(rep) == dropped
    assert rep["size_bytes"] - rep["after_bytes"] == expected > 100_000
    pretty = project.barca("gc", "pipeline.py", "--max-size", "1", "--dry-run", "--pretty")
    assert "(-" not in pretty.out, pretty.out
    # the active environment's current results are whole: a cached run runs nothing
    r = project.barca("get", "x,y", "pipeline.py", "--json")
    assert r.json()["steps_executed"] == 0
    # over the limit on a run: the run's sizes add up too, and the line says so
    project.edit("pipeline.py", "VERSION = 1", "VERSION = 2")
    r = project.barca("get", "x,y", "pipeline.py", "--json", env={"BARCA_CACHE_MAX_SIZE": "1"})
    assert r.code == 0, r.err
    cache = r.json()["cache"]
    gone = evicted(cache)
    assert gone and cache["size_bytes"] - cache["after_bytes"] > 0
    line = next(x for x in r.err.splitlines() if "over its" in x)
    assert "(-" not in line
    # what the run produced and read stays; the next cached run runs nothing
    r = project.barca("get", "x,y", "pipeline.py", "--json")
    assert r.json()["steps_executed"] == 0, r.err


SLOW = """
from barca import asset


@asset()
def x() -> str:
    return "x" * 50_000


@asset(inputs={"x": x})
def slow(x: str) -> int:
    import time
    time.sleep(300)
    return len(x)
"""


def _run_row(p: Project, run_id: str | None = None) -> dict:
    runs = p.barca("history", "--json").json()["runs"]
    return runs[0] if run_id is None else next(r for r in runs if r["run_id"] == run_id)


def test_a_killed_run_is_marked_crashed_and_pins_nothing(project: Project) -> None:
    project.write("pipeline.py", SLOW)
    env = dict(os.environ)
    env.pop("BARCA_OUTPUT", None)
    proc = subprocess.Popen([sys.executable, "-m", "barca", "get", "slow", "pipeline.py"],
                            cwd=project.path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        x_dir = project.path / ".barca" / "artifacts" / "pipeline.py--x"
        deadline = time.time() + 60
        while not list(x_dir.glob("*.json")) and time.time() < deadline:
            time.sleep(0.2)
        assert list(x_dir.glob("*.json")), "x was never produced"
        time.sleep(0.5)  # x recorded
        assert _run_row(project)["status"] == "running"
        os.killpg(proc.pid, signal.SIGKILL)  # the coordinator and its workers
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    row = _run_row(project)
    assert row["status"] == "crashed", row
    text = project.barca("history").out
    assert "crashed" in text
    # x (made by the killed run) is not held: gc evicts it
    r = project.barca("gc", "pipeline.py", "--max-size", "1", "--json")
    assert r.code == 0, r.err
    rep = r.json()
    assert rep["in_use"] == [] and any("pipeline.py--x/" in p for p in evicted(rep)), rep


def test_a_live_run_is_not_marked_crashed(project: Project) -> None:
    """The other side: a run whose process is alive stays `running` and holds what it made."""
    project.write("pipeline.py", SLOW)
    env = dict(os.environ)
    env.pop("BARCA_OUTPUT", None)
    proc = subprocess.Popen([sys.executable, "-m", "barca", "get", "slow", "pipeline.py"],
                            cwd=project.path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        x_dir = project.path / ".barca" / "artifacts" / "pipeline.py--x"
        deadline = time.time() + 60
        while not list(x_dir.glob("*.json")) and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)
        assert _run_row(project)["status"] == "running"
        r = project.barca("gc", "pipeline.py", "--max-size", "1", "--json").json()
        assert any("pipeline.py--x/" in p for p in r["in_use"]) and evicted(r) == []
        assert _run_row(project)["status"] == "running"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


NESTED = """
from barca import asset, partitions_from, sensor


@sensor()
def files() -> list:
    return ["a", "b"]


@asset(partitions={"f": partitions_from(files)})
def parsed(f: str) -> dict:
    return {"f": f}


@asset(partitions={"f": partitions_from(parsed)})
def enriched(parsed: dict) -> dict:
    return {"g": parsed["f"] * 2}
"""


def test_sql_views_at_any_depth_and_names_as_identifiers(project: Project) -> None:
    project.write("pipeline.py", NESTED)
    assert project.barca("get", "parsed", "pipeline.py").code == 0
    # 'enriched' inside a string literal or a comment names no view (enriched has not run)
    r = project.barca("sql", "select 'enriched' as s, f from parsed -- enriched\norder by f",
                      "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.sql_rows() == [["enriched", "a"], ["enriched", "b"]]
    assert project.barca("get", "enriched", "pipeline.py").code == 0
    r = project.barca("sql", "select partition, g from enriched order by 1", "pipeline.py",
                      "--json")
    assert r.code == 0, r.err
    assert r.sql_rows() == [["f=a", "aa"], ["f=b", "bb"]]
    r = project.barca("sql", 'select count(*) from "enriched"', "pipeline.py", "--json")
    assert r.sql_rows() == [[2]]


def test_view_names_are_identifiers_only() -> None:
    from barca.queries.sql import identifiers
    assert identifiers("select 'report' as r from prices") == {"select", "as", "r", "from",
                                                               "prices"}
    assert "report" not in identifiers("select 1 -- report\n")
    assert "report" not in identifiers("select /* report */ 1")
    assert "report" not in identifiers("select 'it''s report' x")
    assert "report" in identifiers('select * from "report"')


def test_a_run_whose_process_ended_is_crashed(tmp_path) -> None:
    """In-process: a run begun by a process that ended without finishing it is marked
    `crashed` by the next reader of the runs; a live process's run, and one whose pid was
    reused by another process (another start time), are told apart."""
    from barca.store.metadata import Store
    from barca.store.process import process_alive, process_token
    pid = os.fork()
    if pid == 0:  # the child begins a run and dies without ending it
        try:
            Store(tmp_path).begin_run("deadbeef0001", "get", "x", 1)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    store = Store(tmp_path)
    try:
        store.begin_run("live00000002", "get", "y", 1)  # this process: alive
        runs = {r["run_id"]: r for r in store.runs()}
        assert runs["deadbeef0001"]["status"] == "crashed"
        assert "ended before it finished" in runs["deadbeef0001"]["error"]
        assert runs["live00000002"]["status"] == "running"
        assert [r["run_id"] for r in store.running_runs()] == ["live00000002"]
    finally:
        store.close()
    me = os.getpid()
    assert process_alive(me, process_token(me))
    if os.path.exists(f"/proc/{me}/stat"):  # the pid alive, but another process's start time
        host = process_token(me).split("|")[0]
        assert not process_alive(me, f"{host}|1")
    assert process_alive(me, "another-host|1")  # not checkable from here: left running
