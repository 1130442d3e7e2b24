"""barca sql: DuckDB views over cached results (the seed's "Looking at the results")."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import Project

PRICES = """\
partition    ticker  close  feed
ticker=AAPL  AAPL    465.0  v1
ticker=GOOG  GOOG    471.0  v1
ticker=MSFT  MSFT    477.0  v1
"""
BUYS = """\
partition    buy
ticker=GOOG  true
ticker=MSFT  true
"""


def test_seed_queries(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    r = seed.barca("sql", "select * from prices order by ticker", "--pretty")
    assert r.code == 0, r.err
    assert r.out == PRICES
    r = seed.barca("sql", "select partition, buy from signal where buy", "--pretty")
    assert r.out == BUYS
    js = seed.barca("sql", "select * from report", "--json").json()
    assert js["columns"] == ["tickers", "buys"]
    assert js["rows"] == [{"tickers": 3, "buys": ["GOOG", "MSFT"]}]
    r = seed.barca("sql", "select count(*) as n from barca.materializations", "--json")
    assert r.sql_rows() == [[8]]


def test_removed_key_leaves_the_view(project: Project) -> None:
    project.copy_pipeline("regions_const.py")
    assert project.barca("get", "summary", "pipeline.py", "--json").code == 0
    project.edit("pipeline.py", '"emea", "amer", "apac"', '"emea", "apac"')
    r = project.barca("sql", "select partition from sales order by 1", "--json")
    assert r.code == 0, r.err
    assert r.sql_rows() == [["region=apac"], ["region=emea"]]


def test_limit_and_all(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset


        @asset()
        def rows() -> list:
            return [{"i": i} for i in range(250)]
    """)
    assert project.barca("get", "rows", "pipeline.py", "--json").code == 0
    r = project.barca("sql", "select i from rows", "--json")
    assert len(r.json()["rows"]) == 100 and r.json()["total"] == 250
    assert r.json()["truncated"] is True
    r = project.barca("sql", "select i from rows", "--limit", "7", "--json")
    assert len(r.json()["rows"]) == 7
    r = project.barca("sql", "select i from rows", "--all", "--pretty")
    assert len(r.out.splitlines()) == 251
    r = project.barca("sql", "select i from rows", "--pretty")
    assert "showing 100 of 250 rows" in r.err


def test_errors_exit_2(seed: Project) -> None:
    r = seed.barca("sql", "select * from prices", "--pretty")
    assert r.code == 2
    assert "view 'prices' has no result yet" in r.err and "barca get prices" in r.err
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    r = seed.barca("sql", "select * from pricse", "--pretty")
    assert r.code == 2 and "No view named 'pricse'. Did you mean 'prices'?" in r.err
    assert ("Views: feed_version, prices, report, signal, barca.materializations, "
            "barca.nodes, barca.runs") in r.err
    r = seed.barca("sql", "select nonsense(", "--json")
    assert r.code == 2 and json.loads(r.err.strip())["kind"] == "usage"


def test_pickle_is_not_a_view(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset


        @asset()
        def things() -> set:
            return {1, 2}
    """)
    assert project.barca("get", "things", "pipeline.py", "--json").code == 0
    r = project.barca("sql", "select * from things", "--pretty")
    assert r.code == 2 and "pickle" in r.err


def test_a_view_whose_keys_were_stored_in_different_formats(project: Project) -> None:
    """A DataFrame parquet cannot hold is pickled (with a warning) while its sibling keys are
    parquet: a query never unpickles (a pickle is code, #35), so the view is a clear usage
    error naming the key, as for a key that is no table."""
    project.write("pipeline.py", """
        import pandas as pd
        from barca import asset, partitions


        @asset(partitions={"region": partitions(["amer", "emea"])})
        def sales(region: str) -> pd.DataFrame:
            if region == "amer":
                return pd.DataFrame({"n": [1, 2], "note": ["a", "b"]})
            return pd.DataFrame({"n": [3, 4], "note": ["c", 5]})  # mixed: not parquet
    """)
    r = project.barca("get", "sales", "pipeline.py", "--json")
    assert r.code == 0 and "stored as pickle" in r.err, r.err
    r = project.barca("sql", "select partition, n from sales order by n", "--json")
    assert r.code == 2, r.err
    assert json.loads(r.err.strip().splitlines()[-1])["error"] == (
        "'sales' (key region=emea) is stored as a pickle, which barca sql does not read.")
    project.edit("pipeline.py", 'return pd.DataFrame({"n": [3, 4], "note": ["c", 5]})',
                 'return {3, 4}')
    assert project.barca("get", "sales", "pipeline.py", "--json").code == 0
    r = project.barca("sql", "select * from sales", "--json")
    assert r.code == 2, r.err
    err = json.loads(r.err.strip().splitlines()[-1])
    assert err["error"] == ("'sales' (key region=emea) is stored as a pickle, which "
                            "barca sql does not read.")


def test_python_api_returns_a_dataframe(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    code = ("import barca; df = barca.sql('select * from prices order by ticker', 'pipeline.py');"
            "print(type(df).__name__, list(df.columns), len(df))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=seed.path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "DataFrame ['partition', 'ticker', 'close', 'feed'] 3"


def test_missing_artifact_is_a_clear_error(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    for p in (seed.path / ".barca/artifacts/pipeline.py--prices_ticker_GOOG").glob("*.json"):
        p.unlink()
    r = seed.barca("sql", "select * from prices", "--pretty")
    assert r.code == 2 and "missing" in r.err and "barca get prices" in r.err
    assert "Traceback" not in r.err


def test_a_view_fetches_results_missing_here_from_the_remote_store(seed: Project,
                                                                   tmp_path: Path) -> None:
    """A result deleted locally is fetched from the remote store for a query; without a store
    it is a usage error naming the missing file."""
    env = {"BARCA_REMOTE_URI": f"file://{tmp_path / 'store'}"}
    assert seed.barca("get", "report", "pipeline.py", "--json", env=env).code == 0
    for p in (seed.path / ".barca" / "artifacts").glob("pipeline.py--prices*/*"):
        p.unlink()
    r = seed.barca("sql", "select count(*) from prices", "--json", env={"BARCA_REMOTE": "off"})
    assert r.code == 2 and "is missing from disk" in r.err, r.err
    r = seed.barca("sql", "select count(*) from prices", "--json", env=env)
    assert r.code == 0, r.err
    assert r.sql_rows() == [[3]]


def test_a_query_never_unpickles_and_checks_what_it_reads(project: Project) -> None:
    """#35: a pickle in a view is never deserialised (it would run code from the store), and a
    result whose bytes changed after barca wrote them is refused, not read."""
    project.write("pipeline.py", """
        import pandas as pd
        from barca import asset, partitions


        @asset(partitions={"region": partitions(["amer", "emea"])})
        def sales(region: str) -> pd.DataFrame:
            return pd.DataFrame({"n": [1, 2] if region == "amer" else [3, 4]})
    """)
    assert project.barca("get", "sales", "pipeline.py", "--json").code == 0
    emea = next((project.path / ".barca" / "artifacts").glob("*emea*/*.parquet"))
    import pandas as pd
    pd.DataFrame({"n": [999]}).to_parquet(emea)   # changed behind barca's back
    r = project.barca("sql", "select sum(n) as s from sales", "--json")
    assert r.code == 2 and "is not the one recorded" in r.err, (r.out, r.err)
