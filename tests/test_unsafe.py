"""@unsafe: a marker, above or below @asset, that runs the function unchanged and is not in the
run hash (a decorator that is not barca's is)."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Project

import barca
from barca import api
from barca.core.settings import Settings

BASE = """
import functools
import barca
from barca import asset, unsafe


def mine(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)
    return wrapper


DECORATORS
def value() -> int:
    return 7
"""


def _run_hash(root: Path, decorators: str) -> str:
    (root / "pipeline.py").write_text(BASE.replace("DECORATORS", decorators))
    plan = api.plan(str(root / "pipeline.py"), settings=Settings.resolve(root, environ={}))
    return plan.phases[0][0]["run_hash"]


def test_unsafe_is_not_hashed_and_another_decorator_is(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plain = _run_hash(tmp_path, "@asset()")
    assert _run_hash(tmp_path, "@unsafe\n@asset()") == plain
    assert _run_hash(tmp_path, "@asset()\n@unsafe") == plain
    assert _run_hash(tmp_path, "@barca.unsafe\n@asset()") == plain
    assert _run_hash(tmp_path, "@asset()\n@mine") != plain


def test_unsafe_returns_the_function_itself() -> None:
    def f() -> int:
        return 1
    assert barca.unsafe(f) is f and f() == 1


@pytest.mark.slow
def test_an_unsafe_asset_runs_unchanged_and_stays_cached(project: Project) -> None:
    project.write("pipeline.py", BASE.replace("DECORATORS", "@asset()"))
    r = project.barca("get", "value", "pipeline.py", "-o", "value")
    assert (r.code, r.out.strip()) == (0, "7")
    project.write("pipeline.py", BASE.replace("DECORATORS", "@unsafe\n@asset()"))
    r = project.barca("get", "value", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["steps"][0]["status"] == "cached"
    r = project.barca("get", "value", "pipeline.py", "--refresh", "value", "-o", "value")
    assert (r.code, r.out.strip()) == (0, "7")
