"""The local executor: a pool of worker processes fed chunks of steps over pipes.

Hand-written on top of ``multiprocessing`` rather than ``concurrent.futures`` because barca
must survive a worker that dies (the step fails, the worker is replaced, the run goes on) and
kill a step that overruns ``timeout_seconds``; a ``ProcessPoolExecutor`` breaks as a whole on
the first death.
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

from barca.core.record import Fields
from barca.engine.executors import branches
from barca.engine.executors.capture import read_lines
from barca.engine.executors.job import StepJob, StepRecord, chunk_size

Line = tuple[int, float, str, str]  # (task index, time, stream, line)
LINES_EVERY = 0.1  # seconds: how long read lines may wait before they are handed on (stored)
STILL_RUNNING = (10.0, 30.0, 60.0)  # a running step is said at these ages, then every 60 s


def _context() -> Any:
    """fork where it is safe (a plain CLI process); never fork a process with live threads,
    such as a Jupyter kernel."""
    method = os.environ.get("BARCA_START_METHOD")
    if not method:
        threaded = threading.active_count() > 1 or "ipykernel" in sys.modules
        method = "forkserver" if threaded and sys.platform != "win32" else (
            "fork" if sys.platform.startswith("linux") else "spawn")
    ctx = mp.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["barca.engine.executors.worker"])
    return ctx


def _worker_main(conn: Connection, settings: Any, parent: int | None,
                 lines: str | None = None) -> None:
    try:  # die with the process that forked us (the coordinator, or its forkserver)
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except Exception:
        pass
    if parent is not None and os.getppid() != parent:
        os._exit(0)  # the coordinator died before prctl took effect
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # a stray write to stdout must never mix with the command's result
    os.chdir(settings.root)
    from barca.engine.executors.capture import LineFile
    from barca.engine.executors.worker import Worker

    pipe = None if lines is None else LineFile(lines)
    worker = Worker(settings, lambda kind, data: conn.send((kind, data)), pipe)
    branches.CHANNEL = conn  # a step's parallel() asks the coordinator over this pipe
    while True:
        try:
            chunk = conn.recv()
        except (EOFError, OSError):
            return
        if chunk is None:
            return
        for task in chunk:
            if task.timeout:
                conn.send(("start", task.index))
            if isinstance(task, branches.BranchJob):
                conn.send(("record", branches.run_branch(worker, task)))
            else:
                conn.send(("record", worker.run(task)))
        conn.send(("idle", None))


_POLL = hasattr(select, "poll")


def _wait(busy: list[_Slot], timeout: float | None) -> None:
    """Until a busy worker sends a message or ends, or ``timeout`` seconds pass: one poll
    (``multiprocessing.connection.wait`` builds a selector per call, ~10,000 calls a run)."""
    if not _POLL:
        wait([s.conn for s in busy] + [s.proc.sentinel for s in busy], timeout)
        return
    p = select.poll()
    for s in busy:
        p.register(s.conn.fileno(), select.POLLIN)
        p.register(s.proc.sentinel, select.POLLIN)
    p.poll(None if timeout is None else timeout * 1000)


class _Slot(Fields):
    __slots__ = ("proc", "conn", "chunk", "done", "deadline", "running", "waiting", "lines",
                 "path", "at", "rest", "since", "said", "poller")

    def __init__(self, proc: Any, conn: Connection, chunk: list[StepJob] | None = None,
                 done: set[int] | None = None, deadline: float | None = None,
                 running: int | None = None, lines: int | None = None,
                 path: str = "") -> None:
        self.proc = proc
        self.conn = conn
        self.lines = lines  # the worker's line file, read here (see capture.LineFile)
        self.path = path
        self.at = 0         # how far it is read
        self.rest = b""     # a line not yet read whole
        self.since = time.monotonic()  # when its running step began (its chunk's steps run
        self.said = 0                  # in order); how many "still running" notes it had
        self.chunk = [] if chunk is None else chunk
        self.done = set() if done is None else done
        self.deadline = deadline
        self.running = running
        self.waiting = False  # its step waits for its branches: it holds no capacity
        # whether its pipe has a message, asked once per record: a poll object made once (a
        # Connection.poll builds a selector per call). Its messages are read whole by recv,
        # never ahead, so the descriptor is readable exactly when one waits (or it closed)
        self.poller: Any = None
        if _POLL:
            self.poller = select.poll()
            self.poller.register(conn.fileno(), select.POLLIN)

    def readable(self) -> bool:
        """A message waits in the worker's pipe (or the pipe closed: recv says which)."""
        return bool(self.poller.poll(0)) if self.poller is not None else self.conn.poll()


