"""Artifact files: where a step's value lives on disk, how it is written (atomically) and read."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from barca.core.root import store_prefix, valid_env_name  # noqa: F401 - re-exported
from barca.core.types import parse_key
from barca.identity.hashing import is_json_value
from barca.store import shapes

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,48}")
MAX_KEY_CHARS = 48


def _safe(value: str, underscore: bool = True) -> str:
    """A key's value as a file name, injectively: kept as written when it is plain (letters,
    digits, ``.``, ``-``, ``_`` where ``underscore`` allows it, and no leading ``.``), else
    ``.`` + its plain characters + ``-`` + a digest of the exact value. Only a digested name
    starts with ``.``, and each carries its own value's digest, so no two values share a name
    (``ACME Corp`` is ``.ACME-Corp-<digest>``, never the plain key ``ACME_Corp-27de7f2960``);
    without ``underscore`` no name holds ``_``, which then only separates a key's parts."""
    if _PLAIN.fullmatch(value) and value[0] != "." and (underscore or "_" not in value):
        return value
    tag = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    clean = re.sub(r"[^A-Za-z0-9._-]" if underscore else r"[^A-Za-z0-9.-]", "-", value)
    return f".{clean[:MAX_KEY_CHARS]}-{tag}"


def key_suffix(key: str) -> str:
    """``_<dimension>_<value>`` for each dimension of a key, as folder and file names carry it.
    With several dimensions a value holding ``_`` is digested too: ``region=eu_year_2024,
    year=x`` and ``region=eu,year=2024_year_x`` must not read alike."""
    dims = sorted(parse_key(key).items())
    one = len(dims) == 1
    return "".join(f"_{_UNSAFE.sub('_', dim)}_{_safe(value, one)}" for dim, value in dims)


def node_dir(node: str, key: str = "") -> str:
    """``pipeline.py:prices`` + ``ticker=AAPL`` -> ``pipeline.py--prices_ticker_AAPL``."""
    return _node_part(node) + key_suffix(key)


@functools.lru_cache(maxsize=4096)
def _node_part(node: str) -> str:
    """A node's part of its folder names (the same for each of its keys: made once)."""
    return _UNSAFE.sub("_", node.replace(":", "--").replace("/", "__"))


def artifact_relpath(node: str, key: str, run_hash: str, ext: str,
                     prefix: str = ".barca") -> str:
    return f"{prefix}/artifacts/{node_dir(node, key)}/{run_hash}.{ext}"


def choose_format(value: Any, serializer: str | None) -> str:
    """The format a step's value is stored in: ``serializer=`` if given; else JSON for what
    JSON holds, parquet for a table, pickle for the rest. The return annotation plays no part."""
    if serializer in EXT:
        return serializer
    if is_json_value(value):
        return "json"
    from barca.store import frames
    k = frames.kind(value)
    return "parquet" if k is not None and frames.can_parquet(k) else "pickle"


EXT = {"json": "json", "pickle": "pkl", "parquet": "parquet", "csv": "csv"}


def serialize(value: Any, fmt: str, checked: bool = False) -> bytes:
    """A value that is not written as a table file (see ``write_table``) as bytes.
    ``checked``: ``choose_format`` chose JSON because the value is JSON (not asked again)."""
    if fmt == "json":
        if not checked and not is_json_value(value):
            raise TypeError(f"serializer='json' cannot store a {type(value).__name__}")
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    import pickle
    return pickle.dumps(value, protocol=5)


def write_table(value: Any, fmt: str, folder: Path) -> tuple[str, str, str | None, str | None]:
    """Write ``value`` into a temp file in ``folder`` as a table (``fmt`` parquet or csv):
    (temp path, format, warning, shape as the ``shape`` column keeps it). parquet that cannot
    hold the value falls back to pickle with a warning; csv on a value that is not a table is
    an error, and leaves no file behind."""
    import tempfile

    from barca.store import frames
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
    os.close(fd)
    try:
        if frames.kind(value) is None:
            if fmt == "csv":
                raise TypeError(f'serializer="csv" stores tables only (a pandas or polars '
                                f"DataFrame, a pyarrow Table or a duckdb relation), not a "
                                f"{type(value).__name__}")
            why = f"parquet cannot hold a {type(value).__name__}"
        else:
            try:
                frames.write(value, fmt, Path(tmp))
                return tmp, fmt, None, shapes.encode(shapes.written(value, fmt, tmp))
            except Exception as exc:
                if fmt == "csv":
                    raise TypeError(f'serializer="csv" could not write this table: '
                                    f"{type(exc).__name__}: {exc}") from exc
                why = (f"parquet cannot hold this {type(value).__name__} "
                       f"({type(exc).__name__}: {exc})")
        Path(tmp).write_bytes(serialize(value, "pickle"))
        return tmp, "pickle", f"{why}; stored as pickle", shape(value, "pickle")
    except BaseException:
        discard(tmp)
        raise


def deserialize(data: bytes, fmt: str) -> Any:
    if fmt == "json":
        return json.loads(data)
    if fmt in ("parquet", "csv"):
        import io

        import pandas as pd
        read = pd.read_parquet if fmt == "parquet" else pd.read_csv
        return read(io.BytesIO(data))
    import pickle
    return pickle.loads(data)  # only ever barca's own store (see `barca docs cache`)


def discard(tmp: str) -> None:
    """A temp file that will not become an artifact (nothing to do if it is already gone)."""
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def write_atomic(path: Path, data: bytes | Path, fsync: bool = False) -> None:
    """Temp file in the same directory, then rename: a reader sees all or nothing. ``data``:
    the bytes, or a file copied in blocks (a result larger than memory)."""
    import tempfile
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, bytes):
                f.write(data)
            else:
                import shutil
                with open(data, "rb") as src:
                    shutil.copyfileobj(src, f, 1 << 20)
        commit(tmp, path, fsync)
    except BaseException:
        discard(tmp)
        raise


