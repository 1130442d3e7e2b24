"""S3: `barca status pipeline.py --json` on the S1 project (2,000 keys, all cached)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, barca, emit, failed, figure, main, measure, s1_project  # noqa: E402

WHAT = "`status --json`, 2,000 keys cached"


def run(opts, ctx) -> list[Figure]:
    proj, err = s1_project(opts, ctx)
    if proj is None:
        return [emit(failed("S3", WHAT, err or "no project"))]
    m = measure(barca("status", "pipeline.py", "--json"), runs=opts.runs, warmup=opts.warmup,
                cwd=proj, timeout=opts.timeout)
    return [emit(figure("S3", WHAT, m))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
