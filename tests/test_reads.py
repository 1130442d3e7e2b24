"""Never stale, never wrong (issue 28): what a step reads is what was recorded. A result
recomputed with other bytes is read by its consumer in the same run; a tampered copy in the
shared store never reaches a lazy reader; collect() of no keys is an empty value of the type
asked for; a store used without a key says so."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Project
from test_remote_trust import KEY, Store, lines, machine, run

UUIDS = """
import uuid

import polars as pl
from barca import asset, collect, partitions


@asset(partitions={"k": partitions(["a", "b", "c"])})
def up(k: str) -> pl.DataFrame:
    return pl.DataFrame({"k": [k], "id": [uuid.uuid4().hex]})  # other bytes every time


@asset(inputs={"ups": collect(up)})
def down(ups: pl.LazyFrame) -> dict:
    return {"rows": ups.collect().height}
"""


def test_a_recomputed_input_with_other_bytes_is_read_in_the_same_run(project: Project) -> None:
    project.write("pipeline.py", UUIDS)
    assert project.barca("get", "down", "pipeline.py", "--json").code == 0
    r = project.barca("gc", "--max-size", "1", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert not list((project.path / ".barca/artifacts").glob("pipeline.py--up_k_*/*.parquet"))
    project.edit("pipeline.py", '{"rows": ups.collect().height}',
                 '{"rows": ups.collect().height, "v": 2}')
    r = project.barca("get", "down", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"rows": 3, "v": 2}
    assert "corrupt" not in r.err, r.err
    assert sorted(r.completed()) == ["pipeline.py:down", "pipeline.py:up[k=a]",
                                     "pipeline.py:up[k=b]", "pipeline.py:up[k=c]"]


WIDE = """
import duckdb
import polars as pl
from barca import asset


@asset()
def wide() -> pl.DataFrame:
    return pl.DataFrame({f"c{i}": list(range(1000)) for i in range(5)})


@asset(inputs={"w": wide})
def lazy_sum(w: pl.LazyFrame) -> dict:
    return {"type": type(w).__name__, "sum": w.select(pl.col("c3").sum()).collect().item()}


@asset(inputs={"w": wide})
def rel_sum(w: duckdb.DuckDBPyRelation) -> dict:
    return {"type": type(w).__name__, "sum": int(w.sum("c3").fetchall()[0][0])}
"""

POISON = """
import polars as pl, sys
pl.DataFrame({f"c{i}": [7] * 1000 for i in range(5)}).write_parquet(sys.argv[1])
"""


@pytest.mark.slow  # the CLI in a subprocess, twice per case
@pytest.mark.parametrize("key", [None, KEY], ids=["no-key", "key"])
@pytest.mark.parametrize("reader", ["lazy_sum", "rel_sum"])
def test_a_tampered_store_copy_never_reaches_a_lazy_reader(tmp_path: Path, key: str | None,
                                                           reader: str) -> None:
    import subprocess
    import sys
    store = Store(f"file://{tmp_path / 'store'}", {})
    a = machine(tmp_path, "a")
    a.write("pipeline.py", WIDE)
    assert run(a, store, "wide", key).code == 0
    [local] = (a.path / ".barca/artifacts/pipeline.py--wide").glob("*.parquet")
    local.unlink()  # this machine no longer has it: the store's copy is read
    [blob] = (tmp_path / "store/artifacts/pipeline.py--wide").glob("*.parquet")
    subprocess.run([sys.executable, "-c", POISON, str(blob)], check=True)  # same name
    r = run(a, store, reader, key)
    assert r.code == 0, r.err
    # the poisoned table (every c3 a 7: a sum of 7000) never reached the step
    assert r.json()["final_output"]["sum"] == 499500, r.err
    assert r.json()["final_output"]["type"] in ("LazyFrame", "DuckDBPyRelation")
    said = lines(r.err, "the store's copy of .barca/artifacts/pipeline.py--wide/")
    assert len(said) == 1 and "did not match the SHA-256 recorded here; computing it again" \
        in said[0], r.err
    assert sorted(r.completed()) == sorted(["pipeline.py:wide", f"pipeline.py:{reader}"])
    # what was read is a verified local copy; the store's bytes are good again
    assert local.is_file()
    assert local.read_bytes() == blob.read_bytes()


def test_a_symlinked_artifact_is_never_followed(project: Project, tmp_path: Path) -> None:
    project.write("pipeline.py", WIDE)
    assert project.barca("get", "wide", "pipeline.py", "--json").code == 0
    [local] = (project.path / ".barca/artifacts/pipeline.py--wide").glob("*.parquet")
    elsewhere = tmp_path / "elsewhere.parquet"
    local.rename(elsewhere)  # the same bytes, but through a link: not the recorded file
    local.symlink_to(elsewhere)
    r = project.barca("get", "lazy_sum", "pipeline.py", "--json", "--agent")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"type": "LazyFrame", "sum": 499500}
    assert f"{local.name} was a symlink; moved it aside" in r.err, r.err
    assert local.is_file() and not local.is_symlink()


ZERO = """
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
from barca import asset, collect, partitions_from, sensor


