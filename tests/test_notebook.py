"""The notebook face: %barca in a real kernel, run by nbclient."""
from __future__ import annotations

import ast
import re

import pytest
from conftest import REPO, Project
from nbtools import error, execute, notebook, outputs, result, text

pytestmark = pytest.mark.slow  # real kernels


def _seed_notebook(seed: Project, *cells: str):
    nb = notebook("%load_ext barca", *cells)
    client = execute(nb, seed.path)
    return nb, client


def test_magics_return_objects(seed: Project) -> None:
    nb, _ = _seed_notebook(
        seed,
        "r = %barca get report pipeline.py\nr",
        "%barca get prices pipeline.py",
        "x = 'report'\n%barca get {x} pipeline.py",
        "%barca status pipeline.py",
        "%barca get report pipeline.py --dry-run",
        'df = %barca sql "select * from prices"\n(type(df).__name__, list(df.columns))',
    )
    assert error(nb, 1) is None, error(nb, 1)
    assert ast.literal_eval(result(nb, 1)["text/plain"]) == {"tickers": 3, "buys": ["GOOG", "MSFT"]}
    prices = ast.literal_eval(result(nb, 2)["text/plain"])
    assert sorted(prices) == ["ticker=AAPL", "ticker=GOOG", "ticker=MSFT"]
    assert prices["ticker=AAPL"] == {"ticker": "AAPL", "close": 465.0, "feed": "v1"}
    assert ast.literal_eval(result(nb, 3)["text/plain"])["tickers"] == 3
    status = result(nb, 4)
    assert "<table" in status["text/html"] and 'data-state="cached"' in status["text/html"]
    cli = seed.barca("status", "pipeline.py", "--pretty")
    assert status["text/plain"] == cli.out.rstrip("\n")
    # no application/json: JupyterLab would show it (a collapsed JSON tree) instead of the table
    assert sorted(status) == ["text/html", "text/plain"]
    assert 'style="text-align:left"' in status["text/html"]
    plan = result(nb, 5)
    assert "<table" in plan["text/html"] and "will run" in plan["text/html"]
    assert plan["text/plain"] == seed.barca("get", "report", "pipeline.py", "--dry-run",
                                            "--pretty").out.rstrip("\n")
    assert ast.literal_eval(result(nb, 6)["text/plain"]) == (
        "DataFrame", ["partition", "ticker", "close", "feed"])


def test_usage_error_raises_usage_error(seed: Project) -> None:
    nb, _ = _seed_notebook(seed, "%barca get nope pipeline.py", "%barca get report --bogus",
                           "%barca frobnicate", "%barca get report --refrsh prices",
                           "%barca stauts")
    for i in (1, 2, 3, 4, 5):
        err = error(nb, i)
        assert err is not None and err["ename"] == "UsageError", outputs(nb, i)
        assert "SystemExit" not in "\n".join(err["traceback"])
    assert "Asset 'nope' not found" in error(nb, 1)["evalue"]
    assert "Unknown option '--bogus'" in error(nb, 2)["evalue"]
    assert "Did you mean" not in error(nb, 2)["evalue"]      # --output is not close to --bogus
    assert "Did you mean '--refresh'?" in error(nb, 4)["evalue"]
    assert "Did you mean 'status'?" in error(nb, 5)["evalue"]
    # hints in the form a notebook user types
    assert "`%barca list pipeline.py`" in error(nb, 1)["evalue"]
    assert "`%barca get --help`" in error(nb, 2)["evalue"]
    assert "`%barca --help`" in error(nb, 3)["evalue"]
    for i in (1, 2, 3, 4, 5):
        shown = error(nb, i)["evalue"] + "\n".join(error(nb, i)["traceback"])
        assert not re.search(r"(?<!%)\bbarca (get|list|--help)", shown), shown


def test_unquoted_sql_as_in_jupysql(seed: Project) -> None:
    nb, _ = _seed_notebook(
        seed, "%barca get report pipeline.py",
        "df = %barca sql select ticker, close from prices order by ticker\n"
        "df.values.tolist()",
        "%barca sql --limit 1 select partition, ticker from prices where ticker = 'MSFT'",
        "%%barca sql pipeline.py\nselect count(*) as n from signal")
    for i in (1, 2, 3, 4):
        assert error(nb, i) is None, error(nb, i)
    assert ast.literal_eval(result(nb, 2)["text/plain"]) == [
        ["AAPL", 465.0], ["GOOG", 471.0], ["MSFT", 477.0]]
    assert "ticker=MSFT" in result(nb, 3)["text/plain"]


