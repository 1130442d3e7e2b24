"""Server mode's ledger (serve.md §4, §7): a real ``barca serve`` on a real port with a real
``file://`` store, and a second project (a laptop's copy) talking to it. The routes
``GET /sql/views``, ``GET /materializations``, ``POST /ledger/lookup``, ``POST /ledger/runs``
(201, 409, 400, 403, 503), and ``barca sql --server`` / ``barca doctor --server``."""
from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from conftest import Project
from serving import Served

pytestmark = pytest.mark.slow

PIPE = '''
import time

from barca import asset, partitions


@asset
def src():
    return [{"region": "emea", "amount": 12.0}, {"region": "amer", "amount": 70.5}]


@asset(inputs={"src": src})
def total(src):
    return {"total": sum(r["amount"] for r in src)}


@asset(partitions={"k": partitions(["a", "b"])})
def per(k):
    return [{"k": k, "v": len(k)}]


@asset
def cities():
    import pandas as pd
    return pd.DataFrame({"city": ["Lyon", "Oslo"], "people": [522_000, 709_000]})


@asset
def never():
    return 1


@asset
def fresh():
    return {"made": "on a laptop"}


@asset
def slow():
    for _ in range(1200):  # until the test opens the gate
        if __import__("pathlib").Path("gate").exists():
            break
        time.sleep(0.05)
    return 1
'''
KEY = "k" * 40  # results signed: doctor's store-signature check passes


class Team:
    def __init__(self, base: Path) -> None:
        self.store = base / "store"
        self.uri = f"file://{self.store}"
        self.env = {"BARCA_REMOTE_URI": self.uri, "BARCA_STORE_KEY": KEY}
        self.server = Project(base / "server")
        self.laptop = Project(base / "laptop")
        for p in (self.server, self.laptop):
            p.path.mkdir()
            p.write("pipeline.py", PIPE)

    def on_server(self, *args: str) -> object:
        r = self.server.barca(*args, env=self.env)
        assert r.code == 0, r.err
        return r

    def here(self, *args: str, **env: str) -> object:
        return self.laptop.barca(*args, env={**self.env, **env})


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory):
    t = Team(tmp_path_factory.mktemp("ledger"))
    for target in ("total", "per", "cities"):
        t.on_server("get", target)
    t.srv = Served(t.server.path, "--no-schedule", env=t.env)
    try:
        yield t
    finally:
        t.srv.stop()


def _rows(db: Path, sql: str, *args: object) -> list[tuple]:
    conn = sqlite3.connect(db)
    try:
        return list(conn.execute(sql, args))
    finally:
        conn.close()


def _server_row(team: Team, name: str) -> tuple:
    """(run hash, path, sha256) of the server's newest successful record of a node."""
    return _rows(team.server.path / ".barca/metadata.db",
                 "SELECT run_hash, path, sha256 FROM materializations WHERE asset=? AND "
                 "status='success' ORDER BY id DESC LIMIT 1", f"pipeline.py:{name}")[0]


def _etag(srv: Served, path: str) -> None:
    code, body, hdrs = srv.get(path)
    tag = {k.lower(): v for k, v in hdrs.items()}.get("etag")
    assert code == 200 and tag, body
    again, _, _ = srv.get(path, headers={"If-None-Match": tag})
    assert again == 304


# ---------------------------------------------------------------------------- GET routes

def test_sql_views_name_each_views_current_result(team) -> None:
    code, doc, _ = team.srv.get("/sql/views")
    assert code == 200, doc
    views = {v["name"]: v for v in doc["views"]}
    assert {"src", "total", "per", "cities"} <= set(views)
    rh, path, digest = _server_row(team, "src")
    assert views["src"]["files"] == [{"partition": None, "path": path, "format": "json",
                                      "size_bytes": views["src"]["files"][0]["size_bytes"],
                                      "digest": digest, "run_hash": rh}]
    assert views["per"]["partitioned"] is True
    assert [f["partition"] for f in views["per"]["files"]] == ["k=a", "k=b"]
    assert views["cities"]["files"][0]["format"] == "parquet"
    missing = {m["name"]: m for m in doc["missing"]}
    assert missing["never"]["command"] == "barca get never"
    assert doc["store_uri"] == team.uri and "never" in doc["names"]
    # only the views a query names
    code, some, _ = team.srv.get("/sql/views?names=src,never,nothing")
    assert [v["name"] for v in some["views"]] == ["src"]
    assert [m["name"] for m in some["missing"]] == ["never"]
    _etag(team.srv, "/sql/views")
    # the project's files only: a client names no other code
    code, one, _ = team.srv.get("/sql/views?files=pipeline.py&names=src")
    assert code == 200 and [v["name"] for v in one["views"]] == ["src"]
    for outside in ("/etc/passwd", "../x.py"):
        code, env, _ = team.srv.get(f"/sql/views?files={outside}")
        assert code == 400 and env["code"] == 2, env


