"""A result's shape (#29 item 17): recorded when the result is written, so ``barca status``
says what a table, a pickle or a JSON value holds without opening a file, importing the
pipeline's modules or unpickling. Also: a store written by barca 0.30 (the Rust original) is
named as such."""
from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from conftest import Project

PIPELINE = '''
import pathlib

pathlib.Path("imported.log").open("a").write("imported\\n")   # a side effect of importing me

import pandas as pd

from barca import asset


class Model:
    def __init__(self) -> None:
        self.w = 1


@asset()
def table() -> pd.DataFrame:
    return pd.DataFrame({"a": [1, 2, 3], "b": [0.5, 1.5, 2.5]})


@asset()
def model():
    return Model()


@asset()
def mapping() -> dict:
    return {"a": 1, "b": [1, 2]}


@asset()
def records() -> list:
    return [{"i": 1, "s": "x"}, {"i": 2, "s": None}, {"i": 3}]


@asset()
def text() -> str:
    return "hi"


@asset()
def wide() -> dict:
    return {f"k{i}": i for i in range(150)}
'''


def _cli(*argv: str):
    """A command's result as the CLI gets it (parsed and dispatched, in this process)."""
    from barca.faces.commands import dispatch, parse
    return dispatch(parse(list(argv)), on_event=lambda e: None).result


@pytest.fixture
def ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    import barca
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    barca.get("pipeline.py")
    return tmp_path


def _shapes(doc: dict) -> dict:
    return {n["name"]: n["shape"] for n in doc["nodes"]}


def test_status_json_shape_is_an_object_per_kind_of_result(ran: Path) -> None:
    """A parquet table: rows and its columns' names and arrow types; a pickle: the class as
    module.QualName; a dict its keys (the first 100, key_count past them); a list its rows
    (and a list of objects its columns with the JSON types seen); a str its type."""
    shapes = _shapes(_cli("status", "pipeline.py", "--json").to_json())
    assert shapes["table"] == {"type": "table", "rows": 3, "columns": [
        {"name": "a", "type": "int64"}, {"name": "b", "type": "double"}]}
    assert shapes["model"] == {"type": "pipeline.Model"}
    assert shapes["mapping"] == {"type": "dict", "keys": ["a", "b"]}
    assert shapes["records"] == {"type": "list", "rows": 3, "columns": [
        {"name": "i", "type": "int"}, {"name": "s", "type": "str | null"}]}
    assert shapes["text"] == {"type": "str"}
    wide = shapes["wide"]
    assert (wide["type"], wide["keys"][:2], len(wide["keys"]), wide["key_count"]) == (
        "dict", ["k0", "k1"], 100, 150)
    table = str(_cli("status", "pipeline.py"))  # the table keeps its short words
    for cell in ("3 rows x 2 cols", " Model ", "dict (2 keys)", "list (3 items)",
                 "dict (150 keys)"):
        assert cell in table, (cell, table)


def test_a_shape_recorded_as_text_by_an_older_barca_still_shows(ran: Path) -> None:
    """Rows written before shapes were objects hold a short text: status says what that
    text tells (rows of a table, keys of a dict) and keeps it word for word in the table."""
    db = ran / ".barca" / "metadata.db"
    with sqlite3.connect(db) as conn:
        for node, text in (("table", "3 rows x 2 cols"), ("model", "Model"),
                           ("mapping", "dict (2 keys)"), ("records", "list (3 items)")):
            conn.execute("UPDATE materializations SET shape = ? WHERE node = ?",
                         (text, f"pipeline.py:{node}"))
    shapes = _shapes(_cli("status", "pipeline.py", "--json").to_json())
    assert shapes["table"] == {"type": "table", "rows": 3,
                               "note": "recorded by an older barca: 3 rows x 2 cols"}
    assert shapes["model"] == {"type": "Model", "note": "recorded by an older barca: Model"}
    assert shapes["mapping"]["key_count"] == 2
    assert shapes["records"] == {"type": "list", "rows": 3}
    table = str(_cli("status", "pipeline.py"))
    for cell in ("3 rows x 2 cols", "Model", "dict (2 keys)", "list (3 items)"):
        assert cell in table, (cell, table)


def test_status_from_a_server_shows_the_shape_objects_as_the_local_table_does(ran: Path) -> None:
    """--server answers JSON; the table rebuilt from it says the same SHAPE cells."""
    from barca.present.fromjson import status_from_json
    local = _cli("status", "pipeline.py")
    again = status_from_json(local.to_json())
    assert [r.shape for r in again.rows] == [r.shape for r in local.rows]
    assert str(again).splitlines()[1:] == str(local).splitlines()[1:]


@pytest.mark.slow
def test_status_names_a_pickles_class_without_importing_the_pipeline(project: Project) -> None:
    """The class of a pickled result is taken when it is written: status (the CLI, in its
    own process) says ``pipeline.Model`` and the module's import side effect does not run."""
    project.write("pipeline.py", PIPELINE)
    assert project.barca("get", "model,table", "pipeline.py", "--json").code == 0
    marker = project.path / "imported.log"
    assert marker.exists()          # the run imported it
    marker.unlink()
    r = project.barca("status", "pipeline.py", "--json")
    assert r.code == 0, r.err
    shapes = _shapes(r.json())
    assert shapes["model"] == {"type": "pipeline.Model"}
    assert shapes["table"]["rows"] == 3 and len(shapes["table"]["columns"]) == 2
    assert shapes["text"] is None   # never run
    assert not marker.exists(), "status imported the pipeline module"
    pretty = project.barca("status", "pipeline.py", "--pretty")
    assert " Model " in pretty.out and not marker.exists()  # the table: the class's own name


