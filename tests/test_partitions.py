"""Partitions: the behavioural contract of the seed page (../shared/seed/000_f6b8a7aeadf78d94.txt).

One test (or a few) per section of the page, each reproducing the page's commands on the page's
pipelines and asserting what the page shows. Completion order of keys is not deterministic, so
sets of completed step ids are compared; timings are never asserted.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
from conftest import Project

LAST_RUN_OK = re.compile(r"^success \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \d+\.\d\ds$")


# ---------------------------------------------------------------- helpers

def table_rows(text: str) -> list[list[str]]:
    """Cells of every table line (columns are two or more spaces apart), header included."""
    rows = []
    for line in text.splitlines():
        if not line.strip() or set(line.strip()) == {"-"}:
            continue
        rows.append(re.split(r" {2,}", line.strip()))
    return rows


def _rows_after(text: str, header: str) -> list[list[str]]:
    """The cells of each row of the table whose header line starts with ``header``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    rows = []
    for ln in lines[start + 1:]:
        if not ln.strip():
            break
        rows.append(re.split(r" {2,}", ln.strip()))
    return rows


def dry_rows(text: str) -> dict[str, list[str]]:
    """STEP -> [STATUS, WHY] for a dry-run table."""
    return {cells[-1]: cells[:-1] for cells in _rows_after(text, "STATUS")}


def status_rows(text: str) -> dict[str, list[str]]:
    """NAME -> the other cells of a status table."""
    return {cells[0]: cells[1:] for cells in _rows_after(text, "NAME")}


def last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def ok(r, code: int = 0):
    assert r.code == code, f"exit {r.code}\nstdout:\n{r.out}\nstderr:\n{r.err}"
    return r


def artifact_dirs(project: Project) -> set[str]:
    root = project.path / ".barca" / "artifacts"
    return {p.name for p in root.iterdir() if p.is_dir()} if root.exists() else set()


def use(project: Project, name: str) -> Project:
    project.copy_pipeline(name)
    return project


def S(*names: str) -> set[str]:
    return {f"pipeline.py:{n}" for n in names}


def sales_keys(*regions: str) -> set[str]:
    return {f"pipeline.py:sales[region={r}]" for r in regions}


SEED_ALL = S("feed_version", "prices[ticker=AAPL]", "prices[ticker=MSFT]", "prices[ticker=GOOG]",
             "signal[ticker=AAPL]", "signal[ticker=MSFT]", "signal[ticker=GOOG]", "report")


def add_nvda(seed: Project) -> None:
    seed.edit("pipeline.py", 'partitions(["AAPL", "MSFT", "GOOG"])',
              'partitions(["AAPL", "MSFT", "GOOG", "NVDA"])')


def python_api(project: Project, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=project.path,
                          capture_output=True, text=True, timeout=120)


# ---------------------------------------------------------------- 1. Example

def test_example_list_one_row_per_asset(seed):
    r = ok(seed.barca("list", "pipeline.py", "--pretty"))
    assert r.out.splitlines() == [
        "NAME                      KIND    FRESHNESS  DEPS",
        "-------------------------------------------------",
        "pipeline.py:feed_version  sensor  manual     -",
        "pipeline.py:prices        asset   always     pipeline.py:feed_version",
        "pipeline.py:signal        asset   always     pipeline.py:prices",
        "pipeline.py:report        asset   always     pipeline.py:signal",
    ]


def test_example_first_run_eight_steps_second_run_one(seed):
    r = ok(seed.barca("get", "report", "pipeline.py", "--pretty"))
    assert r.steps_line() == "8/8 steps | done"
    out = r.out.splitlines()
    assert re.fullmatch(r"Run [0-9a-f]{12} \| got 'report' in \d+\.\d+s \(8 steps, 3 phases\)",
                        out[0]), out[0]
    assert out[1] == ""
    assert re.fullmatch(r"\.barca/artifacts/pipeline\.py--report/[0-9a-f]+\.json", out[2]), out[2]
    assert (seed.path / out[2]).is_file()

    r = ok(seed.barca("get", "report", "pipeline.py", "--pretty", "--agent"))
    assert r.steps_line() == "1/8 steps | done"
    assert set(r.completed()) == S("feed_version")
    assert re.fullmatch(r"Run [0-9a-f]{12} \| got 'report' in \d+\.\d+s \(1 step, 3 phases\)",
                        r.out.splitlines()[0]), r.out


def test_example_report_value_and_per_key_artifacts(seed):
    r = ok(seed.barca("get", "report", "pipeline.py", "--json"))
    data = r.json()
    assert data["final_output"] == {"buys": ["GOOG", "MSFT"], "tickers": 3}
    assert data["steps_executed"] == 8
    dirs = artifact_dirs(seed)
    for asset in ("prices", "signal"):
        for t in ("AAPL", "GOOG", "MSFT"):
            d = f"pipeline.py--{asset}_ticker_{t}"
            assert d in dirs, dirs
            files = list((seed.path / ".barca" / "artifacts" / d).iterdir())
            assert len(files) == 1 and re.fullmatch(r"[0-9a-f]{12,}\.json", files[0].name), files
    assert "pipeline.py--report" in dirs
    # no directory per asset without a key for the partitioned assets
    assert "pipeline.py--prices" not in dirs and "pipeline.py--signal" not in dirs
    # one key's artifact is that key's value
    aapl = next((seed.path / ".barca/artifacts/pipeline.py--prices_ticker_AAPL").iterdir())
    assert json.loads(aapl.read_text()) == {"ticker": "AAPL", "close": 465.0, "feed": "v1"}


