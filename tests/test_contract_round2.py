"""The CLI contract, round two (issue #29): what barca's own integration tests and scripts
written for it expect of a bare `get`, `barca FILE.py`, `-o json`, `from barca import *` and a
step's JSON."""
from __future__ import annotations

import json

import pytest
from conftest import evicted

STAR = '''
from barca import *

@asset()
def s1() -> int:
    return 1

@task()
def t1() -> None:
    print("ran t1")
'''
TASKS = '''
from barca import task

@task()
def only() -> None:
    pass
'''


@pytest.mark.slow
def test_star_import_bare_get_and_file_as_command(project) -> None:
    project.write("star.py", STAR)
    listed = project.barca("list", "star.py", "--json").json()
    assert [n["id"] for n in listed["nodes"]] == ["star.py:s1", "star.py:t1"]
    for argv in (["star.py", "--json"], ["get", "star.py", "--json"]):
        r = project.barca(*argv)
        assert r.code == 0, (argv, r.err)
        doc = r.json()
        assert [s["id"] for s in doc["steps"]] == ["star.py:s1"], doc
        assert doc["final_output"] == 1
        assert "skipped 1 task" in r.err and "t1" in r.err, r.err
        assert "ran t1" not in r.out + r.err


@pytest.mark.slow
def test_a_file_of_tasks_only_gets_nothing(project) -> None:
    project.write("tasks.py", TASKS)
    r = project.barca("get", "tasks.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] is None and "barca run only tasks.py" in r.err


@pytest.mark.slow
def test_o_json_and_o_pretty_are_the_output_flags(seed) -> None:
    as_flag = seed.barca("get", "report", "pipeline.py", "--json").json()
    as_o = seed.barca("get", "report", "pipeline.py", "-o", "json")
    assert as_o.code == 0 and as_o.json()["final_output"] == as_flag["final_output"]
    pretty = seed.barca("get", "report", "pipeline.py", "-o", "pretty")
    assert pretty.code == 0 and pretty.out.startswith("Run "), pretty.out
    both = seed.barca("get", "report", "pipeline.py", "-o", "pretty", "--json")
    assert both.code == 2 and "two output modes" in both.err


@pytest.mark.slow
def test_an_unpartitioned_step_has_no_partitions_key(seed) -> None:
    steps = {s["id"]: s for s in seed.barca("get", "report", "pipeline.py", "--json")
             .json()["steps"]}
    assert "partitions" not in steps["pipeline.py:report"], steps
    assert "partitions" not in steps["pipeline.py:feed_version"], steps
    assert steps["pipeline.py:prices"]["partitions"]["total"] == 3


def test_get_of_a_file_from_python(tmp_path, monkeypatch) -> None:
    import barca
    (tmp_path / "star.py").write_text(STAR)
    (tmp_path / "tasks.py").write_text(TASKS)
    monkeypatch.chdir(tmp_path)
    assert barca.get("star.py") == 1
    assert barca.get("tasks.py") is None


CHAIN = '''
from barca import asset

@asset()
def src() -> int:
    return 1

@asset(inputs={"s": src})
def mid(s: int) -> int:
    return s + 1

@asset(inputs={"m": mid})
def top(m: int) -> int:
    return m + 1
'''


@pytest.mark.slow
def test_refresh_says_why_each_step_reran(project) -> None:
    project.write("pipeline.py", CHAIN)
    assert project.barca("get", "top", "pipeline.py").code == 0
    for extra in ([], ["--dry-run"]):
        doc = project.barca("get", "top", "pipeline.py", "--refresh", "src", "--json",
                            *extra).json()
        reasons = {s["id"].split(":")[1]: s["reason"] for s in doc["steps"]}
        assert reasons == {"src": "refresh", "mid": "refresh_cascade",
                           "top": "refresh_cascade"}, (extra, reasons)
    r = project.barca("get", "top", "pipeline.py", "--refresh", "src", "--no-cascade", "--json")
    assert r.code == 0
    for name in ("mid", "top"):
        line = f"'{name}' was served from cache but depends on refreshed 'src'"
        assert line in r.err and line in [w["message"] for w in r.json()["warnings"]], r.err
    split = project.barca("get", "top", "pipeline.py", "--refresh", "src", "mid")
    assert split.code == 2 and "--refresh src,mid" in split.err, split.err


def test_the_python_api_takes_cascade(tmp_path, monkeypatch) -> None:
    import barca
    (tmp_path / "pipeline.py").write_text(CHAIN)
    monkeypatch.chdir(tmp_path)
    assert barca.get("top", "pipeline.py") == 3
    seen: list = []
    assert barca.get("top", "pipeline.py", refresh="src", cascade=False, on_event=seen.append) == 3
    warnings = [e.text for e in seen if getattr(e, "level", None) == "warning"]
    assert "'mid' was served from cache but depends on refreshed 'src'" in warnings, warnings


@pytest.mark.slow
def test_o_value_of_a_frame_with_datetimes(project) -> None:
    project.write("pipeline.py", '''
from barca import asset
import pandas as pd

@asset()
def frame() -> pd.DataFrame:
    return pd.DataFrame({"when": pd.to_datetime(["2026-01-01 00:00", "2026-02-01 10:30"]),
                         "n": [1, 2]})
''')
    r = project.barca("get", "frame", "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [{"when": "2026-01-01T00:00:00", "n": 1},
                                 {"when": "2026-02-01T10:30:00", "n": 2}]


ROWS = '''
from barca import asset

@asset()
def rows() -> list:
    return [{"i": i, "s": f"x{i}"} for i in range(250)]
'''


def test_sql_json_rows_are_objects_with_the_total(tmp_path, monkeypatch) -> None:
    """#16: rows are objects keyed by column; ``total`` counts the rows before the limit."""
    import barca
    from barca.api import sql_result
    (tmp_path / "pipeline.py").write_text(ROWS)
    monkeypatch.chdir(tmp_path)
    assert len(barca.get("pipeline.py")) == 250
    doc = sql_result("select i, s, i * 2 as i from rows order by i", "pipeline.py",
                     limit=3).to_json()
    assert doc == {"columns": ["i", "s", "i_1"],
                   "rows": [{"i": 0, "s": "x0", "i_1": 0}, {"i": 1, "s": "x1", "i_1": 2},
                            {"i": 2, "s": "x2", "i_1": 4}],
                   "total": 250, "truncated": True}
    whole = sql_result("select count(*) as n from rows", "pipeline.py", limit=None).to_json()
    assert whole == {"columns": ["n"], "rows": [{"n": 250}], "total": 1, "truncated": False}


@pytest.mark.slow
def test_sql_json_limit_reports_the_total(project) -> None:
    project.write("pipeline.py", ROWS)
    assert project.barca("get", "rows", "pipeline.py").code == 0
    r = project.barca("sql", "select i from rows order by i", "--limit", "2", "--json")
    assert r.code == 0, r.err
    assert r.json() == {"columns": ["i"], "rows": [{"i": 0}, {"i": 1}], "total": 250,
                        "truncated": True}
    r = project.barca("sql", "select i from rows where i < 3 order by i", "--json")
    assert r.json() == {"columns": ["i"], "rows": [{"i": 0}, {"i": 1}, {"i": 2}], "total": 3,
                        "truncated": False}


STATUS = CHAIN + '''
from barca import partitions

@asset()
def other() -> list:
    return [{"i": i} for i in range(5)]

@asset(partitions={"k": partitions(["a", "b"])})
def part(k: str) -> str:
    return k
'''
NODE_KEYS = {"id", "name", "kind", "inputs", "partitioned", "cache", "last_materialization",
             "last_bytes_change", "shape", "env"}


def _cli(*argv: str):
    """A command's result as the CLI gets it (parsed and dispatched, in this process)."""
    from barca.faces.commands import dispatch, parse
    return dispatch(parse(list(argv)), on_event=lambda e: None).result


def test_status_json_shape_targets_limit_and_fields(tmp_path, monkeypatch) -> None:
    """#17: {target, targets, nodes, summary, total, truncated, root}; the union of the
    targets' cones; -l cuts and total counts; --fields keeps keys or lists the valid ones."""
    import barca
    from barca.core.errors import UsageError
    (tmp_path / "pipeline.py").write_text(STATUS)
    monkeypatch.chdir(tmp_path)
    barca.get("pipeline.py")
    doc = _cli("status", "top", "pipeline.py", "--json").to_json()
    assert set(doc) == {"target", "targets", "nodes", "summary", "total", "truncated", "root"}
    assert (doc["target"], doc["targets"], doc["total"], doc["truncated"]) == (
        "top", ["top"], 3, False)
    assert doc["root"] == str(tmp_path.resolve())
    assert [n["id"] for n in doc["nodes"]] == ["pipeline.py:src", "pipeline.py:mid",
                                               "pipeline.py:top"]
    for n in doc["nodes"]:
        assert set(n) == NODE_KEYS, n  # no partitions key: not partitioned
        assert n["partitioned"] is False and n["last_bytes_change"] and n["env"] == []
    both = _cli("status", "top,part", "pipeline.py", "--json").to_json()
    assert both["target"] is None and both["targets"] == ["top", "part"]
    assert {n["id"] for n in both["nodes"]} == {"pipeline.py:src", "pipeline.py:mid",
                                                "pipeline.py:top", "pipeline.py:part"}
    part = next(n for n in both["nodes"] if n["id"] == "pipeline.py:part")
    assert part["partitioned"] is True and part["partitions"]["total"] == 2
    cut = _cli("status", "pipeline.py", "-l", "2", "--json").to_json()
    assert len(cut["nodes"]) == 2 and cut["total"] == 5 and cut["truncated"] is True
    assert sum(cut["summary"].values()) == 5
    assert len(_cli("status", "pipeline.py", "-l", "2", "--all").to_json()["nodes"]) == 5
    few = _cli("status", "pipeline.py", "--fields", "id,cache").to_json()
    assert all(set(n) == {"id", "cache"} for n in few["nodes"])
    with pytest.raises(UsageError) as bad:
        _cli("status", "pipeline.py", "--fields", "id,colour")
    assert bad.value.code == 2 and "'colour'" in bad.value.message
    assert "last_bytes_change" in bad.value.remediation and "schedule" in bad.value.remediation
    sampled = _cli("status", "other", "pipeline.py", "--sample", "2").to_json()
    # in the node's shape, as barca 0.30.2 puts it (#29 item 17)
    assert sampled["nodes"][0]["shape"]["sample"] == [{"i": 0}, {"i": 1}]
    assert sampled["nodes"][0]["shape"]["rows"] == 5


def test_status_upstream_stale_filters_and_dry_run_agree(tmp_path, monkeypatch) -> None:
    """#17: an edit upstream makes its dependants upstream_stale; --state and --problems
    keep those nodes (the summary still counts all); status and --dry-run agree node by node."""
    import barca
    (tmp_path / "pipeline.py").write_text(STATUS)
    monkeypatch.chdir(tmp_path)
    barca.get("pipeline.py")
    text = (tmp_path / "pipeline.py").read_text().replace("return 1\n", "return 10\n", 1)
    (tmp_path / "pipeline.py").write_text(text)
    doc = _cli("status", "pipeline.py", "--json").to_json()
    why = {n["name"]: (n["cache"]["state"], n["cache"]["reason"]) for n in doc["nodes"]}
    assert why == {"src": ("stale", "changed"), "mid": ("stale", "upstream_stale"),
                   "top": ("stale", "upstream_stale"), "other": ("cached", "materialized"),
                   "part": ("cached", "materialized")}
    assert "'src'" in doc["nodes"][1]["cache"]["detail"]
    for flags in (["--state", "stale"], ["--problems"]):
        got = _cli("status", "pipeline.py", "--json", *flags).to_json()
        assert [n["name"] for n in got["nodes"]] == ["src", "mid", "top"], flags
        assert got["total"] == 3 and got["summary"]["cached"] == 2
    plan = _cli("get", "pipeline.py", "--dry-run", "--json").to_json()
    action = {s["id"].split(":")[1].split("[")[0]: s["action"] for s in plan["steps"]}
    for n in doc["nodes"]:
        assert (n["cache"]["state"] == "cached") == (action[n["name"]] == "cached"), n["name"]


SLOW = '''
import time
from barca import asset

@asset()
def slow() -> int:
    time.sleep(11.5)
    return 1
'''


@pytest.mark.slow
def test_a_long_step_says_it_is_still_running_in_every_mode(tmp_path) -> None:
    """#15: a step running for 10 s is named on stderr, whatever the output mode (both modes
    run at once: the step sleeps)."""
    import subprocess
    import sys
    runs = {}
    for mode in ("--json", "--pretty", "--agent"):
        folder = tmp_path / mode.strip("-")
        folder.mkdir()
        (folder / "pipeline.py").write_text(SLOW)
        runs[mode] = subprocess.Popen([sys.executable, "-m", "barca", "get", "slow",
                                       "pipeline.py", mode], cwd=folder, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for mode, proc in runs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, (mode, err)
        said = [x for x in err.splitlines() if "still running" in x]
        assert said == ["[barca] still running after 10s: pipeline.py:slow"], (mode, err)


SUNK = '''
from barca import asset, sink

@sink("blocked/out.json")
@asset()
def sunk() -> int:
    return 1
'''


@pytest.mark.slow
def test_a_failed_sink_is_a_line_on_stderr_in_every_mode(project) -> None:
    project.write("pipeline.py", SUNK)
    project.write("blocked", "a file where the sink wants a folder\n")
    for mode in ("--json", "--pretty", "--agent"):
        r = project.barca("get", "sunk", "pipeline.py", mode)
        assert r.code == 1, (mode, r.err)
        lines = [x for x in r.err.splitlines()
                 if x.startswith("[barca] step:pipeline.py:sunk failed: sink failed: ")]
        assert len(lines) == 1, (mode, r.err)


BACKSLASH = '''
from barca import asset, partitions

@asset(partitions={"k": partitions(["back\\\\slash", "a,b", "end\\\\"])})
def item(k: str) -> str:
    return k
'''


def test_a_key_with_a_backslash_is_shown_as_written(tmp_path, monkeypatch) -> None:
    """#9: ``back\\slash`` is ``k=back\\slash`` in keys (a backslash is doubled only where it
    could be read as an escape: before , = \\ or at the end), and every key round-trips."""
    import barca
    from barca.core.types import format_key, parse_key
    (tmp_path / "pipeline.py").write_text(BACKSLASH)
    monkeypatch.chdir(tmp_path)
    got = barca.get("item", "pipeline.py")
    assert got == {"k=back\\slash": "back\\slash", "k=a\\,b": "a,b", "k=end\\\\": "end\\"}
    doc = _cli("get", "item", "pipeline.py", "--json", "--partition", "k=back\\slash")
    assert doc.to_json()["steps"][0]["partitions"]["will_run_keys"] == []  # cached, by name
    for value in ("back\\slash", "a\\,b", "x\\\\y", "\\", "=\\=", ""):
        assert parse_key(format_key({"k": value, "d\\": value})) == {"k": value, "d\\": value}


def test_gc_json_names_files_from_the_project_root(tmp_path, monkeypatch) -> None:
    """#10: like every path barca prints, .barca/artifacts/... (not artifacts/...)."""
    import barca
    from barca.api import gc
    (tmp_path / "pipeline.py").write_text(CHAIN)
    monkeypatch.chdir(tmp_path)
    barca.get("top", "pipeline.py")
    (tmp_path / "pipeline.py").write_text(CHAIN.replace("return 1\n", "return 2\n"))
    barca.get("top", "pipeline.py")
    doc = gc("pipeline.py", max_size="off", dry_run=True).to_json()
    assert len(evicted(doc)) == 3 and evicted(doc, "superseded") == evicted(doc)
    for path in evicted(doc):
        assert path.startswith(".barca/artifacts/pipeline.py--") and (tmp_path / path).is_file()


FRAME = '''
import pandas as pd
from barca import asset

@asset()
def frame() -> pd.DataFrame:
    return pd.DataFrame({"a": range(50), "b": [f"x{i}" for i in range(50)],
                         "when": pd.date_range("2026-01-01", periods=50)})
'''


def test_pretty_shows_a_preview_of_a_table(tmp_path, monkeypatch) -> None:
    """#18: --pretty of a table is its shape and first rows, not only its path."""
    (tmp_path / "pipeline.py").write_text(FRAME)
    monkeypatch.chdir(tmp_path)
    text = str(_cli("get", "frame", "pipeline.py", "--pretty"))
    lines = [x.strip() for x in text.splitlines()]
    assert any(x.startswith(".barca/artifacts/pipeline.py--frame/") for x in lines), text
    assert "50 rows x 3 columns: a int64, b " in text and "when timestamp" in text
    assert lines[lines.index("a  b   when") + 1] == "0  x0  2026-01-01 00:00:00", text
    assert "(the first 5 of 50 rows)" in lines


def test_status_says_when_another_environment_has_the_results(tmp_path, monkeypatch) -> None:
    """#18: after default_env changes, status names the environment that has results."""
    import barca
    (tmp_path / "pipeline.py").write_text(CHAIN)
    monkeypatch.chdir(tmp_path)
    barca.get("top", "pipeline.py")
    assert "note" not in _cli("status", "pipeline.py", "--json").to_json()
    (tmp_path / "barca.toml").write_text('default_env = "dev"\n')
    doc = _cli("status", "pipeline.py", "--json").to_json()
    assert doc["summary"]["never_run"] == 3
    assert "environment 'dev' (default_env in barca.toml)" in doc["note"]
    assert "--env ''" in doc["note"]
    assert "--env ''" in str(_cli("status", "pipeline.py", "--pretty"))
    assert _cli("status", "pipeline.py", "--env", "", "--json").to_json()["summary"][
        "cached"] == 3
