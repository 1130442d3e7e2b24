"""S9: 200 keys whose step sleeps 50 ms, with BARCA_POOL_SIZE=2 (floor: 200 * 50 ms / 2 = 5.0 s).

First run, a fresh project each run.
"""
from __future__ import annotations

import sys
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
)

PIPELINE = '''import time

from barca import asset, partitions

KEYS = [f"k{i:03d}" for i in range(200)]


@asset(partitions={"key": partitions(KEYS)})
def slow(key: str) -> dict:
    time.sleep(0.05)
    return {"key": key}
'''


def run(opts, ctx) -> list[Figure]:
    fresh = Fresh(make_project("s9-template", PIPELINE))
    m = measure(barca("get", "slow", "pipeline.py", "--json"), runs=heavy_runs(opts),
                warmup=heavy_warmup(opts), prepare=fresh, env={"BARCA_POOL_SIZE": "2"},
                timeout=opts.timeout)
    return [emit(figure("S9", "200 keys x 50 ms sleep, pool of 2", m, expect_steps=200))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