def test_example_status_one_row_per_asset(seed):
    ok(seed.barca("get", "report", "pipeline.py", "--json"))
    r = ok(seed.barca("status", "pipeline.py", "--pretty"))
    rows = status_rows(r.out)
    assert list(rows) == ["feed_version", "prices", "signal", "report"]
    expected = {
        "feed_version": ["sensor", "always-runs", "sensor", "str", "-"],
        "prices": ["asset", "cached", "materialized", "dict (3 keys)", "feed_version"],
        "signal": ["asset", "cached", "materialized", "dict (2 keys)", "prices"],
        "report": ["asset", "cached", "materialized", "dict (2 keys)", "signal"],
    }
    for name, cells in rows.items():
        assert LAST_RUN_OK.match(cells[3]), cells
        assert cells[:3] + cells[4:] == expected[name]
    assert last_line(r.out) == "3 cached, 0 stale, 0 never run, 0 partial, 0 unknown, 1 always run"

    status = ok(seed.barca("status", "pipeline.py", "--json")).json()
    nodes = {n["name"]: n for n in status["nodes"]}
    assert nodes["prices"]["partitions"] == {"cached": 3, "missing": 0, "missing_keys": [],
                                             "total": 3}


# ---------------------------------------------------------------- 2. A sensor change

def test_sensor_change_reruns_every_key(seed):
    ok(seed.barca("get", "report", "pipeline.py", "--json"))
    (seed.path / "feed_version.txt").write_text("v2\n")

    d = ok(seed.barca("get", "report", "pipeline.py", "--dry-run", "--pretty"))
    assert d.out.splitlines()[0] == "Dry run: barca get report (nothing executed, nothing written)"
    rows = dry_rows(d.out)
    assert rows == {
        "pipeline.py:feed_version": ["will run", "sensors always re-run"],
        "pipeline.py:prices": ["cached", "3 keys; assumes sensor 'feed_version' returns the same "
                                         "value as its last run"],
        "pipeline.py:signal": ["cached", "3 keys cached"],
        "pipeline.py:report": ["cached", "-"],
    }
    assert last_line(d.out) == "1 will run, 7 cached, 0 unknown"

    r = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "8/8 steps | done"
    assert set(r.completed()) == SEED_ALL
    assert len(r.completed()) == 8
    counters = re.findall(r"^\[barca\] step:\S+ completed \S+ \((\d+)/(\d+)\)$", r.err, re.M)
    assert sorted(int(a) for a, _ in counters) == list(range(1, 9))
    assert {b for _, b in counters} == {"8"}
    assert re.search(r"^\[barca\] importing /\S*pipeline\.py$", r.err, re.M)
    # the sensor before any key, every prices key before the signal of that key, report last
    order = r.completed()
    assert order[0] == "pipeline.py:feed_version" and order[-1] == "pipeline.py:report"
    for t in ("AAPL", "MSFT", "GOOG"):
        assert order.index(f"pipeline.py:prices[ticker={t}]") < order.index(
            f"pipeline.py:signal[ticker={t}]")
    assert r.json()["final_output"]["tickers"] == 3


# ---------------------------------------------------------------- 3. Adding/removing keys

def test_adding_removing_keys_literal_list(seed):
    ok(seed.barca("get", "report", "pipeline.py", "--json"))
    add_nvda(seed)

    d = ok(seed.barca("get", "report", "pipeline.py", "--dry-run", "--pretty"))
    assert d.out.splitlines()[2:] == [
        "STATUS    WHY                                        STEP",
        "will run  sensors always re-run                      pipeline.py:feed_version",
        "partial   3 of 4 keys cached; will run: ticker=NVDA  pipeline.py:prices",
        "partial   3 of 4 keys cached; will run: ticker=NVDA  pipeline.py:signal",
        "will run  changed: input pipeline.py:signal          pipeline.py:report",
        "",
        "4 will run, 6 cached, 0 unknown",
    ]

    r = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "4/10 steps | done"
    assert set(r.completed()) == S("feed_version", "prices[ticker=NVDA]", "signal[ticker=NVDA]",
                                   "report")
    assert r.json()["final_output"] == {"buys": ["GOOG", "MSFT", "NVDA"], "tickers": 4}

    # removing MSFT: the sensor and report ran, no key did
    seed.edit("pipeline.py", '"MSFT", ', "")
    r = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "2/8 steps | done"
    assert set(r.completed()) == S("feed_version", "report")
    assert r.json()["final_output"] == {"buys": ["GOOG", "NVDA"], "tickers": 3}

    # description= is not counted: only the sensor runs
    seed.edit("pipeline.py", "@asset(inputs={\"version\": feed_version},",
              "@asset(inputs={\"version\": feed_version}, description=\"Closing prices\",")
    r = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "1/8 steps | done"
    assert set(r.completed()) == S("feed_version")


def test_reordering_keys_runs_no_key(seed):
    ok(seed.barca("get", "report", "pipeline.py", "--json"))
    seed.edit("pipeline.py", '["AAPL", "MSFT", "GOOG"]', '["GOOG", "AAPL", "MSFT"]')
    r = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "1/8 steps | done"
    assert set(r.completed()) == S("feed_version")


