"""S11: one source asset read by 500 assets: first run (fresh project each run) and cached run.

`barca get pipeline.py` (no target: every asset)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, Fresh, barca, emit, failed, figure, main, make_project, measure  # noqa: E402

N = 500


def pipeline(n: int = N) -> str:
    parts = ['from barca import asset\n\n\n@asset()\ndef source() -> dict:\n'
             '    return {"n": 1}\n']
    for i in range(n):
        parts.append(f'\n\n@asset(inputs={{"source": source}})\n'
                     f"def r{i:03d}(source: dict) -> int:\n    return source[\"n\"] + {i}\n")
    return "".join(parts)


def run(opts, ctx) -> list[Figure]:
    get = barca("get", "pipeline.py", "--json")
    fresh = Fresh(make_project("s11-template", pipeline()))
    m = measure(get, runs=opts.runs, warmup=opts.warmup, prepare=fresh, timeout=opts.timeout)
    first = emit(figure("S11 first", f"1 source read by {N} assets, first run", m,
                        expect_steps=N + 1))
    what = f"1 source read by {N} assets, cached run"
    if m.error or fresh.last is None:
        return [first, emit(failed("S11 cached", what, "needs the first run, which failed"))]
    m2 = measure(get, runs=opts.runs, warmup=opts.warmup, cwd=fresh.last, timeout=opts.timeout)
    return [first, emit(figure("S11 cached", what, m2, expect_steps=0))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
