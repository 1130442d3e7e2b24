"""DataFrames as values: writers by value, readers by the consuming parameter's annotation,
serializer=, barca sql / status / -o value over every kind, collect() of partitioned frames,
and a lazy input that reads only what its step uses."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import Project
from test_remote import s3_server  # noqa: F401  (a fixture: moto's S3 server on 127.0.0.1)

pytestmark = pytest.mark.slow

ROWS = [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}, {"a": 3, "b": "z"}]
WRITERS = ["from_pandas", "from_polars", "from_lazy", "from_arrow", "from_duckdb"]


def _python(project: Project, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], cwd=project.path, capture_output=True,
                          text=True, timeout=120)


def _artifacts(project: Project, node: str) -> list[Path]:
    return sorted(project.path.glob(f".barca/artifacts/pipeline.py--{node}*/*"))


def test_every_writer_is_parquet_with_shape_rows_and_sql(project: Project) -> None:
    project.copy_pipeline("frames.py")
    r = project.barca("get", ",".join(WRITERS), "pipeline.py", "--json")
    assert r.code == 0, r.err
    out = r.json()["final_output"]
    assert {n: out[f"pipeline.py:{n}"]["format"] for n in WRITERS} == dict.fromkeys(
        WRITERS, "parquet")
    status = {n["name"]: n["shape"] for n in project.barca("status", "--json").json()["nodes"]}
    for n in WRITERS:  # rows and schema, in arrow's words, from the file (#29 item 17)
        shape = status[n]
        assert (shape["type"], shape["rows"]) == ("table", 3), (n, shape)
        assert [c["name"] for c in shape["columns"]] == ["a", "b"], (n, shape)
        assert shape["columns"][0]["type"] == "int64", (n, shape)
        assert shape["columns"][1]["type"] in ("string", "large_string"), (n, shape)
    for name in WRITERS:
        got = project.barca("get", name, "-o", "value")
        assert got.code == 0, got.err
        expected = [dict(row, a=row["a"] * 10) for row in ROWS] if name == "from_lazy" else ROWS
        assert json.loads(got.out) == expected, name
        q = project.barca("sql", f"select a, b from {name} order by a", "--json")
        assert q.code == 0, q.err
        assert q.sql_rows() == [[row["a"], row["b"]] for row in expected], name


def test_readers_follow_the_annotation(project: Project) -> None:
    project.copy_pipeline("frames.py")
    r = project.barca("get", "readers", "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    types = {name: v["type"] for name, v in got.items()}
    assert types == {"plain": "pandas.DataFrame", "pandas": "pandas.DataFrame",
                     "polars": "polars.DataFrame", "lazy": "polars.LazyFrame",
                     "arrow": "pyarrow.Table", "rel": "duckdb.DuckDBPyRelation",
                     "quoted": "pyarrow.Table", "imported": "polars.LazyFrame",
                     "optional": "polars.DataFrame"}
    for name, v in got.items():
        expected = [dict(row, a=row["a"] * 10) for row in ROWS] if name == "rel" else ROWS
        assert v["rows"] == expected, name
    # the same upstream, read by two consumers in two ways
    assert types["plain"] != types["polars"] and got["plain"]["rows"] == got["polars"]["rows"]


def test_collect_partitioned_frames_eager_and_lazy(project: Project) -> None:
    project.copy_pipeline("frames.py")
    r = project.barca("get", "eager_list,arrow_list,lazy_all,relation_all", "pipeline.py",
                      "-o", "value")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    amer = {"type": "", "rows": [{"a": 3, "b": "amer"}]}
    emea = {"type": "", "rows": [{"a": 1, "b": "emea"}, {"a": 2, "b": "emea"}]}
    # keys in lexical order: region=amer, region=emea
    assert got["pipeline.py:eager_list"] == [dict(amer, type="polars.DataFrame"),
                                            dict(emea, type="polars.DataFrame")]
    assert got["pipeline.py:arrow_list"] == [dict(amer, type="pyarrow.Table"),
                                            dict(emea, type="pyarrow.Table")]
    rows = [{"partition": "region=emea", "a": 1, "b": "emea"},
            {"partition": "region=emea", "a": 2, "b": "emea"},
            {"partition": "region=amer", "a": 3, "b": "amer"}]
    assert got["pipeline.py:lazy_all"] == {"type": "LazyFrame", "rows": rows}
    assert got["pipeline.py:relation_all"] == {"type": "DuckDBPyRelation", "rows": rows}
    q = project.barca("sql", "select partition, a from sales order by a", "--json")
    assert q.code == 0, q.err
    assert q.sql_rows() == [["region=emea", 1], ["region=emea", 2], ["region=amer", 3]]


def test_get_returns_the_written_type_or_as_type(project: Project) -> None:
    project.copy_pipeline("frames.py")
    assert project.barca("get", ",".join(WRITERS + ["sales"]), "pipeline.py", "--json").code == 0
    code = f"""
