"""S15: fetching 2,000 cached keys from a ``file://`` remote store (``BARCA_REMOTE_URI``).

Two figures on S1's pipeline (2,000 keys + the `total` fan-in), its results in the store:
- **refetch**: this machine's `.barca/artifacts/` deleted, its `metadata.db` kept: `get total`
  downloads every file back (each checked against the SHA-256 this machine recorded);
- **adopt**: another machine (the pipeline alone, no `.barca/`): `get total` takes all 2,001
  results from the store (timed with ``--heavy-runs`` / ``--heavy-warmup``).
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    barca,
    emit,
    failed,
    figure,
    heavy_runs,
    heavy_warmup,
    keys_pipeline,
    main,
    make_project,
    measure,
    prime,
    session_dir,
)


def run(opts, ctx) -> list[Figure]:
    store = session_dir() / "s15-store"
    env = {"BARCA_REMOTE_URI": f"file://{store}"}
    proj = make_project("s15", keys_pipeline(2000))
    err = prime(proj, ["get", "total", "pipeline.py", "--json"], env=env, timeout=opts.timeout)
    if err:
        return [emit(failed("S15 refetch", "refetch", err))]

    def refetch(_i: int) -> Path:
        shutil.rmtree(proj / ".barca" / "artifacts", ignore_errors=True)
        return proj

    other = make_project("s15-other", keys_pipeline(2000))

    def adopt(_i: int) -> Path:
        shutil.rmtree(other / ".barca", ignore_errors=True)
        return other

    argv = barca("get", "total", "pipeline.py", "--json")
    figs = []
    m = measure(argv, runs=opts.runs, warmup=opts.warmup, prepare=refetch, env=env,
                timeout=opts.timeout)
    figs.append(emit(figure("S15 refetch", "`get total`, local files gone (2,001 fetched)", m,
                            tgt="-", expect_steps=0)))
    m = measure(argv, runs=heavy_runs(opts), warmup=heavy_warmup(opts), prepare=adopt, env=env,
                timeout=opts.timeout)
    figs.append(emit(figure("S15 adopt", "`get total`, another machine (2,001 fetched)", m,
                            tgt="-", expect_steps=0)))
    return figs


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
