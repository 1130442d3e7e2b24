"""The DAG picture and the status widget: SVG parsed, the widget driven in a real kernel, and in
JupyterLab in a real (headless, system) Chromium."""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import chrome
import pytest
from conftest import Project
from nbtools import error, execute, notebook, result

from barca.core.render import COLOURS

pytestmark = pytest.mark.slow  # real kernels, JupyterLab and a browser

SVG = "{http://www.w3.org/2000/svg}"
SEED_NODES = ["pipeline.py:feed_version", "pipeline.py:prices", "pipeline.py:signal",
              "pipeline.py:report"]
SEED_EDGES = {("pipeline.py:feed_version", "pipeline.py:prices"),
              ("pipeline.py:prices", "pipeline.py:signal"),
              ("pipeline.py:signal", "pipeline.py:report")}


def parse_svg(text: str) -> tuple[dict[str, dict[str, str]], set[tuple[str, str]]]:
    """node id -> {state, fill, label}, and the (from, to) edges, read from the SVG."""
    root = ET.fromstring(text)
    assert root.tag == SVG + "svg"
    nodes = {}
    for g in root.iter(SVG + "g"):
        if "data-node" in g.attrib:
            rect = g.find(SVG + "rect")
            texts = [t.text for t in g.findall(SVG + "text")]
            nodes[g.get("data-node")] = {"state": g.get("data-state"), "fill": rect.get("fill"),
                                         "name": texts[0], "label": texts[1]}
    edges = {(p.get("data-from"), p.get("data-to")) for p in root.iter(SVG + "path")
             if p.get("data-from")}
    return nodes, edges


# ---------------------------------------------------------------------------- the picture