import json, barca
out = {{n: type(barca.get(n)).__module__.split(".")[0] + "." + type(barca.get(n)).__name__
       for n in {WRITERS!r}}}
out["as"] = type(barca.get("from_pandas", as_type="polars")).__name__
sales = barca.get("sales", as_type="pyarrow")
out["sales"] = sorted((k, type(v).__name__) for k, v in sales.items())
try:
    barca.get("from_pandas", as_type="excel")
except barca.UsageError as exc:
    out["bad"] = str(exc)
print(json.dumps(out))
"""
    proc = _python(project, code)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got == {"from_pandas": "pandas.DataFrame", "from_polars": "polars.DataFrame",
                   "from_lazy": "polars.DataFrame", "from_arrow": "pyarrow.Table",
                   "from_duckdb": "duckdb.DuckDBPyRelation", "as": "DataFrame",
                   "sales": [["region=amer", "Table"], ["region=emea", "Table"]],
                   "bad": got.get("bad", "missing")}
    assert "as_type='excel' is not a table type" in got["bad"]
    r = project.barca("get", "from_pandas", "--as", "excel", "--pretty")
    assert r.code == 2 and "as_type='excel' is not a table type" in r.err, r.err


SERIALIZERS = """
import polars as pl
from barca import asset, sink


@sink("out/polars.csv")
@asset()
def sunk():
    return pl.DataFrame({"a": [1, 2]})


@asset(serializer="csv")
def as_csv():
    return pl.DataFrame({"a": [1, 2], "b": ["x", "y"]})


@asset(inputs={"t": as_csv})
def reads_csv(t: pl.DataFrame) -> dict:
    return {"type": type(t).__name__, "rows": t.to_dicts()}


@asset(serializer="csv")
def not_a_table():
    return {"a": 1}


@asset(serializer="parquet")
def parquet_dict():
    return {"a": (1, 2)}


@asset()
def annotated() -> pl.DataFrame:
    return {"a": 1}
