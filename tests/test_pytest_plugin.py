"""barca's pytest plugin (issue #34): notebooks as tests, the barca_project fixture,
assert_steps. Run through pytester with ``-p barca.faces.pytest_plugin`` (the pytest11 entry
point exists only once the package is reinstalled); autoload is off in the inner runs so an
installed entry point does not register the plugin a second time."""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parent.parent
PLUGIN = "barca.faces.pytest_plugin"
SEED = (REPO / "examples" / "seed" / "pipeline.py").read_text()


@pytest.fixture
def pt(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester


def write_notebook(path: Path, *cells: str | tuple[str, list[str]]) -> Path:
    """A notebook of code cells; a cell is its source, or (source, tags). Written as the
    nbformat 4 JSON it is: importing nbformat (its validator) costs seconds, here at every
    collection of the fast subset."""
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}}
    for i, c in enumerate(cells):
        source, tags = (c, []) if isinstance(c, str) else c
        nb["cells"].append({"cell_type": "code", "id": f"cell-{i}", "metadata": {"tags": tags},
                            "execution_count": None, "outputs": [], "source": source})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1))
    return path


# ---------------------------------------------------------------------------- no kernel

def test_entry_point_is_declared() -> None:
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["pytest11"] == {"barca": PLUGIN}


def test_notebooks_are_collected_only_when_asked(pt: pytest.Pytester) -> None:
    write_notebook(pt.path / "nbs" / "a.ipynb", "1")
    write_notebook(pt.path / "nbs" / "deep" / "b.ipynb", "2")
    write_notebook(pt.path / "nbs" / ".ipynb_checkpoints" / "a-checkpoint.ipynb", "1")
    res = pt.runpytest("-p", PLUGIN, "--collect-only", "-q", "--barca-notebooks", "nbs")
    lines = [ln for ln in res.outlines if ".ipynb" in ln]
    assert "barca_notebook" in pt.runpytest("-p", PLUGIN, "--markers").stdout.str()
    assert lines == ["nbs/a.ipynb::a.ipynb", "nbs/deep/b.ipynb::b.ipynb"], res.outlines
    res = pt.runpytest("-p", PLUGIN, "--collect-only", "-q", "nbs")
    assert not [ln for ln in res.outlines if ".ipynb" in ln]


def test_a_bad_param_is_a_usage_error(pt: pytest.Pytester) -> None:
    res = pt.runpytest("-p", PLUGIN, "--barca-param", "not a name=3")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "NAME=VALUE" in res.stderr.str()


def test_param_values_are_literals_else_text() -> None:
    from barca.faces.nbrun import parse_param
    assert parse_param("n=5") == ("n", 5)
    assert parse_param("tickers=['AAPL']") == ("tickers", ["AAPL"])
    assert parse_param("since=2025-01-01") == ("since", "2025-01-01")
    assert parse_param("name = 'x=y'") == ("name", "x=y")
    with pytest.raises(ValueError, match="NAME=VALUE"):
        parse_param("5=n")


@pytest.mark.slow
def test_a_missing_kernel_is_one_line(pt: pytest.Pytester) -> None:
    write_notebook(pt.path / "a.ipynb", "1")
    res = pt.runpytest("-p", PLUGIN, "--barca-notebooks", "--barca-kernel", "nosuch", "a.ipynb")
    res.assert_outcomes(failed=1)
    assert "a.ipynb: no Jupyter kernel named 'nosuch'" in res.stdout.str()
    assert "Traceback" not in res.stdout.str()


