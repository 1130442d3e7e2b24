"""S17 (the spec's S15): `barca sql "select count(*), sum(km) from trips"` over 1 M parquet rows
in 15 keys, and DuckDB alone over the same files (a `python -c` reading them with
`read_parquet`), each a whole process with its peak memory. Target: barca <= 2 x DuckDB alone,
in time and in peak memory. `--quick` uses 150,000 rows.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    barca,
    emit,
    failed,
    figure,
    main,
    make_project,
    measure,
    prime,
)

PIPELINE = '''import numpy as np
import pandas as pd
from barca import asset, partitions

ROWS = {rows}
MONTHS = [f"2025-{{m:02d}}" for m in range(1, 16)]


@asset(partitions={{"month": partitions(MONTHS)}})
def trips(month: str) -> pd.DataFrame:
    rng = np.random.default_rng(MONTHS.index(month))
    n = ROWS // len(MONTHS)
    return pd.DataFrame({{"km": rng.random(n) * 30, "zone": rng.integers(0, 200, n),
                         "fare": rng.random(n) * 60}})
'''
QUERY = "select count(*), sum(km) from trips"
DUCK = ("import duckdb, glob, sys; files = sorted(glob.glob('.barca/artifacts/*trips*/*.parquet'));"
        "print(duckdb.sql(f'select count(*), sum(km) from read_parquet({files!r})').fetchall())")


def run(opts, ctx) -> list[Figure]:
    rows = 150_000 if opts.quick else 1_000_000
    proj = make_project("s17", PIPELINE.format(rows=rows))
    err = prime(proj, ["get", "trips", "pipeline.py", "--json"])
    if err:
        return [emit(failed("S17", "sql over parquet", err))]
    what = f"`sql` count/sum over {rows:,} parquet rows, 15 keys"
    ours = measure(barca("sql", QUERY), runs=opts.runs, warmup=opts.warmup, cwd=proj,
                   timeout=opts.timeout)
    alone = measure([sys.executable, "-c", DUCK], runs=opts.runs, warmup=opts.warmup, cwd=proj,
                    timeout=opts.timeout)
    f1 = figure("S17", what, ours)
    f2 = figure("S17 duckdb", "DuckDB alone, same files and query", alone)
    if f1.median and f2.median:
        f1.note = (f"{f1.median / f2.median:.2f} x DuckDB time" +
                   (f", {f1.peak_mb / f2.peak_mb:.2f} x peak" if f1.peak_mb and f2.peak_mb
                    else ""))
    return [emit(f1), emit(f2)]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
