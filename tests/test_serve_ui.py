"""The web UI of ``barca serve`` (issue #32, item 6) in Chromium, against a real server: the
graph (``barca graph``'s picture, coloured by state, live), the status table, a run started
with Get followed to its end with its logs, a dry run, the queue's pause and resume. Each page
is photographed narrow and wide, light and dark (``/tmp/ui-shots/``, or ``BARCA_SHOTS``)."""
from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import chrome
import pytest
from serving import PIPELINE, Served, environ

pytestmark = pytest.mark.slow

SHOTS = Path(os.environ.get("BARCA_SHOTS") or "/tmp/ui-shots")
NAMES = ("numbers", "total", "boom", "table", "nap", "slow")




@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("ui")
    (root / "pipeline.py").write_text(PIPELINE)
    served = Served(root)
    try:
        yield served
    finally:
        served.stop()


def test_the_shell_holds_no_node_names_and_the_graph_is_barca_graphs(server) -> None:
    with urllib.request.urlopen(server.url + "/ui/") as r:
        shell = r.read().decode()
    assert "app.js" in shell and "app.css" in shell
    assert "pipeline.py" not in shell  # node names come from the API
    assert not any(name in shell for name in NAMES if name != "table")  # (<table> is HTML)
    for asset in ("app.js", "app.css"):
        with urllib.request.urlopen(f"{server.url}/ui/{asset}") as r:
            assert r.status == 200
    with urllib.request.urlopen(server.url + "/graph.svg") as r:
        assert r.headers["Content-Type"].startswith("image/svg+xml")
        svg = r.read().decode()
    assert svg.startswith("<svg") and 'data-node="pipeline.py:total"' in svg
    # the same picture `barca graph` draws in that project
    local = subprocess.run([sys.executable, "-m", "barca", "graph"], cwd=server.root,
                           capture_output=True, text=True, env=environ(), check=True).stdout
    assert svg == local.strip()


@pytest.mark.skipif(bool(chrome.missing()), reason=chrome.missing() or "ready")
def test_get_from_the_ui_runs_and_shows_its_logs(server) -> None:
    from playwright.sync_api import expect, sync_playwright
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = chrome.launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(server.url + "/ui/")
            nodes = page.locator("#graph svg g.barca-node")
            expect(nodes).to_have_count(len(NAMES), timeout=30_000)
            for name in NAMES:
                expect(page.locator("#graph svg")).to_contain_text(name)
            assert page.locator('#graph g.barca-node[data-node="pipeline.py:total"]'
                                ).get_attribute("data-state") == "never_run"
            # pick total by clicking its box, then Get
            page.locator('#graph g.barca-node[data-node="pipeline.py:total"]').click()
            expect(page.locator("#target")).to_have_value("pipeline.py:total")
            page.click("#act-get")
            page.wait_for_url("**/ui/#run/*", timeout=30_000)
            expect(page.locator("#run h2 .chip")).to_have_text("success", timeout=60_000)
            logs = page.locator("#run pre.logs")
            expect(logs).to_contain_text("[numbers] making numbers <b>not bold</b>")
            expect(logs).to_contain_text("[total] adding 3 numbers")
            assert page.locator("#run pre.logs b").count() == 0  # text, never markup
            expect(page.locator("#run")).to_contain_text("Outcome")
            # the run is listed, triggered over the API
            expect(page.locator("#runs-table tbody tr").first).to_contain_text("api",
                                                                              timeout=10_000)
            # the graph follows: total is cached now
            page.goto(server.url + "/ui/#graph")
            expect(page.locator('#graph g.barca-node[data-node="pipeline.py:total"]')
                   ).to_have_attribute("data-state", "cached", timeout=30_000)
            # the status table: a row per node, its state
            page.click('.tabs a[data-page="status"]')
            rows = page.locator("#status-table tbody tr")
            expect(rows).to_have_count(len(NAMES), timeout=10_000)
            expect(page.locator('#status-table tr[data-node="pipeline.py:total"]')
                   ).to_contain_text("cached")
            # its shape, in the words of the CLI's table (#29 item 17)
            expect(page.locator('#status-table tr[data-node="pipeline.py:numbers"] td').nth(5)
                   ).to_have_text("list (3 items)")
            # a dry run: the plan, nothing queued
            page.select_option("#target", "pipeline.py:boom")
            page.click("#act-dry")
            expect(page.locator("#run")).to_contain_text("Dry run", timeout=30_000)
            expect(page.locator("#run")).to_contain_text("will run")
            # the plan's JSON says "run"; a person reads "will run", in its colour
            expect(page.locator("#run .chip.willrun").first).to_be_visible()
            page.screenshot(path=str(SHOTS / "ui-dry-run-light-1400.png"))
            # a failed step: the run says so, with its traceback in the logs
            page.click("#act-get")
            expect(page.locator("#run h2 .chip")).to_have_text("failed", timeout=60_000)
            expect(page.locator("#run pre.logs")).to_contain_text("ValueError: kaput")
            # the queue: pause, then resume
            page.click('.tabs a[data-page="queue"]')
            page.click("#queue-pause")
            expect(page.locator("#queue-state")).to_have_text("paused", timeout=10_000)
            assert server.call("GET", "/queue")[1]["paused"] is True
            page.click("#queue-resume")
            expect(page.locator("#queue-state")).to_have_text("active", timeout=10_000)
            assert server.call("GET", "/queue")[1]["paused"] is False
            # live: a run going on is drawn running, and said in the header, until it ends
            status, answer, _ = server.call("POST", "/runs", {"command": "get",
                                                           "targets": ["slow"]})
            assert status == 202
            page.click('.tabs a[data-page="graph"]')
            slow = page.locator('#graph g.barca-node[data-node="pipeline.py:slow"]')
            expect(slow).to_have_attribute("data-state", "running", timeout=30_000)
            expect(page.locator("#live")).to_contain_text("running: slow")
            page.screenshot(path=str(SHOTS / "ui-graph-running-light-1400.png"))
            server.call("DELETE", f"/runs/{answer['run_id']}")
            assert server.wait_run(answer["run_id"])["status"] == "cancelled"
            expect(slow).to_have_attribute("data-state", "never_run", timeout=30_000)
            expect(page.locator("#live")).to_have_text("idle")
            # a run waiting in a paused queue: listed with its place, and cancelled from there
            server.call("POST", "/queue/pause")
            status, waiting, _ = server.call("POST", "/runs", {"command": "get",
                                                            "targets": ["total"]})
            assert status == 202 and waiting["status"] == "pending"
            page.click('.tabs a[data-page="queue"]')
            row = page.locator("#queue-table tbody tr", has_text=waiting["run_id"])
            expect(row).to_contain_text("pending", timeout=10_000)
            expect(row.locator("td").nth(3)).to_have_text("1")
            assert errors == []
            page.close()
            _photograph(browser, server.url)
            row_cancel = server.call("DELETE", f"/runs/{waiting['run_id']}")
            assert row_cancel[0] == 200
            server.call("POST", "/queue/resume")
        finally:
            browser.close()


