"""What a step writes while it runs: every line of its stdout and stderr (prints, ``logging``,
``warnings``, the traceback of a failed attempt), with its stream and a UTC timestamp, in order.
The coordinator records them (``barca logs``) and shows them live in human mode.

In a pool worker each complete line also goes, as it is written, into a file the coordinator
reads (``LineFile``): once written there a line is the kernel's, so it outlives the worker -- a
segfault, an out-of-memory kill or a timeout's kill loses none of the lines before it. One
``write`` call is one system call however many lines it holds, and wakes no one (a pipe would
wake the reader per line, which costs more than the print); the coordinator looks every 0.1 s
and batches what it reads into the metadata store (never a commit per line)."""
from __future__ import annotations

import contextlib
import io
import os
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Line = tuple[float, str, str]   # (epoch seconds, "stdout" | "stderr", text without newline)
Sink = Callable[[list[Line]], None]

# one line in the pipe: step index, time, stream (0 stdout, 1 stderr), byte length, then UTF-8
_HEAD = struct.Struct("<idBI")
_STREAMS = ("stdout", "stderr")

_BARCA = str(Path(__file__).resolve().parents[2]) + "/"  # barca's own frames start here


class _Stream(io.TextIOBase):
    """A text stream that cuts what is written into lines, into the step's shared list."""

    def __init__(self, name: str, lines: list[Line], sink: Sink | None = None) -> None:
        self.name, self.lines, self._part, self.sink = name, lines, "", sink

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        chunks = (self._part + text).split("\n")
        self._part = chunks.pop()
        if chunks:
            now = time.time()
            new = [(now, self.name, c) for c in chunks]
            self.lines.extend(new)
            if self.sink is not None:
                self.sink(new)
        return len(text)

    def close_line(self) -> None:
        """A last line written without its newline."""
        if self._part:
            new = [(time.time(), self.name, self._part)]
            self.lines.extend(new)
            self._part = ""
            if self.sink is not None:
                self.sink(new)


class StepOutput:
    """The step's two streams; ``lines`` holds what they wrote, in order; ``sink`` (if any)
    is handed each complete line as it is written."""

    def __init__(self, sink: Sink | None = None) -> None:
        self.lines: list[Line] = []
        self.sink = sink
        self.stdout = _Stream("stdout", self.lines, sink)
        self.stderr = _Stream("stderr", self.lines, sink)

    def finish(self) -> list[Line]:
        self.stdout.close_line()
        self.stderr.close_line()
        return self.lines

    def add_traceback(self, text: str) -> None:
        now = time.time()
        new = [(now, "stderr", t) for t in text.rstrip("\n").split("\n")]
        self.lines.extend(new)
        if self.sink is not None:
            self.sink(new)

    def text(self) -> str:
        """Everything, as the live ``[step] line`` output shows it."""
        return "".join(line + "\n" for _, _, line in self.lines)


class LineFile:
    """The worker's end of its line file (appended to; the coordinator empties it between
    chunks of work): ``sink(index)`` is the ``Sink`` of step ``index``."""

    def __init__(self, path: str) -> None:
        self.fd: int | None = os.open(path, os.O_WRONLY | os.O_APPEND)
        with contextlib.suppress(OSError):  # open here and in the coordinator: nameless
            os.unlink(path)

    def sink(self, index: int) -> Sink:
        return lambda lines: self.send(index, lines)

    def send(self, index: int, lines: list[Line]) -> None:
        if self.fd is None:
            return
        pack = _HEAD.pack
        if len(lines) == 1:  # the usual case (a print): no list to join
            ts, stream, text = lines[0]
            data = text.encode("utf-8", "replace")
            buf = pack(index, ts, stream == "stderr", len(data)) + data
        else:
            parts = []
            for ts, stream, text in lines:
                data = text.encode("utf-8", "replace")
                parts.append(pack(index, ts, stream == "stderr", len(data)))
                parts.append(data)
            buf = b"".join(parts)
        try:
            sent = os.write(self.fd, buf)
            while sent < len(buf):  # a short write (a signal): the rest follows
                sent += os.write(self.fd, buf[sent:])
        except OSError:  # the coordinator is gone: the lines still reach the step's record
            self.fd = None


def read_lines(data: bytes) -> tuple[list[tuple[int, float, str, str]], bytes]:
    """What ``LineFile`` wrote, as (step index, time, stream, line), and the bytes of a line
    not yet read whole (kept for the next read)."""
    out = []
    at, end, size = 0, len(data), _HEAD.size
    while at + size <= end:
        index, ts, err, n = _HEAD.unpack_from(data, at)
        if at + size + n > end:
            break
        out.append((index, ts, _STREAMS[err], data[at + size:at + size + n].decode("utf-8",
                                                                                   "replace")))
        at += size + n
    return out, data[at:]


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
