"""``--server [URL]`` (issue #32, item 7): commands run on a real ``barca serve`` print here what
the same command prints locally -- same JSON keys, same ``-o value``, same exit codes -- and an
unreachable or foreign server is exit 3 naming its URL. Also ``barca.get(..., server=URL)``."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Project
from serving import PIPELINE, Served, environ, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("served")
    (root / "pipeline.py").write_text(PIPELINE)
    server = Served(root)
    try:
        yield Project(root), server
    finally:
        server.stop()


def _keys(doc: object) -> object:
    """A JSON document's shape: its keys, recursively (lists by their first item)."""
    if isinstance(doc, dict):
        return {k: _keys(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_keys(doc[0])] if doc else []
    return None


def test_get_prints_what_a_local_get_prints(served) -> None:
    project, server = served
    remote = project.barca("get", "total", "--server", server.url, "--json")
    assert remote.code == 0, remote.err
    local = project.barca("get", "total", "--json")
    assert local.code == 0, local.err
    r, lo = remote.json(), local.json()
    assert set(r) == set(lo)
    # (the server ran the steps, the local get found them cached: what only a step that ran
    # says, its calls and their time, is the server's alone)
    ran_only = {"attempts", "elapsed_seconds"}
    assert [set(s) - ran_only for s in r["steps"]] == [set(s) - ran_only for s in lo["steps"]]
    assert r["final_output"] == lo["final_output"] == 6
    assert r["status"] == "success" and r["run_id"] != lo["run_id"]
    # the run is the server's: triggered over the API
    status, run, _ = server.call("GET", f"/runs/{r['run_id']}")
    assert status == 200 and run["triggered_by"] == "api"
    # -o value: the value alone, as locally
    value = project.barca("get", "total", "--server", server.url, "-o", "value")
    assert value.code == 0 and value.out == project.barca("get", "total", "-o", "value").out
    assert json.loads(value.out) == 6
    # the text form: the same headline, the value's preview; the step's output on stderr
    text = project.barca("get", "total", "--refresh", "total", "--server", server.url,
                         "--pretty")
    assert text.code == 0, text.err
    assert text.out.startswith("Run ") and "| got 'total' in " in text.out
    assert "  6" in text.out
    assert "[pipeline.py:total] adding 3 numbers" in text.err
    assert "[barca] 1/2 steps | done in" in text.err


def test_a_failed_step_is_exit_1_with_the_run_document(served) -> None:
    project, server = served
    remote = project.barca("get", "boom", "--server", server.url, "--json")
    local = project.barca("get", "boom", "--json")
    assert remote.code == local.code == 1
    r, lo = remote.json(), local.json()
    assert set(r) == set(lo) and r["status"] == "failed"
    assert r["failed_node"] == lo["failed_node"] == "pipeline.py:boom"
    err = remote.error()
    assert err["kind"] == "step_failed" and err["code"] == 1 and "kaput" in err["error"]
    pretty = project.barca("get", "boom", "--server", server.url, "--pretty")
    assert pretty.code == 1
    assert "[pipeline.py:boom] about to fail" in pretty.err
    assert "[barca] step:pipeline.py:boom failed: ValueError: kaput" in pretty.err
    assert "[barca] run failed: step 'pipeline.py:boom' failed" in pretty.err
    # -o value prints nothing for a failed run, as locally
    value = project.barca("get", "boom", "--server", server.url, "-o", "value")
    assert value.code == 1 and value.out == ""


def test_an_unknown_target_is_exit_2_naming_it(served) -> None:
    project, server = served
    remote = project.barca("get", "nosuch", "--server", server.url, "--json")
    local = project.barca("get", "nosuch", "--json")
    assert remote.code == local.code == 2
    assert remote.out == local.out == ""
    assert "nosuch" in remote.error()["error"] and remote.error()["kind"] == "usage"
    # a usage error of this side's grammar is still this side's
    assert project.barca("get", "total", "--server", server.url, "-o", "url").code == 2
    assert project.barca("get", "total", "--server", server.url, "-o", "path").code == 2


@pytest.mark.parametrize("argv", [["status"], ["list"], ["history", "--limit", "3"],
                                  ["stats", "total"], ["status", "total"]])
def test_inspection_commands_have_the_local_json_keys(served, argv: list[str]) -> None:
    project, server = served
    assert project.barca("get", "total").code == 0  # something in the history
    remote = project.barca(*argv, "--server", server.url, "--json")
    local = project.barca(*argv, "--json")
    assert remote.code == local.code == 0, remote.err
    r, lo = remote.json(), local.json()
    assert _keys(r) == _keys(lo)
    if argv[0] in ("status", "list"):
        assert [n["id"] for n in r["nodes"]] == [n["id"] for n in lo["nodes"]]
    if argv[0] == "history":
        assert [x["run_id"] for x in r["runs"]] == [x["run_id"] for x in lo["runs"]]
    # and the text a person reads has the same columns
    text = project.barca(*argv, "--server", server.url, "--pretty")
    assert text.code == 0
    assert text.out.splitlines()[0].split() == project.barca(
        *argv, "--pretty").out.splitlines()[0].split() or argv[0] == "stats"


def test_history_filters_reach_the_server_and_one_run_is_read_here(served) -> None:
    project, server = served
    assert project.barca("get", "total").code == 0
    got = project.barca("history", "--server", server.url, "--status", "success",
                        "--target", "total", "--since", "1d", "--json")
    assert got.code == 0, got.err
    runs = got.json()["runs"]
    assert runs and all(r["status"] == "success" and r["target"] == "total" for r in runs)
    assert got.json()["total"] >= len(runs)
    one = project.barca("history", runs[0]["run_id"], "--server", server.url)
    assert one.code == 2 and "--local" in one.err


def test_logs_of_a_run_on_the_server(served) -> None:
    project, server = served
    run = project.barca("get", "boom", "--server", server.url, "--json").json()
    remote = project.barca("logs", run["run_id"], "--server", server.url, "--pretty")
    assert remote.code == 0, remote.err
    assert "[pipeline.py:boom] about to fail" in remote.out
    assert f"logs of run {run['run_id']} (get boom, failed)" in remote.err
    lines = project.barca("logs", run["run_id"], "--server", server.url, "--json").json()
    local = project.barca("logs", run["run_id"], "--json").json()
    assert [x["line"] for x in lines] == [x["line"] for x in local]
    assert _keys(lines) == _keys(local)


def test_an_unreachable_server_is_exit_3_naming_it(project) -> None:
    project.write("pipeline.py", PIPELINE)
    url = f"http://127.0.0.1:{free_port()}"
    for argv in (["get", "total"], ["status"], ["history"]):
        got = project.barca(*argv, "--server", url, "--json")
        assert got.code == 3, got.err
        assert url in got.error()["error"] and got.error()["kind"] == "infrastructure"
        assert got.out == ""
    assert not (project.path / ".barca").exists()  # no fallback to a local run
    text = project.barca("get", "total", "--server", url)
    assert text.code == 3 and url in text.err


def test_a_server_that_is_not_barca_is_exit_3(project) -> None:
    project.write("pipeline.py", PIPELINE)
    port = free_port()
    other = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                              "127.0.0.1"], cwd=project.path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.0)
        url = f"http://127.0.0.1:{port}"
        got = project.barca("get", "total", "--server", url, "--json")
        assert got.code == 3 and url in got.error()["error"]
    finally:
        other.terminate()
        other.wait()