def test_materializations_filter_and_page(team) -> None:
    code, doc, _ = team.srv.get("/materializations?node=pipeline.py:per")
    assert code == 200, doc
    assert sorted(m["partition"] for m in doc["materializations"]) == ["k=a", "k=b"]
    assert doc["total"] == 2 and doc["truncated"] is False
    one = team.srv.get("/materializations?limit=1")[1]
    assert len(one["materializations"]) == 1 and one["truncated"] is True
    assert one["total"] >= 5 and one["materializations"][0]["status"] == "success"
    newest = one["materializations"][0]
    assert team.srv.get(f"/materializations?run_id={newest['run_id']}")[1]["total"] >= 1
    _, path, digest = _server_row(team, "src")
    got = team.srv.get("/materializations?node=pipeline.py:src")[1]["materializations"][0]
    assert (got["path"], got["digest"], got["partition"]) == (path, digest, None)
    for bad in ("limit=x", "offset=-1", "status=bogus", "since=yesterday"):
        code, env, _ = team.srv.get(f"/materializations?{bad}")
        assert code == 400 and env["code"] == 2 and env["kind"] == "usage", (bad, env)
    _etag(team.srv, "/materializations?limit=3")


# ---------------------------------------------------------------------------- lookup

def test_ledger_lookup_answers_hits_with_path_and_digest(team) -> None:
    rh, path, digest = _server_row(team, "total")
    code, doc, _ = team.srv.post("/ledger/lookup", {"hashes": [
        {"node_id": "pipeline.py:total", "run_hash": rh},
        {"node_id": "pipeline.py:total", "run_hash": "0" * 64}]})
    assert code == 200, doc
    hit, miss = doc["results"]
    assert hit["exists"] is True and hit["path"] == path and hit["digest"] == digest
    assert hit["format"] == "json" and hit["size_bytes"] > 0
    assert miss == {"node_id": "pipeline.py:total", "run_hash": "0" * 64, "exists": False}
    for body in ({}, {"hashes": 3}, {"hashes": [{"node_id": 1}]}, [], b"{"):
        code, env, _ = team.srv.post("/ledger/lookup", body)
        assert code == 400 and env["code"] == 2 and env["error"], (body, env)


# ---------------------------------------------------------------------------- posting runs

def _laptop_post(team: Team) -> dict:
    """The laptop computes ``fresh`` (uploaded to the shared store) and posts it as it
    recorded it."""
    r = team.here("get", "fresh", "--json")
    assert r.code == 0, r.err
    (run_id, node, rh, path, digest, size), = _rows(
        team.laptop.path / ".barca/metadata.db", "SELECT run_id, node, run_hash, path, "
        "sha256, size FROM materializations WHERE asset='pipeline.py:fresh' AND "
        "status='success'")
    return {"run": {"run_id": run_id, "command": "get", "target": "fresh",
                    "status": "success", "started_at": "2026-12-01T20:00:00Z"},
            "steps": [{"node_id": node, "run_hash": rh, "path": path, "digest": digest,
                       "size_bytes": size, "status": "success", "format": "json"}]}


