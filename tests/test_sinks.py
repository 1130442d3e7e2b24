"""@sink: an asset's value also written where the user asks, one file per key or a dataset."""
from __future__ import annotations

import json

import pytest
from conftest import Project

# the [parquet] extra (pandas, pyarrow): skipped, not a collection error, without it
pd = pytest.importorskip("pandas")

PIPELINE = """
from barca import asset, partitions, sink


@sink("out/sales.parquet")
@sink("out/sales.csv")
@sink("dataset/")
@asset(partitions={"region": partitions(["emea", "amer"])})
def sales(region: str) -> dict:
    return {"region": region, "revenue": len(region) * 10}


@sink("out/total.json")
@asset()
def total() -> list:
    return [{"a": 1}, {"a": 2}]
"""


def test_per_key_files_and_dataset(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    for target in ("sales", "total"):
        r = project.barca("get", target, "pipeline.py", "--json")
        assert r.code == 0, r.err
    out = project.path / "out"
    emea = pd.read_parquet(out / "sales_region_emea.parquet")
    assert emea.to_dict("records") == [{"region": "emea", "revenue": 40}]
    assert pd.read_csv(out / "sales_region_amer.csv").to_dict("records") == [
        {"region": "amer", "revenue": 40}]
    ds = pd.read_parquet(project.path / "dataset")
    assert sorted((str(r), v) for r, v in zip(ds["region"], ds["revenue"], strict=False)) == [
        ("amer", 40), ("emea", 40)]
    assert sorted(p.name for p in (project.path / "dataset").iterdir()) == [
        "region=amer", "region=emea"]
    assert json.loads((out / "total.json").read_text()) == [{"a": 1}, {"a": 2}]
    assert not list(project.path.rglob(".tmp-*"))


def test_failing_sink_fails_the_step(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    (project.path / "out" / "total.json").mkdir(parents=True)   # a folder where the file goes
    r = project.barca("get", "total", "pipeline.py", "--json")
    assert r.code == 1
    err = json.loads(r.err.strip().splitlines()[-1])
    assert "sink failed" in err["error"] and err["node"] == "pipeline.py:total"
    (project.path / "out" / "total.json").rmdir()                # the cause fixed outside the code
    r = project.barca("get", "total", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    assert r.completed() == ["pipeline.py:total"]                 # not served from a cache
    assert json.loads((project.path / "out" / "total.json").read_text()) == [{"a": 1}, {"a": 2}]


def test_adding_or_editing_a_sink_reruns_the_asset(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    assert project.barca("get", "total", "pipeline.py", "--json").code == 0
    project.edit("pipeline.py", '@sink("out/total.json")', '@sink("out/all.json")')
    r = project.barca("get", "total", "pipeline.py", "--json", "--agent")
    assert r.completed() == ["pipeline.py:total"]
    assert (project.path / "out" / "all.json").is_file()
    r = project.barca("get", "total", "pipeline.py", "--json", "--agent")
    assert r.completed() == []


SENSED = """
from pathlib import Path

from barca import asset, partitions_from, sensor, sink


@sensor()
def regions() -> list:
    return Path("regions.txt").read_text().split()


@sink("dataset/")
@asset(partitions={"region": partitions_from(regions)})
def sales(region: str) -> dict:
    return {"revenue": 10}
"""


def test_a_hive_dataset_holds_the_current_keys_only(project: Project) -> None:
    project.write("pipeline.py", SENSED)
    project.write("regions.txt", "emea amer apac")
    assert project.barca("get", "sales", "pipeline.py", "--json").code == 0
    ds = project.path / "dataset"
    assert pd.read_parquet(ds)["revenue"].sum() == 30
    project.write("dataset/README.txt", "the user's own file")
    project.write("elsewhere/region=apac/part-0.parquet", "not the sink's")
    project.write("regions.txt", "emea amer")
    # --partition narrows the run: the other keys are not gone, nothing is removed
    r = project.barca("get", "sales", "pipeline.py", "--partition", "region=emea", "--json")
    assert r.code == 0, r.err
    assert (ds / "region=apac" / "part-0.parquet").is_file()
    r = project.barca("get", "sales", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert "removed 1 file of keys that are gone" in r.err
    assert pd.read_parquet(ds / "region=emea")["revenue"].sum() == 10
    assert sorted(p.name for p in ds.iterdir()) == ["README.txt", "region=amer", "region=emea"]
    assert sum(pd.read_parquet(ds / d)["revenue"].sum()
               for d in ("region=amer", "region=emea")) == 20
    assert (project.path / "elsewhere/region=apac/part-0.parquet").read_text() == \
        "not the sink's"
    project.write("regions.txt", "")      # no keys: no key's folder
    assert project.barca("get", "sales", "pipeline.py", "--json").code == 0
    assert sorted(p.name for p in ds.iterdir()) == ["README.txt"]