def test_a_bare_server_flag_reads_BARCA_SERVER_then_barca_toml(served) -> None:
    project, server = served
    got = project.barca("get", "total", "--server", "--json", env={"BARCA_SERVER": server.url})
    assert got.code == 0 and got.json()["final_output"] == 6
    # `get --server total`: total is the target, the URL comes from the environment
    got = project.barca("get", "--server", "total", "-o", "value",
                        env={"BARCA_SERVER": server.url})
    assert got.code == 0 and got.out.strip() == "6"
    (project.path / "barca.toml").write_text(f'[server]\nurl = "{server.url}"\n')
    try:
        got = project.barca("status", "--server", "--json")
        assert got.code == 0 and "nodes" in got.json()
        # --local wins: the same line runs here
        local = project.barca("history", "--server", "--local", "--json")
        assert local.code == 0
    finally:
        (project.path / "barca.toml").unlink()
    none = project.barca("get", "total", "--server")
    assert none.code == 2 and "BARCA_SERVER" in none.err


def test_barca_get_with_server(served, monkeypatch) -> None:
    import barca
    project, server = served
    monkeypatch.chdir(project.path)
    assert barca.get("total", server=server.url) == 6
    assert barca.get("numbers", server=server.url) == [1, 2, 3]
    with pytest.raises(barca.StepFailed, match="kaput"):
        barca.get("boom", server=server.url)
    with pytest.raises(barca.UsageError, match="nosuch"):
        barca.get("nosuch", server=server.url)
    with pytest.raises(barca.InfrastructureError, match="127.0.0.1:1"):
        barca.get("total", server="http://127.0.0.1:1")
    plan = barca.get("total", server=server.url, dry_run=True)
    assert plan.to_json()["dry_run"] is True
    # a value JSON cannot carry: read from the run's artifact, in the type it was written
    import pandas as pd
    got = barca.get("table", server=server.url)
    assert isinstance(got, pd.DataFrame)
    pd.testing.assert_frame_equal(got, barca.get("table"))
    with pytest.raises(barca.UsageError, match="server="):
        barca.get("total", server=server.url, env="dev")


