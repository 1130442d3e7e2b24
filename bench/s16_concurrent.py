"""S16: two `barca get` of a 200-key x 50 ms pipeline started together (pool of 2 each).

Two figures, a fresh project each run: one `get` alone, and two started together (the wall
until both ended). The note says how many steps were executed in all, counted by a side file
each step appends to: 200 means the two runs shared the work (spec: each step once, wall
<= 1.2 x one get).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    Fresh,
    barca,
    emit,
    figure,
    heavy_runs,
    heavy_warmup,
    main,
    make_project,
    measure,
    target,
)

PIPELINE = '''import time
from barca import asset, partitions

KEYS = [f"k{i:03d}" for i in range(200)]


@asset(partitions={"key": partitions(KEYS)})
def slow(key: str) -> dict:
    with open("executions.log", "a") as f:
        f.write(key + "\\n")
    time.sleep(0.05)
    return {"key": key}
'''


def _two(where: Path, timeout: float) -> tuple[float, int, str]:
    """Both commands' wall (seconds), the steps executed in all, and an error text or ""."""
    env = dict(os.environ, BARCA_POOL_SIZE="2")
    argv = barca("get", "slow", "pipeline.py", "--json")
    t0 = time.perf_counter()
    procs = [subprocess.Popen(argv, cwd=where, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = []
    for p in procs:
        _, err = p.communicate(timeout=timeout)
        if p.returncode != 0:
            errs.append(f"exit {p.returncode}: {err.strip().splitlines()[-1:]}")
    wall = time.perf_counter() - t0
    log = where / "executions.log"
    return wall, len(log.read_text().splitlines()) if log.exists() else 0, "; ".join(errs)


def run(opts, ctx) -> list[Figure]:
    fresh = Fresh(make_project("s16-template", PIPELINE))
    one = measure(barca("get", "slow", "pipeline.py", "--json"), runs=heavy_runs(opts),
                  warmup=heavy_warmup(opts), prepare=fresh, env={"BARCA_POOL_SIZE": "2"},
                  timeout=opts.timeout)
    figs = [emit(figure("S16 one", "200 keys x 50 ms, one get", one, expect_steps=200))]
    times, executed, error = [], [], ""
    for i in range(-heavy_warmup(opts), heavy_runs(opts)):
        wall, n, error = _two(fresh(i), opts.timeout)
        if error:
            break
        if i >= 0:
            times.append(wall)
            executed.append(n)
    fig = Figure("S16 two", "two gets of it started together", target=target("S16 two"))
    if error:
        fig.error = error
    elif times:
        fig.values, fig.runs = [round(t, 6) for t in times], len(times)
        fig.median, fig.min, fig.max = statistics.median(times), min(times), max(times)
        ratio = (f"; {fig.median / statistics.median(one.times):.2f} x one" if one.times
                 else "")
        fig.note = f"steps executed {'/'.join(map(str, executed))} (of 200){ratio}"
    figs.append(emit(fig))
    return figs


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
