"""The CLI's live bar in a terminal, drawn by rich: the same facts as the notebook's bar
(percentage, N/M steps, elapsed and ETA, rate, the step just finished). Imported only when a run
lasts long enough to want a bar; the end line is the CLI's own, printed after the bar is gone."""
from __future__ import annotations

import time
from typing import Any, TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Column


class RichBar:
    def __init__(self, stream: TextIO, elapsed: float) -> None:
        self.t0 = time.monotonic() - elapsed
        self.progress = Progress(
            TextColumn("[barca]", markup=False), BarColumn(bar_width=24), TaskProgressColumn(),
            MofNCompleteColumn(), TextColumn("steps"), TimeElapsedColumn(), TextColumn("<"),
            TimeRemainingColumn(), TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[step]}", markup=False, table_column=Column(no_wrap=True,
                                                                  overflow="ellipsis")),
            console=Console(file=stream, highlight=False), transient=True,
            refresh_per_second=10)
        self.task: Any = None

    def update(self, done: int, total: int, step: str) -> None:
        room = max(12, self.progress.console.width - 68)  # what the other columns leave
        step = step if len(step) <= room else step[:room - 1] + "…"
        elapsed = time.monotonic() - self.t0
        rate = done / elapsed if elapsed > 0 else 0.0
        speed = f"{rate:.1f} steps/s" if rate >= 1 or not rate else f"{1 / rate:.1f} s/step"
        if self.task is None:
            self.progress.start()
            self.task = self.progress.add_task("run", total=total, completed=done, rate=speed,
                                               step=step)
            # the elapsed column counts from the run's start, not from the bar's
            self.progress.tasks[0].start_time = self.progress.get_time() - elapsed
        else:
            self.progress.update(self.task, total=total, completed=done, rate=speed, step=step)

    def stop(self) -> None:
        self.progress.stop()
