"""Live progress in a notebook cell, like ``tqdm.notebook``: an ipywidgets bar with the
percentage, ``N/M steps``, elapsed and ETA, the rate and the step just finished. On success it
gives way to one line that says what happened (``[barca] 1 ran, 7 cached | done in 0.0s``); on
a failure or an interrupt it turns red and stays where it is.

Without ipywidgets the same facts are drawn as HTML in an updated display."""
from __future__ import annotations

import html
import time
from typing import Any

from barca.core import events as ev
from barca.core.render import COLOURS

INTERVAL = 0.1  # seconds between two redraws: a 10,000-key run must not flood the front end


def clock(seconds: float) -> str:
    """``01:05`` or ``1:02:03``, as tqdm writes times."""
    s = int(seconds)
    h, m = divmod(s, 3600)
    return f"{h}:{m // 60:02d}:{m % 60:02d}" if h else f"{m // 60:02d}:{m % 60:02d}"


def stats(done: int, total: int, elapsed: float) -> str:
    """``126/300 steps [00:03<00:04, 38.2 steps/s]``: tqdm's facts, in steps."""
    rate = done / elapsed if elapsed > 0 and done else 0.0
    eta = clock((total - done) / rate) if rate and total >= done else "?"
    speed = f"{rate:.1f} steps/s" if rate >= 1 or not rate else f"{1 / rate:.1f} s/step"
    return f"{done}/{total} steps [{clock(elapsed)}<{eta}, {speed}]"


def end_line(done: int, total: int, failed: int, elapsed: float, ok: bool) -> str:
    """What happened, in words: ``1 ran, 7 cached`` rather than ``1/8 steps``, which reads
    as seven missing."""
    if ok:
        return f"[barca] {done} ran, {total - done} cached | done in {elapsed:.1f}s"
    rest = max(0, total - done - failed)
    return (f"[barca] {done} ran, {failed} failed, {rest} cached or skipped | "
            f"failed in {elapsed:.1f}s")


class _WidgetView:
    """The bar as tqdm.notebook draws it: a label, an ipywidgets progress bar, the facts."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.label = widgets.HTML(value="0%")
        self.bar = widgets.FloatProgress(value=0, min=0, max=1, bar_style="info",
                                         layout=widgets.Layout(width="320px"))
        self.facts = widgets.HTML()
        self.text = ""

        class Bar(widgets.HBox):  # a front end without widgets shows the facts as text
            def __repr__(bar) -> str:
                return f"[barca] {self.text}"

        self.box = Bar([self.label, self.bar, self.facts],
                       layout=widgets.Layout(align_items="center", flex_flow="row wrap"))
        self.box.add_class("barca-progress")
        self.shown = False

    def draw(self, done: int, total: int, text: str, state: str) -> None:
        self.text = text
        self.bar.max = max(1, total)
        self.bar.value = min(done, self.bar.max)
        pct = 100 * done // total if total else 100
        self.label.value = (f'<span style="font-family:var(--jp-code-font-family,monospace);'
                            f'font-size:12px;padding-right:6px">{pct}%</span>')
        self.facts.value = (f'<span class="barca-progress-text" style="font-family:'
                            f'var(--jp-code-font-family,monospace);font-size:12px;'
                            f'padding-left:6px">{html.escape(text)}</span>')
        self.bar.bar_style = {"running": "info", "failed": "danger", "done": "success"}[state]
        if not self.shown:
            from IPython.display import display
            display(self.box)
            self.shown = True

    def close(self) -> None:
        self.box.close()


class _HtmlView:
    """The same facts as HTML in a display that is updated in place (no widgets)."""

    def __init__(self) -> None:
        self.handle: Any = None

    def draw(self, done: int, total: int, text: str, state: str) -> None:
        from IPython.display import HTML, display
        pct = 100 * done // total if total else 100
        colour = COLOURS["failed"] if state == "failed" else COLOURS["cached"]
        page = HTML(f'<div class="barca-progress" style="font-family:monospace;font-size:12px">'
                    f'{pct}% <span style="display:inline-block;width:240px;height:8px;'
                    f'background:rgba(127,127,127,.25);border-radius:4px"><span style='
                    f'"display:block;width:{pct}%;height:8px;background:{colour};'
                    f'border-radius:4px"></span></span> {html.escape(text)}</div>')
        if self.handle is None:
            self.handle = display(page, display_id=True)
        else:
            self.handle.update(page)

    def close(self) -> None:
        if self.handle is not None:
            from IPython.display import HTML
            self.handle.update(HTML(""))


class NotebookProgress:
    """An event callback that draws progress in the running cell."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.start = time.monotonic()
        self.view: Any = None
        self._last = 0.0
        self.done = self.total = 0
        self.step = ""
        self.failures: list[ev.StepFailedEvent] = []

    def _view(self) -> Any:
        if self.view is None:
            try:
                self.view = _WidgetView()
            except ImportError:
                self.view = _HtmlView()
        return self.view

    def _draw(self, state: str = "running", note: str = "", force: bool = False) -> None:
        now = time.monotonic()
        if not force and self.view is not None and now - self._last < self.interval:
            return
        self._last = now
        text = stats(self.done, self.total, now - self.start)
        if note:
            text += f" | {note}"
        elif self.step:
            text += f" | {self.step}"
        self._view().draw(self.done, self.total, text, state)

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.StepCompleted):
            if e.output:
                print(f"[{e.step}] " + e.output.rstrip("\n").replace("\n", f"\n[{e.step}] "))
            self.done, self.total, self.step = e.done, e.total, e.step
            self._draw(force=e.done == e.total)
        elif isinstance(e, ev.StepFailedEvent):
            self.failures.append(e)
            if self.view is not None:
                self._draw("failed", f"failed: {e.step}", force=True)
        elif isinstance(e, ev.Note):
            print(f"[barca] {e.level}: {e.text}")
        elif isinstance(e, ev.RunEnded):
            self.done, self.total = e.done, e.total
            if e.failed:
                first = self.failures[0].step if self.failures else ""
                self._draw("failed", f"failed: {first}" if first else "failed", force=True)
            elif self.view is not None:
                self.view.close()
            print(end_line(e.done, e.total, len(self.failures), e.elapsed, not e.failed))

    def interrupted(self) -> None:
        """Ctrl-C / the stop button: the bar turns red and stays, at the step it reached."""
        self._draw("failed", "interrupted", force=True)
