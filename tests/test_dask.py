"""The Dask executor: the same run hashes, decisions, values and failure isolation as the
local pool, on a real dask.distributed LocalCluster with 2 worker processes."""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import REPO, Project

pytest.importorskip("distributed")
pytestmark = pytest.mark.slow  # a Dask cluster and the CLI in subprocesses

DASK = {"BARCA_EXECUTOR": "dask", "BARCA_POOL_SIZE": "2"}

KEYS_2000 = """
from barca import asset, collect, partitions

KEYS = [f"k{i:04d}" for i in range(2000)]


@asset(partitions={"key": partitions(KEYS)})
def item(key: str) -> dict:
    return {"key": key, "n": len(key)}


@asset(inputs={"items": collect(item)})
def total(items: list[dict]) -> dict:
    return {"count": len(items), "sum": sum(i["n"] for i in items)}
"""


def _hashes(p: Project) -> dict[str, str]:
    db = sqlite3.connect(p.path / ".barca" / "metadata.db")
    return dict(db.execute("select node, run_hash from materializations where status='success'"))


def _pair(tmp_path: Path, source: str, extra: dict[str, str] | None = None) -> list[Project]:
    out = []
    for name in ("local", "dask"):
        p = Project(tmp_path / name)
        p.path.mkdir()
        p.write("pipeline.py", source)
        for k, v in (extra or {}).items():
            p.write(k, v)
        out.append(p)
    return out


def test_seed_example_same_on_dask_and_local(tmp_path: Path) -> None:
    local, dask = _pair(tmp_path, (REPO / "examples/seed/pipeline.py").read_text(),
                        {"feed_version.txt": "v1\n"})
    results = []
    for p, env in ((local, {}), (dask, DASK)):
        first = p.barca("get", "report", "pipeline.py", "--json", "--agent", env=env)
        assert first.code == 0, first.err
        p.write("feed_version.txt", "v2\n")
        second = p.barca("get", "report", "pipeline.py", "--json", "--agent", env=env)
        third = p.barca("get", "report", "pipeline.py", "--json", "--agent", env=env)
        results.append((first.json()["final_output"], sorted(first.completed()),
                        sorted(second.completed()), sorted(third.completed())))
    assert results[0] == results[1]
    assert len(results[0][1]) == 8 and len(results[0][2]) == 8 and len(results[0][3]) == 1
    assert _hashes(local) == _hashes(dask)


def test_2000_keys_same_on_dask_and_local(tmp_path: Path) -> None:
    local, dask = _pair(tmp_path, KEYS_2000)
    outs = []
    for p, env in ((local, {}), (dask, DASK)):
        r = p.barca("get", "total", "pipeline.py", "--json", env=env, timeout=300)
        assert r.code == 0, r.err
        outs.append((r.json()["final_output"], r.json()["steps_executed"]))
    assert outs[0] == outs[1] == ({"count": 2000, "sum": 10000}, 2001)
    assert _hashes(local) == _hashes(dask)


def test_a_killed_dask_worker_fails_only_its_step(project: Project) -> None:
    project.write("pipeline.py", """
import os, signal
from barca import asset, partitions


@asset(partitions={"k": partitions(["a", "b", "c", "d"])})
def item(k: str) -> str:
    if k == "b":
        os.kill(os.getpid(), signal.SIGKILL)
    return k
""")
    r = project.barca("get", "item", "pipeline.py", "--json", "--agent", env=DASK, timeout=300)
    assert r.code == 1, r.err
    err = r.error()  # the run-failed line follows it (--agent)
    assert err["node"] == "pipeline.py:item[k=b]" and "Dask worker" in err["error"]
    assert sorted(r.completed()) == ["pipeline.py:item[k=a]", "pipeline.py:item[k=c]",
                                     "pipeline.py:item[k=d]"]


def test_remote_scheduler_needs_a_shared_store(seed: Project) -> None:
    r = seed.barca("get", "report", "pipeline.py", "--executor", "tcp://127.0.0.1:1",
                   "--pretty")
    assert r.code == 2 and "BARCA_REMOTE_URI" in r.err


LIMITS = """
import os
import time
from pathlib import Path

from barca import asset


@asset(timeout_seconds=1)
def stuck() -> int:
    Path("stuck.pid").write_text(str(os.getpid()))
    time.sleep(60)
    return 1


@asset(retries=2, timeout_seconds=30)
def flaky() -> int:
    p = Path("attempts")
    n = int(p.read_text()) + 1 if p.exists() else 1
    p.write_text(str(n))
    if n < 3:
        raise RuntimeError(f"attempt {n}")
    return n


@asset(retries=1)
def fragile() -> int:
    raise RuntimeError("always")
"""


def test_timeout_and_retries_as_on_the_local_pool(tmp_path: Path) -> None:
    import os
    import time
    local, dask = _pair(tmp_path, LIMITS)
    got = []
    for p, env in ((local, {}), (dask, DASK)):
        start = time.time()
        r = p.barca("get", "stuck", "pipeline.py", "--json", env=env, timeout=120)
        took = time.time() - start
        assert r.code == 1, r.err
        err = json.loads(r.err.strip().splitlines()[-1])
        pid = int((p.path / "stuck.pid").read_text())
        alive = os.path.exists(f"/proc/{pid}") and "zombie" not in \
            Path(f"/proc/{pid}/status").read_text().lower()
        got.append((r.code, err["node"], err["error"], alive))
        assert took < 45, took  # killed after 1 s, not after its 60 s sleep
        r = p.barca("get", "flaky", "pipeline.py", "--json", env=env, timeout=120)
        assert r.code == 0, r.err
        assert r.json()["final_output"] == 3
        r = p.barca("get", "fragile", "pipeline.py", "--json", env=env, timeout=120)
        got.append((r.code, json.loads(r.err.strip().splitlines()[-1])["error"]))
    assert got[0] == got[2] == (1, "pipeline.py:stuck",
                                "step 'pipeline.py:stuck' failed: Timeout: pipeline.py:stuck "
                                "did not finish within timeout_seconds=1; its process was "
                                "killed; 0 downstream steps skipped", False), got
    assert got[1] == got[3], got