@sensor()
def regions() -> list:
    return Path("regions.txt").read_text().split()


@asset(partitions={"region": partitions_from(regions)})
def sales(region: str) -> pl.DataFrame:
    return pl.DataFrame({"a": [len(region)]})


def shown(v) -> dict:
    if isinstance(v, list):
        return {"type": "list", "len": len(v)}
    kind = type(v).__module__.split(".")[0] + "." + type(v).__name__
    if isinstance(v, pl.LazyFrame):
        v = v.collect()
    if isinstance(v, duckdb.DuckDBPyRelation):
        v = v.pl()
    if isinstance(v, pa.Table):
        v = pl.from_arrow(v)
    if isinstance(v, pd.DataFrame):
        v = pl.from_pandas(v)
    return {"type": kind, "columns": list(v.columns), "rows": v.sort("partition").rows()}


@asset(inputs={"t": collect(sales)})
def lazy(t: pl.LazyFrame) -> dict:
    return shown(t)


@asset(inputs={"t": collect(sales)})
def rel(t: duckdb.DuckDBPyRelation) -> dict:
    return shown(t)


@asset(inputs={"t": collect(sales)})
def eager(t: pl.DataFrame) -> dict:
    return shown(t)


@asset(inputs={"t": collect(sales)})
def pandas(t: pd.DataFrame) -> dict:
    return shown(t)


@asset(inputs={"t": collect(sales)})
def arrow(t: pa.Table) -> dict:
    return shown(t)


@asset(inputs={"t": collect(sales)})
def listed(t: list[pl.DataFrame]) -> dict:
    return shown(t)


@asset(inputs={"t": collect(sales)})
def plain(t) -> dict:
    return shown(t)
"""

READERS = {"lazy": "polars.LazyFrame", "rel": "duckdb.DuckDBPyRelation",
           "eager": "polars.DataFrame", "pandas": "pandas.DataFrame", "arrow": "pyarrow.Table"}


def test_collect_of_no_keys_is_an_empty_value_of_the_type_asked_for(project: Project) -> None:
    project.write("pipeline.py", ZERO)
    project.write("regions.txt", "")
    names = ",".join([*READERS, "listed", "plain"])
    r = project.barca("get", names, "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    for name, kind in READERS.items():
        assert got[f"pipeline.py:{name}"] == {"type": kind, "columns": ["partition"],
                                              "rows": []}, name
    assert got["pipeline.py:listed"] == got["pipeline.py:plain"] == {"type": "list", "len": 0}
    # with keys: one table over them all, the partition column first, for every table type
    project.write("regions.txt", "emea amer")
    r = project.barca("get", names, "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    for name, kind in READERS.items():
        assert got[f"pipeline.py:{name}"] == {
            "type": kind, "columns": ["partition", "a"],
            "rows": [["region=amer", 4], ["region=emea", 4]]}, name
    assert got["pipeline.py:listed"] == got["pipeline.py:plain"] == {"type": "list", "len": 2}


@pytest.mark.slow
def test_adopting_from_a_store_without_a_key_is_said_once(tmp_path: Path) -> None:
    store = Store(f"file://{tmp_path / 'store'}", {})
    a, b, c = machine(tmp_path, "a"), machine(tmp_path, "b"), machine(tmp_path, "c")
    assert run(a, store, "doubled").code == 0
    r = run(b, store, "doubled")        # two results adopted from the store: said once
    assert r.code == 0 and r.completed() == [], r.err
    said = lines(r.err, "not signed")
    assert said == ["[barca] warning: results taken from the shared store are not signed: "
                    "anyone who can write to it decides what they hold; set BARCA_STORE_KEY "
                    "(the same long random string on every machine that shares the store) to "
                    "accept only signed results (barca docs remote)"], r.err
    assert said[0][len("[barca] warning: "):] in [w["message"] for w in r.json()["warnings"]]
    r = run(b, store, "doubled")        # nothing taken from the store: nothing said
    assert r.code == 0 and "not signed" not in r.err, r.err
    d = machine(tmp_path, "d")          # with a key, what it takes is signed: nothing said
    assert run(d, store, "v", KEY).code == 0
    r = run(c, store, "v", KEY)
    assert r.code == 0 and r.completed() == [] and "not signed" not in r.err, r.err
