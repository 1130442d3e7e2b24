"""parallel(*partials) / parallel_map(f, items) inside a step: @task branches on the worker
pool at the same time (the waiting caller holds no capacity), results in argument order, a
ParallelError in a raising branch's slot, BranchResultError for a value that cannot travel;
never cached or retried."""
from __future__ import annotations

import json
from datetime import date
from functools import partial

import pytest
from conftest import Project

import barca
from barca import BranchResultError, ParallelError, parallel, parallel_map, task


@task()
def _double(x: int, plus: int = 0) -> int:
    return 2 * x + plus


@task()
def _raises(x: int) -> int:
    raise ValueError(f"bad value {x}")


@task()
def _value(kind: str) -> object:
    return {"set": {1, 2}, "date": date(2024, 1, 2), "none": None, "tuple": (1, 2)}[kind]


@task()
def _opener(path: str) -> object:
    return open(path)  # noqa: SIM115 - the point: a value that cannot travel


def _plain(x: int) -> int:
    return x


def test_outside_a_pool_branches_run_here_with_the_same_results() -> None:
    assert parallel(partial(_double, 1), partial(_double, 2, plus=1)) == [2, 5]
    assert parallel_map(_double, [3, 1, 2]) == [6, 2, 4]
    assert parallel() == []
    assert parallel_map(_value, ["set", "date", "none", "tuple"]) == [
        {1, 2}, date(2024, 1, 2), None, [1, 2]]
    got = parallel(partial(_double, 1), partial(_raises, 2))
    assert got[0] == 2 and isinstance(got[1], ParallelError)
    assert got[1].error.startswith("ValueError: bad value 2\n")
    assert "in _raises" in got[1].error and str(got[1]) == got[1].error
    with pytest.raises(BranchResultError, match=r"_io\.TextIOWrapper.*pickle"):
        parallel(partial(_opener, __file__))


def test_only_partials_over_tasks_and_json_arguments() -> None:
    with pytest.raises(TypeError, match="@task"):
        parallel(partial(_plain, 1))
    with pytest.raises(TypeError, match="@task"):
        parallel(_double)
    with pytest.raises(TypeError, match="JSON"):
        parallel(partial(_double, object()))
    assert barca.parallel is parallel and barca.ParallelError is ParallelError


PIPELINE = """
import os
import time
from functools import partial
from pathlib import Path
from barca import BranchResultError, ParallelError, asset, parallel, parallel_map, task


@task()
def nap(i: int) -> list:
    with open("branch_runs", "a") as f:
        f.write("x")
    t = time.time()
    time.sleep(1)
    return [i, os.getpid(), t, time.time()]


@task(retries=3)
def boom(x: int) -> int:
    with open("boom_calls", "a") as f:
        f.write("x")
    if x == 2:
        raise ValueError(f"bad value {x}")
    return x * 10


@task()
def opener(p: str):
    return open(p)


@asset()
def fan() -> dict:
    t = time.time()
    naps = parallel(partial(nap, 1), partial(nap, i=2))
    took = time.time() - t
    res = parallel_map(boom, [1, 2, 3])
    return {"took": took, "order": [n[0] for n in naps], "me": os.getpid(),
            "pids": [n[1] for n in naps],
            "overlap": naps[0][2] < naps[1][3] and naps[1][2] < naps[0][3],
            "boom": [r.error if isinstance(r, ParallelError) else r for r in res]}


@task()
def catches() -> str:
    try:
        parallel(partial(opener, "pipeline.py"))
    except BranchResultError as e:
        return "caught: " + str(e)
    return "no"


@task()
def uncaught() -> str:
    parallel(partial(opener, "pipeline.py"))
    return "no"
"""


@pytest.mark.slow
def test_branches_run_on_the_pool_at_the_same_time(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    env = {"BARCA_POOL_SIZE": "2"}
    r = project.barca("get", "fan", "pipeline.py", "-o", "value", env=env)
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["order"] == [1, 2]
    assert got["overlap"] is True and got["took"] < 1.9      # two 1-second branches, ~1 s
    assert got["me"] not in got["pids"]                       # other processes than the caller
    assert got["boom"][0] == 10 and got["boom"][2] == 30
    assert got["boom"][1].startswith("ValueError: bad value 2\n")
    assert 'pipeline.py", line' in got["boom"][1] and "in boom" in got["boom"][1]
    assert (project.path / "boom_calls").read_text() == "xxx"  # retries= on a branch: none
    assert (project.path / "branch_runs").read_text() == "xx"
    r = project.barca("get", "fan", "pipeline.py", "--json", env=env)  # cached: no branch
    assert r.json()["steps"][0]["status"] == "cached"
    assert (project.path / "branch_runs").read_text() == "xx"
    project.edit("pipeline.py", "took = time.time() - t", "took = round(time.time() - t, 6)")
    assert project.barca("get", "fan", "pipeline.py", env=env).code == 0
    assert (project.path / "branch_runs").read_text() == "xxxx"  # an edit runs them again
    assert not (project.path / ".barca" / "branches").exists()


@pytest.mark.slow
def test_a_value_that_cannot_travel(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    r = project.barca("run", "catches", "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    assert json.loads(r.out).startswith("caught: the result of branch pipeline.py:opener is a "
                                        "_io.TextIOWrapper")
    r = project.barca("run", "uncaught", "pipeline.py", "--json")
    assert r.code == 1
    body = json.loads(r.out)
    assert body["failed_node"] == "pipeline.py:uncaught"
    for said in ("BranchResultError", "pipeline.py:opener", "_io.TextIOWrapper", "pickle"):
        assert said in body["error"], said


@pytest.mark.slow
def test_the_api_returns_the_caller_s_value(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    project.write("use.py", "import json, barca\n"
                            "print(json.dumps(barca.run('catches', 'pipeline.py')[:7]))\n")
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "use.py"], cwd=project.path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == "caught:"


CROWD = """
import time
from functools import partial
from barca import asset, parallel, task


def _busy(name):
    t = time.time()
    time.sleep(0.6)
    with open(f"spans_{name}", "w") as f:
        f.write(f"{t} {time.time()}")
    return name


@task()
def branch(i: int) -> str:
    return _busy(f"b{i}")


@asset()
def fan() -> list:
    got = parallel(*(partial(branch, i) for i in range(3)))
    _busy("fan")  # after its branches, the caller works again: one of the pool's two
    return got


@asset()
def s1() -> str:
    return _busy("s1")


@asset()
def s2() -> str:
    return _busy("s2")


@asset()
def s3() -> str:
    return _busy("s3")
"""


@pytest.mark.slow
def test_a_waiting_caller_never_lets_more_than_the_pool_run(project: Project) -> None:
    project.write("pipeline.py", CROWD)
    r = project.barca("get", "fan,s1,s2,s3", "pipeline.py", "--json",
                      env={"BARCA_POOL_SIZE": "2"})
    assert r.code == 0, r.err
    spans = [tuple(map(float, p.read_text().split()))
             for p in project.path.glob("spans_*")]
    assert len(spans) == 7
    most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert most <= 2  # branches and steps share the pool of 2; the waiting caller is not one