"""


def test_serializer_csv_and_the_parquet_fallback(project: Project) -> None:
    project.write("pipeline.py", SERIALIZERS)
    r = project.barca("get", "reads_csv", "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    assert json.loads(r.out) == {"type": "DataFrame", "rows": [{"a": 1, "b": "x"},
                                                               {"a": 2, "b": "y"}]}
    assert [p.suffix for p in _artifacts(project, "as_csv")] == [".csv"]
    assert _artifacts(project, "as_csv")[0].read_text().splitlines() == ["a,b", "1,x", "2,y"]
    q = project.barca("sql", "select sum(a) as s from as_csv", "--json")
    assert q.code == 0 and q.sql_rows() == [[3]], q.err

    r = project.barca("get", "not_a_table", "pipeline.py", "--pretty")
    assert r.code == 1
    assert 'serializer="csv"' in r.err
    assert list(project.path.glob(".barca/artifacts/pipeline.py--not_a_table*/*")) == []
    assert list(project.path.glob(".barca/artifacts/pipeline.py--not_a_table*/.*")) == []

    r = project.barca("get", "parquet_dict", "pipeline.py", "--pretty")
    assert r.code == 0, r.err
    assert "[barca] warning: pipeline.py:parquet_dict: parquet cannot hold a dict; stored as " \
           "pickle" in r.err
    assert [p.suffix for p in _artifacts(project, "parquet_dict")] == [".pkl"]
    r = project.barca("get", "parquet_dict", "pipeline.py", "--refresh", "parquet_dict", "--json")
    assert r.json()["final_output"]["format"] == "pickle"
    assert [w["message"] for w in r.json()["warnings"]] == [
        "pipeline.py:parquet_dict: parquet cannot hold a dict; stored as pickle"]

    r = project.barca("get", "sunk", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert (project.path / "out" / "polars.csv").read_text().splitlines() == ["a", "1", "2"]

    r = project.barca("get", "annotated", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"a": 1}  # the return annotation never chooses


def test_cached_get_of_frames_imports_no_table_library(project: Project) -> None:
    project.copy_pipeline("frames.py")
    assert project.barca("get", "readers,lazy_all", "pipeline.py", "--json").code == 0
    code = """
import sys, json, io, contextlib
from barca.faces.cli import run_cli
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = run_cli(['get', 'readers,lazy_all', 'pipeline.py', '--json'])
heavy = sorted(m for m in ('duckdb', 'pandas', 'pyarrow', 'polars') if m in sys.modules)
print(json.dumps([rc, heavy]))
"""
    proc = _python(project, code)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == [0, []]


BLOCK_POLARS = """
import sys


class _Block:
    def find_spec(self, name, path=None, target=None):
        if name == "polars" or name.startswith("polars."):
            raise ModuleNotFoundError("No module named 'polars'", name=name)
        return None


sys.meta_path.insert(0, _Block())
"""


def test_missing_library_names_the_extra(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset


        @asset()
        def table() -> dict:
            return {"a": [1, 2]}


        @asset(inputs={"t": table})
        def uses_polars(t: "pl.LazyFrame") -> int:
            return 1
    """)
    block = project.write("blocker/sitecustomize.py", BLOCK_POLARS).parent
    import os
    env = {"PYTHONPATH": os.pathsep.join([str(block), os.environ.get("PYTHONPATH", "")])}
    r = project.barca("get", "uses_polars", "pipeline.py", "--pretty", env=env)
    assert r.code == 2, r.err
    assert "parameter 't' of pipeline.py:uses_polars is read as pl.LazyFrame, which needs " \
           "polars; polars is not installed." in r.err
    assert "pip install 'barca-pipelines[polars]'" in r.err and "Traceback" not in r.err


LAZY = """
import numpy as np
import polars as pl
from barca import asset


def peak_kb() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM")


@asset()
def wide() -> pl.DataFrame:
    rng = np.random.default_rng(0)
    return pl.DataFrame({f"c{i}": rng.random(200_000) for i in range(20)})


@asset(inputs={"_w": wide})
def baseline(_w) -> dict:
    # the same engine warmed up on a tiny frame: what every consumer pays before its input
    return {"sum": pl.LazyFrame({"c3": [1.0]}).select(pl.col("c3").sum()).collect().item(),
            "peak_kb": peak_kb()}


@asset(inputs={"w": wide})
def lazy(w: pl.LazyFrame) -> dict:
    return {"sum": w.select(pl.col("c3").sum()).collect().item(), "peak_kb": peak_kb()}


@asset(inputs={"w": wide})
def eager(w: pl.DataFrame) -> dict:
    return {"sum": w.select(pl.col("c3").sum()).item(), "peak_kb": peak_kb()}
"""


