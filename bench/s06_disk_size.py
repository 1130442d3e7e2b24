"""S6: size of `.barca/` after S1-S5 (`du -sk`, reported in MB of 1024*1024 bytes as `du -sh`).

Under run_all this is the project S1-S5 just used (2,000 keys plus the keys S5 added). Run alone,
it plays S1-S5 once each (untimed) on a new project first.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    TARGETS,
    Figure,
    barca,
    current_n_keys,
    du_bytes,
    emit,
    failed,
    main,
    run_once,
    s1_project,
    set_n_keys,
)

WHAT = "`.barca/` size after S1-S5"


def run(opts, ctx) -> list[Figure]:
    standalone = not ctx.get("s5_done")
    proj, err = s1_project(opts, ctx)
    if proj is None:
        return [emit(failed("S6", WHAT, err or "no project"))]
    if standalone:   # S2, S3, S4 (may not exist), S5 once each
        for args in (["get", "total", "pipeline.py", "--json"], ["status", "pipeline.py", "--json"],
                     ["sql", "select count(*), sum(n) from item"]):
            run_once(barca(*args), cwd=proj, timeout=opts.timeout)
        set_n_keys(proj, current_n_keys(proj) + 1)
        run_once(barca("get", "total", "pipeline.py", "--json"), cwd=proj, timeout=opts.timeout)
    store = proj / ".barca"
    if not store.exists():
        return [emit(failed("S6", WHAT, f"{store} does not exist"))]
    on_disk, apparent = du_bytes(store)
    n_files = sum(len(f) for _d, _s, f in os.walk(store))
    mb = on_disk / 2**20
    fig = Figure("S6", WHAT, unit="MB", median=mb, min=mb, max=mb, runs=1,
                 target=TARGETS["S6"],
                 note=f"{current_n_keys(proj):,} keys, {n_files:,} files, "
                      f"apparent {apparent / 2**20:.1f} MB")
    return [emit(fig)]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
