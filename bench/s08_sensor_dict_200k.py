"""S8: S7's tick at 200,000 keys (one key's version changed; 3 steps), with its peak memory.

The 200,000-key first run is setup (printed, no target). `--quick` uses 20,000 keys.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, barca, emit, failed, figure, main, make_project, measure, target  # noqa: E402
from s07_sensor_dict import GET, PIPELINE, tick, versions_json  # noqa: E402

FULL, QUICK = 200_000, 20_000


def run(opts, ctx) -> list[Figure]:
    n = QUICK if opts.quick else FULL
    scaled = "200,000 keys" if opts.quick else None
    proj = make_project("s8", PIPELINE, {"versions.json": versions_json(n)})
    m = measure(barca(*GET), runs=1, warmup=0, cwd=proj, timeout=opts.timeout)
    first = emit(figure("S8 first", f"sensor dict {n:,} keys, first run (setup)", m,
                        expect_steps=2 * n + 1))
    what = f"tick at {n:,} keys: one key changed (3 steps)"
    if m.error:
        return [first, emit(failed("S8 tick", what, "needs the first run, which failed",
                                   tgt=target("S8 tick", scaled)))]
    return [first, tick(opts, proj, n, "S8 tick", what, target("S8 tick", scaled))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
