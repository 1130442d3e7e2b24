"""The CLI contract (engine.md 5b, issue #15): what users following the seed page, and scripts
written for barca, rely on. Every test drives the real CLI in a subprocess (stdout is a pipe)."""
from __future__ import annotations

import json

import pytest
from conftest import Project

pytestmark = pytest.mark.slow

FAILING_KEY = """
from barca import asset, collect, partitions

REGIONS = ["emea", "amer", "apac"]


@asset(partitions={"region": partitions(REGIONS)})
def sales(region: str) -> dict:
    if region == "amer":
        raise RuntimeError("amer feed not ready")
    return {"region": region, "revenue": len(region) * 10}


@asset(inputs={"all_sales": collect(sales)})
def summary(all_sales: list[dict]) -> dict:
    return {"regions": len(all_sales), "total": sum(s["revenue"] for s in all_sales)}
"""

RUN_FAILED = ("[barca] run failed: step 'pipeline.py:sales[region=amer]' failed: RuntimeError: "
              "amer feed not ready; 1 downstream steps skipped (exit 1)")


def _sql_rows(p: Project, query: str) -> tuple[list[str], list[list]]:
    r = p.barca("sql", query, "pipeline.py", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    return doc["columns"], [[row[c] for c in doc["columns"]] for row in doc["rows"]]


# ------------------------------------------------------------------ 1. sql over derived keys

def test_sql_view_over_keys_from_an_upstream_list(project: Project) -> None:
    project.copy_pipeline("regions_from.py")  # the seed page's "Keys from an upstream asset"
    project.write("regions.txt", "emea amer apac\n")
    assert project.barca("get", "summary", "pipeline.py").code == 0
    cols, rows = _sql_rows(project, "select * from sales order by partition")
    assert cols == ["partition", "region", "revenue"]
    assert rows == [["region=amer", "amer", 40], ["region=apac", "apac", 40],
                    ["region=emea", "emea", 40]]
    # a removed key leaves the view, not the disk
    project.write("regions.txt", "emea apac latam\n")
    r = project.barca("get", "summary", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"regions": 3, "total": 130}
    cols, rows = _sql_rows(project, "select * from sales order by partition")
    assert rows == [["region=apac", "apac", 40], ["region=emea", "emea", 40],
                    ["region=latam", "latam", 50]]
    assert (project.path / ".barca/artifacts/pipeline.py--sales_region_amer").is_dir()


def test_sql_view_over_keys_from_a_dict_sensor(project: Project) -> None:
    project.write("pipeline.py", """
        import json
        from pathlib import Path

        from barca import asset, partitions_from, sensor


        @sensor()
        def versions() -> dict:
            return json.loads(Path("versions.json").read_text())


        @asset(partitions={"retailer": partitions_from(versions)})
        def sales(retailer: str, versions: str) -> dict:
            return {"retailer": retailer, "version": versions}
        """)
    project.write("versions.json", '{"r1": "a", "r2": "b"}')
    assert project.barca("get", "sales", "pipeline.py").code == 0
    cols, rows = _sql_rows(project, "select * from sales order by partition")
    assert cols[0] == "partition"
    assert [r[0] for r in rows] == ["retailer=r1", "retailer=r2"]
    project.write("versions.json", '{"r2": "b", "r3": "c"}')
    assert project.barca("get", "sales", "pipeline.py").code == 0
    cols, rows = _sql_rows(project, "select partition from sales order by partition")
    assert rows == [["retailer=r2"], ["retailer=r3"]]


# ------------------------------------------------------------------ 2. --agent failure line

@pytest.mark.parametrize("mode", [[], ["--json"], ["--pretty"]])
def test_agent_failure_ends_with_the_run_failed_line(project: Project, mode: list[str]) -> None:
    project.write("pipeline.py", FAILING_KEY)
    r = project.barca("get", "summary", "pipeline.py", "--agent", *mode)
    assert r.code == 1
    own = [line for line in r.err.splitlines() if line.startswith("[barca]")]
    assert own[-1] == RUN_FAILED
    assert own.count(RUN_FAILED) == 1
    assert "[barca] step:pipeline.py:sales[region=amer] failed: RuntimeError: amer feed not " \
           "ready" in own
    assert r.err.splitlines()[-1] == RUN_FAILED  # stderr's last line, in every mode (#29)
    if mode != ["--pretty"]:  # JSON mode: the error line comes just before it
        assert json.loads(r.err.splitlines()[-2])["kind"] == "step_failed"
        assert json.loads(r.out)["status"] == "failed"


# ------------------------------------------------------------------ 3. key previews

KEYS_30 = """
from barca import asset, collect, partitions

KEYS = [f"k{i}" for i in range(30)]


@asset(partitions={"key": partitions(KEYS)})
def item(key: str) -> dict:
    return {"key": key}
"""


def test_key_previews_are_the_first_twenty_in_lexical_order(project: Project) -> None:
    project.write("pipeline.py", KEYS_30)
    first20 = sorted(f"key=k{i}" for i in range(30))[:20]
    assert first20[:3] == ["key=k0", "key=k1", "key=k10"]  # lexical, not numeric
    st = project.barca("status", "pipeline.py", "--json").json()
    parts = st["nodes"][0]["partitions"]
    assert parts == {"cached": 0, "missing": 30, "missing_keys": first20, "total": 30}
    dry = project.barca("get", "item", "pipeline.py", "--dry-run", "--json").json()
    step = dry["steps"][0]
    assert step["partitions"]["will_run"] == 30
    assert step["partitions"]["will_run_keys"] == first20
    assert project.barca("get", "item", "pipeline.py", "--partition", "key=k0").code == 0
    rest = sorted(f"key=k{i}" for i in range(1, 30))
    pretty = project.barca("get", "item", "pipeline.py", "--dry-run", "--pretty").out
    assert f"1 of 30 keys cached; will run: {', '.join(rest[:20])} (+9 more)" in pretty
    parts = project.barca("status", "pipeline.py", "--json").json()["nodes"][0]["partitions"]
    assert parts == {"cached": 1, "missing": 29, "missing_keys": rest[:20], "total": 30}
    plan = project.barca("plan", "pipeline.py", "--json").json()
    node = plan["nodes"][0]
    assert node["keys"] == 30 and node["key_preview"] == first20
    run = project.barca("get", "item", "pipeline.py").json()
    assert run["steps"][0]["partitions"]["will_run"] == 29
    assert run["steps"][0]["partitions"]["will_run_keys"] == rest[:20]


# ------------------------------------------------------------------ 4. never-recorded sensors

SENSOR_CHAIN = """
from barca import asset, sensor


@sensor()
def feed() -> str:
    return "v1"


@asset(inputs={"f": feed})
def prices(f: str) -> dict:
    return {"f": f}


@asset(inputs={"p": prices})
def report(p: dict) -> dict:
    return p
"""


def test_a_sensor_with_no_recorded_value_makes_its_consumers_unknown(project: Project) -> None:
    project.write("pipeline.py", SENSOR_CHAIN)
    dry = project.barca("get", "report", "pipeline.py", "--dry-run", "--pretty")
    assert dry.code == 0, dry.err
    assert dry.out.rstrip("\n").splitlines()[-1] == "1 will run, 0 cached, 2 unknown"
    doc = project.barca("get", "report", "pipeline.py", "--dry-run", "--json").json()
    assert doc["summary"] == {"will_run": 1, "cached": 0, "unknown": 2}
    by_id = {s["id"]: s for s in doc["steps"]}
    assert by_id["pipeline.py:prices"]["action"] == "unknown"
    assert by_id["pipeline.py:prices"]["reason"] == "sensor_output_unknown"
    st = project.barca("status", "pipeline.py", "--json").json()
    states = {n["name"]: n["cache"] for n in st["nodes"]}
    assert states["prices"]["state"] == states["report"]["state"] == "unknown"
    assert states["prices"]["reason"] == states["report"]["reason"] == "sensor_output_unknown"
    assert st["summary"]["unknown"] == 2 and st["summary"]["never_run"] == 0
    assert not (project.path / ".barca").exists()
    # once the sensor has a value, the prediction is exact again
    assert project.barca("get", "report", "pipeline.py").code == 0
    again = project.barca("get", "report", "pipeline.py", "--dry-run", "--json").json()
    assert again["summary"] == {"will_run": 1, "cached": 2, "unknown": 0}


# ------------------------------------------------------------------ 5. stored formats

def test_json_values_with_tuples_are_stored_as_json(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset


        @asset()
        def pairs() -> list:
            return [{"name": "a", "point": (1, 2)}, {"name": "b", "point": (3, 4)}]


        @asset()
        def pair() -> tuple:
            return ("x", 1)


        @asset()
        def blob() -> bytes:
            return b"raw"


        @asset(inputs={"p": pairs})
        def first(p: list) -> list:
            return p[0]["point"]
        """)
    r = project.barca("get", "first,pair,blob", "pipeline.py", "--json")
    assert r.code == 0, r.err
    art = project.path / ".barca" / "artifacts"
    assert [f.suffix for f in (art / "pipeline.py--pairs").iterdir()] == [".json"]
    assert [f.suffix for f in (art / "pipeline.py--pair").iterdir()] == [".json"]
    assert [f.suffix for f in (art / "pipeline.py--blob").iterdir()] == [".pkl"]
    assert r.json()["final_output"]["pipeline.py:first"] == [1, 2]
    cols, rows = _sql_rows(project, "select name, point from pairs order by name")
    assert cols == ["name", "point"] and rows == [["a", [1, 2]], ["b", [3, 4]]]


# ------------------------------------------------------------------ 6. sql --json

def test_sql_json_is_valid_json(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py").code == 0
    r = seed.barca("sql", "select 'nan'::double as a, 'inf'::double as b, "
                   "'-inf'::double as c, 12.50::decimal(10,2) as d, close from prices "
                   "order by ticker limit 1", "pipeline.py", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert doc["rows"] == [{"a": None, "b": None, "c": None, "d": 12.5, "close": 465.0}]


# ------------------------------------------------------------------ 7. -o value

def test_output_value_piped_json_and_errors(seed: Project) -> None:
    r = seed.barca("get", "report", "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    assert json.loads(r.out) == {"tickers": 3, "buys": ["GOOG", "MSFT"]}
    r = seed.barca("get", "report", "pipeline.py", "-o", "value", "--json")
    doc = json.loads(r.out)
    assert doc["status"] == "success" and doc["steps_executed"] == 1
    assert doc["final_output"] == {"tickers": 3, "buys": ["GOOG", "MSFT"]}
    seed.write("blob.py", """
        from barca import asset


        @asset()
        def blob() -> bytes:
            return b"raw"
        """)
    r = seed.barca("get", "blob", "blob.py", "-o", "value")
    assert r.code == 2
    err = json.loads(r.err.splitlines()[-1])
    assert err["kind"] == "usage" and err["kind"] != "step_failed"
    assert "-o path" in err["remediation"] and "barca.get()" in err["remediation"]
    assert r.out == ""


def test_output_value_prints_nothing_when_a_step_fails(project: Project) -> None:
    project.write("pipeline.py", FAILING_KEY)
    for extra in ([], ["--json"], ["--pretty"]):
        r = project.barca("get", "summary", "pipeline.py", "-o", "value", *extra)
        assert r.code == 1, extra
        assert r.out == "", extra


# ------------------------------------------------------------------ 8. compact JSON on a pipe

def test_piped_run_json_is_one_compact_line(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py").code == 0
    r = seed.barca("get", "report", "pipeline.py")
    assert r.code == 0
    assert r.out.count("\n") == 1 and r.out.endswith("}\n")
    assert '"steps_executed":1' in r.out and '"status":"success"' in r.out
    pretty = seed.barca("get", "report", "pipeline.py", "--pretty")
    assert pretty.out.startswith("Run ") and "got 'report'" in pretty.out
    seed.write("failing.py", FAILING_KEY)
    bad = seed.barca("get", "summary", "failing.py")
    assert bad.code == 1 and bad.out.count("\n") == 1
    assert json.loads(bad.out)["status"] == "failed"


# ------------------------------------------------------------------ 9. notes on stderr

PARTITIONED_FANIN = """
from barca import asset, collect, partitions


@asset(partitions={"region": partitions(["emea", "amer"])})
def sales(region: str) -> dict:
    return {"region": region}


@asset(inputs={"all_sales": collect(sales)})
def summary(all_sales: list[dict]) -> dict:
    return {"n": len(all_sales)}
"""

MODES = [[], ["--json"], ["--agent"], ["--pretty"]]


@pytest.mark.parametrize("mode", MODES)
def test_partition_note_reaches_stderr_in_every_mode(project: Project, mode: list[str]) -> None:
    project.write("pipeline.py", PARTITIONED_FANIN)
    r = project.barca("get", "pipeline.py", "--partition", "region=emea", *mode)
    assert r.code == 0, r.err
    assert "--partition skips a fan-in that reads every key: summary" in r.err
    if mode in ([], ["--json"]):
        assert any("summary" in w["message"] for w in json.loads(r.out)["warnings"])


NO_CASCADE = """
from barca import asset


@asset()
def base() -> int:
    return 1


@asset(inputs={"b": base})
def kept(b: int) -> int:
    return b + 1


@asset(inputs={"b": base})
def edited(b: int) -> int:
    return b + 2
"""


@pytest.mark.parametrize("mode", MODES)
def test_no_cascade_warning_names_only_cached_dependants(project: Project,
                                                        mode: list[str]) -> None:
    project.write("pipeline.py", NO_CASCADE)
    assert project.barca("get", "pipeline.py").code == 0
    project.edit("pipeline.py", "return b + 2", "return b + 3")  # `edited` runs anyway
    r = project.barca("get", "pipeline.py", "--refresh", "base", "--no-cascade", *mode)
    assert r.code == 0, r.err
    line = "'kept' was served from cache but depends on refreshed 'base'"  # one per dependant
    assert line in r.err
    assert "'edited' was served" not in r.err
    if mode in ([], ["--json"]):
        assert line in [w["message"] for w in json.loads(r.out)["warnings"]]


# ------------------------------------------------------------------ 10. BARCA_OUTPUT

def test_barca_output_chooses_the_mode(seed: Project) -> None:
    pretty = seed.barca("get", "report", "pipeline.py", env={"BARCA_OUTPUT": "pretty"})
    assert pretty.code == 0 and pretty.out.startswith("Run ")
    as_json = seed.barca("status", "pipeline.py", env={"BARCA_OUTPUT": "json"})
    assert "nodes" in as_json.json()
    flag_wins = seed.barca("status", "pipeline.py", "--pretty", env={"BARCA_OUTPUT": "json"})
    assert flag_wins.out.startswith("NAME")
    flag_wins = seed.barca("get", "report", "pipeline.py", "--json",
                           env={"BARCA_OUTPUT": "pretty"})
    assert flag_wins.json()["status"] == "success"
    bad = seed.barca("get", "report", "pipeline.py", env={"BARCA_OUTPUT": "yaml"})
    assert bad.code == 2 and "BARCA_OUTPUT" in bad.err and bad.out == ""


# ------------------------------------------------------------------ 11. usage errors

@pytest.mark.parametrize("args", [
    ["get", "report", "pipeline.py", "--no-cascade"],
    ["get", "report", "pipeline.py", "--no-cascade", "--dry-run"],
    ["get", "", "pipeline.py"],
    ["get", " , ", "pipeline.py"],
    ["status", "", "pipeline.py"],
])
def test_usage_errors_before_anything_runs(seed: Project, args: list[str]) -> None:
    r = seed.barca(*args)
    assert r.code == 2, r.err
    assert "Traceback" not in r.err
    assert json.loads(r.err.splitlines()[-1])["kind"] == "usage"
    assert not (seed.path / ".barca").exists()


def test_no_cascade_error_names_refresh(seed: Project) -> None:
    r = seed.barca("get", "report", "pipeline.py", "--no-cascade", "--pretty")
    assert r.code == 2 and "--refresh" in r.err and "--no-cascade" in r.err


# ------------------------------------------------------------------ 12. a file of tasks

def test_get_on_a_file_of_tasks_suggests_run(project: Project) -> None:
    project.write("tasks.py", """
        from barca import task


        @task()
        def hello() -> None:
            print("hello")
        """)
    for mode in ([], ["--pretty"]):
        r = project.barca("get", "tasks.py", *mode)
        assert r.code == 0, r.err
        assert "barca run hello tasks.py" in r.err
        assert "[tasks.py:hello]" not in r.err  # the task did not run
    assert project.barca("get", "tasks.py").json()["steps_executed"] == 0
    assert not (project.path / ".barca").exists()


# ------------------------------------------------------------------ help

def test_help_lists_every_command_and_each_has_its_own(project: Project) -> None:
    from barca.faces.commands import COMMANDS
    r = project.barca("--help")
    assert r.code == 0, r.err
    for cmd in COMMANDS:
        assert f"    {cmd} " in r.out, cmd
        sub = project.barca(cmd, "--help")
        assert sub.code == 0 and sub.out.startswith(f"usage: barca {cmd}"), (cmd, sub.err)
