"""What a step writes while it runs: every line of its stdout and stderr (prints, ``logging``,
``warnings``, the traceback of a failed attempt), with its stream and a UTC timestamp, in order.
The coordinator records them (``barca logs``) and shows them live in human mode."""
from __future__ import annotations

import contextlib
import io
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

Line = tuple[float, str, str]   # (epoch seconds, "stdout" | "stderr", text without newline)

_BARCA = str(Path(__file__).resolve().parents[2]) + "/"  # barca's own frames start here


class _Stream(io.TextIOBase):
    """A text stream that cuts what is written into lines, into the step's shared list."""

    def __init__(self, name: str, lines: list[Line]) -> None:
        self.name, self.lines, self._part = name, lines, ""

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        chunks = (self._part + text).split("\n")
        self._part = chunks.pop()
        now = time.time()
        self.lines.extend((now, self.name, c) for c in chunks)
        return len(text)

    def close_line(self) -> None:
        """A last line written without its newline."""
        if self._part:
            self.lines.append((time.time(), self.name, self._part))
            self._part = ""


class StepOutput:
    """The step's two streams; ``lines`` holds what they wrote, in order."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.stdout = _Stream("stdout", self.lines)
        self.stderr = _Stream("stderr", self.lines)

    def finish(self) -> list[Line]:
        self.stdout.close_line()
        self.stderr.close_line()
        return self.lines

    def add_traceback(self, text: str) -> None:
        now = time.time()
        self.lines.extend((now, "stderr", t) for t in text.rstrip("\n").split("\n"))

    def text(self) -> str:
        """Everything, as the live ``[step] line`` output shows it."""
        return "".join(line + "\n" for _, _, line in self.lines)


def user_traceback(exc: BaseException) -> str:
    """The traceback of a user function's exception from the user's own first frame: the
    worker's frames (and the import machinery's, when the pipeline file failed to import) are
    barca's business, not the reader's. All of it when the error arose inside barca."""
    t = exc.__traceback__
    while t is not None and (t.tb_frame.f_code.co_filename.startswith(_BARCA)
                             or t.tb_frame.f_code.co_filename.startswith("<frozen ")):
        t = t.tb_next
    return "".join(traceback.format_exception(type(exc), exc, t or exc.__traceback__))


class _Router(io.TextIOBase):
    """Installed once as ``sys.stdout`` / ``sys.stderr`` of a worker: writes go to the running
    step's stream (per thread), else to the process's own. A ``logging`` handler made during
    one step keeps this object, so a later step's log lines are that later step's."""

    def __init__(self, default: Any) -> None:
        self.default = default
        self._local = threading.local()

    @property
    def target(self) -> Any:
        return getattr(self._local, "target", None) or self.default

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return self.target.write(text)

    def flush(self) -> None:
        self.target.flush()

    def isatty(self) -> bool:
        return self.target.isatty()

    def fileno(self) -> int:
        return self.default.fileno()

    # TextIOBase declares a fixed attribute; a router's is the wrapped stream's, read each time
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.default, "encoding", "utf-8")


def _routers() -> tuple[_Router, _Router]:
    if not isinstance(sys.stdout, _Router):
        sys.stdout = _Router(sys.stdout)
    if not isinstance(sys.stderr, _Router):
        sys.stderr = _Router(sys.stderr)
    return sys.stdout, sys.stderr


@contextlib.contextmanager
def captured(out: StepOutput) -> Iterator[None]:
    """While a step runs in this thread, what it writes goes to ``out``."""
    o, e = _routers()
    o._local.target, e._local.target = out.stdout, out.stderr
    try:
        yield
    finally:
        o._local.target = e._local.target = None
