"""``@sink(path)``: an asset's value also written to a file the user names, when the asset runs.

``out.parquet`` (or ``.csv``, ``.json``) is one file; a partitioned asset writes one file per
key (``out_region_emea.parquet``). A path ending in ``/`` is one Hive-partitioned parquet
dataset with a ``region=emea/`` folder per key, which holds the current keys only (a removed
key's folder goes). Every file is written atomically; a sink that fails fails its step."""
from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from barca.core.types import parse_key
from barca.store.artifacts import _safe, key_suffix, write_atomic

FORMATS = (".parquet", ".csv", ".json")


def targets(sink: str, key: str) -> Path:
    """Where one key's value goes (relative to the project root)."""
    dims = sorted(parse_key(key).items())
    if sink.endswith("/"):
        folder = Path(sink)
        for d, v in dims:
            folder = folder / f"{d}={_safe(v)}"
        return folder / "part-0.parquet"
    p = Path(sink)
    if not dims:
        return p
    return p.with_name(f"{p.stem}{key_suffix(key)}{p.suffix}")


def _frame(value: Any) -> Any:
    from barca.store import frames
    if frames.kind(value) is not None:  # any table: pandas, polars, pyarrow, duckdb
        return frames.convert(value, "pandas")
    import pandas as pd
    if isinstance(value, dict):
        return pd.DataFrame.from_records([value])
    if isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return pd.DataFrame.from_records(value)
    return pd.DataFrame({"value": value if isinstance(value, list) else [value]})


def encode(value: Any, suffix: str, drop: tuple[str, ...] = ()) -> bytes:
    """The bytes of one sink file; ``drop`` names columns a Hive folder already holds."""
    if suffix == ".json":
        from barca.store import frames
        if frames.kind(value) is not None and frames.kind(value) != "pandas":
            value = frames.convert(value, "pandas")
        if hasattr(value, "to_json"):
            return value.to_json(orient="records").encode("utf-8")
        return json.dumps(value, ensure_ascii=False, default=str).encode("utf-8")
    df = _frame(value)
    df = df.drop(columns=[c for c in drop if c in df.columns])
    if suffix == ".csv":
        return df.to_csv(index=False).encode("utf-8")
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def write(root: Path, sinks: list[str], key: str, value: Any) -> list[str]:
    """Write every sink of one step; the paths written."""
    written = []
    for sink in sinks:
        rel = targets(sink, key)
        suffix = ".parquet" if sink.endswith("/") else rel.suffix
        if suffix not in FORMATS:
            raise ValueError(f"@sink({sink!r}): unknown format {suffix!r}; use a path ending in "
                             f"{', '.join(FORMATS)} or '/'")
        path = (root / rel).resolve()
        if not path.is_relative_to(root.resolve()) and Path(sink).is_absolute() is False:
            raise ValueError(f"@sink({sink!r}) writes outside the project")
        drop = tuple(parse_key(key)) if sink.endswith("/") else ()
        write_atomic(path, encode(value, suffix, drop))
        written.append(str(rel))
    return written


PART = "part-0.parquet"


def prune(root: Path, sink: str, keys: list[str]) -> list[str]:
    """A Hive dataset sink (a path ending in ``/``) made to hold the current ``keys`` only:
    the file barca wrote for any other key (``<dim>=<value>/.../part-0.parquet``, as deep as
    a key has dimensions) is removed, then its folders if that left them empty. Nothing else
    is touched: not a file barca did not write, nothing outside the sink's folder. The paths
    removed (relative to the project)."""
    if not sink.endswith("/") or not (root / sink).is_dir():
        return []
    base = (root / sink).resolve()
    depth = len(parse_key(keys[0])) if keys else None
    keep = {targets(sink, k).parent for k in keys}
    removed = []
    for part in sorted(base.rglob(PART)):
        rel = part.relative_to(base)
        folders = rel.parts[:-1]
        if not folders or any("=" not in f for f in folders) or part.is_symlink() \
                or (depth is not None and len(folders) != depth):
            continue  # not a key's file as barca lays them out
        if Path(sink, *folders) in keep:
            continue
        part.unlink()
        removed.append(str(Path(sink, *rel.parts)))
        folder = part.parent
        while folder != base and folder.is_relative_to(base):
            try:
                folder.rmdir()  # only once empty: a file the user put there keeps its folder
            except OSError:
                break
            folder = folder.parent
    return removed


def prune_all(root: Path, sinks: list[str], keys: list[str]) -> list[tuple[str, str]]:
    """``prune`` of each sink, and what a run says of it: ``("note", ...)`` for the files of
    keys that are gone, ``("warning", ...)`` for a sink whose files could not be removed."""
    said: list[tuple[str, str]] = []
    for sink in sinks:
        try:
            gone = prune(root, sink, keys)
        except OSError as exc:
            said.append(("warning", f"@sink({sink!r}): could not remove a removed key's "
                                    f"files: {exc}"))
            continue
        if gone:
            said.append(("note", f"@sink({sink!r}): removed {len(gone)} file"
                                 f"{'s' if len(gone) != 1 else ''} of keys that are gone"))
    return said
