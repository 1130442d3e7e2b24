"""The one worker entry point every executor uses: import the pipeline once, run steps, write
artifacts (atomically), return small records."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import time
import traceback as tb
from collections.abc import Callable
from itertools import compress
from operator import ne
from pathlib import Path
from typing import Any

from barca.core.salt import salt
from barca.core.types import key_strings
from barca.engine.executors.capture import LineFile, StepOutput, captured, user_traceback
from barca.engine.executors.job import StepJob, StepRecord, pack_output
from barca.identity.digests import sha as parts_sha
from barca.identity.hashing import (
    json_digests,
    sensor_run_hash,
    source_only,
    str_dict_json,
    value_digest,
)
from barca.store import artifacts, frames, valuememo


class BadInput(Exception):
    """An input artifact that is missing or does not match its recorded SHA-256."""

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"input artifact {what}: {path}")
        self.path, self.what = path, what


class Worker:
    """State kept by one worker process across steps: imported modules, loaded inputs."""

    def __init__(self, settings: Any, notify: Callable[[str, Any], None],
                 pipe: LineFile | None = None) -> None:
        self.settings = settings  # the command's, as the worker was started with them
        self.pipe = pipe  # lines go to the coordinator as written (else in the record)
        self.stamp: tuple[Any, ...] = ()  # a Dask worker's project files as it last ran them
        root = str(settings.root)
        self.root = Path(root)
        self.root_str = root
        self.notify = notify
        self.functions: dict[tuple[str, str], Callable[..., Any]] = {}
        # (path, sha256, reader of a table) -> the value read or written (see load)
        self.values: dict[tuple[str, str | None, str | None], Any] = {}
        self.remote: Any = None
        source_only(root)  # run project modules from the source that was hashed, never a .pyc
        for p in (root,):
            if p not in sys.path:
                sys.path.insert(0, p)

    def function(self, task: StepJob) -> Callable[..., Any]:
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

    def load(self, relpath: str, fmt: str, sha256: str | None = None,
             reader: str | None = None) -> Any:
        """An input's value, checked against its recorded SHA-256 before the step sees it: a
        missing or corrupt input is reported to the coordinator (which fetches or computes it
        again), never passed to the function and never blamed on this step. A table is read as
        ``reader`` asks (see barca.model.readers); a lazy reader scans the verified local file
        and reads only what the step's query touches."""
        table = fmt in frames.TABLE_FORMATS
        # keyed by the digest too: a result recomputed under the same run hash with other bytes
        # (a uuid, a timestamp) is a new value, never the one this worker held before
        key = (relpath, sha256, (reader or "pandas").rstrip("[]") if table else None)
        if key in self.values:
            return self.values[key]
        if table:
            path = self.verified(relpath, sha256)
            value = frames.read(path, fmt, reader or "pandas")
            if key[2] in frames.LAZY:
                return value  # cheap to make again; a relation belongs to its connection
        else:
            data = self._bytes(relpath, sha256)
            value = artifacts.deserialize(data, fmt)
        if len(self.values) > 512:
            self.values.clear()
        self.values[key] = value
        if reader is not None and not table:  # a pickled table, in the type asked for
            return frames.convert(value, reader)
        return value

    def verified(self, relpath: str, sha256: str | None) -> Path:
        """An input file's path once its SHA-256 is checked (read in blocks, never whole). A
        file this machine lacks is fetched from the shared store into its local place, checked
        on the way (against this record, else the store's manifest, signed with a key), and
        only the local copy is read -- a lazy reader too. A regular file only: a symlink (or
        a directory) in an artifact's place is not the result that was recorded."""
        path = self.root / relpath
        kind = artifacts.file_kind(path)
        if kind is None:  # not here: a worker elsewhere, or evicted -- the shared store
            store = self._remote_store()
            if store is None or store.fetch(self.root, relpath, sha256) is None:
                raise BadInput(relpath, "missing")
            kind = artifacts.file_kind(path)
        if kind != "file":
            raise BadInput(relpath, "not a regular file")
        if sha256 and artifacts.file_sha256(path) != sha256:
            raise BadInput(relpath, "corrupt")
        return path

    def _bytes(self, relpath: str, sha256: str | None) -> bytes:
        """A small input's bytes, read once and checked as ``verified`` checks a file."""
        path = os.path.join(self.root_str, relpath)  # a str: a fan-in reads thousands
        try:  # one open that never follows a symlink (no stat first: thousands of inputs)
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError):
            fd = os.open(self.verified(relpath, sha256), os.O_RDONLY)  # fetched and checked
        except OSError:  # ELOOP: a symlink
            raise BadInput(relpath, "not a regular file") from None
        try:  # read on the descriptor: no buffered file object per input
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(relpath, "not a regular file")
            parts = []
            want = min(st.st_size + 1, 1 << 30)  # all of it in one read, then its end
            while block := os.read(fd, want):
                parts.append(block)
                want = 1 << 16
        except IsADirectoryError:
            raise BadInput(relpath, "not a regular file") from None
        finally:
            os.close(fd)
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if sha256 and hashlib.sha256(data).hexdigest() != sha256:
            raise BadInput(relpath, "corrupt")
        return data

    def collected(self, items: list[tuple[Any, ...]], reader: str | None) -> Any:
        """Every key of a partitioned upstream: one lazy frame (or relation) over all their
        files, with a ``partition`` column, for a lazy annotation; one frame for an eager
        one; else a list of values. No keys: an empty value of the type asked for."""
        if not items:
            return frames.empty_keys(reader)
        if reader is not None and not reader.endswith("[]") \
                and all(i[1] in frames.TABLE_FORMATS for i in items):
            return frames.read_keys([(i[3], self.verified(i[0], i[2]), i[1]) for i in items],
                                    reader)
        return [self.load(i[0], i[1], i[2], reader) for i in items]

    def _remote_store(self) -> Any:
        if self.remote is None:
            from barca.store import remote
            self.remote = remote.open_store(self.settings)
        return self.remote

    def _upload(self, rel: str, rec: StepRecord, task: StepJob, data: bytes | None) -> None:
        """Copy an artifact to the remote store, if one is configured; a failure is reported,
        never fatal (the next command retries it)."""
        if self.settings.remote_uri is None:
            return
        try:
            store = self._remote_store()
            store.upload(self.root, rel, task.node, task.key, data)
            rec.uploaded = True
        except Exception as exc:
            rec.uploaded = False
            rec.upload_error = f"{type(exc).__name__}: {exc}"

    def kwargs(self, task: StepJob) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for param, spec in task.kwargs.items():
            tag = spec[0]
            if tag == "value":
                out[param] = spec[1]
            elif tag == "artifact":
                out[param] = self.load(spec[1], spec[2], spec[3], spec[4])
            elif tag == "collect":
                out[param] = self.collected(spec[1], spec[2])
            else:
                out[param] = None
        if any(type(v).__name__ == "DuckDBPyRelation" for v in out.values()):
            from barca.store.duck import name_relations  # visible to SQL as views, by name
            name_relations(out)
        return out

    def run(self, task: StepJob) -> StepRecord:
        start = time.perf_counter()
        out = StepOutput(None if self.pipe is None else self.pipe.sink(task.index))
        attempts = task.retries + 1
        for attempt in range(attempts):
            try:
                with captured(out):
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
                out.finish()
                rec = self.store(task, value, start, out)
                rec.attempts = attempt + 1
                return rec
            except BaseException as exc:  # a user function's exception is data
                if isinstance(exc, KeyboardInterrupt):
                    raise
                out.finish()
                trace = user_traceback(exc)
                shown = out.text()  # the last traceback is shown as the error, not as output
                out.add_traceback(trace)  # every failed attempt's traceback is in the log
                if attempt + 1 < attempts:
                    if task.retry_backoff:  # after failed attempt k, wait retry_backoff * k
                        time.sleep(task.retry_backoff * (attempt + 1))
                    continue
                return StepRecord(task.index, "failed", time.perf_counter() - start,
                                  error=f"{type(exc).__name__}: {exc}", traceback=trace,
                                  output=shown, lines=self._lines(out), attempts=attempt + 1)
        raise AssertionError("unreachable")

    def _lines(self, out: StepOutput) -> list[Any] | None:
        """The lines for the record: None when the pipe has carried them already."""
        return out.lines if self.pipe is None else None

    def store(self, task: StepJob, value: Any, start: float, out: StepOutput) -> StepRecord:
        rec = StepRecord(task.index, "success", 0.0, output=out.text(), lines=self._lines(out))
        # a dict source of strings: its JSON texts made at once (see hashing.str_dict_json)
        texts = str_dict_json(value) if task.key_source and type(value) is dict else None
        if task.key_source:
            problem = _key_source_problem(value, rec, valuememo.path(
                self.root_str, task.store_prefix, task.node), None if texts is None else texts[2],
                strings=texts is not None)
            if problem:
                rec.status, rec.error = "failed", problem
                rec.elapsed = time.perf_counter() - start
                return rec
        value = frames.settle(value)  # a LazyFrame is collected when the step ends
        tmp: str | None = None
        data: bytes | None = None
        try:
            # (a dict of strings, encoded above: JSON, as choose_format finds it after a walk
            # of every value)
            fmt = "json" if texts is not None and task.serializer not in artifacts.EXT \
                else artifacts.choose_format(value, task.serializer)
            if fmt in frames.TABLE_FORMATS:  # written straight into a file, never as bytes
                folder = self.root / artifacts.artifact_relpath(
                    task.node, task.key, "-", "-", task.store_prefix)
                tmp, fmt, rec.warning, rec.shape = artifacts.write_table(value, fmt,
                                                                         folder.parent)
            else:
                # (JSON chosen by choose_format, not asked by serializer=: a JSON value)
                data = texts[0].encode("utf-8") if texts is not None and fmt == "json" \
                    else artifacts.serialize(value, fmt, checked=task.serializer != "json")
        except Exception as exc:
            rec.status = "failed"
            rec.error = (f"cannot store the result of {task.step}: a {type(value).__name__} "
                         f"is not serialisable ({type(exc).__name__}: {exc})")
            rec.traceback = tb.format_exc()
            rec.elapsed = time.perf_counter() - start
            return rec
        try:
            return self._commit(task, rec, value, fmt, data, tmp, start,
                                texts[1] if texts is not None else None)
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)  # a step that failed after its table was written

    def _commit(self, task: StepJob, rec: StepRecord, value: Any, fmt: str,
                data: bytes | None, tmp: str | None, start: float,
                canonical: str | None = None) -> StepRecord:
        """The written value takes its place in the store (after the step's sinks);
        ``canonical``: the value's canonical JSON, when made already."""
        run_hash = task.run_hash
        if task.kind == "sensor":
            rec.value_hash = value_digest(value) if canonical is None \
                else parts_sha("json", canonical)  # (as value_digest makes it)
            run_hash = rec.run_hash = sensor_run_hash(task.run_hash, rec.value_hash)
        rel = artifacts.artifact_relpath(task.node, task.key, run_hash, artifacts.EXT[fmt],
                                         task.store_prefix)
        if task.sinks:  # before the artifact: a step whose sink failed leaves no result behind
            from barca.store import sinks
            try:
                sinks.write(self.root, task.sinks, task.key, value)
            except Exception as exc:  # a sink the user asked for failed: the step fails
                rec.status = "failed"
                rec.error = f"sink failed: {type(exc).__name__}: {exc}"
                rec.traceback = tb.format_exc()
                rec.elapsed = time.perf_counter() - start
                return rec
        fsync = self.settings.fsync
        full = os.path.join(self.root_str, rel)  # a str: no Path made per step
        try:
            if data is not None:
                sha = hashlib.sha256(data).hexdigest()
                placed = artifacts.write_new(full, data, sha, fsync, task.repair)
            else:
                assert tmp is not None  # no bytes: the value was written to a file
                sha = artifacts.file_sha256(Path(tmp))
                placed = artifacts.place(tmp, full, sha, fsync, task.repair)
        except OSError as exc:
            rec.status = "failed"
            rec.infra = rec.error = f"cannot write {rel}: {exc.strerror or exc}"
            rec.elapsed = time.perf_counter() - start
            return rec
        if placed != full:  # another process's file of the same run hash stays: this one
            rel = f"{rel.rpartition('/')[0]}/{os.path.basename(placed)}"  # went beside it
        self._upload(rel, rec, task, data)
        rec.path, rec.format = rel, fmt
        rec.sha256 = sha
        if data is not None:
            rec.size = len(data)
            rec.shape = artifacts.shape(value, fmt)
        else:
            rec.size = os.stat(placed).st_size
        written = frames.kind(value) if fmt in frames.TABLE_FORMATS else None
        if written != "duckdb":  # a relation is not kept: it belongs to the step's connection
            self.values[(rel, rec.sha256, written)] = value  # as load looks it up
        rec.elapsed = time.perf_counter() - start
        return rec


