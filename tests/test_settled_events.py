"""A settled walk says "cached" for each node to every listener that hears it (the ``--agent``
lines, a notebook's warm state), and makes no such event for the CLI's printer that ignores
them (``EventPrinter.cached_steps``). In process, with a real store."""
from __future__ import annotations

import io
from pathlib import Path

import pytest

from barca import api
from barca.core import events as ev
from barca.faces.cli import EventPrinter

PIPELINE = """
from barca import asset


@asset()
def source() -> int:
    return 1


@asset(inputs={"source": source})
def r0(source: int) -> int:
    return source + 1


@asset(inputs={"source": source})
def r1(source: int) -> int:
    return source + 2
"""
NODES = ["pipeline.py:source", "pipeline.py:r0", "pipeline.py:r1"]


@pytest.fixture
def settled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    for _ in range(3):  # run, then the settle record written, then a walk it settles
        api.materialize(None, "pipeline.py")
    return tmp_path


def test_every_listener_hears_each_settled_node(settled: Path) -> None:
    heard: list[object] = []
    res = api.materialize(None, "pipeline.py", on_event=heard.append)
    assert res.steps_executed == 0
    assert sorted(e.step for e in heard if isinstance(e, ev.StepCached)) == sorted(NODES)


def test_the_agent_lines_say_each_settled_node(settled: Path) -> None:
    out = io.StringIO()
    api.materialize(None, "pipeline.py", on_event=EventPrinter("json", True, out))
    assert sorted(out.getvalue().splitlines()) == sorted(
        f"[barca] step:{n} cached" for n in NODES)


def test_no_cached_event_is_made_for_a_printer_that_ignores_them(
        settled: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = ev.StepCached.__init__

    def spy(self: ev.StepCached, step: str) -> None:
        made.append(step)
        real(self, step)
    monkeypatch.setattr(ev.StepCached, "__init__", spy)
    monkeypatch.setattr(api, "keeping", False)  # as the CLI: no warm state (which hears them)
    out = io.StringIO()
    res = api.materialize(None, "pipeline.py", on_event=EventPrinter("json", False, out))
    assert res.steps_executed == 0 and res.steps_total == 3
    assert made == [] and out.getvalue() == ""