def test_the_magic_with_server(served, monkeypatch) -> None:
    pytest.importorskip("IPython")
    import barca
    from barca.faces.jupyter.magics import run_magic
    project, server = served
    monkeypatch.chdir(project.path)
    assert run_magic(f"get total --server {server.url}") == 6
    import pandas as pd
    pd.testing.assert_frame_equal(run_magic(f"get table --server {server.url}"),
                                  run_magic("get table"))
    report = run_magic(f"status --server {server.url}")
    assert [r.name for r in report.rows] == [r.name for r in run_magic("status").rows]
    with pytest.raises(barca.StepFailed):
        run_magic(f"get boom --server {server.url}")


def test_ctrl_c_cancels_the_run_on_the_server(served) -> None:
    project, server = served
    proc = subprocess.Popen([sys.executable, "-m", "barca", "get", "slow", "--server",
                             server.url, "--json"], cwd=project.path, env=environ(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_id = None
        end = time.monotonic() + 60
        while run_id is None and time.monotonic() < end:
            _, runs, _ = server.call("GET", "/runs?status=running")
            run_id = next((r["run_id"] for r in runs["runs"] if r["target"] == "slow"), None)
            time.sleep(0.2)
        assert run_id is not None, "the run never started on the server"
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert server.wait_run(run_id)["status"] == "cancelled"


def test_the_token_is_sent_from_BARCA_SERVER_TOKEN(tmp_path: Path) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    server = Served(tmp_path, env={"BARCA_SERVER_TOKEN": "s3cret-token"})
    try:
        project = Project(tmp_path)
        refused = project.barca("get", "total", "--server", server.url, "--json")
        assert refused.code == 2 and refused.out == ""
        assert "token" in refused.error()["error"].lower()
        got = project.barca("get", "total", "--server", server.url, "--json",
                            env={"BARCA_SERVER_TOKEN": "s3cret-token"})
        assert got.code == 0 and got.json()["final_output"] == 6
    finally:
        server.stop()


def test_a_server_that_restarts_mid_run_is_waited_for(tmp_path: Path) -> None:
    """The server stops (its drain deadline passes: the run goes back to the queue) and comes
    back on the same port: the client's event stream is opened again, and the command ends
    with the rerun's outcome."""
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    first = Served(tmp_path, "--drain-timeout", "0.5")
    proc = subprocess.Popen([sys.executable, "-m", "barca", "get", "nap", "--server",
                             first.url, "--json"], cwd=tmp_path,
                            env=environ({"BARCA_SERVER_RECONNECT": "90"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second = None
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            _, runs, _ = first.call("GET", "/runs?status=running")
            if any(r["target"] == "nap" for r in runs["runs"]):
                break
            time.sleep(0.2)
        first.stop()  # SIGTERM: past the drain deadline the run is put back in the queue
        second = Served(tmp_path, port=first.port)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        doc = json.loads(out)
        # the run the first server took is the one the second finished, under its id
        assert second.call("GET", f"/runs/{doc['run_id']}")[1]["status"] == "success"
    finally:
        if proc.poll() is None:
            proc.kill()
        if second is not None:
            second.stop()
    assert doc["final_output"] == 4
