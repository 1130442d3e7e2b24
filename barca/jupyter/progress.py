"""Live progress in a notebook cell: one display, updated from the engine's events, replaced by
the CLI's summary line when the run ends."""
from __future__ import annotations

import html
import time
from typing import Any

from barca import events as ev


class _Bar:
    def __init__(self, done: int, total: int, text: str, final: bool = False) -> None:
        self.done, self.total, self.text, self.final = done, total, text, final

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        pct = 100 * self.done / self.total if self.total else 100
        colour = "#d03030" if "failed" in self.text else "#2e9d4f"
        bar = "" if self.final else (
            f'<div style="width:240px;height:8px;background:rgba(127,127,127,.25);'
            f'border-radius:4px;display:inline-block;margin-right:8px">'
            f'<div style="width:{pct:.0f}%;height:8px;background:{colour};border-radius:4px">'
            f"</div></div>")
        return {"text/plain": self.text,
                "text/html": f'<div class="barca-progress" style="font-family:monospace;'
                             f'font-size:12px">{bar}{html.escape(self.text)}</div>'}


class NotebookProgress:
    """An event callback that draws progress in the running cell (works without widgets)."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.handle: Any = None
        self._last = 0.0
        self.failures: list[ev.StepFailedEvent] = []

    def _show(self, bar: _Bar, force: bool = False) -> None:
        from IPython.display import display
        now = time.monotonic()
        if self.handle is None:
            self.handle = display(bar, display_id=True)
            self._last = now
        elif force or now - self._last >= self.interval:
            self.handle.update(bar)
            self._last = now

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.StepCompleted):
            if e.output:
                print(f"[{e.step}] " + e.output.rstrip("\n").replace("\n", f"\n[{e.step}] "))
            self._show(_Bar(e.done, e.total, f"[barca] {e.done}/{e.total} steps | {e.step}"))
        elif isinstance(e, ev.StepFailedEvent):
            self.failures.append(e)
        elif isinstance(e, ev.Note):
            print(f"[barca] {e.level}: {e.text}")
        elif isinstance(e, ev.RunEnded):
            word = "failed" if e.failed else "done"
            self._show(_Bar(e.done, e.total,
                            f"[barca] {e.done}/{e.total} steps | {word} in {e.elapsed:.1f}s",
                            final=True), force=True)
