"""Artifact files: where a step's value lives on disk, how it is written (atomically) and read."""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from barca.hashing import is_json_value
from barca.types import parse_key

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_KEY_CHARS = 48


def _safe(value: str) -> str:
    clean = _UNSAFE.sub("_", value)
    if clean != value or len(clean) > MAX_KEY_CHARS or clean in ("", ".", ".."):
        tag = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        clean = f"{clean[:MAX_KEY_CHARS]}-{tag}"
    return clean


def node_dir(node: str, key: str = "") -> str:
    """``pipeline.py:prices`` + ``ticker=AAPL`` -> ``pipeline.py--prices_ticker_AAPL``."""
    base = _UNSAFE.sub("_", node.replace(":", "--").replace("/", "__"))
    for dim, value in sorted(parse_key(key).items()):
        base += f"_{_safe(dim)}_{_safe(value)}"
    return base


_ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


_ENV_OVERRIDE: Any = None   # a ContextVar, made when first used (see using_env)


class using_env:  # noqa: N801 - used like a function: ``with using_env("staging"):``
    """Commands in this block (this thread) use the named environment's store, whatever
    BARCA_ENV says: the status widget's threads, for the ``--env`` it was opened with."""

    def __init__(self, env: str | None) -> None:
        self.env, self.token = env, None

    def __enter__(self) -> "using_env":
        global _ENV_OVERRIDE
        if self.env is not None:
            if _ENV_OVERRIDE is None:
                import contextvars
                _ENV_OVERRIDE = contextvars.ContextVar("barca_env", default=None)
            self.token = _ENV_OVERRIDE.set(self.env)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.token is not None:
            _ENV_OVERRIDE.reset(self.token)


def valid_env_name(name: str) -> bool:
    return bool(_ENV_NAME.fullmatch(name)) and ".." not in name


def store_prefix(env: str | None = None) -> str:
    """The store's folder, relative to the project root: ``.barca``, or ``.barca/envs/<env>``
    for a named environment (``--env`` / ``BARCA_ENV``): a cache of its own."""
    if env is None and _ENV_OVERRIDE is not None:
        env = _ENV_OVERRIDE.get()
    if env is None:
        from barca.settings import value
        env = value("env")  # BARCA_ENV, else barca.toml's default_env
    name = env or ""
    if not name:
        return ".barca"
    if not valid_env_name(name):
        from barca.errors import UsageError
        raise UsageError(f"--env {name!r} is not a plain folder name.",
                         "Name an environment with letters, digits, '.', '_' and '-' only "
                         "(for example --env staging).")
    return f".barca/envs/{name}"


def artifact_relpath(node: str, key: str, run_hash: str, ext: str,
                     prefix: str = ".barca") -> str:
    return f"{prefix}/artifacts/{node_dir(node, key)}/{run_hash}.{ext}"


def choose_format(value: Any, serializer: str | None) -> str:
    if serializer in ("json", "pickle", "parquet"):
        return serializer
    if is_json_value(value):
        return "json"
    mod = type(value).__module__
    if mod.startswith(("pandas", "pyarrow", "duckdb", "polars")):
        try:
            import pyarrow  # noqa: F401
            return "parquet"
        except ImportError:
            return "pickle"
    return "pickle"


EXT = {"json": "json", "pickle": "pkl", "parquet": "parquet"}


def serialize(value: Any, fmt: str) -> bytes:
    if fmt == "json":
        if not is_json_value(value):
            raise TypeError(f"serializer='json' cannot store a {type(value).__name__}")
        return json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    if fmt == "parquet":
        import io
        buf = io.BytesIO()
        mod = type(value).__module__
        if mod.startswith("duckdb"):
            value = value.df()
        if mod.startswith("pyarrow"):
            import pyarrow.parquet as pq
            pq.write_table(value, buf)
        else:
            value.to_parquet(buf)
        return buf.getvalue()
    import pickle
    return pickle.dumps(value, protocol=5)


def deserialize(data: bytes, fmt: str) -> Any:
    if fmt == "json":
        return json.loads(data)
    if fmt == "parquet":
        import io

        import pandas as pd
        return pd.read_parquet(io.BytesIO(data))
    import pickle
    return pickle.loads(data)  # only ever barca's own store (see `barca docs cache`)


def write_atomic(path: Path, data: bytes, fsync: bool = False) -> None:
    """Temp file in the same directory, then rename: a reader sees all or nothing."""
    import tempfile
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def shape(value: Any) -> str:
    """What one artifact looks like: ``dict (3 keys)``, ``str``, ``3 rows x 2 cols``."""
    t = type(value)
    if t is dict:
        return f"dict ({len(value)} key{'s' if len(value) != 1 else ''})"
    if t is list:
        return f"list ({len(value)} item{'s' if len(value) != 1 else ''})"
    s = getattr(value, "shape", None)
    if isinstance(s, tuple) and len(s) == 2:
        return f"{s[0]} rows x {s[1]} cols"
    return t.__name__
