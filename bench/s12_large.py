"""S12: 50,000 keys + a collect fan-in: first run (fresh project each run) / cached run / after
adding one key, next to the disk floor at the same size. `--quick`: 10,000 keys."""
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
    failed,
    figure,
    heavy_runs,
    heavy_warmup,
    keys_pipeline,
    main,
    make_project,
    measure,
    set_n_keys,
    target,
    vs_floor,
)
from floor import floor_figure  # noqa: E402

FULL, QUICK = 50_000, 10_000


def run(opts, ctx) -> list[Figure]:
    n = QUICK if opts.quick else FULL
    scaled = "50,000 keys" if opts.quick else None
    sfx = " (--quick)" if opts.quick else ""
    figs = [emit(floor_figure("S12 floor", n, heavy_runs(opts), heavy_warmup(opts)))]
    get = barca("get", "total", "pipeline.py", "--json")
    fresh = Fresh(make_project("s12-template", keys_pipeline(n)))
    m = measure(get, runs=heavy_runs(opts), warmup=heavy_warmup(opts), prepare=fresh,
                timeout=opts.timeout)
    note = ""
    if not m.error and m.times and figs[0].median is not None:
        note = vs_floor(statistics.median(m.times), figs[0].median)
    figs.append(emit(figure("S12 first", f"{n:,} keys + fan-in, first run{sfx}", m,
                            tgt=target("S12 first", scaled), note=note, expect_steps=n + 1)))
    if m.error or fresh.last is None:
        for fid, what in (("S12 cached", f"{n:,} keys, cached run{sfx}"),
                          ("S12 add key", f"{n:,} keys, after adding one key{sfx}")):
            figs.append(emit(failed(fid, what, "needs the first run, which failed",
                                    tgt=target(fid, scaled))))
        return figs
    proj = fresh.last
    m2 = measure(get, runs=opts.runs, warmup=opts.warmup, cwd=proj, timeout=opts.timeout)
    figs.append(emit(figure("S12 cached", f"{n:,} keys, cached run{sfx}", m2,
                            tgt=target("S12 cached", scaled), expect_steps=0)))
    count = [n]

    def add_key(_i: int) -> Path:
        count[0] += 1
        set_n_keys(proj, count[0])
        return proj

    m3 = measure(get, runs=opts.runs, warmup=opts.warmup, prepare=add_key, timeout=opts.timeout)
    figs.append(emit(figure("S12 add key", f"{n:,} keys, after adding one key{sfx}", m3,
                            tgt=target("S12 add key", scaled), expect_steps=2)))
    return figs


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