# ---------------------------------------------------------------------------- barca 0.30

# the shape of a metadata database barca 0.30 (Rust) writes, as `sqlite3 .schema` shows it
# (abridged: the tables and columns that tell it apart)
RUST_SCHEMA = """
CREATE TABLE materializations (id INTEGER PRIMARY KEY AUTOINCREMENT, node_id TEXT NOT NULL,
    run_hash TEXT, output_json TEXT, artifact_path TEXT, artifact_format TEXT,
    artifact_size_bytes INTEGER, elapsed_seconds REAL, status TEXT NOT NULL DEFAULT 'success',
    error_message TEXT, created_at TEXT DEFAULT (datetime('now')), run_id TEXT);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE,
    command TEXT NOT NULL, files TEXT NOT NULL, target TEXT,
    status TEXT NOT NULL DEFAULT 'running');
CREATE TABLE cost_estimates (node_id TEXT PRIMARY KEY, base_id TEXT NOT NULL,
    estimate_seconds REAL NOT NULL);
INSERT INTO materializations (node_id, run_hash, artifact_path, artifact_format)
    VALUES ('pipeline.py:text', 'abc', '.barca/artifacts/x.json', 'json');
"""


def test_a_store_written_by_barca_030_is_named_and_left_as_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from barca.core.errors import InfrastructureError
    (tmp_path / "pipeline.py").write_text("from barca import asset\n\n@asset()\n"
                                          "def text() -> str:\n    return 'hi'\n")
    db = tmp_path / ".barca" / "metadata.db"
    db.parent.mkdir()
    with sqlite3.connect(db) as conn:
        conn.executescript(RUST_SCHEMA)
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    monkeypatch.chdir(tmp_path)
    for argv in (("status", "pipeline.py"), ("get", "pipeline.py")):
        with pytest.raises(InfrastructureError) as got:
            _cli(*argv)
        err = got.value
        assert err.code == 3
        assert "written by barca 0.30 (the Rust original)" in err.message, err.message
        assert "no such column" not in err.message
        assert f"mv {tmp_path / '.barca'} " in err.remediation, err.remediation
        assert "computes the results again" in err.remediation
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # not a table added
    assert not (tmp_path / "imported.log").exists()


def test_sample_is_in_the_shape_and_never_of_a_pickle(ran: Path) -> None:
    """--sample N: the first N rows of a table or list, the first N entries of an object,
    any other JSON value itself -- inside ``shape``, as barca 0.30.2 puts it; a pickle is
    never opened."""
    doc = _cli("status", "pipeline.py", "--sample", "1", "--fields", "id").to_json()
    shapes = {n["id"].split(":")[1]: n["shape"] for n in doc["nodes"]}
    assert shapes["table"]["sample"] == [{"a": 1, "b": 0.5}]
    assert shapes["table"]["rows"] == 3
    assert shapes["mapping"]["sample"] == {"a": 1}
    assert shapes["records"]["sample"] == [{"i": 1, "s": "x"}]
    assert shapes["text"]["sample"] == "hi"
    assert shapes["model"] == {"type": "pipeline.Model"}   # no sample: never unpickled


def test_describe_and_label_without_a_run() -> None:
    """The words of each case barca 0.30.2 has (JSON types as Python names, ``null``; a list
    of objects' column types in the order seen, null last), the caps, and the table's cells."""
    from collections import OrderedDict

    from barca.store import shapes
    d = shapes.describe
    assert [d(v, "json") for v in (3, 2.5, True, None, (1, 2), [])] == [
        {"type": "int"}, {"type": "float"}, {"type": "bool"}, {"type": "null"},
        {"type": "list", "rows": 2}, {"type": "list", "rows": 0}]
    assert d([{"a": None}, {"a": True, "b": 1}, 5], "json") == {"type": "list", "rows": 3}
    assert d([{"a": None}, {"a": True}], "json")["columns"] == [
        {"name": "a", "type": "bool | null"}]
    assert d({1, 2}, "pickle") == {"type": "set"}
    assert d(OrderedDict(a=1), "pickle") == {"type": "collections.OrderedDict", "keys": ["a"]}
    assert d({(1, 2): "x"}, "pickle") == {"type": "dict", "key_count": 1}
    wide = d([{f"c{i}": i for i in range(600)}], "json")
    assert len(wide["columns"]) == shapes.MAX_COLUMNS and wide["column_count"] == 600
    label = shapes.label
    assert [label(x) for x in (None, "-", {"type": "table", "rows": 1, "columns": [{}]},
                               {"type": "p.Outer.Inner"}, {"type": "dict", "keys": ["a"]},
                               {"type": "list", "rows": 1}, "dict (2 keys)", "Thing")] == [
        "-", "-", "1 rows x 1 cols", "Inner", "dict (1 key)", "list (1 item)",
        "dict (2 keys)", "Thing"]
    assert shapes.decode(shapes.encode({"type": "str"})) == {"type": "str"}


def test_a_result_adopted_from_disk_has_its_shape_read_from_the_file(ran: Path) -> None:
    """metadata.db rebuilt (moved aside): the results on disk are adopted, and a JSON or
    parquet file's shape is read from it then; a pickle is not unpickled for it."""
    import barca
    for f in (ran / ".barca").glob("metadata.db*"):
        f.unlink()
    barca.get("pipeline.py")
    shapes = _shapes(_cli("status", "pipeline.py", "--json").to_json())
    assert shapes["table"] == {"type": "table", "rows": 3, "columns": [
        {"name": "a", "type": "int64"}, {"name": "b", "type": "double"}]}
    assert shapes["mapping"] == {"type": "dict", "keys": ["a", "b"]}
    assert shapes["model"] is None
