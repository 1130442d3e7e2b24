"""S5: `barca get total` after adding one key to the S1 project (2 steps: the key, the fan-in).

Every run (warm-up included) adds one more key (N_KEYS = 2001, 2002, ...), so each timed run is
"after adding one key".
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    barca,
    current_n_keys,
    emit,
    failed,
    figure,
    main,
    measure,
    s1_project,
    set_n_keys,
)

WHAT = "`get total` after adding one key"


def run(opts, ctx) -> list[Figure]:
    proj, err = s1_project(opts, ctx)
    if proj is None:
        return [emit(failed("S5", WHAT, err or "no project"))]
    n = [current_n_keys(proj)]

    def add_key(_i: int) -> Path:
        n[0] += 1
        set_n_keys(proj, n[0])
        return proj

    m = measure(barca("get", "total", "pipeline.py", "--json"), runs=opts.runs,
                warmup=opts.warmup, prepare=add_key, timeout=opts.timeout)
    ctx["s5_done"] = True
    return [emit(figure("S5", WHAT, m, expect_steps=2))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
