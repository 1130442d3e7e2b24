"""S7: a sensor returning a dict of 10,000 keys -> version (read from versions.json), and a
`partitions_from` chain of two partitioned assets.

Figures: the first run (fresh project each run), and a tick where one key's version changed
(3 steps: the sensor, that key of `fetched`, that key of `parsed`). Each tick changes a
different key.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    Figure,
    Fresh,
    barca,
    emit,
    failed,
    figure,
    heavy_runs,
    heavy_warmup,
    main,
    make_project,
    measure,
    target,
)

PIPELINE = '''import json
from pathlib import Path

from barca import asset, partitions_from, sensor


@sensor()
def versions() -> dict:
    return json.loads(Path("versions.json").read_text())


@asset(partitions={"key": partitions_from(versions)})
def fetched(key: str, versions: str) -> dict:
    return {"key": key, "version": versions}


@asset(partitions={"key": partitions_from(fetched)})
def parsed(key: str, fetched: dict) -> dict:
    return {"key": key, "ok": bool(fetched["version"])}
'''

GET = ("get", "parsed", "pipeline.py", "--json")


def key_name(i: int, n: int) -> str:
    return f"k{i:0{max(4, len(str(n - 1)))}d}"


def versions_json(n: int) -> str:
    return json.dumps({key_name(i, n): "v1" for i in range(n)})


def tick(opts, project: Path, n: int, fid: str, what: str, tgt: str) -> Figure:
    """Time runs where, before each, one key's version in versions.json changed."""
    path = project / "versions.json"
    state = json.loads(path.read_text())

    def change_one(i: int) -> Path:
        k = key_name((i * 7919) % n, n)   # a different key each run
        state[k] = f"v2-{i}"
        path.write_text(json.dumps(state))
        return project

    m = measure(barca(*GET), runs=opts.runs, warmup=opts.warmup, prepare=change_one,
                timeout=opts.timeout)
    return emit(figure(fid, what, m, tgt=tgt, expect_steps=3))


def run(opts, ctx) -> list[Figure]:
    n = 10_000
    template = make_project("s7-template", PIPELINE, {"versions.json": versions_json(n)})
    fresh = Fresh(template)
    m = measure(barca(*GET), runs=heavy_runs(opts), warmup=heavy_warmup(opts), prepare=fresh,
                timeout=opts.timeout)
    first = emit(figure("S7 first", f"sensor dict {n:,} keys -> 2-asset chain, first run", m,
                        expect_steps=2 * n + 1))
    what = "tick: one key's version changed (3 steps)"
    if m.error or fresh.last is None:
        return [first, emit(failed("S7 tick", what, "needs the first run, which failed"))]
    return [first, tick(opts, fresh.last, n, "S7 tick", what, target("S7 tick"))]


if __name__ == "__main__":
    raise SystemExit(main(run, __doc__))