def test_ledger_runs_records_a_client_run(team) -> None:
    post = _laptop_post(team)
    step = post["steps"][0]
    code, doc, _ = team.srv.post("/ledger/runs", post)
    assert code == 201, doc
    assert doc["client_run_id"] == post["run"]["run_id"] and doc["bytes_changed"] == []
    run = team.srv.get(f"/runs/{doc['run_id']}")[1]
    assert run["triggered_by"] == "client" and run["client_run_id"] == post["run"]["run_id"]
    assert run["status"] == "success" and [s["node_id"] for s in run["steps"]] == [
        "pipeline.py:fresh"]
    hist = team.srv.get("/history?triggered_by=client&limit=100")[1]["runs"]
    assert hist[0]["run_id"] == doc["run_id"]
    # the ledger holds it now: a lookup hits, and the server's own get is a cache hit
    found = team.srv.post("/ledger/lookup", {"hashes": [
        {"node_id": step["node_id"], "run_hash": step["run_hash"]}]})[1]["results"][0]
    assert found["exists"] and found["digest"] == step["digest"]
    got = team.server.barca("get", "fresh", "--json", env=team.env)
    assert got.code == 0 and got.json()["steps"][0]["status"] == "cached", got.out
    # posted again (an answer lost on the way): the run it recorded, nothing twice
    code, again, _ = team.srv.post("/ledger/runs", post)
    assert code == 201 and again["run_id"] == doc["run_id"] and again["recorded"] is False
    assert _client_runs(team) == len(hist)
    # other bytes for the same run hash (a function that is not deterministic), in the store
    # too: the ledger keeps the record it holds and says so
    other = b'{"made": "elsewhere"}'
    digest = hashlib.sha256(other).hexdigest()
    stem = team.store / step["path"].removeprefix(".barca/").rsplit(".", 1)[0]
    Path(f"{stem}.{digest[:16]}.json").write_bytes(other)
    twice = dict(post, run=dict(post["run"], run_id="twice"),
                 steps=[dict(step, digest=digest, size_bytes=len(other))])
    code, changed, _ = team.srv.post("/ledger/runs", twice)
    assert code == 201 and changed["bytes_changed"] == ["pipeline.py:fresh"], changed
    found = team.srv.post("/ledger/lookup", {"hashes": [
        {"node_id": step["node_id"], "run_hash": step["run_hash"]}]})[1]["results"][0]
    assert found["digest"] == step["digest"]
    # fields it does not know are left out; a run of cache hits alone records the run
    code, bare, _ = team.srv.post("/ledger/runs", {"run": dict(post["run"], run_id="hits",
                                                               kind="get"), "steps": [],
                                                   "client": "barca 0.30"})
    assert code == 201 and team.srv.get(f"/runs/{bare['run_id']}")[1]["steps"] == []


def _client_runs(team: Team) -> int:
    return len(team.srv.get("/history?triggered_by=client&limit=100")[1]["runs"])


def test_ledger_runs_409_when_an_object_is_missing_or_differs(team) -> None:
    post = _laptop_post(team)
    post["run"]["run_id"] = "not-recorded"
    step = post["steps"][0]
    before = _client_runs(team)
    other = "1" * 64  # a run hash whose result the store never received
    cases = {
        "object_missing": dict(step, run_hash=other,
                               path=step["path"].replace(step["run_hash"], other)),
        "digest_differs": dict(step, digest="2" * 64),
        "outside_store": dict(step, path="/etc/passwd"),
    }
    for reason, bad in cases.items():
        code, env, _ = team.srv.post("/ledger/runs", dict(post, steps=[bad]))
        assert code == 409, (reason, env)
        assert env["reason"] == reason and env["code"] == 2 and "not-recorded" in env["error"]
    # the bytes in the store changed after the upload: refused as well
    blob = next(p for p in team.store.rglob("*.json")  # at its path, as under .barca/
                if p.name == f"{step['run_hash']}.json")
    saved = blob.read_bytes()
    try:
        blob.write_bytes(b'{"made": "tampered"}')
        code, env, _ = team.srv.post("/ledger/runs", post)
        assert code == 409 and env["reason"] in ("digest_differs", "object_missing"), env
    finally:
        blob.write_bytes(saved)
    assert _client_runs(team) == before  # nothing recorded by any of them


def test_ledger_runs_400_on_a_bad_post(team) -> None:
    post = _laptop_post(team)
    step = post["steps"][0]
    for body in ({}, {"run": post["run"]}, {"run": post["run"], "steps": {}},
                 dict(post, run=dict(post["run"], status="failed")),
                 dict(post, run=dict(post["run"], started_at="yesterday")),
                 dict(post, steps=[dict(step, digest="xyz")]),
                 dict(post, steps=[{k: v for k, v in step.items() if k != "path"}]),
                 dict(post, steps=[dict(step, status="failed")]),
                 dict(post, run={k: v for k, v in post["run"].items() if k != "run_id"}),
                 b"not json"):
        code, env, _ = team.srv.post("/ledger/runs", body)
        assert code == 400 and env["code"] == 2 and env["kind"] == "usage", (body, env)