def test_failed_step_shows_its_traceback_once_from_the_users_frame(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset, partitions


        def check(region):
            if region == "amer":
                raise RuntimeError("amer feed not ready")


        @asset(partitions={"region": partitions(["emea", "amer"])})
        def sales(region: str) -> dict:
            check(region)
            return {"region": region}
    """)
    nb = notebook("%load_ext barca", "%barca get sales pipeline.py", "print('after')")
    execute(nb, project.path)
    err = error(nb, 1)
    assert err is not None and err["ename"] == "StepFailed"
    assert "RuntimeError: amer feed not ready" in err["evalue"]
    assert "downstream steps skipped" not in err["evalue"]  # none were: nothing to say
    coloured = "\n".join(err["traceback"])
    assert "\x1b[" in coloured                               # coloured, as IPython colours
    tb = re.sub(r"\x1b\[[0-9;]*m", "", coloured)
    # once, in the error box, from the user's frame (no worker frames), with its source
    assert tb.count('raise RuntimeError("amer feed not ready")') == 1, tb
    assert "barca/engine/executors" not in tb and "worker.py" not in tb, tb
    assert re.search(r"File .*pipeline\.py:12, in sales", tb), tb
    assert re.search(r"----> 12 +check\(region\)", tb), tb
    assert re.search(r"File .*pipeline\.py:7, in check", tb), tb
    assert tb.index("in sales") < tb.index("in check") < tb.index("StepFailed: step")
    assert "Traceback (most recent call last)" in tb
    shown = text(nb, 1)
    assert "raise RuntimeError" not in shown                 # not a second time outside it
    assert "[barca] 1 ran, 1 failed, 0 cached or skipped | failed in" in shown


def test_live_progress_and_no_fork_of_the_kernel(project: Project) -> None:
    project.copy_pipeline("ppid.py")
    nb = notebook("%load_ext barca", "import os\nkernel = os.getpid()",
                  "r = %barca get item pipeline.py",
                  "sorted({v['ppid'] for v in r.values()}), kernel, len(r)")
    client = execute(nb, project.path)
    msgs = client.messages[2]
    # an ipywidgets bar, as tqdm.notebook draws one: opened, then updated as steps finish
    opened = {m["content"]["comm_id"]: m["content"]["data"]["state"].get("_model_name")
              for m in msgs if m["msg_type"] == "comm_open"}
    assert "FloatProgressModel" in opened.values(), opened
    texts = [m["content"]["data"]["state"]["value"] for m in msgs
             if m["msg_type"] == "comm_msg" and "value" in m["content"]["data"].get("state", {})
             and isinstance(m["content"]["data"]["state"]["value"], str)]
    facts = [t for t in texts if "steps [" in t]
    assert len(facts) >= 2, texts
    assert any(re.search(r"\d+/200 steps \[\d\d:\d\d&lt;(\d\d:\d\d|\?), [\d.]+ "
                         r"(steps/s|s/step)\] \| pipeline\.py:item\[key=k\d+\]", t)
               for t in facts), facts
    assert any(re.search(r">\d+%<", t) for t in texts), texts
    bars = [m["content"]["data"]["state"]["value"] for m in msgs if m["msg_type"] == "comm_msg"
            and isinstance(m["content"]["data"].get("state", {}).get("value"), (int, float))]
    assert bars and bars == sorted(bars), bars
    streams = "".join(o["text"] for o in outputs(nb, 2) if o["output_type"] == "stream")
    assert streams.startswith("[barca] 200 ran, 0 cached | done in "), streams
    ppids, kernel, n = ast.literal_eval(result(nb, 3)["text/plain"])
    assert n == 200
    assert kernel not in ppids  # workers come from a forkserver, never a fork of the kernel


def test_import_barca_in_a_kernel_is_silent(project: Project) -> None:
    nb = notebook("import threading\nbefore = threading.active_count()",
                  "import barca\nbarca.__version__",
                  "threading.active_count() - before")
    execute(nb, project.path)
    assert [o["output_type"] for o in outputs(nb, 1)] == ["execute_result"]
    assert result(nb, 2)["text/plain"] == "0"


def test_cell_magics(seed: Project) -> None:
    body = (seed.path / "pipeline.py").read_text()
    (seed.path / "pipeline.py").unlink()
    nb = notebook("%load_ext barca", "%%barca pipeline pipeline.py\n" + body,
                  "%barca get report pipeline.py", "%%barca sql\nselect partition, buy\n"
                  "from signal where buy order by partition",
                  "%%barca sql pipeline.py --limit 1\nselect * from prices order by ticker")
    execute(nb, seed.path)
    assert (seed.path / "pipeline.py").read_text().strip() == body.strip()
    assert "pipeline.py:report" in result(nb, 1)["text/plain"]
    df = result(nb, 3)["text/plain"]
    assert "ticker=GOOG" in df and "ticker=MSFT" in df and "ticker=AAPL" not in df
    one = result(nb, 4)["text/plain"]
    assert "ticker=AAPL" in one and "ticker=GOOG" not in one


@pytest.mark.parametrize("name", sorted(p.name for p in (REPO / "notebooks").glob("*.ipynb")))
def test_project_notebooks_are_saved_without_outputs(name: str) -> None:
    """That they run clean is test_pytest_plugin.py::test_the_projects_own_notebooks: they
    run through barca's pytest plugin, as a user's would."""
    import nbformat
    nb = nbformat.read(REPO / "notebooks" / name, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), \
        "notebooks are saved without outputs"
