"""The status widget never contradicts itself (issue #30), driven in-process: the log pane
shows the node's last run, the summary counts the states the badges show, a finished run is
100%, and the text a page without widgets shows is the last state, not a repr."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

PIPELINE = '''
from pathlib import Path
from barca import asset, partitions


@asset(partitions={"region": partitions(["eu", "us"])})
def sales(region: str) -> int:
    if region == "us" and Path("broken").exists():
        print("reading the us feed")
        raise RuntimeError("us feed not ready")
    return len(region)
'''


@pytest.fixture
def widget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    (tmp_path / "broken").write_text("")
    monkeypatch.chdir(tmp_path)
    from barca.faces.jupyter.widget import StatusWidget
    w = StatusWidget("sales", "pipeline.py", poll_interval=60)
    yield w
    w.close()


def _badges(w) -> list[str]:
    return re.findall(r'<span class="barca-badge" data-state="([\w-]+)"', w.table.value)


def test_the_widget_agrees_with_itself(widget, tmp_path: Path) -> None:
    w = widget
    w._run("get", "pipeline.py:sales")
    assert _badges(w) == ["failed"]
    # the count under the table is the badges' (it said "1 partial" beside a "failed" badge)
    assert "1 failed, 0 cached, 0 stale, 0 never run, 0 partial," in w.table.value
    assert w.summary_line(short=True) == "1 failed"
    assert "reading the us feed" in w.logs.value

    (tmp_path / "broken").unlink()
    w._run("get", "pipeline.py:sales")   # us runs again, eu is cached
    assert _badges(w) == ["cached"]
    assert w.summary_line() == w.report.summary_line()   # as `%barca status` writes it
    # the successful run printed nothing: no lines of the failed run before it
    assert "reading the us feed" not in w.logs.value
    assert "Traceback" not in w.message.value + w.logs.value
    # a finished run reads 100% beside its full bar (it said "1/2 steps (50%)")
    assert w.progress.value == w.progress.max
    assert "(100%) | 1 ran, 1 cached" in w.progress_label.value, w.progress_label.value

    # what a saved notebook falls back to: the last state, in words and as the table
    bundle = w._repr_mimebundle_()
    assert bundle["text/plain"] == "barca status: 1 cached", bundle["text/plain"]
    assert "StatusWidget(" not in bundle["text/plain"]
    assert bundle["text/html"] == w.table.value and "<table" in bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
