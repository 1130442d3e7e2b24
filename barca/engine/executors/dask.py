"""The Dask executor: steps run on a ``dask.distributed`` cluster — a ``LocalCluster`` started
for the run (``BARCA_EXECUTOR=dask``) or an existing scheduler (``BARCA_EXECUTOR=tcp://...``).

The same contract as the local pool: chunks of ``StepJob`` in, ``StepRecord`` out, through the
one worker entry point (``barca.engine.executors.worker.Worker``); the coordinator alone writes
metadata. Workers on other machines read inputs from and write artifacts to the shared store
(``BARCA_REMOTE_URI``)."""
from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any

from barca.engine.executors.job import StepJob, StepRecord

_WORKERS: dict[str, Any] = {}


def _run_chunk(settings: Any, tasks: list[StepJob]) -> tuple[list[str], list[StepRecord]]:
    """Runs on a Dask worker process: (files it imported, one record per task). ``settings``
    are the coordinator's: the worker writes where the command says (its remote store)."""
    from barca.engine.executors.worker import Worker

    root = str(settings.root)
    imported: list[str] = []
    worker = _WORKERS.get(root)
    if worker is not None and _stat(f for f, _, _ in worker.stamp) != worker.stamp:
        _forget_project_modules(root)  # a long-lived worker, and the code changed since
        worker = None
    if worker is not None and worker.settings != settings:
        worker = None
    if worker is None:
        worker = _WORKERS[root] = Worker(settings, lambda kind, data: None)
    worker.notify = lambda kind, data: imported.append(data) if kind == "importing" else None
    os.makedirs(root, exist_ok=True)
    os.chdir(root)
    records = [worker.run(t) if not t.timeout else _alone(settings, t, imported)
               for t in tasks]
    worker.stamp = _project_stamp(root, tasks)
    return imported, records


# ---------------------------------------------------------------------- timeout_seconds
# A Dask task runs in a thread of the worker, which nothing can stop; and a worker is a daemon
# process, which multiprocessing refuses children. So a step with ``timeout_seconds`` runs in
# an interpreter of its own, killed (with what it started) when its time is up: the local
# pool's contract, its messages and its exit code. Its clock starts once that interpreter is
# ready, as the local pool's starts when its worker takes the step.

_CHILD = "from barca.engine.executors.dask import _child; _child()"


def _child() -> None:
    """The process of one step with a timeout: (settings, task) pickled on stdin; ``S`` on
    stdout once ready, then (imported files, record) pickled."""
    import pickle
    import sys
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray write to stdout must never mix with the record
    settings, task = pickle.load(sys.stdin.buffer)
    from barca.engine.executors.worker import Worker
    imported: list[str] = []
    worker = Worker(settings, lambda kind, data: imported.append(data)
                    if kind == "importing" else None)
    out.write(b"S")
    out.flush()
    record = worker.run(task)  # retries= too: each failed attempt is retried in here
    out.write(pickle.dumps((imported, record)))
    out.flush()


def _alone(settings: Any, task: StepJob, imported: list[str]) -> StepRecord:
    """Run one step with ``timeout_seconds`` in a process of its own; its record, or the
    local pool's failure when it overran (or its process died)."""
    import pickle
    import select
    import signal
    import subprocess
    import sys
    import time
    proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=str(settings.root),
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(pickle.dumps((settings, task)))
        proc.stdin.close()
    except BrokenPipeError:
        pass  # it died at once: said below
    fd, got, deadline = proc.stdout.fileno(), bytearray(), None
    try:
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([fd], [], [], wait)[0]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return StepRecord(task.index, "failed", float(task.timeout or 0),
                                  error=f"Timeout: {task.step} did not finish within "
                                        f"timeout_seconds={task.timeout:g}; its process was "
                                        "killed")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            if deadline is None:  # ready: the step's clock starts
                deadline = time.monotonic() + float(task.timeout or 0)
                chunk = chunk[1:]
            got += chunk
    finally:
        proc.stdout.close()
    code = proc.wait()
    try:
        files, record = pickle.loads(bytes(got))
    except Exception:  # it died before it could say how the step went
        how = f"exited with code {code}"
        if code < 0:
            try:
                how = f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"was killed by signal {-code}"
        return StepRecord(task.index, "failed", 0.0,
                          error=f"WorkerDied: the worker process running {task.step} {how}")
    imported.extend(files)
    return record