def file_mode() -> int:
    """The mode a file created here would get (0o666 less the umask). Temp files are created
    0600; a result keeps that only if the user's umask says so, so a project or a file:// store
    shared by a team stays readable by it."""
    global _FILE_MODE
    if _FILE_MODE is None:
        umask = None
        with contextlib.suppress(OSError, ValueError, StopIteration):
            status = Path("/proc/self/status").read_text()  # read, never set: threads share it
            umask = int(next(ln for ln in status.splitlines()
                             if ln.startswith("Umask:")).split()[1], 8)
        if umask is None:
            umask = os.umask(0o022)
            os.umask(umask)
        _FILE_MODE = 0o666 & ~umask
    return _FILE_MODE


_FILE_MODE: int | None = None


def _ready(tmp: str, fsync: bool) -> None:
    """A finished temp file given the mode a new file gets, and on disk when ``fsync``."""
    os.chmod(tmp, file_mode())
    if fsync:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def commit(tmp: str, path: Path, fsync: bool = False) -> None:
    """A finished temp file takes its place (renamed, so a reader sees all or nothing), with
    the mode a new file gets."""
    _ready(tmp, fsync)
    os.replace(tmp, path)


def file_kind(path: Path | str) -> str | None:
    """What is at ``path``, not following a symlink: ``file`` (a regular file), ``link``,
    ``dir`` or ``other``; None when nothing is. Only a regular file is ever read as a result:
    a symlink could point anywhere, and change after its target was checked."""
    import stat
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISREG(mode):
        return "file"
    return "link" if stat.S_ISLNK(mode) else "dir" if stat.S_ISDIR(mode) else "other"


def place(tmp: str, path: Path | str, sha: str, fsync: bool = False, replace: bool = False
          ) -> str:
    """A finished result file (``tmp``, its SHA-256 ``sha``) takes its place at ``path``, and
    never replaces another process's result there: two processes that compute the same run
    hash (two kernels on one notebook, values that differ run to run, or ``--refresh``) each
    keep the file their row describes, the second beside the first, named by its own digest.
    ``replace``: the file at ``path`` is known corrupt or missing (a repair), so it is replaced
    in place. Returns where the result went."""
    _ready(tmp, fsync)
    return _settle(tmp, os.fspath(path), sha, replace)


def _settle(tmp: str, path: str, sha: str, replace: bool) -> str:
    """``place`` once the temp file has its mode (and is on disk if asked)."""
    if replace:
        os.replace(tmp, path)
        return path
    try:
        os.link(tmp, path)  # atomic, and fails rather than replace
    except FileExistsError:
        try:
            same = file_sha256(path) == sha
        except OSError:
            same = False
        if same:
            discard(tmp)
            return path
        stem, ext = os.path.splitext(path)
        alt = f"{stem}-{sha[:16]}{ext}"
        os.replace(tmp, alt)
        return alt
    except OSError:  # a filesystem without hard links: the rename, as before
        os.replace(tmp, path)
        return path
    discard(tmp)
    return path


class _Temp:
    """This process's temp file names: its pid, a random tag, a counter."""
    pid, tag, n = 0, "", 0


def _temp_file(folder: str) -> tuple[int, str]:
    """A new empty file in ``folder`` for a result's bytes: (fd, path). Made with O_EXCL (never
    another's file) and the mode 0o666 less the umask -- the mode a new result gets (see
    ``file_mode``), so it needs no chmod. Named by pid, a random tag and a counter: cheaper
    than ``mkstemp`` at one file per step; a name taken all the same (a stale temp file of a
    crashed process) falls back to ``mkstemp``."""
    pid = os.getpid()
    if _Temp.pid != pid:  # first use, or a forked worker: a tag of its own
        _Temp.pid, _Temp.tag, _Temp.n = pid, os.urandom(4).hex(), 0
    _Temp.n += 1
    tmp = f"{folder}/.tmp-{pid}-{_Temp.tag}-{_Temp.n}"
    try:
        return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), tmp
    except FileExistsError:
        import tempfile
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        try:
            os.chmod(tmp, file_mode())
        except BaseException:
            os.close(fd)
            discard(tmp)
            raise
        return fd, tmp


def write_new(path: Path | str, data: bytes, sha: str, fsync: bool = False,
              replace: bool = False) -> str:
    """``data`` placed at ``path`` as ``place`` does (a temp file in the same folder first).
    Returns where the result went. One step's result, so kept to few system calls: the folder
    made, the temp file opened, written and closed, then linked into place."""
    path = os.fspath(path)
    folder = os.path.dirname(path)
    try:
        os.mkdir(folder)
    except FileExistsError:
        pass  # (not a folder: the open below fails, as it would after makedirs)
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = _temp_file(folder)
    try:
        try:
            view = memoryview(data)
            while view:  # a short write (a signal, a full disk's last bytes): the rest follows
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        return _settle(tmp, path, sha, replace)
    except BaseException:
        discard(tmp)
        raise


def file_sha256(path: Path | str) -> str:
    """A file's SHA-256, read in blocks (a big table is never held whole to hash it)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            h.update(block)
    return h.hexdigest()


def shape(value: Any, fmt: str) -> str | None:
    """What one artifact looks like, as the ``shape`` column keeps it (JSON text, described
    now, from the value: ``status`` never opens the file nor unpickles it; store.shapes)."""
    try:
        return shapes.encode(shapes.describe(value, fmt))
    except Exception:  # noqa: BLE001 - a value that will not say its size: no shape, no failure
        return None
