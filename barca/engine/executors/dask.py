"""The Dask executor: steps run on a ``dask.distributed`` cluster — a ``LocalCluster`` started
for the run (``BARCA_EXECUTOR=dask``) or an existing scheduler (``BARCA_EXECUTOR=tcp://...``).

The same contract as the local pool: chunks of ``StepJob`` in, ``StepRecord`` out, through the
one worker entry point (``barca.engine.executors.worker.Worker``); the coordinator alone writes
metadata. Workers on other machines read inputs from and write artifacts to the shared store
(``BARCA_REMOTE_URI``)."""
from __future__ import annotations

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
    records = [worker.run(t) for t in tasks]
    worker.stamp = _project_stamp(root, tasks)
    return imported, records


def _project_stamp(root: str, tasks: list[StepJob]) -> tuple[Any, ...]:
    """What identifies the project's code now: each pipeline file's and each project module's
    (mtime, size), for the modules this worker has imported."""
    import sys
    files = {t.file for t in tasks if t.shipped is None}
    files |= {m.__file__ for m in list(sys.modules.values())
              if getattr(m, "__file__", None) and str(m.__file__).startswith(root + os.sep)}
    return _stat(sorted(files))


def _stat(files: Any) -> tuple[Any, ...]:
    out = []
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

    def run(self, tasks: list[StepJob], on_record: Callable[[StepRecord], None]) -> None:
        from distributed import as_completed

        per_chunk = max(1, min(64, -(-len(tasks) // (self.size * 4))))
        pending = {}
        for i in range(0, len(tasks), per_chunk):
            chunk = tasks[i:i + per_chunk]
            pending[self._submit(chunk)] = chunk
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
