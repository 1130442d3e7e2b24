"""`barca logs`: every line a step writes is recorded with its step, stream and time, and read
back through the CLI (in subprocesses, with real worker processes)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from conftest import Project

NOISY = """
import logging
import sys
import warnings

from barca import asset, partitions

log = logging.getLogger("noisy")


@asset(partitions={"region": partitions(["emea", "amer", "apac"])}, retries=1)
def sales(region: str) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    print(f"first {region}")
    print(f"second {region}", file=sys.stderr)
    log.info("logged %s", region)
    warnings.warn(f"careful {region}")
    print(f"third {region}")
    if region == "amer":
        raise RuntimeError("amer feed not ready")
    return {"region": region}
"""


def _json_lines(r) -> list[dict]:
    """``barca logs --json``: one JSON array of the lines."""
    assert r.code == 0, r.err
    lines = json.loads(r.out)
    assert isinstance(lines, list), r.out
    return lines


def test_logs_keep_order_streams_and_filters(project: Project) -> None:
    project.write("pipeline.py", NOISY)
    run = project.barca("get", "sales", "pipeline.py", env={"BARCA_POOL_SIZE": "1"})
    assert run.code == 1
    run_id = json.loads(run.out)["run_id"]
    lines = _json_lines(project.barca("logs", "--json"))
    assert {tuple(sorted(x)) for x in lines} == {("line", "node_id", "stream", "ts")}
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", x["ts"]) for x in lines)
    emea = [(x["stream"], x["line"]) for x in lines
            if x["node_id"] == "pipeline.py:sales[region=emea]"]
    assert emea[:3] == [("stdout", "first emea"), ("stderr", "second emea"),
                        ("stderr", "INFO logged emea")]
    assert ("stderr", "  warnings.warn(f\"careful {region}\")") in emea
    assert emea[-1] == ("stdout", "third emea")
    # a step's lines keep their order; timestamps never go back within a step
    for step in {x["node_id"] for x in lines}:
        ts = [x["ts"] for x in lines if x["node_id"] == step]
        assert ts == sorted(ts)
    # the failed key: both attempts, each traceback from the user's frame, none of barca's
    amer = [x["line"] for x in lines if x["node_id"] == "pipeline.py:sales[region=amer]"]
    assert amer.count("Traceback (most recent call last):") == 2
    assert amer.count("RuntimeError: amer feed not ready") == 2
    assert any("pipeline.py" in x and "in sales" in x for x in amer)
    assert not any("barca" in x and ".py" in x and "pipeline.py" not in x for x in amer)
    assert not any(x["line"].startswith("[barca]") for x in lines)  # barca's own lines
    # the step logged in a worker that ran other steps before: its lines are its own
    assert ("stderr", "INFO logged apac") in [
        (x["stream"], x["line"]) for x in lines
        if x["node_id"] == "pipeline.py:sales[region=apac]"]

    # filters: a base name selects every key; a key selects one; a stream
    by_name = _json_lines(project.barca("logs", run_id, "--step", "sales", "--json"))
    assert by_name == lines
    one = _json_lines(project.barca("logs", "--step", "sales[region=apac]", "--json"))
    assert one and {x["node_id"] for x in one} == {"pipeline.py:sales[region=apac]"}
    full = _json_lines(project.barca("logs", "--step", "pipeline.py:sales[region=apac]",
                                     "--json"))
    assert full == one
    out = _json_lines(project.barca("logs", "--stream", "stdout", "--json"))
    assert {x["stream"] for x in out} == {"stdout"}
    assert [x["line"] for x in out if x["node_id"].endswith("[region=emea]")] == [
        "first emea", "third emea"]

    # the human form, with and without timestamps; the run is named on stderr
    text = project.barca("logs", "--step", "sales[region=emea]", "--stream", "stdout",
                         "--pretty")
    assert text.out.splitlines() == ["[pipeline.py:sales[region=emea]] first emea",
                                     "[pipeline.py:sales[region=emea]] third emea"]
    assert run_id in text.err and "failed" in text.err
    stamped = project.barca("logs", "--step", "sales[region=emea]", "--stream", "stdout",
                            "--timestamps", "--pretty")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT[\d:.]+Z \[pipeline.py:sales\[region=emea\]\] "
                        r"first emea", stamped.out.splitlines()[0])


def test_history_ids_are_the_ids_logs_takes(project: Project) -> None:
    project.write("pipeline.py", NOISY.replace('raise RuntimeError("amer feed not ready")',
                                               "pass"))
    first = project.barca("get", "sales", "pipeline.py", "--json").json()["run_id"]
    project.edit("pipeline.py", 'print(f"third {region}")', 'print(f"changed {region}")')
    second = project.barca("get", "sales", "pipeline.py", "--json").json()["run_id"]
    hist = project.barca("history", "--json").json()
    assert [r["run_id"] for r in hist["runs"][:2]] == [second, first]  # newest first
    assert {"run_id", "command", "target", "status"} <= set(hist["runs"][0])
    assert len(project.barca("history", "--json", "--limit", "1").json()["runs"]) == 1
    old = _json_lines(project.barca("logs", first, "--stream", "stdout", "--json"))
    assert "third emea" in [x["line"] for x in old]
    new = _json_lines(project.barca("logs", second[:8], "--stream", "stdout", "--json"))
    assert "changed emea" in [x["line"] for x in new]
    assert project.barca("logs", "--stream", "stdout", "--json").out == \
        project.barca("logs", second, "--stream", "stdout", "--json").out


def test_unknown_run_step_or_no_run_is_exit_2(project: Project) -> None:
    project.write("pipeline.py", NOISY)
    none = project.barca("logs")
    assert none.code == 2 and "No run" in none.err
    project.barca("get", "sales", "pipeline.py")
    bad_run = project.barca("logs", "ffffffffffff")
    assert bad_run.code == 2 and "barca history" in bad_run.err
    bad_step = project.barca("logs", "--step", "sale", "--pretty")
    assert bad_step.code == 2 and "Did you mean 'sales'" in bad_step.err
    bad_stream = project.barca("logs", "--stream", "both")
    assert bad_stream.code == 2


def test_follow_prints_lines_while_the_run_goes_on(project: Project) -> None:
    project.write("pipeline.py", """
        import time

        from barca import asset, partitions


        @asset(partitions={"i": partitions(["a", "b", "c", "d"])})
        def slow(i: str) -> str:
            print(f"start {i}", flush=True)
            time.sleep(1.0)
            return i
        """)
    runner = subprocess.Popen([sys.executable, "-m", "barca", "get", "slow", "pipeline.py",
                               "--json"], cwd=project.path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**__import__("os").environ,
                                                           "BARCA_POOL_SIZE": "1"})
    try:
        deadline, running = time.monotonic() + 60, False
        while time.monotonic() < deadline and not running:  # until the run is under way
            hist = project.barca("history", "--json")
            running = hist.code == 0 and bool(hist.json()["runs"]) and \
                hist.json()["runs"][0]["status"] == "running"
            time.sleep(0.1)
        assert running
        follow = project.barca("logs", "-f", "--pretty", timeout=120)
        assert runner.wait(timeout=120) == 0
    finally:
        runner.kill()
    assert follow.code == 0, follow.err
    assert sorted(follow.out.splitlines()) == [f"[pipeline.py:slow[i={i}]] start {i}"
                                               for i in "abcd"]


def test_logs_magic_renders_the_lines(project: Project) -> None:
    from nbtools import execute, notebook, result
    project.write("pipeline.py", NOISY)
    assert project.barca("get", "sales", "pipeline.py").code == 1
    nb = notebook("%load_ext barca", "%barca logs --step sales[region=emea] --stream stdout")
    execute(nb, project.path)
    shown = result(nb, 1)
    assert "<table" in shown["text/html"] and "first emea" in shown["text/html"]
    assert shown["text/plain"].splitlines() == [
        "[pipeline.py:sales[region=emea]] first emea",
        "[pipeline.py:sales[region=emea]] third emea"]


def test_the_widget_shows_the_selected_nodes_last_lines(project: Project, monkeypatch) -> None:
    import html
    project.write("pipeline.py", NOISY)
    assert project.barca("get", "sales", "pipeline.py").code == 1
    last = project.barca("logs", "--step", "sales", "--pretty").out.splitlines()[-10:]
    monkeypatch.chdir(project.path)
    from barca.faces.jupyter.widget import StatusWidget
    w = StatusWidget("pipeline.py", poll_interval=60)
    try:
        w.select("sales")
        shown = html.unescape(w.logs.value)
        # the node's last ten lines, as `barca logs --step sales` ends
        body = shown.split("<pre", 1)[1].split(">", 1)[1].split("</pre>", 1)[0]
        assert body.splitlines() == last
    finally:
        w.close()


def test_history_docs_and_version_show_the_same_in_the_cli_and_the_magic(project: Project
                                                                          ) -> None:
    """Each command returns one result object: the magic shows the CLI's text (and, for
    history, the same table in HTML); its JSON is the CLI's --json, byte for byte."""
    from nbtools import execute, notebook, result
    project.write("pipeline.py", NOISY.replace('raise RuntimeError("amer feed not ready")',
                                               "pass"))
    assert project.barca("get", "sales", "pipeline.py").code == 0
    assert project.barca("get", "sales", "pipeline.py", "--refresh", "sales").code == 0
    table = project.barca("history", "--pretty").out
    as_json = project.barca("history", "--json").out
    ids = [r["run_id"] for r in json.loads(as_json)["runs"]]
    nb = notebook("%load_ext barca", "%barca history",
                  "h = %barca history\nprint(h.json_text())", "%barca docs cache",
                  "%barca version", "%barca history --limit 1")
    execute(nb, project.path)
    shown = result(nb, 1)
    assert shown["text/plain"] == table.rstrip("\n")
    html = shown["text/html"]
    assert "<table" in html and all(i in html for i in ids) and "COMMAND" in html
    assert 'data-state="success"' in html  # the status coloured as everywhere else
    assert "".join(o.get("text", "") for o in nb.cells[2].outputs) == as_json
    assert result(nb, 3)["text/markdown"] == project.barca("docs", "cache").out
    assert result(nb, 4)["text/plain"] == project.barca("version").out.rstrip("\n")
    assert result(nb, 5)["text/plain"] == \
        project.barca("history", "--pretty", "--limit", "1").out.rstrip("\n")


