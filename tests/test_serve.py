"""``barca serve``'s core (#32): a real server in a subprocess on a free port, driven over
HTTP -- runs, inspection routes, the queue, drain and requeue across a restart, the token."""
from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from serving import Served

pytestmark = pytest.mark.slow

PIPE = """
from barca import asset, task

@asset
def a():
    print("hello from a")
    return 1

@asset(inputs={"a": a})
def b(a):
    return a + 1

@task
def slow():
    import pathlib, time
    for _ in range(600):  # until the test opens the gate
        if pathlib.Path("gate").exists():
            break
        time.sleep(0.05)
    print("slow done")

@asset
def boom():
    raise ValueError("boom")
"""


@pytest.fixture
def proj(project):
    project.write("pipe.py", PIPE)
    return project


def events(srv: Served, run_id: str, route: str = "/runs/{}/events") -> list[dict]:
    code, text, hdrs = srv.get(route.format(run_id), raw=True)
    assert code == 200 and hdrs["content-type"].startswith("text/event-stream")
    return [json.loads(line[6:]) for line in text.decode().splitlines()
            if line.startswith("data: ")]


def test_runs_over_http(proj):
    with Served(proj.path, "--max-runs", "1") as srv:
        # refused requests: the CLI's envelope, and nothing recorded
        for body, status in [(b"{nope", 400), ([1], 400), ({"command": "get", "bogus": 1}, 400),
                             ({"command": "sql"}, 400), ({"command": "get", "targets": ["t"]},
                                                         404),
                             ({"command": "get", "targets": ["slow"]}, 400),
                             ({"command": "run", "targets": ["b"]}, 400),
                             ({"command": "get", "files": ["/etc/passwd"]}, 400),
                             ({"command": "get", "files": ["../x.py"]}, 400)]:
            code, env, _ = srv.post("/runs", body)
            assert code == status, (body, env)
            assert env["code"] == 2 and env["kind"] == "usage" and env["remediation"]
        assert "'t'" in srv.post("/runs", {"command": "get", "targets": ["t"]})[1]["error"]
        assert srv.get("/runs")[1]["runs"] == []
        # a dry run answers the plan, queues nothing
        code, plan, _ = srv.post("/runs", {"command": "get", "targets": ["b"], "dry_run": True})
        assert code == 200 and plan["dry_run"] is True and len(plan["steps"]) == 2

        code, acc, _ = srv.post("/runs", {"command": "get", "targets": ["b"]})
        assert code == 202 and set(acc) == {"run_id", "status", "position"}
        run_id = acc["run_id"]
        done = srv.until(run_id, ("success",))
        cli = proj.barca("get", "b", "--json")
        assert cli.code == 0
        assert set(done["outcome"]) == set(cli.json())  # the CLI's own JSON document
        assert done["outcome"]["run_id"] == run_id and done["outcome"]["final_output"] == 2
        assert done["triggered_by"] == "api" and done["started_at"].endswith("Z")
        assert done["exit_code"] == 0
        assert [s["node_id"] for s in done["steps"]] == ["pipe.py:a", "pipe.py:b"]
        page = srv.get(f"/runs/{run_id}?limit=1")[1]
        assert len(page["steps"]) == 1 and page["steps_page"] == {"total": 2, "truncated": True}
        assert srv.get(f"/runs/{run_id}?limit=x")[0] == 400
        assert [x["line"] for x in done["logs"]] == ["hello from a"]
        code, logs, _ = srv.get(f"/runs/{run_id}/logs")
        assert logs["logs"][0]["line"] == "hello from a" and logs["status"] == "success"
        kinds = [e["type"] for e in events(srv, run_id)]
        assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
        assert "log" in kinds and kinds.count("step_finished") == 2
        assert events(srv, run_id) == events(srv, run_id)  # replayed from the start
        again = srv.post("/runs", {"command": "get", "targets": ["b"]})[1]["run_id"]
        srv.until(again, ("success",))
        hits = [e for e in events(srv, again) if e["type"] == "step_finished"]
        assert [(e["node_id"], e.get("cached")) for e in hits] == \
            [("pipe.py:a", True), ("pipe.py:b", True)]
        code, data, _ = srv.get(f"/runs/{run_id}/output", raw=True)
        assert code == 200 and json.loads(data) == 2
        assert srv.call("DELETE", f"/runs/{run_id}")[0] == 409
        for path in ("/runs/nope", "/runs/nope/logs", "/runs/nope/events"):
            assert srv.get(path)[0] == 404
        # barca 0.30's routes
        old = srv.post("/get/a", {})[1]
        assert srv.until(old["run_id"], ("success",))["status"] == "success"
        assert srv.get(f"/status/{old['run_id']}")[1]["status"] == "complete"
        assert events(srv, old["run_id"], "/events/{}")[-1]["type"] == "run_finished"
        assert srv.post("/get/slow")[0] == 400 and srv.post("/run/zz")[0] == 404
        # a run of named files
        named = srv.post("/runs", {"command": "get", "targets": ["a"], "files": ["pipe.py"]})
        assert srv.until(named[1]["run_id"], ("success",))["outcome"]["final_output"] == 1
        # a failed step: the CLI's exit code, its document and its error envelope
        boom = srv.post("/runs", {"command": "get", "targets": ["boom"]})[1]["run_id"]
        failed = srv.until(boom, ("failed",))
        assert failed["exit_code"] == 1 and failed["outcome"]["status"] == "failed"
        assert failed["outcome"]["envelope"]["kind"] == "step_failed"
        # who triggered each run, as history shows it
        hist = srv.get("/history")[1]["runs"]
        assert {r["triggered_by"] for r in hist} == {"api", "manual"}
        assert [r["run_id"] for r in srv.get("/history?triggered_by=api")[1]["runs"]] == \
            [boom, named[1]["run_id"], old["run_id"], again, run_id]  # newest first
        assert [r["run_id"] for r in srv.get("/history?status=failed")[1]["runs"]] == [boom]
        assert srv.get("/history?status=bogus")[0] == 400
        assert srv.get("/history?limit=abc")[0] == 400
        # the metadata database moved aside: a clean slate, the old file kept
        code, reset, _ = srv.post("/state/reset")
        assert code == 200 and Path(reset["moved_to"]).is_file()
        assert srv.get("/runs")[1]["runs"] == [] and srv.get(f"/runs/{run_id}")[0] == 404