def _project_stamp(root: str, tasks: list[StepJob]) -> tuple[Any, ...]:
    """What identifies the project's code now: each pipeline file's and each project module's
    (mtime, size), for the modules this worker has imported."""
    import sys
    files: set[str | None] = {t.file for t in tasks if t.shipped is None}
    files |= {m.__file__ for m in list(sys.modules.values())
              if getattr(m, "__file__", None) and str(m.__file__).startswith(root + os.sep)}
    return _stat(sorted(files))


def _stat(files: Any) -> tuple[Any, ...]:
    out: list[tuple[Any, int | None, int | None]] = []
    for f in files:
        try:
            st = os.stat(f)
            out.append((f, st.st_mtime_ns, st.st_size))
        except OSError:
            out.append((f, None, None))
    return tuple(out)


def _forget_project_modules(root: str) -> None:
    import sys
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if f and str(f).startswith(root + os.sep) and "site-packages" not in str(f):
            del sys.modules[name]


class DaskExecutor:
    """Runs steps on Dask; a chunk whose worker died is split so only the step that killed it
    fails."""

    def __init__(self, settings: Any, address: str, size: int,
                 on_import: Callable[[str], None]) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            from barca.core.errors import UsageError
            where = settings.where("executor", "BARCA_EXECUTOR")
            raise UsageError(f"{where} asks for Dask, which is not installed",
                             f"pip install 'barca-pipelines[dask]', or unset {where}.") \
                from None
        self.settings, self.size, self.on_import = settings, size, on_import
        self.cluster = None
        if address == "dask":
            import dask
            # A worker that dies fails its tasks at once; barca re-runs the innocent ones itself
            # (see run), so a crashing step cannot exhaust the retries of its neighbours.
            dask.config.set({"distributed.scheduler.allowed-failures": 0})
            self.cluster = LocalCluster(n_workers=size, threads_per_worker=1, processes=True,
                                        host="127.0.0.1", dashboard_address=None,
                                        silence_logs=logging.CRITICAL)
            logging.getLogger("distributed").setLevel(logging.CRITICAL)
            self.client = Client(self.cluster)
        else:
            self.client = Client(address)

    def run(self, tasks: list[StepJob], on_record: Callable[[StepRecord], None],
            on_lines: Any = None,  # lines come back in each record
            meanwhile: Callable[[], None] | None = None) -> None:
        from distributed import as_completed

        per_chunk = max(1, min(64, -(-len(tasks) // (self.size * 4))))
        pending = {}
        for i in range(0, len(tasks), per_chunk):
            chunk = tasks[i:i + per_chunk]
            pending[self._submit(chunk)] = chunk
        if meanwhile is not None:
            meanwhile()
        done = as_completed(list(pending))
        suspects: list[StepJob] = []
        for fut in done:
            chunk = pending.pop(fut)
            try:
                imported, records = fut.result()
            except Exception:  # a worker died (KilledWorker): its steps are suspects
                suspects.extend(chunk)
                continue
            for path in imported:
                self.on_import(path)
            for rec in records:
                on_record(rec)
        if suspects:
            self._isolate(suspects, on_record)

    def _isolate(self, suspects: list[StepJob], on_record: Callable[[StepRecord], None]) -> None:
        """Run each step that was on a worker that died alone on a worker of its own, so only
        the step that kills its worker fails."""
        from distributed import wait

        for t in sorted(suspects, key=lambda t: t.index):
            workers = list(self.client.scheduler_info()["workers"])
            if not workers:
                self.client.wait_for_workers(1, timeout=60)
                workers = list(self.client.scheduler_info()["workers"])
            fut = self.client.submit(_run_chunk, self.settings, [t], pure=False, retries=0,
                                     workers=workers[:1], allow_other_workers=False)
            wait(fut)
            try:
                imported, records = fut.result()
            except Exception as exc:
                on_record(StepRecord(t.index, "failed", 0.0,
                                     error=f"WorkerDied: the Dask worker running {t.step} died "
                                           f"({type(exc).__name__})"))
                self.client.wait_for_workers(self.size, timeout=60)
                continue
            for path in imported:
                self.on_import(path)
            for rec in records:
                on_record(rec)

    def _submit(self, chunk: list[StepJob]) -> Any:
        return self.client.submit(_run_chunk, self.settings, chunk, pure=False,
                                  retries=0)

    def close(self) -> None:
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()
