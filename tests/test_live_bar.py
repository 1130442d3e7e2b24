"""The live bar in a terminal: it appears once a run has lasted a moment with steps still to
finish -- never for a run whose only step (a sensor before cached assets) just finished, so
a cached run never imports rich, and always for a long chain of one step at a time."""
from __future__ import annotations

import os
import pty
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from barca.core import events as ev
from barca.faces import cli
from barca.faces.cli import EventPrinter

LIVE_AFTER = 0.15  # the bar's delay, shortened so the test waits less; the rule is the same


@pytest.fixture(autouse=True)
def _short_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "LIVE_AFTER", LIVE_AFTER)


@contextmanager
def terminal() -> Iterator[tuple[EventPrinter, int]]:
    master, slave = pty.openpty()
    os.set_blocking(master, False)
    with open(slave, "w", closefd=True) as stream:
        yield EventPrinter("pretty", False, stream), master
    os.close(master)


def _drawn(master: int) -> str:
    out = b""
    while True:
        try:
            got = os.read(master, 65536)
        except BlockingIOError:
            return out.decode(errors="replace")
        if not got:
            return out.decode(errors="replace")
        out += got


def test_no_bar_when_the_only_running_step_finishes() -> None:
    with terminal() as (printer, master):
        printer(ev.StepsStarted(("pipeline.py:feed",), 0, 0, 0, 8))  # early: no bar yet
        time.sleep(LIVE_AFTER + 0.05)
        printer(ev.StepCompleted("pipeline.py:feed", 0.6, 1, 8))  # the rest is cached
        assert _drawn(master) == ""
        printer(ev.RunEnded(1, 8, 0.7, False))
        assert _drawn(master).strip().endswith("1/8 steps | done in 0.7s")


def test_a_long_chain_of_single_steps_shows_the_bar() -> None:
    with terminal() as (printer, master):
        for i in range(3):
            printer(ev.StepsStarted((f"pipeline.py:a{i}",), i, 0, 0, 3))
            time.sleep(LIVE_AFTER / 2 + 0.05)
            printer(ev.StepCompleted(f"pipeline.py:a{i}", 0.3, i + 1, 3))
        printer(ev.RunEnded(3, 3, 1.0, False))
        shown = _drawn(master)
        bar, _, end = shown.rpartition("[barca] 3/3 steps | done")
        assert "2/3" in bar and end.strip() == "in 1.0s"  # the bar, then the end line