def test_dag_svg_of_the_seed(seed: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    before = seed.barca("graph", "pipeline.py")
    assert before.code == 0, before.err
    nodes, edges = parse_svg(before.out)
    assert list(nodes) == SEED_NODES  # one group per node
    assert edges == SEED_EDGES
    assert {n: v["state"] for n, v in nodes.items()} == {
        # the sensor has no recorded value yet: all that reads it is unknown (#15)
        "pipeline.py:feed_version": "always_runs", "pipeline.py:prices": "unknown",
        "pipeline.py:signal": "unknown", "pipeline.py:report": "unknown"}
    for v in nodes.values():
        assert v["fill"] == COLOURS[v["state"]]
    assert nodes["pipeline.py:prices"]["label"] == "unknown 0/3 keys"

    # a partial run: prices shows k/n keys in the partial colour
    assert seed.barca("get", "prices", "pipeline.py", "--partition", "ticker=AAPL").code == 0
    nodes, _ = parse_svg(seed.barca("graph", "pipeline.py", "--pretty").out)
    assert nodes["pipeline.py:prices"]["state"] == "partial"
    assert nodes["pipeline.py:prices"]["label"] == "partial 1/3 keys"
    assert nodes["pipeline.py:prices"]["fill"] == COLOURS["partial"]

    assert seed.barca("get", "report", "pipeline.py").code == 0
    nodes, edges = parse_svg(seed.barca("graph", "pipeline.py").out)
    assert edges == SEED_EDGES
    assert {n: v["state"] for n, v in nodes.items()} == {
        "pipeline.py:feed_version": "always_runs", "pipeline.py:prices": "cached",
        "pipeline.py:signal": "cached", "pipeline.py:report": "cached"}
    for v in nodes.values():
        assert v["fill"] == COLOURS[v["state"]]
    assert nodes["pipeline.py:report"]["fill"] == COLOURS["cached"] != COLOURS["never_run"]

    # --json is the data; levels run left to right along the edges
    data = seed.barca("graph", "pipeline.py", "--json").json()
    assert [n["level"] for n in data["nodes"]] == [0, 1, 2, 3]
    assert {(e["from"], e["to"]) for e in data["edges"]} == SEED_EDGES

    # the display object: SVG and text in its mime bundle, built from the same status
    monkeypatch.chdir(seed.path)
    import barca
    import barca.api  # noqa: F401  (every engine module loaded: barca.graph is still the API)
    barca.status("pipeline.py")
    pic = barca.graph("pipeline.py")
    bundle = pic._repr_mimebundle_()
    assert set(bundle) == {"image/svg+xml", "text/plain"}
    assert parse_svg(bundle["image/svg+xml"])[0]["pipeline.py:report"]["state"] == "cached"
    assert "report (cached)  <- signal" in bundle["text/plain"]


def test_dag_picture_live_states_and_layout() -> None:
    from barca.present.results import StatusReport, StatusRow
    from barca.queries.picture import DagPicture

    def row(i: str, state: str, deps: tuple[str, ...] = ()) -> StatusRow:
        return StatusRow(i, "asset", state, "", "", "-", "-", deps, deps)

    report = StatusReport((row("a.py:x", "cached"), row("b.py:x", "stale"),
                           row("a.py:y", "unknown", ("a.py:x", "b.py:x")),
                           row("a.py:z", "cached", ("a.py:x",))))
    pic = DagPicture.from_status(report, states={"a.py:y": "running", "a.py:z": "failed"})
    nodes, edges = parse_svg(pic.svg())
    assert nodes["a.py:y"]["fill"] == COLOURS["running"]
    assert nodes["a.py:z"]["fill"] == COLOURS["failed"]
    assert nodes["a.py:x"]["name"] == "a.py:x"  # names that clash show their ids
    assert edges == {("a.py:x", "a.py:y"), ("b.py:x", "a.py:y"), ("a.py:x", "a.py:z")}
    levels = {n["id"]: n["level"] for n in pic.to_json()["nodes"]}
    assert levels == {"a.py:x": 0, "b.py:x": 0, "a.py:y": 1, "a.py:z": 1}
    assert ET.fromstring(DagPicture.from_status(StatusReport(())).svg()) is not None


# ---------------------------------------------------------------------------- in a kernel

WAIT = """
import time
def wait_for(cond, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return False
"""

PARSE = """
import xml.etree.ElementTree as ET, re
def svg_states(w):
    root = ET.fromstring(w.picture.value)
    ns = '{http://www.w3.org/2000/svg}'
    return {g.get('data-node'): (g.get('data-state'), g.find(ns + 'rect').get('fill'))
            for g in root.iter(ns + 'g') if g.get('data-node')}
def table_states(w):
    row = (r'<tr><td[^>]*>(\\w+)</td><td[^>]*>\\w+</td><td[^>]*>'
           r'<span class="barca-badge" data-state="([\\w-]+)"')
    return dict(re.findall(row, w.table.value))
"""


def _widget_output(nb, i: int) -> dict:
    """The widget's output: displayed under a display id (so its saved fallback follows it)."""
    shown = [o["data"] for o in nb.cells[i].get("outputs", [])
             if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
    assert len(shown) == 1, nb.cells[i].get("outputs")
    return shown[0]


def test_widget_in_a_kernel(seed: Project) -> None:
    cli = [sys.executable, "-m", "barca", "get", "signal", "pipeline.py"]
    nb = notebook(
        WAIT + PARSE + "import barca, threading, subprocess, sys, json\n"
        "w = barca.StatusWidget('pipeline.py')\nw",
        # a run from a terminal: picked up by the polling, with the kernel busy in this cell
        f"subprocess.run({cli!r}, check=True, capture_output=True)\n"
        "t0 = time.monotonic()\n"
        "ok = wait_for(lambda: svg_states(w)['pipeline.py:signal'][0] == 'cached', 10)\n"
        "json.dumps([ok, time.monotonic() - t0, table_states(w), svg_states(w)])",
        # Get on report: the click returns at once, the run happens on a thread
        "w.select('pipeline.py:report')\nt0 = time.monotonic()\nw.get_button.click()\n"
        "json.dumps([w.busy, time.monotonic() - t0, w.get_button.disabled])",
        "done = w.wait(120)\n"
        "json.dumps([done, w.last_error and str(w.last_error), table_states(w), svg_states(w),\n"
        "            w.progress.value, w.progress.max, w.progress.bar_style, w.message.value,\n"
        "            w.progress_label.value, w.last_value])",
        # Refresh on prices re-runs its keys
        "w.select('prices')\nw.refresh_button.click()\nw.wait(120)\n"
        "json.dumps([w.last_error and str(w.last_error), w.last_result.to_json()['steps'],\n"
        "            svg_states(w)['pipeline.py:prices']])",
        # Dry run shows the plan in the message area and runs nothing
        "w.select('report')\nw.dry_run_button.click()\nw.wait(60)\n"
        "json.dumps([type(w.last_result).__name__, 'Dry run' in w.message.value])",
        # close() stops the polling thread
        "p = w._poller\nalive = p.is_alive()\nw.close()\np.join(5)\n"
        "json.dumps([alive, p.is_alive(), [t.name for t in threading.enumerate() "
        "if t.name == 'barca-status-poll']])",
        "%load_ext barca",
        "%barca status --widget pipeline.py",
        "%barca graph pipeline.py",
    )
    execute(nb, seed.path, timeout=180)
    for i in range(len(nb.cells)):
        assert error(nb, i) is None, (i, error(nb, i))

    def out(i: int):
        return json.loads(ast.literal_eval(result(nb, i)["text/plain"]))

    shown = _widget_output(nb, 0)
    assert "application/vnd.jupyter.widget-view+json" in shown
    # the saved fallback is the widget's last state in words, never its repr
    assert shown["text/plain"].startswith("barca status: "), shown["text/plain"]
    assert "<table" in shown["text/html"]

    ok, seconds, table, svg = out(1)
    assert ok, (table, svg)
    assert seconds < 5
    assert table["signal"] == "cached" and table["report"] == "never-run"
    assert svg["pipeline.py:signal"] == ["cached", COLOURS["cached"]]
    assert svg["pipeline.py:report"] == ["never_run", COLOURS["never_run"]]

    busy, seconds, disabled = out(2)
    assert busy and disabled and seconds < 1.0  # never blocks the kernel

    done, err, table, svg, value, maximum, style, message, label, got = out(3)
    assert done and err is None
    # the value, and how to have it in Python; a labelled bar
    assert got == {"tickers": 3, "buys": ["GOOG", "MSFT"]}
    assert "&#x27;tickers&#x27;: 3" in message or "'tickers': 3" in message
    assert "barca.get(&#x27;report&#x27;, &#x27;pipeline.py&#x27;)" in message
    assert "%barca get report pipeline.py" in message
    assert re.search(r"Get report: \d+/\d+ steps \(\d+%\)", label), label
    assert table == {"feed_version": "always-runs", "prices": "cached", "signal": "cached",
                     "report": "cached"}
    assert svg["pipeline.py:report"] == ["cached", COLOURS["cached"]]
    assert value == maximum and maximum >= 2 and style == "success"
    assert "got &#x27;report&#x27;" in message or "got 'report'" in message

    err, steps, prices = out(4)
    assert err is None
    by_id = {s["id"]: s for s in steps}
    assert by_id["pipeline.py:prices"]["status"] == "ran"
    assert by_id["pipeline.py:prices"]["partitions"]["will_run_keys"] == [
        "ticker=AAPL", "ticker=GOOG", "ticker=MSFT"]
    assert prices == ["cached", COLOURS["cached"]]

    assert out(5) == ["Plan", True]
    assert out(6) == [True, False, []]

    assert "application/vnd.jupyter.widget-view+json" in _widget_output(nb, 8)
    svg_text = result(nb, 9)["image/svg+xml"]
    assert parse_svg(svg_text)[0]["pipeline.py:report"]["state"] == "cached"


def test_widget_failed_node_and_clickable_picture(project: Project,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed node reads "failed" in the table as in the DAG; each DAG node selects itself
    in the menu when clicked (an onclick on the standard Dropdown's <select>); the WHY cell
    is cut to the notebook's width with its text on hover."""
    project.write("pipeline.py", """
        from barca import asset


        @asset()
        def base() -> int:
            return 1


        @asset(inputs={"b": base})
        def broken(b: int) -> int:
            raise RuntimeError("not today")
    """)
    monkeypatch.chdir(project.path)
    from barca.faces.jupyter.widget import StatusWidget
    w = StatusWidget("broken", "pipeline.py", poll_interval=60)
    try:
        w._run("get", "pipeline.py:broken")
        assert "not today" in str(w.last_error)
        assert w.progress.bar_style == "danger" and "failed" in w.progress_label.value
        table = dict(re.findall(r'<tr><td[^>]*>(\w+)</td><td[^>]*>\w+</td><td[^>]*>'
                                r'<span class="barca-badge" data-state="([\w-]+)"',
                                w.table.value))
        svg = {n: v["state"] for n, v in parse_svg(w.picture.value)[0].items()}
        assert table == {"base": "cached", "broken": "failed"}, table
        assert svg == {"pipeline.py:base": "cached", "pipeline.py:broken": "failed"}
        assert 'td.barca-why{max-width:22em;overflow:hidden;text-overflow:ellipsis' in \
            w.table.value and 'class="barca-why" title="' in w.table.value
        clicks = dict(re.findall(r'data-node="([^"]+)"(?: data-selected="true")? onclick="'
                                 r'[^"]*selectedIndex=(\d+)', w.picture.value))
        ids = [v for _, v in w.selector.options]
        assert {n: ids[int(i)] for n, i in clicks.items()} == {n: n for n in ids}
        assert 'data-node="pipeline.py:broken" data-selected="true"' in w.picture.value
        w.select("base")
        assert 'data-node="pipeline.py:base" data-selected="true"' in w.picture.value
    finally:
        w.close()


def test_widget_polling_ends_with_the_widget(seed: Project, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """Without a kernel: the poller holds the widget weakly, and ends when it is collected."""
    import gc
    import weakref

    monkeypatch.chdir(seed.path)
    from barca.faces.jupyter.widget import StatusWidget
    w = StatusWidget("report", "pipeline.py", poll_interval=0.05)
    assert w.selector.value == "pipeline.py:report"
    poller, ref = w._poller, weakref.ref(w)
    assert poller.is_alive()
    from ipywidgets.widgets.widget import _instances
    for child in [w, *w.children, *w.children[2].children]:  # as if nothing showed it any more
        _instances.pop(child.model_id, None)
        child.comm.on_msg(None)  # the comm stays registered; it no longer points at the widget
    del w, child
    gc.collect()
    assert ref() is None
    poller.join(5)
    assert not poller.is_alive()


def test_widget_for_a_named_environment(seed: Project, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    """`%barca status --widget --env staging`: the widget reads and watches that environment's
    store, not the default one; its Get runs there too."""
    r = seed.barca("get", "report", "pipeline.py", "--env", "staging", "--json")
    assert r.code == 0, r.err
    monkeypatch.chdir(seed.path)
    monkeypatch.delenv("BARCA_ENV", raising=False)
    from barca.faces.jupyter.widget import StatusWidget
    staging = StatusWidget("pipeline.py", env="staging", poll_interval=60)
    default = StatusWidget("pipeline.py", poll_interval=60)
    try:
        # each watches its own store (the engine's stamp of it): a run in staging changes
        # what the staging widget sees, and not what the default one does
        assert staging._stamp().store == ".barca/envs/staging"
        assert default._stamp().store == ".barca"
        seen = (staging._stamp(), default._stamp())
        r = seed.barca("get", "report", "pipeline.py", "--env", "staging", "--refresh-all")
        assert r.code == 0, r.err
        assert staging._stamp() != seen[0] and default._stamp() == seen[1]
        states = {row.name: row.state for row in staging.report.rows}
        assert states["report"] == "cached" and states["prices"] == "cached"
        # nothing ran in the default store: its sensor has no value, so report is unknown
        assert {row.name: row.state for row in default.report.rows}["report"] == "unknown"
        default._run("get", "pipeline.py:report")  # the button's work, in this thread
        assert default.last_error is None, default.last_error
        assert (seed.path / ".barca/metadata.db").is_file()
        staging.refresh_view()
        assert {row.name: row.state for row in staging.report.rows}["report"] == "cached"
        # the magic's line opens it the same way, and it keeps those settings: a later
        # BARCA_ENV in the kernel does not move it to another store
        from barca.faces.jupyter.magics import run_magic
        magic = run_magic("status pipeline.py --widget --env staging")
        try:
            monkeypatch.setenv("BARCA_ENV", "elsewhere")
            magic.refresh_view()
            assert magic._stamp().store == ".barca/envs/staging"  # what it watches
            assert {row.name: row.state for row in magic.report.rows}["report"] == "cached"
            assert not (seed.path / ".barca/envs/elsewhere").exists()
        finally:
            magic.close()
    finally:
        staging.close()
        default.close()


# ---------------------------------------------------------------------------- in a browser

def _browser_missing() -> str:
    if chrome.missing():
        return chrome.missing()
    if shutil.which("jupyter-lab") is None and not _has("jupyterlab"):
        return "jupyterlab is not installed (pip install -e '.[test]')"
    return ""


def _has(module: str) -> bool:
    import importlib.util
    return importlib.util.find_spec(module) is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


TOUR = ["%load_ext barca", "%barca status pipeline.py", "%barca get report pipeline.py --dry-run",
        "%barca get item slow.py"]
SLOW = """import time
from barca import asset, partitions


@asset(partitions={"key": partitions([f"k{i:03d}" for i in range(300)])})
def item(key: str) -> int:
    time.sleep(0.05)
    return len(key)
"""
SHOTS = Path("/work/briefs/shots20")  # a copy for people to look at, when that folder exists


def _keep(shot: Path) -> None:
    if SHOTS.is_dir():
        shutil.copy(shot, SHOTS / shot.name)


@pytest.fixture
def lab(seed: Project, tmp_path_factory: pytest.TempPathFactory):
    """JupyterLab on 127.0.0.1 serving the seed project; yields (url of the notebook)."""
    home = tmp_path_factory.mktemp("lab")
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import barca\nw = barca.StatusWidget('pipeline.py')\nw")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, seed.path / "widget.ipynb")
    tour = nbformat.v4.new_notebook()
    tour.cells = [nbformat.v4.new_code_cell(c) for c in TOUR]
    tour.metadata["kernelspec"] = nb.metadata["kernelspec"]
    nbformat.write(tour, seed.path / "tour.ipynb")
    (seed.path / "slow.py").write_text(SLOW)
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(home / "config"),
               JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTERLAB_WORKSPACES_DIR=str(
                   home / "workspaces"), IPYTHONDIR=str(home / "ipython"))
    env.pop("BARCA_OUTPUT", None)
    labconfig = home / "config" / "labconfig"  # no "Jupyter news?" toast over the page
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(json.dumps(
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}}))
    log = open(home / "lab.log", "w")  # noqa: SIM115 - held open for the server's lifetime
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1",
         f"--port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
         f"--ServerApp.root_dir={seed.path}",
         "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         f"--LabApp.workspaces_dir={home / 'workspaces'}", "--LabApp.news_url=None",
         "--LabApp.extension_manager=readonly",
         *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else [])],
        cwd=seed.path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > end:
                    raise AssertionError("JupyterLab did not start:\n"
                                         + (home / "lab.log").read_text()[-3000:]) from None
                time.sleep(0.25)
        yield f"{base}/lab/tree/widget.ipynb?token={token}", home
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


@pytest.mark.timeout(150)
@pytest.mark.skipif(bool(_browser_missing()), reason=_browser_missing() or "browser available")
def test_widget_in_jupyterlab_in_chromium(lab, seed: Project, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright
    url, home = lab
    report = 'svg.barca-dag g[data-node="pipeline.py:report"]'
    with sync_playwright() as pw:
        browser = chrome.launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(60_000)
            page.goto(url)
            editor = page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea-editor").first
            editor.wait_for()
            # the kernel is connected and idle (the status bar says so), then run the cell
            page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for()
            editor.click()
            page.keyboard.press("Shift+Enter")
            widget = page.locator(".barca-status-widget")
            widget.wait_for()
            # the table and the DAG render
            page.wait_for_selector(".barca-status-widget table.barca-table")
            rows = widget.locator("table.barca-table tbody tr")
            assert rows.count() == 4
            node = page.locator(report)
            node.wait_for()
            assert page.locator("svg.barca-dag g[data-node]").count() == 4
            assert page.locator("svg.barca-dag path[data-from]").count() == 3
            assert node.get_attribute("data-state") == "unknown"  # no sensor value yet
            before = node.locator("rect").evaluate("r => getComputedStyle(r).fill")
            # select report and click Get: the node's colour changes
            widget.locator("select").select_option(label="report")
            widget.locator("button", has_text="Get").click()
            page.wait_for_selector(report + '[data-state="cached"]', timeout=60_000)
            after = page.locator(report + " rect").evaluate("r => getComputedStyle(r).fill")
            assert before != after
            assert after == _rgb(COLOURS["cached"]) and before == _rgb(COLOURS["unknown"])
            page.wait_for_selector(".barca-status-widget table.barca-table "
                                   "span.barca-badge[data-state='cached']")
            # after Get: the value, how to have it in Python, and the bar's label
            value = widget.locator("pre.barca-value")
            value.wait_for()
            assert "'tickers': 3" in value.inner_text()
            assert "barca.get('report', 'pipeline.py')" in widget.inner_text()
            assert re.search(r"Get report: \d+/\d+ steps \(100%\)",
                             widget.locator(".barca-progress-label").inner_text())
            # the table fits: no wider than the widget
            table_w = widget.locator("table.barca-table").first.evaluate("t => t.offsetWidth")
            assert table_w <= widget.evaluate("w => w.clientWidth") + 1
            shot = tmp_path / "widget.png"
            widget.screenshot(path=str(shot))
            _keep(shot)
            # a click on a node of the DAG selects it in the menu
            page.locator('svg.barca-dag g[data-node="pipeline.py:prices"]').click()
            page.wait_for_selector('svg.barca-dag g[data-node="pipeline.py:prices"]'
                                   '[data-selected]')
            chosen = widget.locator("select").evaluate("s => s.options[s.selectedIndex].text")
            assert chosen == "prices"
            shot2 = tmp_path / "widget-selected.png"
            widget.screenshot(path=str(shot2))
            _keep(shot2)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            print(f"page screenshot: {tmp_path / 'failure.png'}; server log: {home / 'lab.log'}")
            raise
        finally:
            browser.close()
    _assert_not_blank(shot)


def _rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return "rgb({}, {}, {})".format(*(int(h[i:i + 2], 16) for i in (0, 2, 4)))


def _assert_not_blank(png: Path) -> None:
    from PIL import Image
    assert png.stat().st_size > 2000
    with Image.open(png) as im:
        rgb = im.convert("RGB")
        w, h = rgb.size
        assert w > 300 and h > 100, rgb.size
        colours = rgb.getcolors(maxcolors=w * h)
        assert colours is not None and len(colours) > 20  # text, table, boxes, edges
        cached = tuple(int(COLOURS["cached"][i:i + 2], 16) for i in (1, 3, 5))
        assert any(c == cached for _, c in colours), "no node drawn in the cached colour"


def _run_cell(page, index: int) -> None:
    cell = page.locator(".jp-NotebookPanel .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


@pytest.mark.slow
@pytest.mark.timeout(240)
@pytest.mark.skipif(bool(_browser_missing()), reason=_browser_missing() or "browser available")
def test_notebook_tables_and_progress_in_jupyterlab(lab, seed: Project, tmp_path: Path) -> None:
    """In JupyterLab: status and a dry run are HTML tables (not a JSON tree) whose cells are
    left-aligned despite JupyterLab's own table CSS; a 300-key run shows a percentage while it
    runs, and an interrupted run leaves a red bar in place."""
    from playwright.sync_api import sync_playwright
    url, home = lab
    url = url.replace("widget.ipynb", "tour.ipynb")
    with sync_playwright() as pw:
        browser = chrome.launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(url)
            page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea-editor").first.wait_for()
            page.locator(".jp-StatusBar-Widget", has_text="| Idle").first.wait_for()
            cells = page.locator(".jp-NotebookPanel .jp-Cell")
            for i in range(3):
                _run_cell(page, i)
            for i in (1, 2):
                out = cells.nth(i).locator(".jp-OutputArea-output")
                out.locator("table.barca-table").wait_for()
                assert out.locator(".jp-RenderedJSON").count() == 0
                assert out.locator("table.barca-table").count() == 1
                aligns = out.locator("table.barca-table td, table.barca-table th").evaluate_all(
                    "cells => cells.map(c => getComputedStyle(c).textAlign)")
                assert aligns and set(aligns) == {"left"}, aligns
                if i == 1:  # status shows names, the dry run too where they are unambiguous
                    assert out.locator("td", has_text="pipeline.py:").count() == 0
                shot = tmp_path / ("status.png" if i == 1 else "dry-run.png")
                cells.nth(i).screenshot(path=str(shot))
                _keep(shot)
            first = cells.nth(2).locator("td.barca-why").first
            assert first.evaluate("c => getComputedStyle(c).textAlign") == "left"

            # a 300-key run: the bar shows a percentage while it runs
            _run_cell(page, 3)
            bar = cells.nth(3).locator(".barca-progress")
            bar.wait_for(timeout=90_000)
            seen = ""
            end = time.monotonic() + 90
            while time.monotonic() < end:
                seen = bar.inner_text()
                m = re.search(r"(\d+)%", seen)
                if m and 5 <= int(m.group(1)) <= 90 and "/300 steps" in seen:
                    break
                time.sleep(0.2)
            assert re.search(r"\d+%", seen) and re.search(
                r"\d+/300 steps \[\d\d:\d\d<(\d\d:\d\d|\?), [\d.]+ (steps/s|s/step)\]",
                seen), seen
            assert "slow.py:item[key=" in seen
            shot = tmp_path / "progress.png"
            cells.nth(3).screenshot(path=str(shot))
            _keep(shot)

            # interrupt: the bar turns red and stays where it stopped
            page.keyboard.press("Escape")
            page.keyboard.press("i")
            page.keyboard.press("i")
            red = cells.nth(3).locator(".barca-progress .barca-bar-failed")
            red.wait_for(timeout=60_000)
            colour = red.evaluate("b => getComputedStyle(b).backgroundColor")
            r, g, b = (int(x) for x in re.findall(r"\d+", colour)[:3])
            assert r > 150 and g < 120 and b < 120, colour
            cells.nth(3).locator(".jp-OutputArea-output[data-mime-type="
                                 "'application/vnd.jupyter.stderr']").first.wait_for()
            stopped = bar.inner_text()
            assert "interrupted" in stopped and "/300 steps" in stopped, stopped
            assert "300/300" not in stopped
            shot = tmp_path / "interrupted.png"
            cells.nth(3).screenshot(path=str(shot))
            _keep(shot)

            # the dark theme: the same tables read, white on every badge at WCAG AA
            page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
            page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
            page.locator(".lm-Menu-itemLabel").get_by_text("JupyterLab Dark",
                                                           exact=True).click()
            page.wait_for_function("document.body.dataset.jpThemeLight === 'false'")
            time.sleep(1)  # the theme's stylesheet applies
            status = cells.nth(1).locator("table.barca-table")
            text, back = status.locator("td").first.evaluate(
                "c => [getComputedStyle(c).color, getComputedStyle(document.querySelector("
                "'.jp-Notebook')).backgroundColor]")
            assert _contrast(text, back) >= 4.5, (text, back)
            for badge in status.locator(".barca-badge").all():
                fg, bg = badge.evaluate("b => [getComputedStyle(b).color, "
                                        "getComputedStyle(b).backgroundColor]")
                assert _contrast(fg, bg) >= 4.5, (fg, bg)
            shot = tmp_path / "status-dark.png"
            cells.nth(1).screenshot(path=str(shot))
            _keep(shot)
        except Exception:
            page.screenshot(path=str(tmp_path / "failure.png"))
            _keep(tmp_path / "failure.png")
            print(f"page screenshot: {tmp_path / 'failure.png'}; server log: {home / 'lab.log'}")
            raise
        finally:
            browser.close()


def _contrast(a: str, b: str) -> float:
    """WCAG contrast of two CSS ``rgb(...)`` colours."""
    def lum(css: str) -> float:
        c = [int(x) / 255 for x in re.findall(r"\d+", css)[:3]]
        c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
