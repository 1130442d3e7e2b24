"""A failed step's traceback, shown as IPython shows a cell's: coloured, with the source around
each line, notebook cells named ``Cell In[N]``.

The exception happened in a worker process and reached the kernel as text; the kernel still
has the sources (files on disk, and its own cells in ``linecache``), so each frame is drawn
again here, from the text."""
from __future__ import annotations

import linecache
import re
from typing import Any

RED, GREEN, CYAN, BOLD_GREEN, RESET = "\x1b[0;31m", "\x1b[0;32m", "\x1b[0;36m", "\x1b[1;32m", \
    "\x1b[0m"
RULE = "-" * 75
CONTEXT = 2  # lines of source before the failing one, as IPython shows
_FRAME = re.compile(r'^  File "(?P<file>.+)", line (?P<line>\d+), in (?P<fn>.+)$')


def _where(filename: str, lineno: int) -> str:
    """``Cell In[3], line 5`` for a notebook cell, else ``path:line`` (home as ``~``)."""
    try:
        from IPython import get_ipython
        shell = get_ipython()
        number = shell.compile._filename_map.get(filename) if shell is not None else None
    except Exception:  # an IPython without the map: the file name will do
        number = None
    if number is not None:
        return f"Cell {GREEN}In[{number}], line {lineno}{RESET}"
    import os
    home = os.path.expanduser("~")
    shown = "~" + filename[len(home):] if home != "~" and filename.startswith(home + os.sep) \
        else filename
    return f"File {GREEN}{shown}:{lineno}{RESET}"


def _frame(filename: str, lineno: int, fn: str, shown: str) -> list[str]:
    """One frame; ``shown`` is the line as the worker printed it, for a source the kernel
    cannot read."""
    out = [f"{_where(filename, lineno)}, in {CYAN}{fn}{RESET}"]
    width = len(str(lineno + 1))
    for n in range(max(1, lineno - CONTEXT), lineno + 2 if lineno > 0 else 1):
        line = linecache.getline(filename, n).rstrip("\n")
        if not line and n == lineno:
            line = shown
        if not line and n != lineno:
            continue
        if n == lineno:
            out.append(f"{BOLD_GREEN}----> {n:>{width}}{RESET} {line}")
        else:
            out.append(f"      {n:>{width}} {line}")
    return out


def ipython_lines(text: str) -> list[str]:
    """A plain Python traceback (``traceback.format_exception`` text) as IPython's lines."""
    lines = text.rstrip("\n").splitlines()
    last = lines[-1] if lines else ""
    ename, _, evalue = last.partition(": ")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FRAME.match(line)
        if line.startswith("Traceback (most recent call last)"):
            if out:
                out.append("")
            name = _exception_after(lines, i)
            out += [f"{RED}{RULE}{RESET}",
                    f"{RED}{name}{RESET}{' ' * max(1, 42 - len(name))}"
                    "Traceback (most recent call last)"]
        elif m:
            out.append("")
            shown = lines[i + 1].strip() if i + 1 < len(lines) and lines[i + 1].startswith(
                "    ") else ""
            out += _frame(m["file"], int(m["line"]), m["fn"], shown)
            i += 1
            while i < len(lines) and lines[i].startswith("    "):  # source and ^^^ markers
                i += 1
            continue
        elif line and not line.startswith(" ") and i == len(lines) - 1 and evalue:
            out += ["", f"{RED}{ename}{RESET}: {evalue}"]
        else:
            out.append(line if not _is_exception_line(line) else
                       f"{RED}{line.partition(':')[0]}{RESET}:{line.partition(':')[2]}")
        i += 1
    return out


def _exception_after(lines: list[str], start: int) -> str:
    """The exception name that ends the traceback block starting at ``start``."""
    for line in lines[start + 1:]:
        if not line.startswith(" ") and line.strip():
            return line.partition(":")[0]
    return "Exception"


def _is_exception_line(line: str) -> bool:
    return bool(re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Warning|Interrupt|Exit)?:", line)) \
        and not line.startswith(("During handling", "The above exception"))


def show(shell: Any, etype: type, value: BaseException, tb: Any,
         tb_offset: int | None = None) -> list[str]:
    """IPython's custom exception handler for barca errors (``set_custom_exc``): draws
    ``render(value)`` in the error box, where IPython would have drawn barca's internals."""
    stb = render(value)
    shell._showtraceback(etype, value, stb)
    return stb


def render(exc: Any) -> list[str]:
    """The lines IPython shows for a barca error: the step's traceback (if any), then the
    error and its fix."""
    lines: list[str] = []
    tb = exc.extra.get("traceback")
    if tb:
        lines += ipython_lines(str(tb)) + [""]
    lines.append(f"{RED}{type(exc).__name__}{RESET}: {exc.message}")
    if exc.remediation:
        lines += ["", exc.remediation]
    return lines
