"""The one worker entry point every executor uses: import the pipeline once, run steps, write
artifacts (atomically), return small records."""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import sys
import time
import traceback as tb
from pathlib import Path
from typing import Any, Callable

from barca import artifacts
from barca.executors.task import StepRecord, StepTask
from barca.hashing import canonical_json, sensor_run_hash, sha, source_only, value_digest


class BadInput(Exception):
    """An input artifact that is missing or does not match its recorded SHA-256."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"input artifact {what}: {path}")
        self.path, self.what = path, what


_OWN = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # barca/


def user_traceback(exc: BaseException) -> str:
    """The traceback of a user function's exception from the user's own first frame: the
    worker's frames (and the import machinery's, when the pipeline file failed to import) are
    barca's business, not the reader's. All of it when the error arose inside barca."""
    t = exc.__traceback__
    while t is not None and (t.tb_frame.f_code.co_filename.startswith(_OWN)
                             or t.tb_frame.f_code.co_filename.startswith("<frozen ")):
        t = t.tb_next
    return "".join(tb.format_exception(type(exc), exc, t or exc.__traceback__))


class Worker:
    """State kept by one worker process across steps: imported modules, loaded inputs."""

    def __init__(self, root: str, notify: Callable[[str, Any], None]) -> None:
        self.root = Path(root)
        self.notify = notify
        self.functions: dict[tuple[str, str], Callable[..., Any]] = {}
        self.values: dict[str, Any] = {}
        self.remote: Any = None
        source_only(root)  # run project modules from the source that was hashed, never a .pyc
        for p in (root,):
            if p not in sys.path:
                sys.path.insert(0, p)

    def function(self, task: StepTask) -> Callable[..., Any]:
        key = (task.file, task.function)
        if task.shipped is not None:  # a notebook function, sent by value
            key = (task.file, hashlib.sha256(task.shipped).hexdigest())
            fn = self.functions.get(key)
            if fn is None:
                import cloudpickle
                fn = self.functions[key] = cloudpickle.loads(task.shipped)
            return fn
        fn = self.functions.get(key)
        if fn is None:
            mod = sys.modules.get(task.module)
            if mod is None or os.path.abspath(getattr(mod, "__file__", "") or "") != task.file:
                self.notify("importing", task.file)
                d = os.path.dirname(task.file)
                if d not in sys.path:
                    sys.path.insert(0, d)
                spec = importlib.util.spec_from_file_location(task.module, task.file)
                assert spec is not None and spec.loader is not None
                mod = importlib.util.module_from_spec(spec)
                sys.modules[task.module] = mod
                try:
                    spec.loader.exec_module(mod)
                except BaseException:
                    sys.modules.pop(task.module, None)
                    raise
            fn = getattr(mod, task.function)
            self.functions[key] = fn
        return fn

    def load(self, relpath: str, fmt: str, sha256: str | None = None) -> Any:
        """An input's value, checked against its recorded SHA-256 as it is read: a missing or
        corrupt input is reported to the coordinator (which computes it again), never passed
        to the function and never blamed on this step."""
        if relpath in self.values:
            return self.values[relpath]
        try:
            data = (self.root / relpath).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            data = self._fetch(relpath)  # a worker on another machine: from the shared store
            if data is None:
                raise BadInput(relpath, "missing") from None
        if sha256 and hashlib.sha256(data).hexdigest() != sha256:
            raise BadInput(relpath, "corrupt")
        value = artifacts.deserialize(data, fmt)
        if len(self.values) > 512:
            self.values.clear()
        self.values[relpath] = value
        return value

    def _fetch(self, relpath: str) -> bytes | None:
        from barca import remote
        uri = remote.configured()
        if uri is None:
            return None
        if self.remote is None:
            self.remote = remote.Remote(uri)
        if self.remote.fetch(self.root, relpath) is None:
            return None
        return (self.root / relpath).read_bytes()

    def _upload(self, rel: str, rec: StepRecord) -> None:
        """Copy an artifact to the remote store, if one is configured; a failure is reported,
        never fatal (the next command retries it)."""
        from barca import remote
        uri = remote.configured()
        if uri is None:
            return
        try:
            if self.remote is None:
                self.remote = remote.Remote(uri)
            self.remote.upload(self.root, rel)
            rec.uploaded = True
        except Exception as exc:
            rec.uploaded = False
            rec.upload_error = f"{type(exc).__name__}: {exc}"

    def kwargs(self, task: StepTask) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for param, spec in task.kwargs.items():
            tag = spec[0]
            if tag == "value":
                out[param] = spec[1]
            elif tag == "artifact":
                out[param] = self.load(spec[1], spec[2], spec[3])
            elif tag == "collect":
                out[param] = [self.load(p, f, h) for p, f, h in spec[1]]
            else:
                out[param] = None
        return out

    def run(self, task: StepTask) -> StepRecord:
        start = time.perf_counter()
        out = io.StringIO()
        attempts = task.retries + 1
        for attempt in range(attempts):
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    fn = self.function(task)
                    try:
                        kwargs = self.kwargs(task)
                    except BadInput as bad:
                        return StepRecord(task.index, "input", time.perf_counter() - start,
                                          error=str(bad), bad_input=bad.path)
                    value = fn(**kwargs)
                if task.kind == "sensor" and isinstance(value, tuple) and len(value) == 2 \
                        and isinstance(value[0], bool):
                    value = value[1]
                return self.store(task, value, start, out.getvalue())
            except BaseException as exc:  # a user function's exception is data
                if isinstance(exc, KeyboardInterrupt):
                    raise
                if attempt + 1 < attempts:
                    continue
                return StepRecord(task.index, "failed", time.perf_counter() - start,
                                  error=f"{type(exc).__name__}: {exc}",
                                  traceback=user_traceback(exc), output=out.getvalue())
        raise AssertionError("unreachable")

    def store(self, task: StepTask, value: Any, start: float, output: str) -> StepRecord:
        rec = StepRecord(task.index, "success", 0.0, output=output)
        if task.key_source:
            problem = _key_source_problem(value, rec)
            if problem:
                rec.status, rec.error = "failed", problem
                rec.elapsed = time.perf_counter() - start
                return rec
        try:
            fmt = artifacts.choose_format(value, task.serializer)
            data = artifacts.serialize(value, fmt)
        except Exception as exc:
            rec.status = "failed"
            rec.error = (f"cannot store the result of {task.step}: a {type(value).__name__} "
                         f"is not serialisable ({type(exc).__name__}: {exc})")
            rec.traceback = tb.format_exc()
            rec.elapsed = time.perf_counter() - start
            return rec
        run_hash = task.run_hash
        if task.kind == "sensor":
            rec.value_hash = value_digest(value)
            run_hash = rec.run_hash = sensor_run_hash(task.run_hash, rec.value_hash)
        rel = artifacts.artifact_relpath(task.node, task.key, run_hash, artifacts.EXT[fmt],
                                         task.store_prefix)
        if task.sinks:  # before the artifact: a step whose sink failed leaves no result behind
            from barca import sinks
            try:
                sinks.write(self.root, task.sinks, task.key, value)
            except Exception as exc:  # a sink the user asked for failed: the step fails
                rec.status = "failed"
                rec.error = f"sink failed: {type(exc).__name__}: {exc}"
                rec.traceback = tb.format_exc()
                rec.elapsed = time.perf_counter() - start
                return rec
        try:
            artifacts.write_atomic(self.root / rel, data,
                                   fsync=os.environ.get("BARCA_FSYNC", "") not in ("", "0"))
        except OSError as exc:
            rec.status = "failed"
            rec.infra = rec.error = f"cannot write {rel}: {exc.strerror or exc}"
            rec.elapsed = time.perf_counter() - start
            return rec
        self.values[rel] = value
        self._upload(rel, rec)
        rec.path, rec.format, rec.size = rel, fmt, len(data)
        rec.sha256 = hashlib.sha256(data).hexdigest()
        rec.shape = artifacts.shape(value)
        rec.elapsed = time.perf_counter() - start
        return rec


def _key_source_problem(value: Any, rec: StepRecord) -> str | None:
    try:
        rec.keys, rec.key_values, rec.key_raw = source_keys(value)
    except ValueError as exc:
        return str(exc)
    return None


def source_keys(value: Any) -> tuple[list[str], dict[str, str] | None, dict[str, Any] | None]:
    """The partition keys a source's output gives: a list's items, or a dict's keys (with each
    key's value and its digest). ``ValueError`` names what is wrong."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [(k, None) for k in value]
    else:
        raise ValueError(f"returned a {type(value).__name__}, but its output gives partition "
                         "keys: return a list of keys or a dict of key -> value")
    keys: list[str] = []
    seen: dict[str, Any] = {}
    values: dict[str, str] = {}
    raw: dict[str, Any] = {}
    is_dict = isinstance(value, dict)
    for k, v in items:
        if isinstance(k, bool) or not isinstance(k, (str, int)):
            raise ValueError(f"partition key {k!r} is a {type(k).__name__}; keys must be strings")
        s = str(k)
        if s in seen:
            raise ValueError(f"partition keys {seen[s]!r} and {k!r} collide (both become {s!r})")
        seen[s] = k
        keys.append(s)
        if is_dict:
            try:
                values[s] = sha("json", canonical_json(v))
            except (TypeError, ValueError):
                raise ValueError(f"the value of partition key {s!r} is not JSON-writable "
                                 f"({type(v).__name__})") from None
            raw[s] = v
    return keys, (values if is_dict else None), (raw if is_dict else None)
