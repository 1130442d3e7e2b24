"""Plan warnings as objects {kind, node, param, message} in plan, get, run and --dry-run JSON
(always an array), one stderr line each (one summary line for undeclared environment
variables): unused_input and undeclared_env."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project

from barca import api
from barca.core.settings import Settings

PIPELINE = """
import os
from barca import asset, sensor, task


def helper():
    return os.environ.get("VOCAB_HELPER")


@asset()
def raw() -> int:
    return 1


@asset(inputs={"raw": raw})
def unused(raw: int) -> int:
    return 2


@asset(inputs={"raw": raw, "_after": raw})
def in_sql(raw: int, _after: int) -> str:
    return "select * from raw"


@asset(inputs={"raw": raw})
def only_raises(raw: int) -> int:
    raise NotImplementedError


@asset(inputs={"raw": raw})
def documented(raw: int) -> int:
    \"\"\"Later.\"\"\"
    ...


@asset(inputs={"raw": raw})
def dynamic(raw: int) -> int:
    return locals()["raw"]


@asset(inputs={"raw": raw}, env=["VOCAB_DECLARED"])
def reads_env(raw: int) -> int:
    helper()
    return raw + len(os.getenv("VOCAB_DECLARED", "")) + len(os.environ["VOCAB_PLAIN"] or "")


@task(inputs={"raw": raw})
def boom(raw: int) -> int:
    raise ValueError(raw)
"""


def _plan(tmp_path: Path) -> dict:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    return api.plan(str(tmp_path / "pipeline.py"),
                    settings=Settings.resolve(tmp_path, environ={})).to_json()


def test_the_warnings_are_objects_sorted_by_node_param_kind(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.chdir(tmp_path)
    warnings = _plan(tmp_path)["warnings"]
    assert all(set(w) == {"kind", "node", "param", "message"} for w in warnings)
    assert [(w["kind"], w["node"], w["param"]) for w in warnings] == [
        ("undeclared_env", "pipeline.py:reads_env", "VOCAB_HELPER"),
        ("undeclared_env", "pipeline.py:reads_env", "VOCAB_PLAIN"),
        ("unused_input", "pipeline.py:unused", "raw"),
    ]
    assert warnings[2]["message"].startswith(
        "pipeline.py:unused never uses its input `raw`.")


def test_no_warnings_is_an_empty_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text("from barca import asset\n\n@asset()\n"
                                          "def a() -> int:\n    return 1\n")
    plan = api.plan(str(tmp_path / "pipeline.py"), settings=Settings.resolve(tmp_path,
                                                                             environ={}))
    assert plan.to_json()["warnings"] == []
    dry = api.plan_run("a", str(tmp_path / "pipeline.py"),
                       settings=Settings.resolve(tmp_path, environ={}))
    assert dry.to_json()["warnings"] == []


@pytest.mark.slow
def test_get_run_and_dry_run_carry_them_and_stderr_says_each_once(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    env = {"VOCAB_PLAIN": "x"}
    r = project.barca("get", "unused,reads_env", "pipeline.py", "--json", env=env)
    assert r.code == 0, r.err
    body = r.json()
    assert [(w["kind"], w["param"]) for w in body["warnings"]] == [
        ("undeclared_env", "VOCAB_HELPER"), ("undeclared_env", "VOCAB_PLAIN"),
        ("unused_input", "raw")]
    steps = {s["id"]: s for s in body["steps"]}
    assert steps["pipeline.py:reads_env"]["undeclared_env"] == ["VOCAB_HELPER", "VOCAB_PLAIN"]
    lines = [x for x in r.err.splitlines() if x.startswith("[barca] warning:")]
    assert lines == [
        "[barca] warning: pipeline.py:unused never uses its input `raw`. Remove it from "
        "inputs=, or name the parameter `_raw` if it is there only to run after it.",
        "[barca] warning: 1 step read environment variables not declared in env=: "
        "VOCAB_HELPER, VOCAB_PLAIN; barca status lists them"]

    # not hashed: a change of an undeclared variable leaves the step cached
    r = project.barca("get", "reads_env", "pipeline.py", "--json", env={"VOCAB_PLAIN": "yy"})
    assert r.code == 0, r.err
    assert {s["status"] for s in r.json()["steps"]} == {"cached"}

    r = project.barca("get", "unused", "pipeline.py", "--dry-run", "--json")
    assert [(w["kind"], w["param"]) for w in r.json()["warnings"]] == [("unused_input", "raw")]
    assert "never uses its input `raw`" in r.err

    r = project.barca("status", "pipeline.py", "--json")
    nodes = {n["id"]: n for n in r.json()["nodes"]}
    assert nodes["pipeline.py:reads_env"]["undeclared_env"] == ["VOCAB_HELPER", "VOCAB_PLAIN"]
    assert "warning" not in r.err
    assert "warning" not in project.barca("list", "pipeline.py").err


@pytest.mark.slow
def test_a_failed_run_has_its_warnings_and_the_exit_code_is_the_run_s(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    r = project.barca("run", "boom", "pipeline.py", "--json")
    assert r.code == 1
    assert json.loads(r.out)["warnings"] == []  # a body that only raises is not warned of
    project.edit("pipeline.py", "    raise ValueError(raw)", "    n = 1\n    raise ValueError(n)")
    r = project.barca("run", "boom", "pipeline.py", "--json")
    assert r.code == 1
    assert [(w["kind"], w["node"]) for w in json.loads(r.out)["warnings"]] == [
        ("unused_input", "pipeline.py:boom")]
