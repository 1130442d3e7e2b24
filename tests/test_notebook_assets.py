"""Assets defined in notebook cells: nodes of the kernel's __main__, cached across re-runs
and kernel restarts, run in worker processes. Real kernels, run by nbclient."""
from __future__ import annotations

import ast
import re

import pytest
from conftest import Project
from nbtools import error, execute, notebook, result, text

pytestmark = pytest.mark.slow  # real kernels

HEADER = ("from pathlib import Path\n"
          "from barca import asset, collect, partitions, partitions_from, sensor")
SENSOR = '''@sensor()
def feed_version() -> str:
    return Path("feed_version.txt").read_text().strip()'''
SCALE = "SCALE = 100"
HELPER = '''def close_of(ticker):
    return float(len(ticker) * SCALE + ord(ticker[0]))'''
PRICES = '''@asset(inputs={"version": feed_version},
       partitions={"ticker": partitions(["AAPL", "MSFT", "GOOG"])})
def prices(ticker: str, version: str) -> dict:
    import os
    return {"ticker": ticker, "close": close_of(ticker), "feed": version, "pid": os.getpid()}'''
SIGNAL = '''@asset(partitions={"ticker": partitions_from(prices)})
def signal(ticker: str, prices: dict) -> dict:
    return {"ticker": ticker, "buy": prices["close"] > 470}'''
REPORT = '''@asset(inputs={"signals": collect(signal)})
def report(signals: list[dict]) -> dict:
    return {"tickers": len(signals), "buys": sorted(s["ticker"] for s in signals if s["buy"])}'''


def cells(**edits: str) -> list[str]:
    parts = {"SCALE": SCALE, "HELPER": HELPER, "SIGNAL": SIGNAL}
    parts.update(edits)
    return ["%load_ext barca", HEADER, SENSOR, parts["SCALE"], parts["HELPER"], PRICES,
            parts["SIGNAL"], REPORT]


def _steps(nb, i: int) -> str:
    """``ran/total`` from the cell's end line, ``[barca] 1 ran, 7 cached | done in 0.0s``."""
    m = re.search(r"\[barca\] (\d+) ran, (\d+) cached \| done", text(nb, i))
    assert m, (text(nb, i), error(nb, i))
    return f"{m.group(1)}/{int(m.group(1)) + int(m.group(2))}"


def _run(project: Project, *extra: str, **edits: str):
    nb = notebook(*cells(**edits), *extra)
    execute(nb, project.path)
    return nb


def test_notebook_pipeline_caches_across_reruns_and_restarts(project: Project,
                                                            monkeypatch) -> None:
    # one notebook across kernels: its path told as Jupyter tells it (a kernel that is not
    # told names the notebook after itself: tests/test_notebook_kernels.py)
    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "analysis.ipynb"))
    project.write("feed_version.txt", "v1\n")
    n = len(cells())
    nb = _run(project, "r = %barca get report\nr", *cells()[1:], "%barca get report",
              "p = %barca get prices\nimport os\n"
              "sorted({v['pid'] for v in p.values()}), os.getpid()",
              "%barca status")
    assert _steps(nb, n) == "8/8"
    assert ast.literal_eval(result(nb, n)["text/plain"]) == {"tickers": 3, "buys": ["GOOG", "MSFT"]}
    assert _steps(nb, 2 * n) == "1/8"          # all cells run again: only the sensor
    pids, kernel = ast.literal_eval(result(nb, 2 * n + 1)["text/plain"])
    assert kernel not in pids                   # keys ran in worker processes
    status = result(nb, 2 * n + 2)["text/plain"]
    for name in ("feed_version", "prices", "signal", "report"):
        assert re.search(rf"^{name}\s", status, re.M), status
    assert "3 cached" in status
    arts = {p.name for p in (project.path / ".barca" / "artifacts").iterdir()}
    assert "analysis--prices_ticker_AAPL" in arts and "analysis--report" in arts

    restarted = _run(project, "%barca get report --agent")    # a fresh kernel
    assert _steps(restarted, n) == "1/8"

    edited = _run(project, "%barca get report",
                  SIGNAL="@asset(partitions={\"ticker\": partitions_from(prices)})\n"
                         "def signal(ticker: str, prices: dict) -> dict:\n"
                         "    return {\"ticker\": ticker, \"buy\": prices[\"close\"] > 400}")
    assert _steps(edited, n) == "5/8"          # the sensor, signal's 3 keys and report

    helper = _run(project, "%barca get report",
                  SIGNAL=edited.cells[6].source,
                  HELPER=HELPER.replace("ord(ticker[0])", "ord(ticker[-1])"))
    assert _steps(helper, n) == "8/8"          # prices and everything below it

    const = _run(project, "%barca get report", SIGNAL=edited.cells[6].source,
                 HELPER=HELPER.replace("ord(ticker[0])", "ord(ticker[-1])"), SCALE="SCALE = 101")
    assert _steps(const, n) == "8/8"

    dry = _run(project, "%barca get report --dry-run", SIGNAL=edited.cells[6].source,
               HELPER=HELPER.replace("ord(ticker[0])", "ord(ticker[-1])"), SCALE="SCALE = 102")
    assert "changed: helper __notebook__:SCALE" in result(dry, n)["text/plain"]