def test_inspection_routes_are_the_cli_json(proj):
    proj.write("broken.py", "from barca import asset\n\n@asset\ndef c(:\n    return 1\n")
    with Served(proj.path) as srv:
        health = srv.get("/health")[1]
        assert health["status"] == "ok" and health["queue"]["max_runs"] >= 1
        assert [e["file"] for e in health["load_errors"]] == ["broken.py"]
        code, listing, hdrs = srv.get("/list")
        assert code == 200
        assert listing == json.loads(proj.barca("list", "pipe.py", "--json").out)
        assert srv.get("/list", headers={"If-None-Match": hdrs["etag"]})[0] == 304
        assert srv.get("/assets")[1] == listing["nodes"]
        nodes = srv.get("/nodes")[1]["nodes"]
        assert [n["id"] for n in nodes] == ["pipe.py:a", "pipe.py:b", "pipe.py:slow",
                                            "pipe.py:boom"]
        assert {n["id"]: n["running"] for n in srv.get("/state")[1]}["pipe.py:a"] is None
        assert "phases" in srv.get("/plan")[1]
        assert srv.get("/groups")[1] == {"groups": []}
        assert srv.get("/stats/a")[1]["id"] == "pipe.py:a"
        assert srv.get("/stats/zz")[0] == 404
        assert isinstance(srv.get("/schedule")[1], list)
        code, env, _ = srv.get("/no/such/route")
        assert code == 404 and "no such endpoint" in env["error"] and env["code"] == 2
        code, env, hdrs = srv.post("/health")
        assert code == 405 and "GET" in hdrs["allow"] and env["code"] == 2
        code, _, hdrs = srv.get("/")
        assert code == 303 and hdrs["location"] == "/ui/"
        assert srv.get("/ui/", raw=True)[0] == 200
        # a new file is read, a mended one comes back, without a restart
        proj.write("more.py", "from barca import asset\n\n@asset\ndef d():\n    return 4\n")
        proj.write("broken.py", "from barca import asset\n\n@asset\ndef c():\n    return 3\n")
        end = time.monotonic() + 20
        while time.monotonic() < end and srv.get("/health")[1]["load_errors"]:
            time.sleep(0.2)
        assert srv.get("/health")[1]["load_errors"] == []
        ids = {n["id"] for n in srv.get("/assets")[1]}
        assert {"more.py:d", "broken.py:c"} <= ids
    err = srv.output()
    assert f"serving on http://127.0.0.1:{srv.port}" in err and "metadata.db" in err
    assert "broken.py left out" in err and "no schedules" in err