FIXTURE_TEST = '''
import pytest
from barca import StepFailed
from barca.faces.testing import assert_steps

PIPELINE = """
from helpers import scale
from barca import asset, collect, partitions

@asset(partitions={"ticker": partitions(["AAPL", "MSFT"])})
def prices(ticker: str) -> int:
    return len(ticker)

@asset()
def scaled() -> int:
    return scale(10)

@asset()
def other() -> int:
    return 7

@asset(inputs={"prices": collect(prices), "scaled": scaled, "other": other})
def report(prices: list, scaled: int, other: int) -> dict:
    return {"n": len(prices), "scaled": scaled, "other": other}
"""

def test_edit_reruns_the_cone(barca_project, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = barca_project({"pipeline.py": PIPELINE,
                       "helpers.py": "def scale(x):\\n    return x * 2\\n"})
    first = p.get("report", "pipeline.py")
    assert first.value == {"n": 2, "scaled": 20, "other": 7}
    assert "pipeline.py:prices[ticker=AAPL]" in first.ran and first.cached == ()
    assert_steps(first, ran=["prices", "scaled", "other", "report"], cached=[])
    assert (p.root / ".barca").is_dir() and not (tmp_path / ".barca").exists()
    import os; assert os.getcwd() == str(tmp_path)

    p.write("helpers.py", "def scale(x):\\n    return x * 3\\n")
    second = p.get("report", "pipeline.py")
    assert second.value["scaled"] == 30
    assert second.ran == ("pipeline.py:report", "pipeline.py:scaled")
    assert second.cached == ("pipeline.py:other", "pipeline.py:prices[ticker=AAPL]",
                             "pipeline.py:prices[ticker=MSFT]")
    assert_steps(second, ran=["scaled", "pipeline.py:report"],
                 cached=["other", "prices[ticker=AAPL]", "prices[ticker=MSFT]"])
    st = p.status(None, "pipeline.py")
    assert st.summary()["cached"] == 4

def test_assert_steps_says_why(barca_project):
    p = barca_project({"pipeline.py": PIPELINE, "helpers.py": "def scale(x):\\n    return x\\n"})
    p.get("report", "pipeline.py")
    p.write("helpers.py", "def scale(x):\\n    return -x\\n")
    assert_steps(p.get("report", "pipeline.py"), ran=["other"], cached=["scaled"])

BOOM = "from barca import asset\\n@asset()\\ndef boom() -> int:\\n    return 1 / 0\\n"

def test_a_failed_step_raises(barca_project):
    p = barca_project({"pipeline.py": BOOM})
    with pytest.raises(StepFailed) as exc:
        p.get("boom", "pipeline.py")
    assert_steps(exc.value.result, ran=[])
'''


@pytest.mark.slow
def test_fixture_ran_and_cached_after_an_edit(pt: pytest.Pytester) -> None:
    pt.makepyfile(test_fixture=FIXTURE_TEST)
    # in a subprocess: an inline run's sys.modules are rolled back after it, and the engine's
    # worker pool would then pickle classes of modules that are no longer the imported ones
    res = pt.runpytest_subprocess("-p", PLUGIN, "-p", "no:cacheprovider")
    res.assert_outcomes(passed=2, failed=1)
    out = res.stdout.str()
    # the WHY of each step that differed: scaled ran because its helper changed
    assert "- expected cached, was pipeline.py:scaled: ran (why: " in out
    assert "helpers.py" in out.split("expected cached, was pipeline.py:scaled")[1].split("\n")[0]
    assert "- expected ran, was pipeline.py:other: cached" in out
    assert "- not expected to be ran: pipeline.py:report: ran" in out