class _Call(Fields):
    """One ``parallel()`` call: the waiting slot, its branches' indices, what came back."""
    __slots__ = ("slot", "indices", "records")

    def __init__(self, slot: _Slot, indices: list[int]) -> None:
        self.slot, self.indices = slot, indices
        self.records: dict[int, Any] = {}


class ProcessPool:
    """Runs steps on ``size`` worker processes, started lazily and reused across calls."""

    def __init__(self, settings: Any, size: int, on_import: Callable[[str], None],
                 on_note: Callable[[str], None] | None = None) -> None:
        self.settings = settings  # what the workers are started with (remote store, fsync)
        self.size = size
        self.on_import = on_import
        self.on_note = on_note    # "still running" lines: stderr in every output mode
        self.ctx = _context()
        self.slots: list[_Slot] = []
        self.calls: dict[int, _Call] = {}   # branch index -> its parallel() call
        self._branch = 0                     # branch indices count down from -1
        self._on_lines: Callable[[list[Line]], None] | None = None
        self._pending: list[Line] = []      # lines read, not yet handed to _on_lines
        self._sent = time.monotonic()
        from barca.engine.executors import capacity
        self.capacity = capacity(settings, size)[0]

    def _spawn(self) -> _Slot:
        parent, child = self.ctx.Pipe(duplex=True)
        import tempfile
        try:
            lines, path = tempfile.mkstemp(prefix="barca-lines-")  # the worker unlinks it
        except OSError:  # no temporary folder: the lines come with each step's record
            lines, path = None, None
        forked_from = os.getpid() if self.ctx.get_start_method() == "fork" else None
        proc = self.ctx.Process(target=_worker_main,
                                args=(child, self.settings, forked_from, path),
                                daemon=True, name="barca-worker")
        proc.start()
        child.close()
        slot = _Slot(proc, parent, lines=lines, path=path or "")
        self.slots.append(slot)
        return slot

    def run(self, tasks: list[StepJob], on_record: Callable[[StepRecord], None],
            on_lines: Callable[[list[Line]], None] | None = None,
            meanwhile: Callable[[], None] | None = None) -> None:
        """Run every task; ``on_record`` is called in the coordinator as each one finishes,
        ``on_lines`` with the lines steps wrote as they write them: (task index, time, stream,
        line), in batches at most ``LINES_EVERY`` seconds apart, a step's lines always
        before its record; ``meanwhile`` once, when the first steps are sent."""
        if not tasks:
            return
        self._on_lines, self._pending, self._sent = on_lines, [], time.monotonic()
        by_index = {t.index: t for t in tasks}
        weighed = self.capacity < self.size or any(t.weight != 1 for t in tasks)
        per_chunk = chunk_size(len(tasks), self.size, weighed)
        queue: deque[list[StepJob]] = deque(
            tasks[i:i + per_chunk] for i in range(0, len(tasks), per_chunk))
        remaining = len(tasks)

        def deliver(rec: Any) -> int:
            """A record to its step's on_record (1: a step done), or a branch's to the
            parallel() call waiting for it (0)."""
            if rec.index >= 0:
                self._hand_lines()
                on_record(rec)
                return 1
            self._branch_done(rec, by_index)
            return 0

        while remaining:
            for dead in [s for s in self.slots if not s.chunk and not s.proc.is_alive()]:
                self._replace(dead)
            idle = [s for s in self.slots if not s.chunk]
            while queue and self._running() < self.size:
                chunk = self._next_chunk(queue) if weighed else queue.popleft()
                if chunk is None:
                    break  # the capacity is taken until a running step ends
                slot = idle.pop() if idle else self._spawn()
                slot.chunk = chunk
                slot.done = set()
                slot.deadline = None
                slot.since, slot.said = time.monotonic(), 0
                slot.conn.send(slot.chunk)
            if meanwhile is not None:  # (the workers have their steps: this overlaps them)
                call, meanwhile = meanwhile, None
                call()
            busy = [s for s in self.slots if s.chunk]
            timeout = None
            deadlines = [s.deadline for s in busy if s.deadline is not None]
            if deadlines:
                timeout = max(0.0, min(deadlines) - time.monotonic())
            if busy:  # a line file says nothing when written to: looked at this often
                timeout = LINES_EVERY if timeout is None else min(timeout, LINES_EVERY)
            _wait(busy, timeout)
            now = time.monotonic()
            for slot in busy:
                died = False
                self._read_lines(slot)  # what running steps wrote so far
                while slot.chunk:
                    try:
                        if not slot.readable():
                            break
                        kind, data = slot.conn.recv()
                    except (EOFError, OSError):
                        died = True
                        break
                    if kind == "record":
                        self._read_lines(slot)  # its lines, written before it was sent
                        slot.done.add(data.index)
                        slot.deadline, slot.running = None, None
                        slot.since, slot.said = time.monotonic(), 0  # the next step begins
                        remaining -= deliver(data)
                    elif kind == "branches":  # its step called parallel(): queue them first
                        self._fan_out(slot, data, queue, by_index)
                    elif kind == "start":
                        slot.running = data
                        slot.deadline = now + float(by_index[data].timeout or 0)
                    elif kind == "importing":
                        self.on_import(data)
                    elif kind == "idle":
                        slot.chunk = []
                        self._read_lines(slot, idle=True)
                if slot.chunk and (died or not slot.proc.is_alive()):
                    remaining -= self._fail_dead(slot, queue, deliver)
                elif slot.chunk and slot.deadline is not None and now >= slot.deadline:
                    remaining -= self._fail_timeout(slot, queue, deliver, by_index)
            if self._pending and time.monotonic() - self._sent >= LINES_EVERY:
                self._hand_lines()
            self._say_long_steps()
        self._hand_lines()

    def _say_long_steps(self) -> None:
        """A step running for 10 s is said, then at 30 s, then every minute: a run that
        seems stuck shows what it is waiting for, whatever the output mode."""
        if self.on_note is None:
            return
        now = time.monotonic()
        for slot in self.slots:
            running = [t for t in slot.chunk if t.index not in slot.done]
            if not running or slot.waiting:
                continue
            took = now - slot.since
            due = STILL_RUNNING[min(slot.said, len(STILL_RUNNING) - 1)] * (
                1 + max(0, slot.said - len(STILL_RUNNING) + 1))
            if took >= due:
                slot.said += 1
                self.on_note(f"still running after {took:.0f}s: {running[0].step}")

    def _read_lines(self, slot: _Slot, idle: bool = False) -> None:
        """What the slot's worker has written into its line file since the last look (all
        of it, also after the worker died: the file keeps what was written). ``idle``: the
        worker waits for work, so the file is emptied for its next steps."""
        if slot.lines is None:
            return
        data = slot.rest
        try:
            while got := os.pread(slot.lines, 1 << 22, slot.at):
                slot.at += len(got)
                data += got
            if idle:  # the worker appends (O_APPEND): its next line lands at 0
                os.ftruncate(slot.lines, 0)
                slot.at = 0
        except OSError:
            pass
        if data:
            lines, slot.rest = read_lines(data)
            self._pending.extend(lines)

    def _hand_lines(self) -> None:
        if self._pending and self._on_lines is not None:
            self._on_lines(self._pending)
        self._pending, self._sent = [], time.monotonic()

    def _running(self) -> int:
        """The workers that count against the pool size: those running something, but not
        those whose step waits for its branches (a pool grows by the callers that wait)."""
        return sum(1 for s in self.slots if s.chunk and not s.waiting)

    def _fan_out(self, slot: _Slot, jobs: list[Any], queue: deque[list[Any]],
                 by_index: dict[int, Any]) -> None:
        """A step's branches, queued ahead of the other steps, each with the step's weight
        and an index of its own (negative: never a step's)."""
        caller = next((t for t in slot.chunk if t.index not in slot.done), None)
        weight = getattr(caller, "weight", 1)
        indices = []
        for job in jobs:
            self._branch -= 1
            job.index, job.weight = self._branch, weight
            by_index[job.index] = job
            indices.append(job.index)
        call = _Call(slot, indices)
        for i in indices:
            self.calls[i] = call
        slot.waiting = True
        queue.extendleft([by_index[i]] for i in reversed(indices))

    def _branch_done(self, rec: Any, by_index: dict[int, Any]) -> None:
        """A branch's record (a worker that died or overran gives a step's record: said as
        the error in its slot); the last one wakes the caller with all of them, in order."""
        call = self.calls.pop(rec.index, None)
        job = by_index.pop(rec.index, None)
        if call is None:
            return
        if not isinstance(rec, branches.BranchRecord):
            text = rec.error or "the branch failed"
            if text.startswith("Timeout:") and job is not None:
                text = (f"TimeoutError: branch {job.step} ran past "
                        f"{branches.BRANCH_TIMEOUT:g} s; its process was killed")
            rec = branches.BranchRecord(rec.index, "failed", error=text)
        call.records[rec.index] = rec
        if len(call.records) == len(call.indices):
            call.slot.waiting = False
            if call.slot in self.slots:  # a caller that died (or overran) meanwhile: dropped
                with contextlib.suppress(OSError, ValueError):
                    call.slot.conn.send(("branch_results",
                                         [call.records[i] for i in call.indices]))

    def _next_chunk(self, queue: deque[list[StepJob]]) -> list[StepJob] | None:
        """The first queued step whose weight fits in the capacity left, taken off the queue;
        None when none fits. A step heavier than the capacity runs alone (when nothing else
        does), never starved of it forever."""
        used = sum(t.weight for s in self.slots if not s.waiting
                   for t in s.chunk if t.index not in s.done)
        for i, chunk in enumerate(queue):
            need = chunk[0].weight
            if used + need <= self.capacity or (used == 0 and need > self.capacity):
                del queue[i]
                return chunk
        return None

    def _replace(self, slot: _Slot) -> None:
        self.slots.remove(slot)
        try:
            slot.proc.kill()
            slot.proc.join(1)
        except Exception:
            pass
        slot.conn.close()
        self._read_lines(slot)  # every line written before it died or was killed
        self._close_lines(slot)

    def _close_lines(self, slot: _Slot) -> None:
        if slot.lines is not None:
            os.close(slot.lines)
            slot.lines = None
            with contextlib.suppress(OSError):  # the worker died before it unlinked it
                os.unlink(slot.path)

    def _fail_dead(self, slot: _Slot, queue: deque[list[StepJob]],
                   on_record: Callable[[StepRecord], int]) -> int:
        slot.proc.join(1)
        code = slot.proc.exitcode
        if code is not None and code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        else:
            how = f"exited with code {code}"
        pending = [t for t in slot.chunk if t.index not in slot.done]
        self._replace(slot)
        if not pending:
            return 0
        first, rest = pending[0], pending[1:]
        counted = on_record(StepRecord(
            first.index, "failed", 0.0,
            error=f"WorkerDied: the worker process running {first.step} {how}"))
        if rest:
            queue.appendleft(rest)
        return counted

    def _fail_timeout(self, slot: _Slot, queue: deque[list[StepJob]],
                      on_record: Callable[[StepRecord], int],
                      by_index: dict[int, StepJob]) -> int:
        pending = [t for t in slot.chunk if t.index not in slot.done]
        running = by_index[slot.running] if slot.running is not None else pending[0]
        self._replace(slot)
        counted = on_record(StepRecord(
            running.index, "failed", float(running.timeout or 0),
            error=f"Timeout: {running.step} did not finish within "
                  f"timeout_seconds={running.timeout:g}; its process was killed"))
        rest = [t for t in pending if t.index != running.index]
        if rest:
            queue.appendleft(rest)
        return counted

    def close(self) -> None:
        for slot in self.slots:
            with contextlib.suppress(OSError, ValueError):
                slot.conn.send(None)
        deadline = time.monotonic() + 1.0
        for slot in self.slots:
            slot.proc.join(max(0.0, deadline - time.monotonic()))
            if slot.proc.is_alive():
                slot.proc.kill()
                slot.proc.join(1)
            slot.conn.close()
            self._close_lines(slot)
        self.slots = []
