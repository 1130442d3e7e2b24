"""barca.duckdb_connection(): the process's duckdb default connection; what the pipeline ran
on it at import is in effect in steps; a relation input is a view named after its parameter."""
from __future__ import annotations

import json

import pytest
from conftest import Project

duckdb = pytest.importorskip("duckdb")

import barca  # noqa: E402


def test_outside_a_run_it_is_the_default_connection() -> None:
    con = barca.duckdb_connection()
    assert con is barca.duckdb_connection()
    con.sql("CREATE OR REPLACE TABLE h33_t AS SELECT 5 AS x")
    assert duckdb.sql("SELECT x FROM h33_t").fetchall() == [(5,)]
    con.sql("DROP TABLE h33_t")


PIPELINE = """
import duckdb
import barca
from barca import asset

con = barca.duckdb_connection()
con.sql("CREATE OR REPLACE MACRO plus_one(x) AS x + 1")


@asset()
def prices() -> duckdb.DuckDBPyRelation:
    return duckdb.sql("SELECT 1 AS p UNION ALL SELECT 2")


@asset(inputs={"prices": prices})
def report(prices: duckdb.DuckDBPyRelation) -> list:
    c = barca.duckdb_connection()
    a = duckdb.sql("SELECT sum(plus_one(p)) FROM prices").fetchall()[0][0]
    b = c.sql("SELECT count(*) FROM prices").fetchall()[0][0]
    return [a, b, c is barca.duckdb_connection()]
"""


@pytest.mark.slow
def test_in_a_step_macros_and_relation_views(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    r = project.barca("get", "report", "pipeline.py", "-o", "value")
    assert r.code == 0, r.err
    assert json.loads(r.out) == [5, 2, True]
