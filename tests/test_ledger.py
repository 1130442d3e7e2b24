"""The server's ledger without a server (the slow tests are tests/test_serve_ledger.py): its
SQL over a real metadata database, the checks of a posted run, and ``barca sql``'s client
side over a real ``file://`` store -- each file checked against its recorded digest."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from barca.core.errors import InfrastructureError, UsageError
from barca.queries.sqlviews import query
from barca.store import ledger, serverq
from barca.store.metadata import Store
from barca.store.remote import Remote

RH = "a" * 64


def _db(tmp_path: Path):
    Store(tmp_path, create=True).close()
    return serverq.connect(tmp_path / ".barca/metadata.db")


def _step(node: str, key: str, rh: str, digest: str) -> dict:
    return {"node": f"{node}[{key}]" if key else node, "asset": node, "partition": key,
            "run_hash": rh, "path": f".barca/artifacts/x/{rh}.json", "format": "json",
            "size": 2, "sha256": digest, "status": "success", "remote": 1, "attempts": 1}


def test_a_client_run_is_recorded_and_looked_up(tmp_path: Path) -> None:
    conn = _db(tmp_path)
    assert ledger.lookup(conn, [("p.py:a", RH)]) == [None]
    run = {"run_id": "laptop1", "command": "get", "target": "a"}
    ledger.record_client_run(conn, "srv1", run, [_step("p.py:a", "", RH, "d" * 64),
                                                 _step("p.py:b", "k=x", "b" * 64, "e" * 64)])
    assert ledger.client_run(conn, "laptop1") == "srv1"
    assert ledger.client_run(conn, "other") is None
    hit, keyed, miss = ledger.lookup(conn, [("p.py:a", RH), ("p.py:b[k=x]", "b" * 64),
                                            ("p.py:a", "c" * 64)])
    assert hit is not None and hit["digest"] == "d" * 64 and hit["partition"] is None
    assert keyed is not None and keyed["partition"] == "k=x"
    assert miss is None
    row = serverq.row(conn, "srv1")
    assert row is not None and row["triggered_by"] == "client"
    assert row["client_run_id"] == "laptop1" and row["status"] == "success"
    rows, total = ledger.materializations(conn, "p.py:b", None, None, None, None, 10, 0)
    assert total == 1 and rows[0]["node_id"] == "p.py:b[k=x]" and rows[0]["run_id"] == "srv1"
    assert ledger.materializations(conn, None, "srv1", "success", None, None, 1, 0)[1] == 2
    assert ledger.digests(conn, [("p.py:a", "", RH)]) == {("p.py:a", "", RH): "d" * 64}


def test_a_post_is_checked_before_anything_is_read() -> None:
    pytest.importorskip("starlette")
    from barca.faces.serve.ledger import _check_post, _row
    from barca.faces.serve.render import Answer
    good = {"run": {"run_id": "r1", "command": "get", "target": "a", "status": "success"},
            "steps": [{"node_id": "p.py:a", "run_hash": RH, "digest": "d" * 64,
                       "path": f".barca/artifacts/p.py--a/{RH}.json"}]}
    run, steps = _check_post(json.loads(json.dumps(good)), "")
    server = SimpleNamespace(settings=SimpleNamespace(store_prefix=".barca",
                                                      remote_uri="file:///s", env=None))
    row = _row(server, run, steps[0])
    assert row["format"] == "json" and row["asset"] == "p.py:a" and row["partition"] == ""
    # a store URI names the same object
    uri = dict(steps[0], path=f"file:///s/artifacts/p.py--a/{RH}.json")
    assert _row(server, run, uri)["path"] == row["path"]
    for bad in ({**good, "steps": {}}, {**good, "run": {**good["run"], "status": "failed"}},
                {**good, "steps": [{**good["steps"][0], "digest": "D" * 64}]},
                {**good, "steps": [{**good["steps"][0], "size_bytes": -1}]},
                {**good, "run": {**good["run"], "run_id": ""}}):
        with pytest.raises(Answer) as got:
            _check_post(json.loads(json.dumps(bad)), "")
        assert got.value.status == 400
    # another node's folder, another environment, outside the store: 409
    for path in (f".barca/artifacts/p.py--b/{RH}.json", f".barca/envs/dev/artifacts/p.py--a/"
                 f"{RH}.json", "/etc/passwd", f".barca/artifacts/p.py--a/../../{RH}.json"):
        with pytest.raises(Answer) as got:
            _row(server, run, dict(steps[0], path=path))
        assert got.value.status == 409 and got.value.body["reason"] == "outside_store"


def _uploaded(tmp_path: Path, value: object) -> tuple[Remote, dict]:
    """A JSON result uploaded to a real file:// store, as the server's view names it."""
    root = tmp_path / "server"
    rel = f".barca/artifacts/p.py--a/{RH}.json"
    data = json.dumps(value).encode()
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_bytes(data)
    store = Remote(f"file://{tmp_path / 'store'}")
    store.upload(root, rel, "p.py:a", "")
    view = {"name": "a", "node": "p.py:a", "kind": "asset", "partitioned": False,
            "files": [{"partition": None, "path": rel, "format": "json",
                       "size_bytes": len(data), "digest": hashlib.sha256(data).hexdigest()}]}
    return store, {"views": [view], "missing": [], "names": ["a"]}


def test_sql_reads_the_store_copy_checked(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    store, doc = _uploaded(tmp_path, [{"x": 1}, {"x": 2}])
    cache = tmp_path / "cache"
    assert query(doc, {}, "select sum(x) from a", None, store, cache, "u")[1] == [(3,)]
    # a copy changed in the cache is fetched again; a digest the store lacks is exit 3
    copy = cache / doc["views"][0]["files"][0]["path"]
    copy.write_text('[{"x": 100}]')
    assert query(doc, {}, "select sum(x) from a", None, store, cache, "u")[1] == [(3,)]
    doc["views"][0]["files"][0]["digest"] = "0" * 64
    copy.unlink()
    with pytest.raises(InfrastructureError):
        query(doc, {}, "select * from a", None, store, cache, "u")
    assert not copy.exists()  # nothing unchecked left behind to read


def test_sql_errors_are_a_local_sqls(tmp_path: Path) -> None:
    pytest.importorskip("duckdb")
    store, doc = _uploaded(tmp_path, {"x": 1})
    doc["missing"] = [{"name": "b", "problem": "no result yet", "command": "barca get b"}]
    doc["names"].append("b")
    cache = tmp_path / "cache"
    for sql in ("select * from b", "select * from aa", "select nonsense("):
        with pytest.raises(UsageError):
            query(doc, {}, sql, None, store, cache, "u")
    tables = {"runs": [{"run_id": "r1", "status": "success"}], "materializations": []}
    cols, rows, total = query(doc, tables, "select run_id from barca.runs", 10, store, cache,
                              "u")
    assert (cols, rows, total) == (["run_id"], [("r1",)], 1)
    # the columns a local barca.materializations has, whatever the route calls them
    tables["materializations"] = [{"node_id": "p.py:a[k=x]", "node": "p.py:a",
                                   "digest": "d" * 64, "size_bytes": 2}]
    got = query(doc, tables, "select node, asset, sha256, size from barca.materializations",
                None, store, cache, "u")[1]
    assert got == [("p.py:a[k=x]", "p.py:a", "d" * 64, 2)]
