"""The engine issue: the seed's Example end to end, through the CLI and the Python API."""
from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Project

LIST_TABLE = """\
NAME                      KIND    FRESHNESS  DEPS
-------------------------------------------------
pipeline.py:feed_version  sensor  manual     -
pipeline.py:prices        asset   always     pipeline.py:feed_version
pipeline.py:signal        asset   always     pipeline.py:prices
pipeline.py:report        asset   always     pipeline.py:signal
"""

AGENT_V2 = [
    "pipeline.py:feed_version",
    "pipeline.py:prices[ticker=AAPL]", "pipeline.py:prices[ticker=MSFT]",
    "pipeline.py:prices[ticker=GOOG]",
    "pipeline.py:signal[ticker=AAPL]", "pipeline.py:signal[ticker=MSFT]",
    "pipeline.py:signal[ticker=GOOG]",
    "pipeline.py:report",
]


def test_list_prints_the_seed_table(seed: Project) -> None:
    r = seed.barca("list", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    assert r.out == LIST_TABLE


def test_first_run_eight_steps_then_one(seed: Project) -> None:
    r = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    assert r.steps_line() == "8/8 steps | done"
    assert re.search(r"^\[barca\] 8/8 steps \| done in \d+\.\ds$", r.err, re.M)
    lines = r.out.splitlines()
    assert re.fullmatch(r"Run [0-9a-f]{12} \| got 'report' in \d+\.\d{3}s \(8 steps, 3 phases\)",
                        lines[0])
    assert lines[1] == ""
    assert re.fullmatch(r"\.barca/artifacts/pipeline\.py--report/[0-9a-f]{64}\.json", lines[2])
    value = json.loads((seed.path / lines[2]).read_text())
    assert value == {"buys": ["GOOG", "MSFT"], "tickers": 3}
    assert "\n".join(lines[3:]) == "\n".join("  " + x for x in json.dumps(
        value, indent=2, sort_keys=True).splitlines())

    r2 = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert r2.code == 0, r2.err
    assert r2.steps_line() == "1/8 steps | done"
    assert re.fullmatch(r"Run [0-9a-f]{12} \| got 'report' in \d+\.\d{3}s \(1 step, 3 phases\)",
                        r2.out.splitlines()[0])
    assert r2.out.splitlines()[2] == lines[2]  # the same cached artifact


def test_sensor_change_reruns_every_key_agent_lines(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    seed.write("feed_version.txt", "v2\n")
    r = seed.barca("get", "report", "pipeline.py", "--agent", "--json")
    assert r.code == 0, r.err
    assert sorted(r.completed()) == sorted(AGENT_V2)
    # the sensor first, the report last, and the counter counts up to 8
    assert r.completed()[0] == "pipeline.py:feed_version"
    assert r.completed()[-1] == "pipeline.py:report"
    counters = re.findall(r"completed \d+\.\ds \((\d+)/8\)$", r.err, re.M)
    assert counters == [str(i) for i in range(1, 9)]
    assert re.search(r"^\[barca\] importing " + re.escape(str(seed.path / "pipeline.py")) + "$",
                     r.err, re.M)
    assert r.err.rstrip().splitlines()[-1].startswith("[barca] 8/8 steps | done in ")
    assert r.json()["final_output"] == {"buys": ["GOOG", "MSFT"], "tickers": 3}


STATUS_ROWS = [
    ("feed_version", "sensor", "always-runs", "sensor", "str", "-"),
    ("prices", "asset", "cached", "materialized", "dict (3 keys)", "feed_version"),
    ("signal", "asset", "cached", "materialized", "dict (2 keys)", "prices"),
    ("report", "asset", "cached", "materialized", "dict (2 keys)", "signal"),
]


def test_status_table_and_json(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    r = seed.barca("status", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == ("NAME          KIND    STATE        WHY           LAST RUN"
                        "                               SHAPE          DEPS")
    when = r"success \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \d+\.\d\ds"
    for line, (name, kind, state, why, shape, deps) in zip(lines[1:5], STATUS_ROWS, strict=False):
        pattern = (rf"{name}\s+{kind}\s+{state}\s+{why}\s+{when}\s+{re.escape(shape)}\s+{deps}")
        assert re.fullmatch(pattern, line), line
        assert line.index(kind) == 14 and line.index(state) == 22
    assert lines[5] == ""
    assert lines[6] == "3 cached, 0 stale, 0 never run, 0 partial, 0 unknown, 1 always run"
    js = seed.barca("status", "pipeline.py", "--json").json()
    prices = next(n for n in js["nodes"] if n["name"] == "prices")
    assert prices["partitions"] == {"cached": 3, "missing": 0, "missing_keys": [], "total": 3}
    assert prices["cache"]["state"] == "cached"
    assert js["summary"] == {"cached": 3, "stale": 0, "never_run": 0, "partial": 0,
                             "unknown": 0, "always_runs": 1}


def test_status_is_read_only(seed: Project) -> None:
    r = seed.barca("status", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    # the sensor has never recorded a value: what reads it is unknown, not never run (#15)
    assert "0 cached, 0 stale, 0 never run, 0 partial, 3 unknown, 1 always run" in r.out
    assert not (seed.path / ".barca").exists()


def test_artifact_layout(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    art = seed.path / ".barca" / "artifacts"
    for t in ("AAPL", "MSFT", "GOOG"):
        for node in ("prices", "signal"):
            files = list((art / f"pipeline.py--{node}_ticker_{t}").iterdir())
            assert len(files) == 1 and re.fullmatch(r"[0-9a-f]{64}\.json", files[0].name)
    assert len(list((art / "pipeline.py--report").glob("*.json"))) == 1
    assert (seed.path / ".barca" / ".gitignore").read_text().strip() == "*"
    db = sqlite3.connect(seed.path / ".barca" / "metadata.db")
    assert db.execute("pragma journal_mode").fetchone()[0] == "wal"
    rows = db.execute("select node, path from materializations where status='success'").fetchall()
    assert len(rows) == 8
    for _node, path in rows:
        assert (seed.path / path).is_file(), path


def _run_hashes(p: Project) -> dict[str, str]:
    db = sqlite3.connect(p.path / ".barca" / "metadata.db")
    return dict(db.execute("select node, run_hash from materializations where status='success'"))


def test_keys_run_in_separate_worker_processes(project: Project) -> None:
    project.copy_pipeline("pids.py")
    r = project.barca("get", "pids", "pipeline.py", "--json", env={"BARCA_POOL_SIZE": "2"})
    assert r.code == 0, r.err
    pids = r.json()["final_output"]
    assert len(pids) == 2
    import os
    assert os.getpid() not in pids


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [("1", "2", "5")])
def test_decisions_independent_of_pool_size(tmp_path: Path, sizes: tuple[str, ...]) -> None:
    seed_src = (Path(__file__).parent.parent / "examples" / "seed" / "pipeline.py").read_text()
    hashes, steps = [], []
    for size in sizes:
        p = Project(tmp_path / f"pool{size}")
        p.path.mkdir()
        p.write("pipeline.py", seed_src)
        p.write("feed_version.txt", "v1\n")
        env = {"BARCA_POOL_SIZE": size}
        first = p.barca("get", "report", "pipeline.py", "--json", env=env)
        assert first.code == 0, first.err
        p.write("feed_version.txt", "v2\n")
        p.edit("pipeline.py", '"MSFT", "GOOG"', '"MSFT", "GOOG", "NVDA"')
        second = p.barca("get", "report", "pipeline.py", "--json", "--agent", env=env)
        assert second.code == 0, second.err
        hashes.append(_run_hashes(p))
        steps.append(sorted(second.completed()))
    assert hashes[0] == hashes[1] == hashes[2]
    assert steps[0] == steps[1] == steps[2]
    assert len(steps[0]) == 10


def _ran(p: Project, target: str = "top") -> list[str]:
    r = p.barca("get", target, "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    return sorted(r.completed())


def test_helper_edits(project: Project) -> None:
    project.copy_pipeline("helpers_same_file.py")
    assert _ran(project) == ["pipeline.py:base", "pipeline.py:top"]
    assert _ran(project) == []
    # an unused helper: nothing re-runs
    project.edit("pipeline.py", "return x * 2", "return x * 3")
    assert _ran(project) == []
    # reformatting and comments: nothing re-runs
    project.edit("pipeline.py", "def base() -> int:\n    return clean(1) * SCALE",
                 "def base() -> int:\n    # a comment\n    return clean( 1 )*SCALE   # more\n")
    assert _ran(project) == []
    # description= is not counted
    project.edit("pipeline.py", "@asset()\ndef base", '@asset(description="the base")\ndef base')
    assert _ran(project) == []
    # a used helper: base re-runs, and top because its input changed
    project.edit("pipeline.py", "return x + 1", "return x + 2")
    assert _ran(project) == ["pipeline.py:base", "pipeline.py:top"]
    # a used constant
    project.edit("pipeline.py", "SCALE = 10", "SCALE = 11")
    dry = project.barca("get", "top", "pipeline.py", "--dry-run", "--pretty")
    assert "changed: helper pipeline.py:SCALE" in dry.out
    assert _ran(project) == ["pipeline.py:base", "pipeline.py:top"]
    # the function's own code
    project.edit("pipeline.py", "return b + 1", "return b + 100")
    assert _ran(project) == ["pipeline.py:top"]


def test_a_failing_key(project: Project) -> None:
    project.copy_pipeline("failing.py")
    r = project.barca("get", "summary", "pipeline.py", "--agent", "--pretty")
    assert r.code == 1
    assert "[barca] step:pipeline.py:sales[region=amer] failed: RuntimeError: amer feed not ready" \
        in r.err
    assert r.err.rstrip().splitlines()[-1] == (
        "[barca] run failed: step 'pipeline.py:sales[region=amer]' failed: RuntimeError: amer "
        "feed not ready; 1 downstream steps skipped (exit 1)")
    assert r.steps_line() == "2/4 steps | failed"
    assert sorted(r.completed()) == ["pipeline.py:sales[region=apac]",
                                     "pipeline.py:sales[region=emea]"]
    js = project.barca("status", "pipeline.py", "--json").json()
    sales = next(n for n in js["nodes"] if n["name"] == "sales")
    assert sales["partitions"]["cached"] == 2 and sales["partitions"]["missing_keys"] == [
        "region=amer"]
    (project.path / "amer_ready.txt").write_text("")
    r2 = project.barca("get", "summary", "pipeline.py", "--agent", "--json")
    assert r2.code == 0, r2.err
    assert sorted(r2.completed()) == ["pipeline.py:sales[region=amer]", "pipeline.py:summary"]
    assert r2.json()["final_output"] == {"regions": 3, "total": 120}


def test_json_error_line_for_a_failed_step(project: Project) -> None:
    project.copy_pipeline("failing.py")
    r = project.barca("get", "summary", "pipeline.py", "--json")
    assert r.code == 1
    err = json.loads(r.err.strip().splitlines()[-1])
    assert err["code"] == 1 and err["kind"] == "step_failed"
    assert "RuntimeError: amer feed not ready" in err["error"]
    assert err["remediation"]
    out = r.json()
    assert out["status"] == "failed" and out["failed_node"] == "pipeline.py:sales[region=amer]"


def _python(p: Project, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=p.path, capture_output=True,
                          text=True, timeout=120)


def test_python_api_get(seed: Project) -> None:
    proc = _python(seed, "import barca, json; print(json.dumps(["
                         "barca.get('report', 'pipeline.py'), "
                         "barca.get('prices', 'pipeline.py')]))")
    assert proc.returncode == 0, proc.stderr
    report, prices = json.loads(proc.stdout)
    assert report == {"buys": ["GOOG", "MSFT"], "tickers": 3}
    assert prices == {
        "ticker=AAPL": {"ticker": "AAPL", "close": 465.0, "feed": "v1"},
        "ticker=GOOG": {"ticker": "GOOG", "close": 471.0, "feed": "v1"},
        "ticker=MSFT": {"ticker": "MSFT", "close": 477.0, "feed": "v1"},
    }


def test_python_api_objects_and_errors(seed: Project) -> None:
    code = """
import barca, json
plan = barca.get('report', 'pipeline.py', dry_run=True)
st = barca.status('pipeline.py')
try:
    barca.get('nope', 'pipeline.py')
except barca.UsageError as e:
    err = [e.kind, e.code, e.remediation]
print(json.dumps([plan.to_json()['summary'], st.to_json()['summary'], err, str(plan)]))
"""
    proc = _python(seed, code)
    assert proc.returncode == 0, proc.stderr
    summary, status, err, text = json.loads(proc.stdout)
    # a fresh project: the sensor has no recorded value, so all that reads it is unknown (#15)
    assert summary == {"will_run": 1, "cached": 0, "unknown": 7}
    assert status["unknown"] == 3 and status["never_run"] == 0
    assert err[0] == "usage" and err[1] == 2 and "barca list" in err[2]
    cli = seed.barca("get", "report", "pipeline.py", "--dry-run", "--pretty")
    assert cli.out.rstrip("\n") == text


def test_cached_get_imports_no_heavy_library(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    code = """
import sys, json, io, contextlib
from barca.faces.cli import run_cli
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = run_cli(['get', 'report', 'pipeline.py', '--json'])
heavy = sorted(m for m in ('rich', 'duckdb', 'pandas', 'IPython', 'pyarrow', 'ipywidgets',
                              'polars')
               if m in sys.modules)
print(json.dumps([rc, heavy]))
"""
    proc = _python(seed, code)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [0, []]


def test_usage_errors_exit_2_without_traceback(seed: Project) -> None:
    r = seed.barca("get", "reprot", "pipeline.py", "--pretty")
    assert r.code == 2
    assert "Asset 'reprot' not found. Available: pipeline.py:feed_version, pipeline.py:prices, " \
           "pipeline.py:signal, pipeline.py:report" in r.err
    assert "Did you mean 'report'?" in r.err
    assert "Traceback" not in r.err
    r = seed.barca("get", "report", "pipeline.py", "--refrsh", "x")
    assert r.code == 2 and "--refresh" in r.err and "Traceback" not in r.err
    r = seed.barca("get", "report", "pipeline.py", "--json", "--bogus")
    assert r.code == 2
    assert json.loads(r.err.strip())["kind"] == "usage"
    assert not (seed.path / ".barca").exists()


def test_bad_decorator_argument(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset


        @asset(inptus={})
        def a() -> int:
            return 1
    """)
    r = project.barca("get", "a", "pipeline.py", "--pretty")
    assert r.code == 2
    assert "pipeline.py:5: @asset got an unexpected argument 'inptus'." in r.err
    assert "Accepted arguments: inputs, partitions" in r.err
    assert "Did you mean 'inputs'?" in r.err


def test_syntax_error_is_a_usage_error(project: Project) -> None:
    project.write("pipeline.py", "from barca import asset\n\n@asset()\ndef a(:\n    return 1\n")
    r = project.barca("list", "pipeline.py", "--pretty")
    assert r.code == 2
    assert "pipeline.py:4:" in r.err and "SyntaxError" in r.err and "^" in r.err
    assert "Traceback" not in r.err


def test_task_and_run_commands(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset, task


        @asset()
        def numbers() -> list:
            return [1, 2, 3]


        @task(inputs={"n": numbers})
        def publish(n: list) -> int:
            return sum(n)
    """)
    r = project.barca("run", "publish", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == 6
    r = project.barca("run", "publish", "pipeline.py", "--json", "--agent")
    assert r.completed() == ["pipeline.py:publish"]  # the task always runs, numbers is cached
    r = project.barca("get", "publish", "pipeline.py")
    assert r.code == 2 and "barca run publish" in r.err
    r = project.barca("run", "numbers", "pipeline.py")
    assert r.code == 2 and "barca get numbers" in r.err


def test_plan_version_docs(seed: Project) -> None:
    r = seed.barca("plan", "pipeline.py")
    assert r.code == 0, r.err
    plan = r.json()
    assert plan["pool_size"] >= 1
    assert [len(p["steps"]) for p in plan["phases"]] == [1, 6, 1]
    assert seed.barca("version").out.startswith("barca ")
    r = seed.barca("docs", "partitons")
    assert r.code == 2 and "Did you mean 'partitions'?" in r.err
    for topic in ("cache", "partitions", "server-mode", "sinks", "sql"):  # the seed page's
        r = seed.barca("docs", topic)
        assert r.code == 0 and r.out.startswith("# "), (topic, r.err)
    assert "BARCA_REMOTE_URI" in seed.barca("docs", "server-mode").out


def test_status_of_a_target_is_its_upstream_cone(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    js = seed.barca("status", "signal", "pipeline.py", "--json").json()
    assert [n["name"] for n in js["nodes"]] == ["feed_version", "prices", "signal"]
    report = next(n for n in seed.barca("status", "pipeline.py", "--json").json()["nodes"]
                  if n["name"] == "report")
    lm = report["last_materialization"]
    assert lm["status"] == "success"
    assert lm["path"].startswith(".barca/artifacts/pipeline.py--report/")
    assert report["shape"] == {"type": "dict", "keys": ["tickers", "buys"]}  # #29 item 17


def test_independent_assets_share_the_pool(project: Project) -> None:
    """Assets that do not read each other are one batch of work: with a pool of 2, four
    one-step readers of the same source run on both workers, and the result lists the nodes
    in walk order."""
    project.write("pipeline.py", """
        import os

        from barca import asset


        @asset()
        def source() -> int:
            return 1
    """ + "".join(f"""

        @asset(inputs={{"source": source}})
        def reader{i}(source: int) -> int:
            return os.getpid()
    """ for i in range(4)))
    r = project.barca("get", "pipeline.py", "--json", env={"BARCA_POOL_SIZE": "2"})
    assert r.code == 0, r.err
    out = r.json()
    pids = {out["final_output"][f"pipeline.py:reader{i}"] for i in range(4)}
    assert len(pids) == 2
    assert [s["id"].split(":")[1] for s in out["steps"]] == [
        "source", "reader0", "reader1", "reader2", "reader3"]


def test_plan_previews_keys_and_sorts_warnings(project: Project) -> None:
    """`barca plan`: one summary per node with its first twenty keys in lexical order, and the
    warnings sorted by node, parameter and kind; the steps stay one entry per key."""
    project.write("pipeline.py", """
        from barca import asset, collect, partitions, partitions_from

        KEYS = [f"k{i:02d}" for i in range(24, -1, -1)]   # written in reverse order


        @asset(partitions={"k": partitions(KEYS)})
        def item(scale: int = 2) -> int:
            return scale


        @asset(partitions={"region": partitions(["us", "eu"]), "day": partitions(["d2", "d1"])})
        def grid(region: str, day: str) -> str:
            return region + day


        @asset(partitions={"k": partitions_from(item)})
        def double(item: int = 0) -> int:
            return item * 2


        @asset(inputs={"items": collect(double)})
        def a_total(items: list = []) -> int:
            return sum(items)
    """)
    r = project.barca("plan", "pipeline.py", env={"BARCA_POOL_SIZE": "3"})
    assert r.code == 0, r.err
    plan = r.json()
    assert plan["pool_size"] == 3
    assert plan["steps_total"] == 25 + 4 + 25 + 1
    nodes = {n["id"].split(":")[1]: n for n in plan["nodes"]}
    assert nodes["item"]["keys"] == 25 and nodes["item"]["will_run"] == 25
    assert nodes["item"]["key_preview"] == [f"k=k{i:02d}" for i in range(20)]
    assert nodes["grid"]["key_preview"] == ["day=d1,region=eu", "day=d1,region=us",
                                            "day=d2,region=eu", "day=d2,region=us"]
    assert nodes["a_total"]["partitioned"] is False and nodes["a_total"]["keys"] is None
    assert [(w["node"].split(":")[1], w["param"], w["kind"]) for w in plan["warnings"]] == [
        ("a_total", "items", "default_unused"),
        ("double", "item", "default_unused"),
        ("item", "k", "dimension_unused"),
    ]
    assert "every key of dimension 'k' makes the same call" in plan["warnings"][2]["message"]
