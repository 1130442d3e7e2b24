"""Live progress in a notebook cell, like ``tqdm.notebook``: an ipywidgets bar with the
percentage, ``N/M steps``, elapsed and ETA, the rate and the step running, drawn as soon as the
first steps go to the workers (``0/8 steps [00:00<?, ? steps/s] | clean``). Cached steps count
as settled, so a finished run is full. Keys that come from an upstream's output are counted
once known: until then the total reads ``20+``. On success the bar stays full and green,
followed by one line that says what happened (``[barca] 1 ran, 7 cached | done in 0.0s``); on a
failure or an interrupt it turns red and stays where it is (``0/8 steps | interrupted``). The
display is updated in place at the end, so a saved notebook holds the last state, also as text
and HTML.

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


def stats(done: int, total: int, elapsed: float, ran: int | None = None,
          growing: bool = False) -> str:
    """``126/300 steps [00:03<00:04, 38.2 steps/s]``: tqdm's facts, in steps. ``ran`` (the
    steps executed, default ``done``) makes the rate: a cached step takes no time. A total that
    may still grow (keys from an upstream's output not known yet) is written ``300+``."""
    ran = done if ran is None else ran
    rate = ran / elapsed if elapsed > 0 and ran else 0.0
    eta = clock((total - done) / rate) if rate and total >= done and not growing else "?"
    speed = (f"{rate:.1f} steps/s" if rate >= 1 else f"{1 / rate:.1f} s/step") if rate \
        else "? steps/s"  # nothing ran yet: no rate to say
    return f"{done}/{total}{'+' if growing else ''} steps [{clock(elapsed)}<{eta}, {speed}]"


def bar_html(pct: int, text: str, state: str) -> str:
    """The bar as static HTML: what a saved notebook (GitHub, nbviewer, a reload without the
    widget's state) shows of the run's last state."""
    colour = {"failed": COLOURS["failed"], "done": COLOURS["cached"]}.get(state, "#2196f3")
    # a run stopped at 0% is red too: its words, and the track's outline
    red = f";color:{colour}" if state == "failed" else ""
    track = f";box-shadow:inset 0 0 0 1px {colour}" if state == "failed" else ""
    return (f'<div class="barca-progress" style="font-family:monospace;font-size:12px{red}">'
            f'{pct}% <span style="display:inline-block;width:240px;height:8px;'
            f'background:rgba(127,127,127,.25);border-radius:4px;vertical-align:middle{track}">'
            f'<span class="barca-bar-{state}" style="display:block;width:{pct}%;height:8px;'
            f'background:{colour};border-radius:4px"></span></span> {html.escape(text)}</div>')


def end_line(done: int, total: int, failed: int, elapsed: float, ok: bool) -> str:
    """What happened, in words: ``1 ran, 7 cached`` rather than ``1/8 steps``, which reads
    as seven missing."""
    if ok:
        return f"[barca] {done} ran, {total - done} cached | done in {elapsed:.1f}s"
    rest = max(0, total - done - failed)
    return (f"[barca] {done} ran, {failed} failed, {rest} cached or skipped | "
            f"failed in {elapsed:.1f}s")


class _WidgetView:
    """The bar as tqdm.notebook draws it: a label, an ipywidgets progress bar, the facts. It is
    displayed under a display id and updated in place at the end, so the saved output holds the
    last state -- also its ``text/plain`` and ``text/html`` fallbacks."""

    def __init__(self) -> None:
        import ipywidgets as widgets

        self.label = widgets.HTML(value="0%")
        self.bar = widgets.FloatProgress(value=0, min=0, max=1, bar_style="info",
                                         layout=widgets.Layout(width="320px"))
        self.facts = widgets.HTML()
        self.text = ""
        self.page = ""

        class Bar(widgets.HBox):  # a front end without widgets shows the facts as text
            def __repr__(bar) -> str:
                return f"[barca] {self.text}"

            def _repr_mimebundle_(bar, **kw: Any) -> Any:
                data = super()._repr_mimebundle_(**kw)
                if isinstance(data, dict):  # the last state drawn, for GitHub and nbviewer
                    data["text/plain"] = repr(bar)
                    data["text/html"] = self.page
                return data

        self.box = Bar([self.label, self.bar, self.facts],
                       layout=widgets.Layout(align_items="center", flex_flow="row wrap"))
        self.box.add_class("barca-progress")
        self.handle: Any = None

    def draw(self, pct: int, text: str, state: str) -> None:
        self.text = text
        self.page = bar_html(pct, text, state)
        self.bar.max = 100
        self.bar.value = pct
        self.label.value = (f'<span style="font-family:var(--jp-code-font-family,monospace);'
                            f'font-size:12px;padding-right:6px">{pct}%</span>')
        self.facts.value = (f'<span class="barca-progress-text" style="font-family:'
                            f'var(--jp-code-font-family,monospace);font-size:12px;'
                            f'padding-left:6px">{html.escape(text)}</span>')
        self.bar.bar_style = {"running": "info", "failed": "danger", "done": "success"}[state]
        if self.handle is None:
            from IPython.display import display
            self.handle = display(self.box, display_id=True)

    def end(self, state: str) -> None:
        """The display takes the last state as a static bar (green, or red where it stopped)
        and the widget closes: nothing is left to update, and a saved notebook shows the same
        bar wherever it is opened (nbconvert and nbviewer would draw the widget's view, which
        needs its JavaScript, before the HTML)."""
        if self.handle is None:
            return
        self.handle.update({"text/plain": repr(self.box), "text/html": self.page}, raw=True)
        self.box.close()


class _HtmlView:
    """The same facts as HTML in a display that is updated in place (no widgets)."""

    def __init__(self) -> None:
        self.handle: Any = None

    def draw(self, pct: int, text: str, state: str) -> None:
        from IPython.display import display
        page = {"text/plain": f"[barca] {text}", "text/html": bar_html(pct, text, state)}
        if self.handle is None:
            self.handle = display(page, raw=True, display_id=True)
        else:
            self.handle.update(page, raw=True)

    def end(self, state: str) -> None:
        """Every draw updated the display already."""


class NotebookProgress:
    """An event callback that draws progress in the running cell: from the moment the first
    steps are handed to the workers (``0/8 steps | clean``, the step in flight), counting cached and
    failed steps as settled, to the last state, which stays in the saved notebook."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self.interval = interval
        self.start = time.monotonic()
        self.view: Any = None
        self._last = 0.0
        self.ran = self.cached = self.total = self.unknown = 0
        self.running: dict[str, None] = {}  # steps handed to the workers, not finished yet
        self.step = ""
        self.failures: list[ev.StepFailedEvent] = []
        self.ended = False

    @property
    def done(self) -> int:
        """Steps settled: ran, cached or failed."""
        return self.ran + self.cached + len(self.failures)

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
        done, total = self.done, max(self.total, self.done)
        text = stats(done, total, now - self.start, self.ran, bool(self.unknown))
        if note:
            text += f" | {note}"
        elif self.running:
            first = next(iter(self.running))
            more = f" (+{len(self.running) - 1} more)" if len(self.running) > 1 else ""
            text += f" | {first}{more}"
        elif self.step:
            text += f" | {self.step}"
        pct = 100 * done // total if total else 0
        self._view().draw(pct, text, state)

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.StepsStarted):
            self.running.update(dict.fromkeys(e.steps))
            self.ran, self.cached = e.done, e.cached
            self.total, self.unknown = e.total, e.unknown
            self._draw(force=self.view is None)
        elif isinstance(e, ev.StepCompleted):
            if e.output:
                print(f"[{e.step}] " + e.output.rstrip("\n").replace("\n", f"\n[{e.step}] "))
            self.running.pop(e.step, None)
            self.ran, self.total, self.step = e.done, max(self.total, e.total), e.step
            self._draw()
        elif isinstance(e, ev.StepFailedEvent):
            self.running.pop(e.step, None)
            self.failures.append(e)
            if self.view is not None:
                self._draw("failed", f"failed: {e.step}", force=True)
        elif isinstance(e, ev.Note):
            print(f"[barca] {e.level}: {e.text}")
        elif isinstance(e, ev.RunEnded):
            self.ran, self.total = e.done, e.total
            self.running.clear()
            if e.failed:
                first = self.failures[0].step if self.failures else ""
                self.end("failed", f"failed: {first}" if first else "failed")
            else:
                self.end("done", "done")
            print(end_line(e.done, e.total, len(self.failures), e.elapsed, not e.failed))

    def end(self, state: str, note: str) -> None:
        """The last state, drawn once and kept in the saved output."""
        if self.ended or self.view is None:
            return
        self.ended = True
        self.running.clear()
        if state == "done":  # every step settled: the bar is full, whatever was cached
            self.cached = max(0, self.total - self.ran - len(self.failures))
            self.unknown = 0
        self._draw(state, note, force=True)
        self.view.end(state)

    def interrupted(self) -> None:
        """Ctrl-C / the stop button: the bar turns red and stays, at the step it reached --
        drawn even when no step had finished (``0/8 steps | interrupted``)."""
        self.running.clear()
        if self.view is None and not self.total:
            return  # interrupted before the plan was made: nothing to draw
        self._view()
        self.end("failed", "interrupted")

    def finished(self, failed: bool) -> None:
        """The command returned (or raised) without a run's end (every step cached, or a
        failure before the end): close the bar on its last state."""
        if failed:
            first = self.failures[0].step if self.failures else ""
            self.end("failed", f"failed: {first}" if first else "failed")
        else:
            self.end("done", "done")
