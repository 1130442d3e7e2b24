"""weight= and the capacity: the weights of the running steps sum to at most the capacity
(BARCA_CAPACITY > [execution] capacity > the pool size); a step heavier than the capacity runs
alone, with a warning; plan and --dry-run say the capacity; weight is not hashed."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project

from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.model.discovery import parse_file
from barca.present.notices import Capacity

PAIR = """
import time
from barca import asset


@asset(weight=WEIGHT)
def heavy_a() -> list:
    t = time.time(); time.sleep(1); return [t, time.time()]


@asset(weight=WEIGHT)
def heavy_b() -> list:
    t = time.time(); time.sleep(1); return [t, time.time()]


@asset(inputs={"a": heavy_a, "b": heavy_b})
def both(a: list, b: list) -> bool:
    return a[0] < b[1] and b[0] < a[1]  # the two ran at the same time
"""


def _model(tmp_path: Path, args: str) -> object:
    (tmp_path / "pipeline.py").write_text(
        f"from barca import asset\n\n@asset({args})\ndef a() -> int:\n    return 1\n")
    return parse_file(tmp_path / "pipeline.py", tmp_path).nodes[0]


def test_weight_is_read_from_the_decorator(tmp_path: Path) -> None:
    assert _model(tmp_path, "weight=3").weight == 3
    assert _model(tmp_path, "").weight == 1


@pytest.mark.parametrize("bad", ["0", "-1", "1.5", '"x"', "True", "None", "n"])
def test_a_bad_weight_is_a_usage_error_naming_it(tmp_path: Path, bad: str) -> None:
    with pytest.raises(UsageError, match="weight="):
        _model(tmp_path, f"weight={bad}")


def test_capacity_comes_from_the_variable_then_the_file_then_the_pool(tmp_path: Path) -> None:
    def cap(environ: dict[str, str]) -> tuple[int, int, str]:
        c = Capacity(Settings.resolve(tmp_path, environ=environ))
        return c.pool_size, c.capacity, c.source

    assert cap({"BARCA_POOL_SIZE": "3"}) == (3, 3, "pool size")
    (tmp_path / "barca.toml").write_text("[execution]\ncapacity = 5\n")
    assert cap({"BARCA_POOL_SIZE": "3"}) == (3, 5, "[execution] capacity")
    assert cap({"BARCA_POOL_SIZE": "3", "BARCA_CAPACITY": "2"}) == (3, 2, "BARCA_CAPACITY")
    for bad in ("0", "x", "1.5", "-2"):
        with pytest.raises(UsageError, match="BARCA_CAPACITY"):
            cap({"BARCA_CAPACITY": bad})
    (tmp_path / "barca.toml").write_text("[execution]\ncapacity = 0\n")
    with pytest.raises(UsageError, match=r"\[execution\] capacity"):
        cap({})


def _overlapped(p: Project, env: dict[str, str]) -> bool:
    r = p.barca("get", "both", "pipeline.py", "-o", "value", "--refresh", "heavy_a,heavy_b",
                env=env)
    assert r.code == 0, r.err
    return json.loads(r.out)


@pytest.mark.slow
def test_weights_share_the_capacity(project: Project) -> None:
    pool = {"BARCA_POOL_SIZE": "2"}
    project.write("pipeline.py", PAIR.replace("WEIGHT", "1"))
    assert _overlapped(project, pool) is True                       # 1 + 1 <= 2
    assert _overlapped(project, {**pool, "BARCA_CAPACITY": "1"}) is False
    project.write("pipeline.py", PAIR.replace("WEIGHT", "2"))
    assert _overlapped(project, pool) is False                      # 2 + 2 > 2


@pytest.mark.slow
def test_plan_and_dry_run_report_the_capacity_and_warn_of_a_heavy_step(project: Project
                                                                        ) -> None:
    project.write("pipeline.py", PAIR.replace("WEIGHT", "2"))
    env = {"BARCA_POOL_SIZE": "2", "BARCA_CAPACITY": "1"}
    warning = ("[barca] warning: 'heavy_a' has weight=2, more than the capacity 1 "
               "(BARCA_CAPACITY); it runs alone")
    r = project.barca("plan", "pipeline.py", "--json", env=env)
    assert r.code == 0, r.err
    body = r.json()
    assert (body["pool_size"], body["capacity"], body["capacity_source"]) == (
        2, 1, "BARCA_CAPACITY")
    assert body["weights"] == {"pipeline.py:heavy_a": 2, "pipeline.py:heavy_b": 2}
    assert warning in r.err
    r = project.barca("get", "both", "pipeline.py", "--dry-run", "--json", env=env)
    assert r.code == 0, r.err
    body = r.json()
    assert body["capacity"] == 1
    assert [s.get("weight") for s in body["steps"]] == [2, 2, None]
    assert warning in r.err
    r = project.barca("get", "both", "pipeline.py", "--json", env=env)
    assert r.code == 0 and warning in r.err  # it runs all the same, alone

    # not in the run hash
    project.edit("pipeline.py", "@asset(weight=2)\ndef heavy_a", "@asset(weight=3)\ndef heavy_a")
    r = project.barca("get", "both", "pipeline.py", "--json", env=env)
    assert r.code == 0, r.err
    assert {s["status"] for s in r.json()["steps"]} == {"cached"}


@pytest.mark.slow
def test_a_bad_capacity_exits_2(project: Project) -> None:
    project.write("pipeline.py", PAIR.replace("WEIGHT", "1"))
    r = project.barca("get", "both", "pipeline.py", env={"BARCA_CAPACITY": "0"})
    assert r.code == 2 and "BARCA_CAPACITY" in r.err
    project.write("pipeline.py", PAIR.replace("WEIGHT", "0"))
    r = project.barca("plan", "pipeline.py")
    assert r.code == 2 and "weight=" in r.err
