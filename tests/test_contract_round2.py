"""The CLI contract, round two (issue #29): what barca's own integration tests and scripts
written for it expect of a bare `get`, `barca FILE.py`, `-o json`, `from barca import *` and a
step's JSON."""
from __future__ import annotations

import json

import pytest

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