def test_ledger_runs_400_without_a_store_and_403_read_only(team, tmp_path) -> None:
    post = _laptop_post(team)
    bare = Project(tmp_path / "bare")
    bare.path.mkdir()
    bare.write("pipeline.py", PIPE)
    with Served(bare.path, "--no-schedule", env={"BARCA_REMOTE_URI": ""}) as srv:
        code, env, _ = srv.post("/ledger/runs", post)
        assert code == 400 and "no artifact store" in env["error"], env
    with Served(team.server.path, "--read-only", env=team.env) as ro:
        code, env, _ = ro.post("/ledger/runs", post)
        assert code == 403 and env["code"] == 2, env
        # the reads answer on a read-only server
        assert ro.get("/sql/views")[0] == ro.get("/materializations")[0] == 200


def test_ledger_runs_503_while_draining(team, tmp_path) -> None:
    post = _laptop_post(team)
    other = Project(tmp_path / "other")  # a server of its own: its queue runs the slow step
    other.path.mkdir()
    other.write("pipeline.py", PIPE)
    gate = other.path / "gate"
    srv = Served(other.path, "--no-schedule", "--drain-timeout", "60", env=team.env)
    try:
        run = srv.post("/runs", {"command": "get", "targets": ["slow"]})[1]
        srv.until(run["run_id"], ("running",))
        srv.proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + 10
        while srv.get("/health")[1]["status"] != "draining" and time.monotonic() < end:
            time.sleep(0.1)
        code, env, _ = srv.post("/ledger/runs", post)
        assert code == 503 and env["code"] == 3, env
    finally:
        gate.write_text("open")
        srv.stop()


# ---------------------------------------------------------------------------- barca sql --server

def test_sql_with_a_server_queries_its_results_here(team) -> None:
    for query in ("select region, amount from src order by region",
                  "select * from per order by partition", "select * from cities order by city",
                  "select s.region, t.total from src s, total t order by 1"):
        local = team.server.barca("sql", query, "--json", env=team.env)
        remote = team.here("sql", query, "--server", team.srv.url, "--json")
        assert remote.code == local.code == 0, remote.err
        assert remote.json() == local.json(), query
    # the laptop computed none of them: every file came from the store, checked
    cache = team.laptop.path / ".barca/sql-cache"
    assert any(cache.rglob("*.parquet")) and any(cache.rglob("*.json"))
    assert (team.laptop.path / ".barca/.gitignore").read_text() == "*\n"
    # barca's tables are the server's records
    runs = team.here("sql", "select count(*) as n from barca.runs", "--server", team.srv.url,
                     "--json")
    assert runs.code == 0 and runs.json()["rows"][0]["n"] >= 3, runs.err
    # the same exit codes and messages as a local sql
    never = team.here("sql", "select * from never", "--server", team.srv.url, "--json")
    assert never.code == 2 and "barca get never" in never.error()["remediation"]
    unknown = team.here("sql", "select * from srcc", "--server", team.srv.url, "--json")
    assert unknown.code == 2 and "src" in unknown.error()["error"]
    bad = team.here("sql", "select nonsense(", "--server", team.srv.url, "--json")
    assert bad.code == 2
    # --local: this machine's own records (it has no src result)
    assert team.here("sql", "select * from src", "--server", team.srv.url, "--local").code == 2