def _key_source_problem(value: Any, rec: StepRecord, memo: str | None = None,
                        raw_text: str | None = None, strings: bool = False) -> str | None:
    try:  # (the digests as bytes, when the memo gave them so: half the hex in the pipe)
        rec.keys, rec.key_values, rec.key_raw = pack_output(
            *source_keys(value, memo, strings=strings, raw=True), raw_text)
    except ValueError as exc:
        return str(exc)
    return None


MEMO_KEYS = 2048  # a dict source of fewer keys is hashed whole: its memo would cost more
MEMO_MOVED = 1024  # values hashed again past which the memo is written anew


def source_keys(value: Any, memo: str | None = None, strings: bool = False, raw: bool = False
                ) -> tuple[list[str], str | bytes | None, list[Any] | None]:
    """The partition keys a source's output gives: a list's items, or a dict's keys, with (for a
    dict) each key's value and the digests of those values, in key order (see SourceOutput).
    ``memo``: where a dict source's last values and digests are kept (store.valuememo): the
    values that are the same string at the same key keep their digest. ``strings``: a dict
    whose keys and values are all strings (not looked at again); ``raw``: the digests may be
    bytes (32 a value) rather than hex, as the memo holds them. ``ValueError`` names what is
    wrong."""
    is_dict = isinstance(value, dict)
    if not is_dict and not isinstance(value, (list, tuple)):
        raise ValueError(f"returned a {type(value).__name__}, but its output gives partition "
                         "keys: return a list of keys or a dict of key -> value")
    prev = None
    if is_dict and memo is not None and len(value) >= MEMO_KEYS:
        prev = valuememo.read(memo, salt())
    keys: list[str] | None = None
    kj: str | None = None  # the keys joined by NUL, when they are the memo's keys, in order
    if is_dict and (strings or {str}.issuperset(map(type, value))):
        keys = list(value)  # a dict's string keys: unique, also case-folded (the memo's keys
        if prev is not None:  # were checked so)
            kj = "\x00".join(keys)
            if kj != prev[0] or kj.count("\x00") != len(keys) - 1:
                kj = None
        if kj is None and len({k.casefold() for k in keys}) != len(keys):
            keys = None
    if keys is None:
        kj = None
        keys, problems = key_strings(value)
        if problems:
            k, earlier = problems[0]
            if earlier is None:
                raise ValueError(f"partition key {k!r} is a {type(k).__name__}; keys must be "
                                 "strings")
            raise ValueError(f"partition keys {earlier!r} and {k!r} collide (both become "
                             f"{str(k)!r}, or differ only in case)")
    if not is_dict:
        return keys, None, None
    values = list(value.values())
    vj = valuememo.joined(values, strings) if prev is not None and kj is not None else None
    if prev is not None and vj is not None:
        # the memo's keys, in order, and string values: an equal string is the same canonical
        # JSON, so the same digest (the memo's values split as many as its keys: see read)
        moved = [] if vj == prev[1] else _moved(prev[1], prev[3], vj, values)
        got = _spliced(prev[2], moved, bytes.fromhex(json_digests([values[i] for i in moved])))
        if len(moved) > MEMO_MOVED and memo is not None:  # (a memo was read: it is given)
            valuememo.write(memo, salt(), keys, values, got, kj, vj)
        return keys, got if raw else got.hex(), values
    try:
        digests = json_digests(values)
        if memo is not None and len(values) >= MEMO_KEYS:  # (string values only: see write)
            valuememo.write(memo, salt(), keys, values, digests, kj)
        return keys, digests, values
    except (TypeError, ValueError):
        for s, v in zip(keys, values, strict=True):  # name the first value that is not JSON
            try:
                json_digests([v])
            except (TypeError, ValueError):
                raise ValueError(f"the value of partition key {s!r} is not JSON-writable "
                                 f"({type(v).__name__})") from None
        raise