def test_queue_fifo_cancel_and_pause(proj):
    with Served(proj.path, "--max-runs", "1") as srv:
        first = srv.post("/runs", {"command": "run", "targets": ["slow"]})[1]
        assert first["status"] == "running" and first["position"] is None
        second = srv.post("/runs", {"command": "run", "targets": ["slow"]})[1]
        third = srv.post("/runs", {"command": "get", "targets": ["a"]})[1]
        assert (second["status"], second["position"]) == ("pending", 1)
        assert third["position"] == 2
        assert srv.post("/state/reset")[0] == 409  # runs pending: the database stays
        q = srv.get("/queue")[1]
        assert [r["run_id"] for r in q["queued"]] == [second["run_id"], third["run_id"]]
        assert srv.call("DELETE", f"/runs/{third['run_id']}")[1]["status"] == "cancelled"
        assert srv.get(f"/runs/{third['run_id']}")[1]["status"] == "cancelled"
        srv.until(first["run_id"], ("running",))
        assert srv.call("DELETE", f"/runs/{first['run_id']}")[1]["status"] == "cancelling"
        assert srv.until(first["run_id"], ("cancelled",))["status"] == "cancelled"
        srv.until(second["run_id"], ("running",))  # next in line, once the first ended
        assert srv.post("/queue/pause")[1]["paused"] is True
        fourth = srv.post("/runs", {"command": "get", "targets": ["a"]})[1]
        (proj.path / "gate").write_text("")
        srv.until(second["run_id"], ("success",))
        time.sleep(1)
        assert srv.get(f"/runs/{fourth['run_id']}")[1]["status"] == "pending"  # paused
    with Served(proj.path) as srv:  # the pause outlives the server
        assert srv.get("/queue")[1]["paused"] is True
        srv.post("/queue/resume")
        assert srv.until(fourth["run_id"], ("success",))["status"] == "success"


def test_drain_requeues_past_the_deadline_and_a_restart_resumes(proj):
    srv = Served(proj.path, "--max-runs", "1", "--drain-timeout", "1")
    inflight = srv.post("/runs", {"command": "run", "targets": ["slow"]})[1]["run_id"]
    waiting = srv.post("/runs", {"command": "get", "targets": ["b"]})[1]["run_id"]
    srv.until(inflight, ("running",))
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    health = srv.get("/health")[1]
    assert health["status"] == "draining" and health["queue"]["queued"] == 1
    assert srv.post("/runs", {"command": "get", "targets": ["a"]})[0] == 202  # kept for later
    assert srv.proc.wait(60) == 0  # the deadline passed: stopped, put back, exit 0
    assert "put back" in srv.output()
    (proj.path / "gate").write_text("")
    with Served(proj.path, "--max-runs", "1") as again:  # same ids, the requeued one first
        one = again.until(inflight, ("success",))
        two = again.until(waiting, ("success",))
        assert one["started_at"] < two["started_at"]
        assert one["outcome"]["run_id"] == inflight