def test_sql_with_a_server_never_reads_unchecked_bytes(team) -> None:
    query = "select sum(amount) as s from src"
    _, path, digest = _server_row(team, "src")
    first = team.here("sql", query, "--server", team.srv.url, "--json")
    assert first.code == 0 and first.json()["rows"] == [{"s": 82.5}], first.err
    # a copy changed in this machine's cache is checked again and fetched afresh
    cached = team.laptop.path / ".barca/sql-cache" / path
    cached.write_text('[{"region": "x", "amount": 1000}]')
    again = team.here("sql", query, "--server", team.srv.url, "--json")
    assert again.code == 0 and again.json()["rows"] == [{"s": 82.5}], again.err
    # the store's bytes changed: refused (exit 3), never queried
    blob = next(p for p in team.store.rglob("*.json") if p.name == Path(path).name)
    saved = blob.read_bytes()
    try:
        blob.write_text('[{"region": "x", "amount": 1000}]')
        cached.unlink()
        bad = team.here("sql", query, "--server", team.srv.url, "--json")
        assert bad.code == 3 and "digest" in bad.error()["error"], bad.err
        assert bad.out == ""
    finally:
        blob.write_bytes(saved)


def test_sql_with_a_server_needs_its_store_and_the_server(team, tmp_path) -> None:
    other = team.here("sql", "select * from src", "--server", team.srv.url, "--json",
                      BARCA_REMOTE_URI=f"file://{tmp_path}")
    assert other.code == 2 and team.uri in other.error()["error"], other.err
    down = team.here("sql", "select * from src", "--server", "http://127.0.0.1:9", "--json")
    assert down.code == 3 and "http://127.0.0.1:9" in down.error()["error"]


# ---------------------------------------------------------------------------- barca doctor --server

def test_doctor_checks_the_server_too(team) -> None:
    r = team.here("doctor", "--server", team.srv.url, "--json")
    doc = json.loads(r.out)
    checks = {c["name"]: c for c in doc["checks"]}
    assert r.code == 0 and doc["ok"], doc
    assert {"server", "server version", "server store", "server health", "server sources",
            "server scheduler"} <= set(checks)
    assert "discovery" in checks  # this machine's checks come first
    local = team.here("doctor", "--server", team.srv.url, "--local", "--json")
    assert local.code == 0 and not any(c["name"].startswith("server")
                                       for c in local.json()["checks"])
    # another store: a failed check, exit 3 like any doctor problem
    wrong = team.here("doctor", "--server", team.srv.url, "--json",
                      BARCA_REMOTE_URI=f"file://{team.store}-other")
    bad = {c["name"]: c for c in json.loads(wrong.out)["checks"] if not c["ok"]}
    assert wrong.code == 3 and "server store" in bad, wrong.out
    # a file the server cannot load
    team.server.write("broken.py", "from barca import asset\n@asset\ndef oops(:\n")
    try:
        end = time.monotonic() + 15
        while not team.srv.get("/health")[1]["load_errors"] and time.monotonic() < end:
            time.sleep(0.2)
        broken = team.here("doctor", "--server", team.srv.url, "--json")
        bad = {c["name"]: c for c in json.loads(broken.out)["checks"] if not c["ok"]}
        assert broken.code == 3 and "broken.py" in bad["server sources"]["detail"]
    finally:
        (team.server.path / "broken.py").unlink()
    # an unreachable server: exit 3, naming it
    down = team.here("doctor", "--server", "http://127.0.0.1:9", "--json")
    bad = {c["name"]: c for c in json.loads(down.out)["checks"] if not c["ok"]}
    assert down.code == 3 and "http://127.0.0.1:9" in bad["server"]["detail"]


def test_doctor_names_a_failing_schedule(tmp_path) -> None:
    proj = Project(tmp_path / "sched")
    proj.path.mkdir()
    proj.write("pipeline.py", """
        from barca import Schedule, asset

        @asset(freshness=Schedule("*/1 * * * * *", max_failures=1))
        def flaky():
            raise RuntimeError("down")
        """)
    env = {"BARCA_REMOTE_URI": f"file://{tmp_path / 'store'}", "BARCA_STORE_KEY": KEY}
    with Served(proj.path, "--timezone", "utc", env=env) as srv:
        end = time.monotonic() + 60
        while time.monotonic() < end and not any(
                e.get("failing") for e in srv.get("/schedule")[1]):
            time.sleep(0.3)
        r = proj.barca("doctor", "--server", srv.url, "--json", env=env)
        bad = {c["name"]: c for c in json.loads(r.out)["checks"] if not c["ok"]}
        assert r.code == 3 and "pipeline.py:flaky" in bad["server scheduler"]["detail"], r.out
        assert set(bad) == {"server scheduler"}, bad
