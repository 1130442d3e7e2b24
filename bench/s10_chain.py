"""S10: a chain of 100 unpartitioned assets (a000 -> a001 -> ... -> a099): first run (fresh
project each run) and cached run."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, Fresh, barca, emit, failed, figure, main, make_project, measure  # noqa: E402

N = 100


def pipeline(n: int = N) -> str:
    parts = ["from barca import asset\n\n\n@asset()\ndef a000() -> int:\n    return 0\n"]
    for i in range(1, n):
        parts.append(f'\n\n@asset(inputs={{"prev": a{i - 1:03d}}})\n'
                     f"def a{i:03d}(prev: int) -> int:\n    return prev + {i}\n")
    return "".join(parts)


def run(opts, ctx) -> list[Figure]:
    get = barca("get", f"a{N - 1:03d}", "pipeline.py", "--json")
    fresh = Fresh(make_project("s10-template", pipeline()))
    m = measure(get, runs=opts.runs, warmup=opts.warmup, prepare=fresh, timeout=opts.timeout)
    first = emit(figure("S10 first", f"chain of {N} assets, first run", m, expect_steps=N))
    what = f"chain of {N} assets, cached run"
    if m.error or fresh.last is None:
        return [first, emit(failed("S10 cached", what, "needs the first run, which failed"))]
    m2 = measure(get, runs=opts.runs, warmup=opts.warmup, cwd=fresh.last, timeout=opts.timeout)
    return [first, emit(figure("S10 cached", what, m2, expect_steps=0))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