def _photograph(browser, url: str) -> None:
    """Every page, narrow and wide, light and dark: nothing wider than the window but the
    tables and the graph, which scroll inside their box."""
    for scheme in ("light", "dark"):
        for width in (400, 1400):
            ctx = browser.new_context(viewport={"width": width, "height": 900},
                                      color_scheme=scheme)
            page = ctx.new_page()
            for name in ("graph", "status", "runs", "queue"):
                page.goto(f"{url}/ui/#{name}")
                page.wait_for_load_state("networkidle")
                if name == "runs":
                    page.locator("#runs-table tbody tr", has_text="get boom").first.click()
                    page.locator("#run h3", has_text="Outcome").wait_for(timeout=30_000)
                else:
                    page.wait_for_timeout(800)
                where = f"{name}, {scheme}, {width}px"
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= width, where  # the page never scrolls sideways
                shot = SHOTS / f"ui-{name}-{scheme}-{width}.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 5000, where
            ctx.close()


@pytest.mark.skipif(bool(chrome.missing()), reason=chrome.missing() or "ready")
def test_a_server_with_a_token_asks_for_it_once(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    served = Served(tmp_path, env={"BARCA_SERVER_TOKEN": "ui-t0ken"})
    try:
        with sync_playwright() as pw:
            browser = chrome.launch(pw)
            try:
                page = browser.new_page(viewport={"width": 1000, "height": 800})
                page.goto(served.url + "/ui/")
                expect(page.locator("#token-dialog")).to_be_visible(timeout=30_000)
                assert page.locator("#graph svg").count() == 0  # nothing without it
                page.fill("#token", "ui-t0ken")
                page.click("#token-form button")
                expect(page.locator("#graph svg g.barca-node")).to_have_count(
                    len(NAMES), timeout=30_000)
                page.reload()  # kept for the tab: not asked again
                expect(page.locator("#graph svg g.barca-node")).to_have_count(
                    len(NAMES), timeout=30_000)
                assert not page.locator("#token-dialog").is_visible()
            finally:
                browser.close()
    finally:
        served.stop()
