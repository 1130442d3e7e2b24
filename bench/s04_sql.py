"""S4: `barca sql "select count(*), sum(n) from item"` on the S1 project.

If the command exits non-zero (e.g. `sql` is not implemented yet), prints
"S4 unavailable: <first line of stderr>" (for a Python traceback: its last line).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    TARGETS,
    Figure,
    barca,
    emit,
    failed,
    figure,
    main,
    measure,
    s1_project,
    stderr_summary,
)

WHAT = '`sql "select count(*), sum(n) from item"`'
QUERY = "select count(*), sum(n) from item"


def run(opts, ctx) -> list[Figure]:
    proj, err = s1_project(opts, ctx)
    if proj is None:
        return [emit(failed("S4", WHAT, err or "no project"))]
    m = measure(barca("sql", QUERY), runs=opts.runs, warmup=opts.warmup, cwd=proj,
                timeout=opts.timeout)
    if m.error and m.failed_run is not None:
        r = m.failed_run
        return [emit(Figure("S4", WHAT, target=TARGETS["S4"],
                            unavailable=stderr_summary(r.stderr, r.rc)))]
    return [emit(figure("S4", WHAT, m, note=answer_note(m.last.stdout if m.last else "")))]


def answer_note(stdout: str) -> str:
    """The query's answer, short: the rows of `--json`-style output, else the text."""
    try:
        doc = json.loads(stdout)
        return f"rows {json.dumps(doc['rows'])}"[:60]
    except (ValueError, KeyError, TypeError):
        text = " ".join(stdout.split())
        return f"output: {text[:50]}{'…' if len(text) > 50 else ''}" if text else ""


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