def test_drain_waits_for_runs_and_a_second_signal_cancels(proj):
    srv = Served(proj.path, "--drain-timeout", "60", "--max-runs", "2")
    runs = [srv.post("/runs", {"command": "run", "targets": ["slow"]})[1] for _ in range(3)]
    assert [r["status"] for r in runs] == ["running", "running", "pending"]  # two at once
    for r in runs[:2]:
        srv.until(r["run_id"], ("running",))
    assert len(srv.get("/queue")[1]["running"]) == 2
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    assert srv.proc.poll() is None  # waiting for the runs in flight
    srv.proc.send_signal(signal.SIGTERM)
    assert srv.stop() == 1
    out = {r["run_id"]: r["status"] for r in proj.barca("history", "--json").json()["runs"]}
    assert [out[r["run_id"]] for r in runs] == ["cancelled", "cancelled", "pending"]


def test_token_and_public_addresses(proj):
    env = {"BARCA_SERVER_TOKEN": "s3cret"}
    with Served(proj.path, env=env) as srv:
        assert srv.get("/health", headers={"Authorization": ""})[0] == 200
        for h in ({"Authorization": ""}, {"Authorization": "Bearer nope"}):
            code, body, hdrs = srv.get("/list", headers=h)
            assert code == 401 and body["code"] == 2 and hdrs["www-authenticate"] == "Bearer"
            assert srv.post("/runs", {"command": "get"}, headers=h)[0] == 401
        assert srv.get("/list")[0] == 200
    refused = proj.barca("serve", "--host", "0.0.0.0", "-p", "1")
    assert refused.code == 2 and "token" in refused.err and "0.0.0.0" in refused.err


def test_serve_usage_and_infrastructure_errors(proj):
    with Served(proj.path, "--read-only") as srv:
        assert srv.post("/runs", {"command": "get"})[0] == 403
        assert srv.post("/queue/pause")[0] == 403
        assert srv.get("/health")[1]["read_only"] is True
        assert srv.get("/runs")[1] == {"runs": []} and srv.get("/nodes")[0] == 200
    assert not (proj.path / ".barca").exists()  # a read-only server writes nothing
    bad_zone = proj.barca("serve", "--timezone", "Mars/Olympus")
    assert bad_zone.code == 2 and "Mars/Olympus" in bad_zone.err
    assert proj.barca("serve", "--server").code == 2
    assert proj.barca("serve", "--local").code == 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = str(s.getsockname()[1])
        taken = proj.barca("serve", "-p", port)
    assert taken.code == 3 and port in taken.err


def test_cli_does_not_import_server_libraries(proj):
    for argv in (["list", "--json"], ["get", "b", "--json"], ["history", "--json"]):
        code = (f"import sys, runpy; sys.argv = ['barca', *{argv!r}]\n"
                "try:\n    runpy.run_module('barca', run_name='__main__')\n"
                "except SystemExit:\n    pass\n"
                "print(sorted(m for m in ('starlette', 'uvicorn', 'croniter', 'watchfiles', "
                "'anyio') if m in sys.modules), file=sys.stderr)")
        got = subprocess.run([sys.executable, "-c", code], cwd=proj.path, capture_output=True,
                             text=True, timeout=60)
        assert got.stderr.strip().splitlines()[-1] == "[]", (argv, got.stderr)


def test_a_killed_server_leaves_its_run_interrupted(proj):
    srv = Served(proj.path)
    run = srv.post("/runs", {"command": "run", "targets": ["slow"]})[1]["run_id"]
    srv.until(run, ("running",))
    srv.proc.kill()
    srv.proc.wait()
    time.sleep(0.5)
    try:
        with Served(proj.path) as again:
            got = again.get(f"/runs/{run}")[1]
            assert got["status"] == "interrupted" and got["error"]
    finally:
        (proj.path / "gate").write_text("")  # a step still waiting lets go