def test_redefined_and_deleted_functions(project: Project) -> None:
    nb = notebook("%load_ext barca", "from barca import asset",
                  "@asset()\ndef a() -> int:\n    return 1",
                  "@asset()\ndef extra() -> int:\n    return 2",
                  "@asset()\ndef a() -> int:\n    return 3",
                  "del extra",
                  "%barca get a",
                  "st = %barca status\n[r.name for r in st.rows]")
    execute(nb, project.path)
    assert result(nb, 6)["text/plain"] == "3"
    assert ast.literal_eval(result(nb, 7)["text/plain"]) == ["a"]


def test_unshippable_function_is_a_clear_error(project: Project) -> None:
    nb = notebook("%load_ext barca",
                  "import threading\nfrom barca import asset\nLOCK = threading.Lock()",
                  "@asset()\ndef locked() -> int:\n    with LOCK:\n        return 1",
                  "%barca get locked")
    execute(nb, project.path)
    err = error(nb, 3)
    assert err is not None and err["ename"] == "UsageError", text(nb, 3)
    assert "cannot send notebook function 'locked' to a worker process" in err["evalue"]
    assert not list((project.path / ".barca" / "artifacts").glob("*--locked"))


def test_a_renamed_notebook_keeps_its_results(project: Project, monkeypatch) -> None:
    """Untitled.ipynb renamed to analysis.ipynb: the node ids follow the new name, the results
    do not have to be computed again (the cache is keyed by definition and inputs)."""
    project.write("feed_version.txt", "v1\n")
    n = len(cells())
    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "Untitled.ipynb"))
    first = _run(project, "%barca get report", "st = %barca status\n[r.id for r in st.rows]")
    assert _steps(first, n) == "8/8"
    assert "'Untitled:report'" in result(first, n + 1)["text/plain"]

    monkeypatch.setenv("JPY_SESSION_NAME", str(project.path / "analysis.ipynb"))
    renamed = _run(project, "st = %barca status\n[(r.id, r.state) for r in st.rows]",
                   "%barca get report")
    states = dict(ast.literal_eval(result(renamed, n)["text/plain"]))
    assert states == {"analysis:feed_version": "always_runs", "analysis:prices": "cached",
                      "analysis:signal": "cached", "analysis:report": "cached"}, states
    assert _steps(renamed, n + 1) == "1/8"      # only the sensor, as after a restart

    edited = _run(project, "%barca get report", SCALE="SCALE = 7")
    assert _steps(edited, n) == "8/8"           # a changed definition is still a change


SCOPED = '''@asset()
def scoped() -> list:
    out = [row * 2 for row in range(2)]
    try:
        raise ValueError("boom")
    except ValueError as e:
        out.append(str(e))
    match {"k": 5}:
        case {"k": v, **rest}:
            out.append(v + len(rest))
    return out + [len("ab")]'''


STATE = "st = %barca status\n{r.name: r.state for r in st.rows}['scoped']"


def test_notebook_hash_follows_python_scopes(project: Project) -> None:
    """A notebook asset's definition hash uses the same scope analysis as a file's: names bound
    by a comprehension, ``except ... as e`` or a ``match`` pattern are the function's own (the
    notebook's globals of the same name do not count), and a notebook function shadowing a
    builtin the asset calls does count."""
    nb = notebook("%load_ext barca",
                  "from barca import asset\ne, v, row, rest = 1, 1, 1, 1\n"
                  "def len(x):\n    return 10",
                  SCOPED, "%barca get scoped",
                  "e, v, row, rest = 2, 2, 2, 2", STATE,
                  "def len(x):\n    return 20", STATE, "%barca get scoped")
    execute(nb, project.path)
    for i in range(len(nb.cells)):
        assert error(nb, i) is None, (i, error(nb, i))
    assert ast.literal_eval(result(nb, 3)["text/plain"]) == [0, 2, "boom", 15, 10]
    assert result(nb, 5)["text/plain"] == "'cached'"   # only same-named globals changed
    assert result(nb, 7)["text/plain"] == "'stale'"    # the notebook's len changed
    assert ast.literal_eval(result(nb, 8)["text/plain"]) == [0, 2, "boom", 25, 20]
