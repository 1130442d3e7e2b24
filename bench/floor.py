"""The disk floor (performance.md, "The disk sets a floor").

A plain Python loop that does the unavoidable file-system work of a first run over N keys: one
folder and one small JSON file per key (temp file + rename, as barca writes artifacts), then one
SQLite transaction (WAL, synchronous=NORMAL) inserting one row per key. No interpreter start,
no planning, no worker processes: barca's first run can only approach it.

    python bench/floor.py            # 2,000 keys
    python bench/floor.py 50000      # 50,000 keys
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, arg_parser, emit, session_dir  # noqa: E402


def write_floor(root: Path, n_keys: int) -> None:
    """The folders, files and SQLite rows of n_keys keys, under root/.barca/."""
    store = root / ".barca"
    arts = store / "artifacts"
    arts.mkdir(parents=True)
    db = sqlite3.connect(store / "metadata.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE materializations (node TEXT, partition TEXT, run_hash TEXT, "
               "path TEXT, size INTEGER, sha256 TEXT, created_at REAL, "
               "PRIMARY KEY (node, partition, run_hash))")
    width = max(4, len(str(n_keys - 1)))
    rows = []
    for i in range(n_keys):
        key = f"k{i:0{width}d}"
        folder = arts / f"pipeline.py--item_key_{key}"
        folder.mkdir()
        data = json.dumps({"key": key, "n": len(key)}).encode()
        run_hash = hashlib.sha256(key.encode()).hexdigest()
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        path = folder / f"{run_hash}.json"
        os.replace(tmp, path)
        rows.append(("pipeline.py:item", f"key={key}", run_hash, str(path.relative_to(root)),
                     len(data), hashlib.sha256(data).hexdigest(), time.time()))
    with db:
        db.executemany("INSERT INTO materializations VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    db.close()


def floor_seconds(n_keys: int) -> float:
    """Seconds for one floor pass in a fresh folder (the folder is removed afterwards)."""
    root = Path(tempfile.mkdtemp(prefix=f"floor-{n_keys}-", dir=session_dir()))
    try:
        t0 = time.perf_counter()
        write_floor(root, n_keys)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def floor_figure(fid: str, n_keys: int, runs: int, warmup: int = 1, tgt: str = "") -> Figure:
    for _ in range(warmup):
        floor_seconds(n_keys)
    xs = [floor_seconds(n_keys) for _ in range(max(1, runs))]
    return Figure(fid, f"disk floor, {n_keys:,} keys",
                  median=statistics.median(xs), min=min(xs), max=max(xs), runs=len(xs),
                  target=tgt, values=[round(x, 6) for x in xs])


def main() -> int:
    ap = arg_parser("Disk floor: folders, files and one SQLite transaction for N keys.")
    ap.add_argument("n_keys", nargs="?", type=int, default=2000)
    opts = ap.parse_args()
    fig = emit(floor_figure("floor", opts.n_keys, opts.runs, opts.warmup))
    print(f"{fig.median:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
