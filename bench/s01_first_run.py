"""S1: first `barca get total` over 2,000 keys + a collect fan-in, next to the disk floor.

Each timed run gets a fresh copy of the project (a second run would be cached). The floor
(bench/floor.py) is measured right before, on the same file system: aim for S1 within 0.5 s of it.
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    Fresh,
    barca,
    emit,
    figure,
    keys_pipeline,
    main,
    make_project,
    measure,
    vs_floor,
)
from floor import floor_figure  # noqa: E402

N_KEYS = 2000


def run(opts, ctx) -> list[Figure]:
    fl = emit(floor_figure("S1 floor", N_KEYS, opts.runs, opts.warmup,
                           tgt="S1 ≤ floor + 0.5 s"))
    fresh = Fresh(make_project("s1-template", keys_pipeline(N_KEYS)))
    m = measure(barca("get", "total", "pipeline.py", "--json"), runs=opts.runs,
                warmup=opts.warmup, prepare=fresh, timeout=opts.timeout)
    note = ""
    if not m.error and m.times and fl.median is not None:
        note = vs_floor(statistics.median(m.times), fl.median)
    fig = emit(figure("S1", "first `get total`, 2,000 keys", m, note=note, expect_steps=2001))
    if not m.error and fresh.last is not None:
        ctx["s1_project"] = fresh.last   # S2-S6 and S13 continue from this project
    return [fl, fig]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