def test_a_run_that_printed_nothing(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py").code == 0
    r = seed.barca("logs", "--json")
    assert r.code == 0 and json.loads(r.out) == []
    pretty = seed.barca("logs", "--pretty")
    assert pretty.code == 0 and pretty.out == ""
    assert "no output recorded for this run" in pretty.err


def test_an_empty_log_says_so_in_a_notebook() -> None:
    from barca.present.journal import LogLine, StepLog
    empty = StepLog("abc123", "get", "report", "success", ())
    assert "no output recorded for this run" in empty._repr_html_()
    assert "<table" not in empty._repr_html_() and str(empty) == StepLog.EMPTY
    one = StepLog("abc123", "get", "report", "success",
                  (LogLine(1, "p.py:a", "stdout", 1764590000.5, "hi"),))
    assert "2025-12-01 11:53:20.500 UTC" in one._repr_html_()   # as every table writes time


def test_logs_of_a_step_cached_in_that_run_name_the_run_that_recorded_it(seed: Project) -> None:
    first = seed.barca("get", "report", "pipeline.py", "--json").json()["run_id"]
    second = seed.barca("get", "report", "pipeline.py", "--json").json()["run_id"]
    r = seed.barca("logs", second, "--step", "report")
    assert r.code == 2
    assert f"'report' was cached in run {second}: its output was recorded by run {first}" \
        in r.err, r.err
    assert f"barca logs {first} --step report" in r.err


CRASHES = {
    "abort": "os.abort()",
    "segfault": "os.kill(os.getpid(), signal.SIGSEGV)",
    "oom_kill": "os.kill(os.getpid(), signal.SIGKILL)",  # what the OOM killer sends
    "timeout": "time.sleep(60)",
}


@pytest.mark.parametrize("how", sorted(CRASHES))
def test_lines_written_before_a_crash_are_kept(project: Project, how: str) -> None:
    """Lines are recorded as they are written: a worker that dies (or is killed for its
    timeout) keeps every line it wrote before (issue 29 #1)."""
    project.write("pipeline.py", f"""
import os, signal, sys, time
from barca import asset


@asset(timeout_seconds=2)
def doomed() -> int:
    for i in range(500):
        print(f"line {{i}}")
    print("last words", file=sys.stderr)
    {CRASHES[how]}
    return 1
""")
    r = project.barca("get", "doomed", "pipeline.py", "--json", timeout=60)
    assert r.code == 1, r.err
    lines = _json_lines(project.barca("logs", "--json"))
    assert [(x["stream"], x["line"]) for x in lines] == (
        [("stdout", f"line {i}") for i in range(500)] + [("stderr", "last words")])
    assert {x["node_id"] for x in lines} == {"pipeline.py:doomed"}


WAITS = """
import pathlib, sys, time
from barca import asset


@asset
def waits() -> int:
    print("before", flush=True)
    print("on stderr", file=sys.stderr)
    deadline = time.monotonic() + 60
    while not pathlib.Path("go").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    print("after")
    return 1
"""


def _wait_for_line(project: Project, line: str) -> list[dict]:
    """The running run's lines once ``line`` is among them (as `barca logs --json` reads
    them while the step still runs)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = project.barca("logs", "--json")
        if r.code == 0 and line in [x["line"] for x in json.loads(r.out)]:
            return json.loads(r.out)
        time.sleep(0.2)
    raise AssertionError(f"{line!r} was never recorded while the step ran")


def test_lines_are_recorded_while_the_step_runs_and_follow_ends_with_the_run(
        project: Project) -> None:
    project.write("pipeline.py", WAITS)
    runner = subprocess.Popen([sys.executable, "-m", "barca", "get", "waits", "pipeline.py",
                               "--json"], cwd=project.path, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    try:
        seen = _wait_for_line(project, "before")
        assert [x["line"] for x in seen] == ["before", "on stderr"]  # the step still waits
        assert project.barca("history", "--json").json()["runs"][0]["status"] == "running"
        follow = subprocess.Popen([sys.executable, "-m", "barca", "logs", "-f", "--json"],
                                  cwd=project.path, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        (project.path / "go").write_text("")
        out, err = follow.communicate(timeout=60)  # ends by itself when the run ends
        assert runner.wait(timeout=60) == 0
    finally:
        runner.kill()
    assert follow.returncode == 0, err
    assert [json.loads(x)["line"] for x in out.splitlines()] == ["before", "on stderr",
                                                                 "after"]


def test_logs_magic_follows_a_running_run(project: Project) -> None:
    from nbtools import execute, notebook, outputs
    project.write("pipeline.py", WAITS)
    nb = notebook("%load_ext barca",
                  "import subprocess, sys, threading, pathlib, time\n"
                  "run = subprocess.Popen([sys.executable, '-m', 'barca', 'get', 'waits', "
                  "'pipeline.py', '--json'], stdout=subprocess.DEVNULL)\n"
                  "import sqlite3\n"
                  "def running():\n"
                  "    try:\n"
                  "        db = sqlite3.connect('.barca/metadata.db')\n"
                  "        return db.execute('select status from runs').fetchall() == "
                  "[('running',)]\n"
                  "    except sqlite3.Error:\n"
                  "        return False\n"
                  "while not running(): time.sleep(0.05)\n"
                  "threading.Timer(1.5, pathlib.Path('go').write_text, ['']).start()",
                  "%barca logs -f",
                  "run.wait(timeout=60)")
    execute(nb, project.path)
    shown = "".join(o.get("text", "") for o in outputs(nb, 2) if o["output_type"] == "stream")
    assert shown.splitlines() == ["[pipeline.py:waits] before", "[pipeline.py:waits] on stderr",
                                  "[pipeline.py:waits] after"], outputs(nb, 2)
