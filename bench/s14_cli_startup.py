"""S14: `barca --help`, and `barca list pipeline.py` on a copy of the seed example
(examples/seed/)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    SEED_EXAMPLE,
    Figure,
    barca,
    copy_project,
    emit,
    figure,
    main,
    measure,
    session_dir,
)


def run(opts, ctx) -> list[Figure]:
    m = measure(barca("--help"), runs=opts.runs, warmup=opts.warmup, cwd=session_dir(),
                timeout=opts.timeout)
    figs = [emit(figure("S14 help", "`barca --help`", m))]
    proj = copy_project(SEED_EXAMPLE, "seed")
    m2 = measure(barca("list", "pipeline.py"), runs=opts.runs, warmup=opts.warmup, cwd=proj,
                 timeout=opts.timeout)
    figs.append(emit(figure("S14 list", "`barca list pipeline.py` (seed example)", m2)))
    return figs


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