def test_the_project_object_says_what_ran_after_an_edit(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """What barca_project returns, in this process (the fast subset's copy of the test above):
    an edit of a helper re-runs its cone, the rest is cached, key by key."""
    from barca.faces.testing import assert_steps, new_project
    monkeypatch.chdir(tmp_path)
    pipeline = FIXTURE_TEST.split('PIPELINE = """', 1)[1].split('"""', 1)[0]
    p = new_project(tmp_path, {"pipeline.py": pipeline,
                               "helpers.py": "def scale(x):\n    return x * 2\n"})
    first = p.get("report", "pipeline.py")
    assert first.value == {"n": 2, "scaled": 20, "other": 7} and first.cached == ()
    assert os.getcwd() == str(tmp_path) and (p.root / ".barca").is_dir()
    p.write("helpers.py", "def scale(x):\n    return x * 3\n")
    again = p.get("report", "pipeline.py")
    assert again.value["scaled"] == 30
    assert again.ran == ("pipeline.py:report", "pipeline.py:scaled")
    assert again.cached == ("pipeline.py:other", "pipeline.py:prices[ticker=AAPL]",
                            "pipeline.py:prices[ticker=MSFT]")
    assert_steps(again, ran=["scaled", "report"], cached=["prices", "other"])
    with pytest.raises(AssertionError) as exc:
        assert_steps(again, ran=["other"], cached=["scaled", "report"])
    msg = str(exc.value)
    assert "- expected cached, was pipeline.py:scaled: ran (why: changed: helper helpers.py" \
        in msg
    assert "- expected ran, was pipeline.py:other: cached" in msg


# ---------------------------------------------------------------------------- start-up cost

@pytest.mark.slow
def test_the_plugin_costs_import_barca_and_the_cli_nothing() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for code in ("import barca", "import barca.faces.cli; barca.faces.cli"):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", code], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        loaded = proc.stderr
        assert "barca.faces." in loaded or code == "import barca"
        for mod in (PLUGIN, "barca.faces.testing", "barca.faces.nbrun", "nbclient", "pytest"):
            assert f" {mod}\n" not in loaded, f"{code!r} imports {mod}"
    # the plugin itself, as pytest loads it: what `import barca` loads, and no notebook library
    show = ("import sys, {}; print(sorted(m for m in sys.modules "
            "if m.startswith(('barca', 'nbclient', 'nbformat', 'jupyter'))))")
    mods = {}
    for name in ("barca", PLUGIN):
        proc = subprocess.run([sys.executable, "-c", show.format(name)], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
        mods[name] = set(ast.literal_eval(proc.stdout))
    assert mods[PLUGIN] - mods["barca"] == {"barca.faces", PLUGIN}


# ---------------------------------------------------------------------------- kernels

@pytest.mark.slow
def test_notebooks_pass_fail_tags_params_isolation(pt: pytest.Pytester) -> None:
    proj = pt.path / "proj"
    (proj / "barca.toml").parent.mkdir()
    (proj / "barca.toml").write_text("")
    (proj / "pipeline.py").write_text(SEED)
    (proj / "feed_version.txt").write_text("v1\n")
    user_cache = proj / ".barca"
    user_cache.mkdir()
    (user_cache / "mine").write_text("the user's cache")
    write_notebook(
        proj / "nbs" / "ok.ipynb",
        ("n = 1", ["parameters"]),
        "import os; os.chdir('..')",
        "assert n == 5, n",
        "import barca\nfrom pathlib import Path\nassert not Path('.barca/mine').exists()\n"
        "r = barca.get('report', 'pipeline.py')\nassert r['tickers'] == 3",
        ("raise RuntimeError('this cell is expected to raise')", ["raises-exception"]),
        ("raise RuntimeError('never run')", ["skip-test"]),
    )
    write_notebook(proj / "nbs" / "bad.ipynb",
                   "def ratio(a, b):\n    return a / b",
                   "x = 1",
                   "ratio(x, 0)",
                   "print('not reached')")
    write_notebook(proj / "nbs" / "noraise.ipynb", ("x = 1", ["raises-exception"]))
    before = sorted((p.relative_to(proj), p.stat().st_mtime_ns) for p in user_cache.rglob("*"))

    res = pt.runpytest("-p", PLUGIN, "-p", "no:cacheprovider", "--barca-notebooks",
                       "--barca-param", "n=5", "--barca-timeout", "60", "proj")
    res.assert_outcomes(passed=1, failed=2)
    out = res.stdout.str()
    # the failing notebook: its name, the cell, its source, the user's traceback
    head = "proj/nbs/bad.ipynb: cell 2 (counting from 0) failed"
    assert f"{head}: ZeroDivisionError: division by zero" in out
    assert "    ratio(x, 0)" in out
    tb = out.split(head)[1].split("proj/nbs/noraise")[0]
    assert "----> 2     return a / b" in tb and "\x1b[" not in tb
    assert "nbclient" not in tb and "not reached" not in tb
    assert ("proj/nbs/noraise.ipynb: cell 0 (counting from 0) is tagged 'raises-exception' "
            "but raised nothing") in out
    # isolation: the user's .barca/ is as it was, and the project got no new cache
    after = sorted((p.relative_to(proj), p.stat().st_mtime_ns) for p in user_cache.rglob("*"))
    assert after == before
    assert not (proj / "nbs" / ".barca").exists()


@pytest.mark.slow
def test_fixture_runs_a_notebook_with_parameters(pt: pytest.Pytester) -> None:
    write_notebook(pt.path / "nb" / "n.ipynb", ("size = 100", ["parameters"]),
                   "open('size.txt', 'w').write(str(size))")
    pt.makepyfile(test_nb='''
import pytest

def test_it(barca_project):
    p = barca_project("nb")
    nb = p.run_notebook("n.ipynb", parameters={"size": 3})
    assert p.read("size.txt") == "3"
    assert nb.cells[1].metadata.tags == ["injected-parameters"]
    with pytest.raises(AssertionError, match="no cell is tagged 'parameters'"):
        p.write("m.ipynb", p.read("n.ipynb").replace('"parameters"', '"other"'))
        p.run_notebook("m.ipynb", parameters={"size": 3})
''')
    res = pt.runpytest("-p", PLUGIN, "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)


@pytest.mark.slow
def test_the_projects_own_notebooks(pt: pytest.Pytester) -> None:
    """Dogfood: notebooks/ runs through the plugin, its user's .barca/ untouched."""
    res = pt.runpytest("-p", PLUGIN, "-p", "no:cacheprovider", "--barca-notebooks",
                       "--barca-timeout", "240", str(REPO / "notebooks"))
    res.assert_outcomes(passed=len(list((REPO / "notebooks").glob("*.ipynb"))))


@pytest.mark.slow
def test_a_cell_past_the_timeout_fails(pt: pytest.Pytester) -> None:
    write_notebook(pt.path / "slow.ipynb", "x = 1", "import time\ntime.sleep(60)")
    res = pt.runpytest("-p", PLUGIN, "-p", "no:cacheprovider", "--barca-notebooks",
                       "--barca-timeout", "2", "slow.ipynb")
    res.assert_outcomes(failed=1)
    assert "slow.ipynb: cell 1 (counting from 0) timed out after 2s" in res.stdout.str()


def _worked_example() -> tuple[dict[str, str], list[str]]:
    """The files and the notebook cells of barca/docs/testing.md's worked example."""
    import re
    page = (REPO / "barca" / "docs" / "testing.md").read_text()
    example = page.split("## A worked example", 1)[1]
    files, cells = {}, []
    for block in re.findall(r"```python\n(.*?)```", example, re.S):
        first = block.splitlines()[0]
        named = re.fullmatch(r"# ([\w/]+\.py)", first)
        if named:
            files[named.group(1)] = block
        else:
            cells.append(block)
    return files, cells


@pytest.mark.slow
def test_the_manuals_worked_example(pt: pytest.Pytester) -> None:
    """barca docs testing: its notebook test and its pytest tests pass as written."""
    files, cells = _worked_example()
    assert sorted(files) == ["helpers.py", "pipeline.py", "tests/test_pipeline.py"]
    for name, text in files.items():
        (pt.path / name).parent.mkdir(parents=True, exist_ok=True)
        (pt.path / name).write_text(text)
    first, *rest = cells
    write_notebook(pt.path / "explore.ipynb", (first, ["parameters"]), *rest)
    res = pt.runpytest_subprocess("-p", PLUGIN, "-p", "no:cacheprovider", "--barca-notebooks",
                                  "explore.ipynb", "tests/test_pipeline.py")
    res.assert_outcomes(passed=3)
    assert not (pt.path / ".barca").exists()


def test_a_project_copied_into_a_folder_inside_itself(tmp_path: Path) -> None:
    """barca_project(".") from a test whose tmp_path lies under the project: the copy leaves
    itself (and the project's .barca/) out instead of copying itself forever."""
    from barca.faces.testing import new_project
    (tmp_path / "pipeline.py").write_text("x = 1\n")
    (tmp_path / ".barca").mkdir()
    (tmp_path / "tmp").mkdir()  # pytest's tmp_path, say: listed by the copy before it starts
    p = new_project(tmp_path / "tmp", tmp_path)
    assert sorted(x.name for x in p.root.iterdir()) == ["pipeline.py"]