def test_lazy_input_reads_one_column_in_far_less_memory(project: Project) -> None:
    """Each consumer runs in a fresh worker process of its own `barca get` and reports the
    peak RSS of that process (VmHWM); the memory a consumer's input costs is its peak over a
    baseline consumer's that reads nothing. Ratios, not absolute numbers."""
    project.write("pipeline.py", LAZY)
    env = {"POLARS_MAX_THREADS": "2"}
    assert project.barca("get", "wide", "pipeline.py", "--json", env=env).code == 0
    [path] = _artifacts(project, "wide")
    assert path.suffix == ".parquet" and path.stat().st_size > 20_000_000
    peaks = {}
    sums = {}
    for name in ("baseline", "lazy", "eager"):
        r = project.barca("get", name, "pipeline.py", "-o", "value", env=env)
        assert r.code == 0, r.err
        got = json.loads(r.out)
        peaks[name], sums[name] = got["peak_kb"], got["sum"]
    assert sums["lazy"] == pytest.approx(sums["eager"]) and 99_000 < sums["lazy"] < 101_000
    lazy_cost = peaks["lazy"] - peaks["baseline"]
    eager_cost = peaks["eager"] - peaks["baseline"]
    # one column of twenty: an eager read holds ~32 MB of floats, the lazy one a column chunk
    assert eager_cost > 25_000, peaks
    assert lazy_cost < eager_cost / 2.5, peaks
    assert peaks["lazy"] < peaks["eager"], peaks


REMOTE = """
import duckdb
import polars as pl
from barca import asset


@asset()
def wide() -> pl.DataFrame:
    return pl.DataFrame({f"c{i}": list(range(1000)) for i in range(20)})


@asset(inputs={"w": wide})
def lazy_sum(w: pl.LazyFrame) -> dict:
    return {"type": type(w).__name__, "sum": w.select(pl.col("c3").sum()).collect().item()}


@asset(inputs={"w": wide})
def rel_sum(w: duckdb.DuckDBPyRelation) -> dict:
    return {"type": type(w).__name__, "sum": int(w.sum("c3").fetchall()[0][0])}


@asset(inputs={"w": wide})
def eager_sum(w: pl.DataFrame) -> int:
    return w["c3"].sum()
"""


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_lazy_input_is_fetched_checked_then_scanned(project: Project, tmp_path: Path,
                                                    kind: str,
                                                    request: pytest.FixtureRequest) -> None:
    project.write("pipeline.py", REMOTE)
    store = tmp_path / "store"
    if kind == "file":
        env = {"BARCA_REMOTE_URI": f"file://{store}"}
    else:
        env = {"BARCA_REMOTE_URI": "s3://barca-test/frames", "AWS_ACCESS_KEY_ID": "test",
               "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_ENDPOINT_URL": request.getfixturevalue("s3_server")}
    r = project.barca("get", "wide", "pipeline.py", "--json", env=env)
    assert r.code == 0, r.err
    [local] = _artifacts(project, "wide")
    if kind == "file":  # the store keeps the bytes at their local name, beside a manifest
        folder = store / "artifacts" / local.parent.name
        assert (folder / f"{local.name}.manifest").is_file()
        assert (folder / local.name).read_bytes() == local.read_bytes()
    local.unlink()  # this machine no longer has it; the store does
    r = project.barca("get", "lazy_sum,rel_sum", "pipeline.py", "-o", "value", env=env)
    assert r.code == 0, r.err
    assert json.loads(r.out) == {
        "pipeline.py:lazy_sum": {"type": "LazyFrame", "sum": 499500},
        "pipeline.py:rel_sum": {"type": "DuckDBPyRelation", "sum": 499500}}
    # fetched into its local place and its SHA-256 checked before the step scanned it (a
    # byte-range read in place could not be checked: see test_reads.py)
    assert local.exists()
    local.unlink()
    r = project.barca("get", "eager_sum", "pipeline.py", "-o", "value", env=env)
    assert r.code == 0 and json.loads(r.out) == 499500, r.err
    assert local.exists()  # an eager read downloads it (and checks its SHA-256)