def _moved(old: str, at: list[int], new: str, values: list[str]) -> list[int]:
    """The positions where ``values`` (joined by NUL: ``new``) differ from the memo's values
    (``old``, as many, joined so; ``at``: where each STEP-th begins, see valuememo.read),
    compared a block of STEP values at a time: only a block whose text moved is split."""
    out: list[int] = []
    pos = 0  # where block j begins in ``new``
    last = len(at) - 1
    step = valuememo.STEP
    for j, a in enumerate(at):
        lo = j * step
        block = values[lo:lo + step]
        size = sum(map(len, block)) + len(block) - 1
        b = at[j + 1] - 1 if j < last else len(old)
        if old[a:b] != new[pos:pos + size]:  # (as many values each: see valuememo.read)
            out.extend(compress(range(lo, lo + len(block)), map(ne, old[a:b].split("\x00"),
                                                                 block)))
        pos += size + 1
    return out


def _spliced(old: bytes, moved: list[int], fresh: bytes) -> bytes:
    """``old`` (32 bytes a value) with the digest of each value at ``moved`` (in order)
    replaced by the next of ``fresh``."""
    if not moved:
        return old
    parts: list[bytes] = []
    last = 0
    for j, i in enumerate(moved):
        parts += (old[32 * last:32 * i], fresh[32 * j:32 * j + 32])
        last = i + 1
    parts.append(old[32 * last:])
    return b"".join(parts)
