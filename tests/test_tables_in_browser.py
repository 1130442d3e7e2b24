"""Tables that hold their shape at any width (issue #30): status, dry run and history as a
notebook shows them (their text/html), in Chromium, in a narrow and a wide output, light and
dark. No cell breaks inside a word; names, times and shapes stay on one line; a multi-line
error shows its first line; a table wider than its output scrolls sideways inside it."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import chrome
import pytest

SHOTS = os.environ.get("BARCA_SHOTS")  # a folder to keep the screenshots in, for a person

PIPELINE = '''
from barca import asset, collect, partitions

@asset(partitions={"customer_region_code": partitions([f"region_{i:02d}" for i in range(25)])})
def a_rather_long_asset_name_for_monthly_customer_revenue(customer_region_code: str) -> int:
    return len(customer_region_code)

@asset(inputs={"monthly": collect(a_rather_long_asset_name_for_monthly_customer_revenue)})
def summary_of_everything_that_matters(monthly: list) -> int:
    raise ValueError("polars.exceptions.ColumnNotFoundError: unable to find column 'revenue';\\n"
                     "valid columns: ['customer', 'region', 'month', 'amount']\\n\\n"
                     "Resolved plan until failure:\\n\\n\\t---> FAILED HERE RESOLVING 'sink' <---")
'''




def _html(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    import barca
    from barca import api
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    plan = barca.get("summary_of_everything_that_matters", "pipeline.py", dry_run=True)
    with pytest.raises(barca.StepFailed):
        barca.get("summary_of_everything_that_matters", "pipeline.py")
    from barca.present.listview import narrow
    from barca.queries.listing import list_nodes
    from barca.queries.runlog import run_detail
    failed = api.history()[0].run_id
    return {"status": api.status(None, "pipeline.py")._repr_html_(),
            "dry run": plan._repr_html_(), "history": api.history(1)._repr_html_(),
            "one run": run_detail(failed, 3)._repr_html_(),
            "list": narrow(list_nodes("pipeline.py"), 1)._repr_html_()}


PAGE = """<!doctype html><html><head><style>
body{{margin:16px;background:{bg};color:{fg};font-family:sans-serif}}
.output{{width:{width}px;border:1px dashed #888;padding:4px;margin-bottom:24px}}
</style></head><body>{outputs}</body></html>"""

# every word of a cell on one line box: a word broken across lines has two rects
BROKEN_WORDS = """() => {
  const bad = [];
  for (const td of document.querySelectorAll('td.barca-why, td.barca-cell')) {
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    let node;
    while ((node = walker.nextNode())) {
      if (node.parentElement.closest('pre')) continue;   // an opened detail: preformatted
      const re = /\\S+/g; let m;
      while ((m = re.exec(node.data))) {
        const r = document.createRange();
        r.setStart(node, m.index); r.setEnd(node, m.index + m[0].length);
        const tops = new Set([...r.getClientRects()].map(x => Math.round(x.top)));
        if (tops.size > 1) bad.push(m[0]);
      }
    }
  }
  return bad;
}"""
ONE_LINE = """() => [...document.querySelectorAll('td.barca-cell')].filter(td => {
  const r = document.createRange(); r.selectNodeContents(td);
  return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size > 1;
}).map(td => td.textContent)"""


@pytest.mark.slow
@pytest.mark.skipif(bool(chrome.missing()), reason=chrome.missing() or "browser available")
def test_tables_hold_their_shape_narrow_and_wide_light_and_dark(tmp_path: Path,
                                                                monkeypatch) -> None:
    from playwright.sync_api import sync_playwright
    (tmp_path / "project").mkdir()
    html = _html(tmp_path / "project", monkeypatch)
    assert "FAILED HERE" in html["status"] and "<details>" in html["status"]
    assert "showing 1 of 1" not in html["history"] and "showing 1 of 2 nodes" in html["list"]
    # (--limit 3, and the failed step, always shown)
    assert "FAILED HERE" in html["one run"] and "showing 4 of 26 steps" in html["one run"]
    shots = []
    with sync_playwright() as pw:
        browser = chrome.launch(pw)
        try:
            for theme, bg, fg in (("light", "#ffffff", "#1a1a1a"), ("dark", "#111111", "#dddddd")):
                for width in (420, 1400):
                    page = browser.new_page(viewport={"width": width + 80, "height": 1000})
                    outputs = "".join(f'<h3>{name}</h3><div class="output">{h}</div>'
                                      for name, h in html.items())
                    page.set_content(PAGE.format(bg=bg, fg=fg, width=width, outputs=outputs))
                    where = f"{theme}, {width}px"
                    assert page.evaluate(BROKEN_WORDS) == [], where
                    assert page.evaluate(ONE_LINE) == [], where
                    # a multi-line error: its first line in the row, the rest folded away
                    assert page.locator("details pre.barca-more").first.is_hidden(), where
                    shot = tmp_path / f"tables-{theme}-{width}.png"
                    page.screenshot(path=str(shot), full_page=True)
                    shots.append(shot)
                    # every table fits its output, or scrolls inside it (never cut, never
                    # wider than the page)
                    for box in page.locator(".output > .barca").all():
                        sw, cw = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
                        assert cw <= width + 1, where
                        if sw > cw:
                            box.evaluate("b => { b.scrollLeft = 60; }")
                            assert box.evaluate("b => b.scrollLeft") > 0, where
                    if width == 420:  # the narrow output scrolls the status table
                        status = page.locator(".output > .barca").first
                        assert status.evaluate("b => b.scrollWidth > b.clientWidth"), where
                    page.close()
        finally:
            browser.close()
    for shot in shots:
        assert shot.stat().st_size > 5000
        if SHOTS:
            shutil.copy(shot, Path(SHOTS) / shot.name)
