"""S2: second `barca get total` on the S1 project: every step cached (0 steps run)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, barca, emit, failed, figure, main, measure, s1_project  # noqa: E402

WHAT = "second `get total` (cached, 0 steps)"


def run(opts, ctx) -> list[Figure]:
    proj, err = s1_project(opts, ctx)
    if proj is None:
        return [emit(failed("S2", WHAT, err or "no project"))]
    m = measure(barca("get", "total", "pipeline.py", "--json"), runs=opts.runs,
                warmup=opts.warmup, cwd=proj, timeout=opts.timeout)
    return [emit(figure("S2", WHAT, m, expect_steps=0))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