# ---------------------------------------------------------------- 4. Module constant

def test_module_level_constant_add_and_remove(project):
    use(project, "regions_const.py")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "4/4 steps | done"
    assert r.json()["final_output"] == {"regions": 3, "total": 120}

    project.edit("pipeline.py", '"apac"]', '"apac", "latam"]')
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "2/5 steps | done"
    assert set(r.completed()) == S("sales[region=latam]", "summary")
    assert re.search(r"^\[barca\] step:pipeline\.py:sales\[region=latam\] completed \S+ \(1/5\)$",
                     r.err, re.M)
    assert re.search(r"^\[barca\] step:pipeline\.py:summary completed \S+ \(2/5\)$", r.err, re.M)

    project.edit("pipeline.py", '"amer", ', "")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "1/4 steps | done"
    assert set(r.completed()) == S("summary")
    assert r.json()["final_output"] == {"regions": 3, "total": 130}


@pytest.mark.parametrize("expr", [
    '[r for r in ("emea", "amer", "apac")]',
    'make_regions()',
    'sorted({"emea", "amer", "apac"})',
])
def test_module_level_constant_non_literal_expression_is_evaluated(project, expr):
    use(project, "regions_const.py")
    project.edit("pipeline.py", 'REGIONS = ["emea", "amer", "apac"]',
                 'def make_regions():\n    return ["emea", "amer", "apac"]\n\n\n'
                 f'REGIONS = {expr}')
    r = ok(project.barca("get", "sales", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "3/3 steps | done"
    assert set(r.completed()) == sales_keys("emea", "amer", "apac")
    # written directly in the decorator, too
    project.edit("pipeline.py", 'partitions(REGIONS)', f'partitions({expr} + ["latam"])')
    r = ok(project.barca("get", "sales", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "1/4 steps | done"
    assert set(r.completed()) == sales_keys("latam")


# ---------------------------------------------------------------- 5. Keys from upstream

def test_keys_from_upstream_unknown_before_first_run(project):
    use(project, "regions_from.py")
    project.write("regions.txt", "emea amer apac\n")
    msg = "partition keys come from the output of 'regions', which is not available until it runs"

    d = ok(project.barca("get", "summary", "pipeline.py", "--dry-run", "--pretty"))
    rows = dry_rows(d.out)
    assert rows["pipeline.py:sales"][0] == "unknown"
    assert msg in rows["pipeline.py:sales"][1]
    assert rows["pipeline.py:summary"][0] == "unknown"

    s = ok(project.barca("status", "pipeline.py", "--pretty"))
    rows = status_rows(s.out)
    assert rows["sales"][1] == "unknown" and msg in rows["sales"][2], rows["sales"]
    assert rows["summary"][1] == "unknown"
    status = ok(project.barca("status", "pipeline.py", "--json")).json()
    nodes = {n["name"]: n for n in status["nodes"]}
    assert nodes["sales"]["cache"]["state"] == "unknown"
    assert nodes["summary"]["cache"]["state"] == "unknown"
    # neither status nor dry-run created .barca/
    assert not (project.path / ".barca").exists()


def test_keys_from_upstream_append_and_remove(project):
    use(project, "regions_from.py")
    project.write("regions.txt", "emea amer apac\n")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "6/6 steps | done"
    assert r.json()["final_output"] == {"regions": 3, "total": 120}

    project.write("regions.txt", "emea amer apac latam\n")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    lines = [ln for ln in r.err.splitlines() if " completed " in ln]
    norm = [re.sub(r" completed \S+ ", " completed ", ln) for ln in lines]
    assert norm == [
        "[barca] step:pipeline.py:region_list completed (1/4)",
        "[barca] step:pipeline.py:regions completed (2/4)",
        "[barca] step:pipeline.py:sales[region=latam] completed (3/7)",
        "[barca] step:pipeline.py:summary completed (4/7)",
    ]
    assert r.steps_line() == "4/7 steps | done"
    # the list itself is not passed to sales (sales takes only region)
    assert r.json()["final_output"] == {"regions": 4, "total": 170}

    project.write("regions.txt", "emea apac latam\n")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == S("region_list", "regions", "summary")
    assert not any("sales[" in c for c in r.completed())
    assert r.json()["final_output"] == {"regions": 3, "total": 130}


DICT_ASSET_SOURCE = """\
    import json
    from pathlib import Path

    from barca import asset, collect, partitions_from, sensor


    @sensor()
    def raw() -> str:
        return Path("versions.json").read_text()


    @asset(inputs={"text": raw})
    def versions(text: str) -> dict:
        return json.loads(text)


    @asset(partitions={"retailer": partitions_from(versions)})
    def orders(retailer: str, versions: str) -> dict:
        return {"retailer": retailer, "seen": versions}


    @asset(inputs={"all_orders": collect(orders)})
    def total(all_orders: list[dict]) -> dict:
        return {"retailers": sorted(o["retailer"] for o in all_orders)}
    """


def dict_project(project: Project, source: str, with_value: bool) -> list[str]:
    """The dict-source pipeline: versions is a sensor or an asset; orders takes the value or not.
    Returns the ids of the source's own steps (which run when the file changes)."""
    if source == "sensor":
        use(project, "dict_source.py")
        own = ["pipeline.py:versions"]
    else:
        project.write("pipeline.py", DICT_ASSET_SOURCE)
        own = ["pipeline.py:raw", "pipeline.py:versions"]
    if not with_value:
        project.edit("pipeline.py", "def orders(retailer: str, versions: str) -> dict:",
                     "def orders(retailer: str) -> dict:")
        project.edit("pipeline.py", '"seen": versions}', '"seen": "-"}')
    project.write("versions.json", json.dumps({"r1": "2024-01-01", "r2": "2024-01-01",
                                               "r3": "2024-01-01"}))
    return own


@pytest.mark.parametrize("source", ["sensor", "asset"])
def test_keys_from_dict_source_value_passed_under_source_name(project, source):
    dict_project(project, source, with_value=True)
    r = ok(project.barca("get", "orders", "pipeline.py", "--agent", "--json"))
    assert r.json()["final_output"] == {
        "retailer=r1": {"retailer": "r1", "seen": "2024-01-01"},
        "retailer=r2": {"retailer": "r2", "seen": "2024-01-01"},
        "retailer=r3": {"retailer": "r3", "seen": "2024-01-01"},
    }
    project.write("versions.json", json.dumps({"r1": "2024-01-01", "r2": "2024-02-01",
                                               "r3": "2024-01-01"}))
    out = ok(project.barca("get", "orders", "pipeline.py", "--json")).json()["final_output"]
    assert out["retailer=r2"] == {"retailer": "r2", "seen": "2024-02-01"}
    assert out["retailer=r1"] == {"retailer": "r1", "seen": "2024-01-01"}


@pytest.mark.parametrize("source", ["sensor", "asset"])
def test_keys_from_dict_source_only_changed_value_reruns(project, source):
    own = set(dict_project(project, source, with_value=False))
    r = ok(project.barca("get", "total", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == own | {f"pipeline.py:orders[retailer=r{i}]" for i in (1, 2, 3)
                                        } | {"pipeline.py:total"}
    assert r.json()["final_output"] == {"retailers": ["r1", "r2", "r3"]}

    # same values: only the sensor runs
    r = ok(project.barca("get", "total", "pipeline.py", "--agent", "--json"))
    sensor_id = "pipeline.py:versions" if source == "sensor" else "pipeline.py:raw"
    assert set(r.completed()) == {sensor_id}

    # only r2's value changed: only r2 runs (and the fan-in over it)
    project.write("versions.json", json.dumps({"r1": "2024-01-01", "r2": "2024-02-01",
                                               "r3": "2024-01-01"}))
    r = ok(project.barca("get", "total", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == own | {"pipeline.py:orders[retailer=r2]", "pipeline.py:total"}

    # a new key runs alone; a removed key runs no key
    project.write("versions.json", json.dumps({"r1": "2024-01-01", "r2": "2024-02-01",
                                               "r4": "2024-01-01"}))
    r = ok(project.barca("get", "total", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == own | {"pipeline.py:orders[retailer=r4]", "pipeline.py:total"}
    assert r.json()["final_output"] == {"retailers": ["r1", "r2", "r4"]}


# ---------------------------------------------------------------- 6. Removed key on disk

@pytest.mark.parametrize("pipeline", [
    "regions_const.py",
    "regions_from.py",
])
def test_removed_key_leaves_results_on_disk(project, pipeline):
    use(project, pipeline)
    project.write("regions.txt", "emea amer apac latam\n")
    if pipeline == "regions_const.py":
        project.edit("pipeline.py", '"apac"]', '"apac", "latam"]')
    ok(project.barca("get", "summary", "pipeline.py", "--json"))
    amer_dir = project.path / ".barca/artifacts/pipeline.py--sales_region_amer"
    amer_files = list(amer_dir.iterdir())
    assert len(amer_files) == 1

    # remove amer
    if pipeline == "regions_const.py":
        project.edit("pipeline.py", '"amer", ', "")
    else:
        project.write("regions.txt", "emea apac latam\n")
    r = ok(project.barca("get", "summary", "pipeline.py", "--json"))
    assert r.json()["final_output"] == {"regions": 3, "total": 130}
    assert amer_files[0].is_file()
    r = ok(project.barca("get", "summary", "pipeline.py", "--json"))
    assert r.json()["final_output"] == {"regions": 3, "total": 130}

    # put amer back: its result and the four-key summary are still cached
    if pipeline == "regions_const.py":
        project.edit("pipeline.py", '"emea", ', '"emea", "amer", ')
        r = ok(project.barca("get", "summary", "pipeline.py", "--json", "--agent"))
        assert r.json()["steps_executed"] == 0
        assert r.completed() == []
    else:
        project.write("regions.txt", "emea amer apac latam\n")
        r = ok(project.barca("get", "summary", "pipeline.py", "--json", "--agent"))
        # only the sensor (which always runs): regions over this list, every key of sales and
        # the four-key summary are still cached
        assert set(r.completed()) == S("region_list")
    assert r.json()["final_output"] == {"regions": 4, "total": 170}


# ---------------------------------------------------------------- 7. --partition

def test_partition_key_is_not_a_target(project):
    use(project, "regions_const.py")
    r = project.barca("get", "sales[region=emea]", "pipeline.py", "--pretty")
    assert r.code == 2, r
    text = r.out + r.err
    assert ("Asset 'sales[region=emea]' not found. Available: pipeline.py:sales, "
            "pipeline.py:summary\n\nRun `barca list pipeline.py` to see available assets and "
            "tasks.") in text, text
    assert "Traceback" not in text
    assert not (project.path / ".barca" / "artifacts").exists()


def test_partition_key_is_not_a_refresh_name(project):
    use(project, "regions_const.py")
    r = project.barca("get", "summary", "pipeline.py", "--refresh", "sales[region=emea]",
                      "--pretty")
    assert r.code == 2, r
    text = r.out + r.err
    assert ("--refresh: no upstream asset named 'sales[region=emea]' in the cone of 'summary'.\n"
            "Upstream assets you can refresh: sales, summary\n"
            "Pass several as a comma-separated list: --refresh sales,summary") in text, text
    assert "Traceback" not in text
    assert not (project.path / ".barca" / "artifacts").exists()


def test_partition_selection_on_downstream_target(project):
    use(project, "margin.py")
    r = ok(project.barca("get", "margin", "pipeline.py", "--partition", "region=emea",
                         "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[region=emea]",
                                  "pipeline.py:margin[region=emea]"}
    assert r.json()["final_output"] == {"region=emea": {"region": "emea", "margin": 10}}
    dirs = artifact_dirs(project)
    assert "pipeline.py--sales_region_amer" not in dirs
    assert "pipeline.py--margin_region_apac" not in dirs

    # the keys computed under a selection are served from cache by the next full run
    r = ok(project.barca("get", "margin", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[region=amer]",
                                  "pipeline.py:sales[region=apac]",
                                  "pipeline.py:margin[region=amer]",
                                  "pipeline.py:margin[region=apac]"}


def test_partition_selection_without_target_skips_fan_in(project):
    use(project, "margin.py")
    r = ok(project.barca("get", "pipeline.py", "--partition", "region=emea", "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[region=emea]",
                                  "pipeline.py:margin[region=emea]"}
    assert ("[barca] note: --partition skips a fan-in that reads every key: summary. Run without "
            "--partition to update it.") in r.err.splitlines()
    steps = {s["id"]: s for s in r.json()["steps"]}
    assert steps["pipeline.py:summary"]["status"] == "skipped"
    assert steps["pipeline.py:summary"]["reason"] == "partition_selection"
    assert "pipeline.py--summary" not in artifact_dirs(project)

    r = ok(project.barca("get", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[region=amer]",
                                  "pipeline.py:sales[region=apac]",
                                  "pipeline.py:margin[region=amer]",
                                  "pipeline.py:margin[region=apac]", "pipeline.py:summary"}


def test_partition_selection_keeps_other_dimension(project):
    """A partitioned asset on another dimension keeps every key."""
    use(project, "margin.py")
    with (project.path / "pipeline.py").open("a") as f:
        f.write(textwrap.dedent("""

            @asset(partitions={"day": partitions(["d1", "d2"])})
            def weather(day: str) -> str:
                return day
            """))
    r = ok(project.barca("get", "pipeline.py", "--partition", "region=emea", "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[region=emea]",
                                  "pipeline.py:margin[region=emea]",
                                  "pipeline.py:weather[day=d1]", "pipeline.py:weather[day=d2]"}


@pytest.mark.parametrize("sel", ["day=d1", "region=mars"])
def test_partition_unknown_dimension_or_value_is_usage_error(project, sel):
    use(project, "regions_const.py")
    r = project.barca("get", "sales", "pipeline.py", "--partition", sel, "--pretty")
    assert r.code == 2, r
    assert sel.split("=")[0 if sel.startswith("day") else 1] in r.err
    assert "Traceback" not in r.err
    assert not (project.path / ".barca" / "artifacts").exists()


# ---------------------------------------------------------------- 8. Refresh

def test_refresh_recomputes_every_key_and_downstream(project):
    use(project, "regions_const.py")
    ok(project.barca("get", "summary", "pipeline.py", "--json"))

    r = ok(project.barca("get", "summary", "pipeline.py", "--refresh", "sales", "--agent",
                         "--json"))
    assert r.steps_line() == "4/4 steps | done"
    assert set(r.completed()) == sales_keys("emea", "amer", "apac") | S("summary")

    r = ok(project.barca("get", "sales", "pipeline.py", "--refresh", "sales", "--partition",
                         "region=emea", "--agent", "--json"))
    assert set(r.completed()) == sales_keys("emea")
    assert r.json()["steps_executed"] == 1

    r = ok(project.barca("get", "summary", "pipeline.py", "--refresh", "sales", "--no-cascade",
                         "--agent", "--json"))
    assert set(r.completed()) == sales_keys("emea", "amer", "apac")

    r = ok(project.barca("get", "summary", "pipeline.py", "--refresh-all", "--agent", "--json"))
    assert r.steps_line() == "4/4 steps | done"
    assert set(r.completed()) == sales_keys("emea", "amer", "apac") | S("summary")

    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.json()["steps_executed"] == 0


# ---------------------------------------------------------------- 9. barca get

def test_get_partitioned_asset_returns_every_key(project):
    use(project, "regions_const.py")
    r = ok(project.barca("get", "sales", "pipeline.py", "--pretty"))
    paths = [ln for ln in r.out.splitlines() if ln.startswith("region=")]
    assert [p.split(":")[0] for p in paths] == ["region=amer", "region=apac", "region=emea"]
    for ln in paths:
        key, path = ln.split(": ", 1)
        region = key.split("=")[1]
        assert re.fullmatch(rf"\.barca/artifacts/pipeline\.py--sales_region_{region}/[0-9a-f]+"
                            r"\.json", path), ln
        assert json.loads((project.path / path).read_text()) == {"region": region,
                                                                  "revenue": len(region) * 10}

    data = ok(project.barca("get", "sales", "pipeline.py", "--json")).json()
    assert data["final_output"] == {
        "region=amer": {"region": "amer", "revenue": 40},
        "region=apac": {"region": "apac", "revenue": 40},
        "region=emea": {"region": "emea", "revenue": 40},
    }
    data = ok(project.barca("get", "sales", "pipeline.py", "--partition", "region=emea",
                            "--json")).json()
    assert data["final_output"] == {"region=emea": {"region": "emea", "revenue": 40}}


def test_get_partitioned_asset_python_api(project):
    use(project, "regions_const.py")
    p = python_api(project, """
        import json, barca
        full = barca.get("sales", "pipeline.py")
        one = barca.get("sales", "pipeline.py", partition="region=emea")
        print(json.dumps({"full": full, "one": one}))
        """)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout.strip().splitlines()[-1])
    assert data["full"] == {
        "region=amer": {"region": "amer", "revenue": 40},
        "region=apac": {"region": "apac", "revenue": 40},
        "region=emea": {"region": "emea", "revenue": 40},
    }
    assert data["one"] == {"region=emea": {"region": "emea", "revenue": 40}}


# ---------------------------------------------------------------- 10. When a key fails

def fail_first(project: Project):
    use(project, "failing.py")
    r = project.barca("get", "summary", "pipeline.py", "--agent", "--pretty")
    assert r.code == 1, r
    return r


def test_when_a_key_fails(project):
    r = fail_first(project)
    assert set(r.completed()) == sales_keys("emea", "apac")
    assert ("[barca] step:pipeline.py:sales[region=amer] failed: RuntimeError: amer feed not ready"
            in r.err.splitlines())
    assert r.steps_line() == "2/4 steps | failed"
    assert last_line(r.err) == ("[barca] run failed: step 'pipeline.py:sales[region=amer]' failed: "
                                "RuntimeError: amer feed not ready; 1 downstream steps skipped "
                                "(exit 1)")
    assert "pipeline.py--summary" not in artifact_dirs(project)
    assert {"pipeline.py--sales_region_emea", "pipeline.py--sales_region_apac"} <= artifact_dirs(
        project)

    s = ok(project.barca("status", "pipeline.py", "--pretty"))
    rows = status_rows(s.out)
    assert list(rows) == ["sales", "summary"]
    sales = rows["sales"]
    assert sales[:3] == ["asset", "partial", "2 of 3 keys cached; partitions_missing; last run "
                         "failed: RuntimeError: amer feed not ready"], sales
    assert re.fullmatch(r"failed \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC.*", sales[3]), sales
    assert sales[4:] == ["-", "-"], sales
    assert rows["summary"] == ["asset", "never-run", "no_record", "-", "-", "sales"]
    assert last_line(s.out) == "0 cached, 0 stale, 1 never run, 1 partial, 0 unknown, 0 always run"

    status = ok(project.barca("status", "pipeline.py", "--json")).json()
    nodes = {n["name"]: n for n in status["nodes"]}
    assert nodes["sales"]["partitions"] == {"cached": 2, "missing": 1,
                                            "missing_keys": ["region=amer"], "total": 3}

    # the cause fixed outside the code: only the failed key and the fan-in run
    project.write("amer_ready.txt", "yes\n")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "2/4 steps | done"
    assert set(r.completed()) == sales_keys("amer") | S("summary")
    assert r.json()["final_output"] == {"regions": 3, "total": 120}


def test_when_a_key_fails_json_error(project):
    use(project, "failing.py")
    r = project.barca("get", "summary", "pipeline.py", "--json")
    assert r.code == 1
    err = json.loads(r.err.strip().splitlines()[-1])
    assert {"error", "code", "kind", "remediation"} <= set(err)
    assert err["node"] == "pipeline.py:sales[region=amer]"
    assert "amer feed not ready" in err["error"]


def test_when_a_key_fails_code_fix_reruns_every_key(project):
    fail_first(project)
    project.edit("pipeline.py", 'raise RuntimeError("amer feed not ready")', 'region = "amer"')
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "4/4 steps | done"
    assert set(r.completed()) == sales_keys("emea", "amer", "apac") | S("summary")


# ---------------------------------------------------------------- 11. Limits

def assert_usage_error(project: Project, *args: str, mention: tuple[str, ...] = ()):
    r = project.barca(*args, "--pretty")
    assert r.code == 2, f"exit {r.code}\n{r.out}\n{r.err}"
    assert "Traceback" not in r.err
    for m in mention:
        assert m in r.err, r.err
    assert not (project.path / ".barca" / "artifacts").exists()
    return r


def test_limits_partitions_from_partitioned_upstream_renames_dimension(project):
    use(project, "regions_const.py")
    with (project.path / "pipeline.py").open("a") as f:
        f.write(textwrap.dedent("""

            from barca import partitions_from


            @asset(partitions={"area": partitions_from(sales)})
            def margin(area: str, sales: dict) -> dict:
                return {"area": area}
            """))
    assert_usage_error(project, "get", "margin", "pipeline.py", mention=("margin",))
    assert_usage_error(project, "get", "pipeline.py", mention=("margin",))


def test_limits_partitions_from_partitioned_upstream_not_only_dimension(project):
    use(project, "regions_const.py")
    with (project.path / "pipeline.py").open("a") as f:
        f.write(textwrap.dedent("""

            from barca import partitions_from


            @asset(partitions={"region": partitions_from(sales), "day": partitions(["d1"])})
            def margin(region: str, day: str, sales: dict) -> dict:
                return {"region": region}
            """))
    assert_usage_error(project, "get", "margin", "pipeline.py", mention=("margin",))


def test_limits_partitioned_asset_in_plain_inputs(project):
    use(project, "regions_const.py")
    with (project.path / "pipeline.py").open("a") as f:
        f.write(textwrap.dedent("""

            @asset(inputs={"s": sales})
            def total(s: dict) -> int:
                return 1
            """))
    assert_usage_error(project, "get", "total", "pipeline.py", mention=("total",))


def test_limits_mixing_partitions_and_partitions_from(project):
    use(project, "regions_from.py")
    project.write("regions.txt", "emea amer\n")
    with (project.path / "pipeline.py").open("a") as f:
        f.write(textwrap.dedent("""

            from barca import partitions


            @asset(partitions={"region": partitions_from(regions), "day": partitions(["d1", "d2"])})
            def daily(region: str, day: str) -> str:
                return region + day
            """))
    assert_usage_error(project, "get", "daily", "pipeline.py", mention=("daily",))
    assert not (project.path / ".barca" / "artifacts").exists()


def test_limits_changing_dimension_name_reruns_every_key(project):
    project.write("pipeline.py", """\
        from barca import asset, collect, partitions


        @asset(partitions={"region": partitions(["emea", "amer", "apac"])})
        def sales(region: str = "", area: str = "") -> dict:
            return {"key": region or area}


        @asset(inputs={"all_sales": collect(sales)})
        def summary(all_sales: list[dict]) -> int:
            return len(all_sales)
        """)
    r = ok(project.barca("get", "summary", "pipeline.py", "--json"))
    assert r.json()["steps_executed"] == 4
    project.edit("pipeline.py", '{"region": partitions', '{"area": partitions')
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "4/4 steps | done"
    assert set(r.completed()) == {f"pipeline.py:sales[area={a}]" for a in ("emea", "amer", "apac")
                                  } | S("summary")
    assert "pipeline.py--sales_area_emea" in artifact_dirs(project)


@pytest.mark.parametrize("extra", ['tags=["finance"]', "retries=2",
                                   'description="Sales per region"'])
def test_limits_uncounted_arguments_rerun_nothing(project, extra):
    use(project, "regions_const.py")
    ok(project.barca("get", "summary", "pipeline.py", "--json"))
    project.edit("pipeline.py", '@asset(partitions={"region": partitions(REGIONS)})',
                 f'@asset(partitions={{"region": partitions(REGIONS)}}, {extra})')
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.json()["steps_executed"] == 0
    assert r.completed() == []


def test_limits_unpartitioned_input_change_reruns_every_key(project):
    use(project, "margin.py")
    project.write("pipeline.py", (project.path / "pipeline.py").read_text().replace(
        "def margin(region: str, sales: dict) -> dict:",
        "def margin(region: str, sales: dict, rate: int) -> dict:").replace(
        '@asset(partitions={"region": partitions_from(sales)})',
        '@asset(inputs={"rate": rate}, partitions={"region": partitions_from(sales)})').replace(
        "REGIONS = [",
        'RATE = 4\n\n\n@asset()\ndef rate() -> int:\n    return RATE\n\n\nREGIONS = ['))
    ok(project.barca("get", "margin", "pipeline.py", "--json"))
    project.edit("pipeline.py", "RATE = 4", "RATE = 5")
    r = ok(project.barca("get", "margin", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == S("rate", "margin[region=emea]", "margin[region=amer]",
                                   "margin[region=apac]")


# ---------------------------------------------------------------- 12. Several dimensions

def test_several_dimensions_cartesian_product(project):
    project.write("pipeline.py", """\
        from barca import asset, collect, partitions


        @asset(partitions={"region": partitions(["amer", "emea"]), "day": partitions(["d1", "d2"])})
        def sales(region: str, day: str) -> dict:
            return {"region": region, "day": day}


        @asset(inputs={"all_sales": collect(sales)})
        def summary(all_sales: list[dict]) -> int:
            return len(all_sales)
        """)
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.steps_line() == "5/5 steps | done"
    keys = {f"day={d},region={g}" for d in ("d1", "d2") for g in ("amer", "emea")}
    assert set(r.completed()) == {f"pipeline.py:sales[{k}]" for k in keys} | S("summary")
    assert r.json()["final_output"] == 4
    assert {f"pipeline.py--sales_day_{d}_region_{g}" for d in ("d1", "d2")
            for g in ("amer", "emea")} <= artifact_dirs(project)

    data = ok(project.barca("get", "sales", "pipeline.py", "--json")).json()
    assert data["final_output"] == {f"day={d},region={g}": {"region": g, "day": d}
                                    for d in ("d1", "d2") for g in ("amer", "emea")}

    r = ok(project.barca("get", "sales", "pipeline.py", "--partition", "region=emea", "--json",
                         "--refresh", "sales", "--agent"))
    assert set(r.completed()) == {"pipeline.py:sales[day=d1,region=emea]",
                                  "pipeline.py:sales[day=d2,region=emea]"}

    # a new value on one dimension runs the new combinations only
    project.edit("pipeline.py", '["d1", "d2"]', '["d1", "d2", "d3"]')
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[day=d3,region=amer]",
                                  "pipeline.py:sales[day=d3,region=emea]"} | S("summary")


# ---------------------------------------------------------------- 13. Bad key lists

@pytest.mark.parametrize("keys,mention", [
    ('["emea", "amer", "emea"]', "emea"),
    ('["emea", None]', "None"),
    ('["emea", 1.5]', "1.5"),
    ('["emea", ("a", "b")]', "('a', 'b')"),
    ('["emea", True]', "True"),
    ('[1, "1"]', "1"),
], ids=["duplicate", "none", "float", "tuple", "bool", "int-and-str-collide"])
def test_bad_key_lists_are_usage_errors(project, keys, mention):
    use(project, "regions_const.py")
    project.edit("pipeline.py", 'REGIONS = ["emea", "amer", "apac"]', f"REGIONS = {keys}")
    r = assert_usage_error(project, "get", "summary", "pipeline.py", mention=(mention, "sales"))
    assert r.out == ""


def test_int_keys_become_strings(project):
    use(project, "regions_const.py")
    project.edit("pipeline.py", 'REGIONS = ["emea", "amer", "apac"]', "REGIONS = [1, 22]")
    project.edit("pipeline.py", "len(region) * 10", "len(str(region)) * 10")
    r = ok(project.barca("get", "sales", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == {"pipeline.py:sales[region=1]", "pipeline.py:sales[region=22]"}
    assert r.json()["final_output"] == {"region=1": {"region": "1", "revenue": 10},
                                        "region=22": {"region": "22", "revenue": 20}}


def test_zero_keys_collect_receives_empty_list(project):
    use(project, "regions_const.py")
    project.edit("pipeline.py", 'REGIONS = ["emea", "amer", "apac"]', "REGIONS = []")
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert set(r.completed()) == S("summary")
    assert r.json()["final_output"] == {"regions": 0, "total": 0}


def test_unsafe_keys_stay_inside_artifacts(project):
    before_parent = set(p.name for p in project.path.parent.iterdir())
    long_key = "k" * 400
    project.write("pipeline.py", f"""\
        from barca import asset, collect, partitions


        @asset(partitions={{"region": partitions(["../../etc", "a/b", "..", "{long_key}"])}})
        def sales(region: str) -> dict:
            return {{"n": len(region)}}


        @asset(inputs={{"all_sales": collect(sales)}})
        def summary(all_sales: list[dict]) -> int:
            return sum(s["n"] for s in all_sales)
        """)
    r = ok(project.barca("get", "summary", "pipeline.py", "--agent", "--json"))
    assert r.json()["final_output"] == 9 + 3 + 2 + 400
    assert len(r.completed()) == 5
    art = (project.path / ".barca" / "artifacts").resolve()
    files = [p for p in project.path.rglob("*") if p.is_file()]
    for f in files:
        rel = f.relative_to(project.path)
        assert rel.parts[0] in (".barca", "pipeline.py") or rel.parts[0] == "__pycache__", rel
    arts = [p for p in art.rglob("*") if p.is_file()]
    assert len(arts) == 5, arts  # 4 keys + summary, each in its own directory
    for p in arts:
        assert p.resolve().is_relative_to(art)
        assert p.parent.parent == art, p  # one level: <node dir>/<hash>.<ext>
        assert len(p.parent.name) <= 255 and len(p.name) <= 255
        assert re.fullmatch(r"[A-Za-z0-9._-]+", p.parent.name), p.parent.name
        assert p.parent.name not in (".", "..")
    assert len({p.parent for p in arts}) == 5
    assert set(p.name for p in project.path.parent.iterdir()) == before_parent
    assert not (project.path / "etc").exists() and not (project.path.parent / "etc").exists()

    # the keys are still addressed by their value; a second run is all cached
    data = ok(project.barca("get", "sales", "pipeline.py", "--json")).json()
    assert set(data["final_output"]) == {"region=../../etc", "region=a/b", "region=..",
                                         f"region={long_key}"}
    assert data["steps_executed"] == 0


# ---------------------------------------------------------------- pool independence

def test_decisions_independent_of_pool_size(seed):
    """Run hashes of every key and the steps that run are the same for pool sizes 1 and 2."""
    import shutil

    def run_hashes():
        # artifact files are named <node dir>/<run hash>.json: one per key
        return sorted(str(p.relative_to(seed.path)) for p in
                      (seed.path / ".barca" / "artifacts").rglob("*.json"))

    seen = []
    for pool in ("1", "2"):
        shutil.rmtree(seed.path / ".barca", ignore_errors=True)
        (seed.path / "feed_version.txt").write_text("v1\n")
        r1 = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json",
                           env={"BARCA_POOL_SIZE": pool}))
        add_nvda(seed)
        r2 = ok(seed.barca("get", "report", "pipeline.py", "--agent", "--json",
                           env={"BARCA_POOL_SIZE": pool}))
        seed.edit("pipeline.py", '"GOOG", "NVDA"', '"GOOG"')
        seen.append((set(r1.completed()), set(r2.completed()), run_hashes()))
    assert seen[0] == seen[1]
    assert seen[0][1] == S("feed_version", "prices[ticker=NVDA]", "signal[ticker=NVDA]", "report")
