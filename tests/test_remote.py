"""The remote store: every artifact copied to BARCA_REMOTE_URI, fetched back when a local copy
is missing; file:// and a real S3 API (moto's server on 127.0.0.1)."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Project


def _sales(project: Project) -> None:
    project.copy_pipeline("regions_const.py")


def _drop_local(project: Project, *regions: str) -> None:
    for r in regions:
        shutil.rmtree(project.path / ".barca" / "artifacts" / f"pipeline.py--sales_region_{r}")


def _round_trip(project: Project, env: dict[str, str]) -> None:
    r = project.barca("get", "sales", "pipeline.py", "--pretty", env=env)
    assert r.code == 0, r.err
    _drop_local(project, "emea", "amer")
    r = project.barca("get", "sales", "pipeline.py", "--pretty", "--agent", env=env)
    assert r.code == 0, r.err
    assert r.completed() == []                       # no step ran
    assert "[barca] fetched 2 cached artifacts (66 B) in " in r.err
    assert (project.path / ".barca/artifacts/pipeline.py--sales_region_emea").is_dir()


def test_file_store_round_trip(project: Project, tmp_path: Path) -> None:
    _sales(project)
    store = tmp_path / "store"
    _round_trip(project, {"BARCA_REMOTE_URI": f"file://{store}"})
    copies = sorted(p.relative_to(store).parts[:2] for p in store.rglob("*.json"))
    assert copies == [("artifacts", "pipeline.py--sales_region_amer"),
                      ("artifacts", "pipeline.py--sales_region_apac"),
                      ("artifacts", "pipeline.py--sales_region_emea")]


def test_status_and_dry_run_on_a_second_machine_see_the_store(project: Project,
                                                                 tmp_path: Path) -> None:
    """A fresh checkout pointed at the store: status and --dry-run say what `get` will do
    (take the results from the store), and neither downloads nor writes anything."""
    _sales(project)
    env = {"BARCA_REMOTE_URI": f"file://{tmp_path / 'store'}"}
    assert project.barca("get", "summary", "pipeline.py", "--json", env=env).code == 0
    fresh = Project(tmp_path / "machine-b")
    fresh.path.mkdir()
    _sales(fresh)
    status = fresh.barca("status", "pipeline.py", "--json", env=env)
    assert status.code == 0, status.err
    states = {n["id"]: n["cache"]["state"] for n in status.json()["nodes"]}
    assert states == {"pipeline.py:sales": "cached", "pipeline.py:summary": "cached"}
    plan = fresh.barca("get", "summary", "pipeline.py", "--dry-run", "--pretty", env=env)
    assert plan.code == 0, plan.err
    assert plan.out.rstrip().splitlines()[-1] == "0 will run, 4 cached, 0 unknown"
    assert not (fresh.path / ".barca").exists()
    without = fresh.barca("status", "pipeline.py", "--json")  # the local store alone
    assert {n["cache"]["state"] for n in without.json()["nodes"]} == {"never_run"}
    r = fresh.barca("get", "summary", "pipeline.py", "--json", "--agent", env=env)
    assert r.code == 0, r.err
    assert r.completed() == [] and "fetched" in r.err


def test_unreachable_store_is_exit_3_before_any_step(project: Project) -> None:
    _sales(project)
    r = project.barca("get", "sales", "pipeline.py", "--json",
                      env={"BARCA_REMOTE_URI": "file:///proc/no/such/place"})
    assert r.code == 3
    assert "cannot be reached" in r.err
    assert not (project.path / ".barca" / "artifacts").exists()


def test_failed_upload_warns_then_retries(project: Project, tmp_path: Path) -> None:
    _sales(project)
    store = tmp_path / "store"
    store.mkdir()
    (store / "artifacts").write_text("not a folder")   # uploads fail, the store is reachable
    env = {"BARCA_REMOTE_URI": f"file://{store}"}
    r = project.barca("get", "sales", "pipeline.py", "--pretty", env=env)
    assert r.code == 0, r.err
    assert "could not be copied to the remote store (the next command retries)" in r.err
    (store / "artifacts").unlink()
    r = project.barca("get", "sales", "pipeline.py", "--pretty", env=env)
    assert r.code == 0, r.err
    assert len(list(store.rglob("*.json"))) == 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_server():
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        end = time.time() + 30
        while time.time() < end:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def test_s3_store_round_trip_and_a_second_machine(project: Project, tmp_path: Path,
                                                   s3_server: str) -> None:
    _sales(project)
    env = {"BARCA_REMOTE_URI": "s3://barca-test/cache", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": s3_server}
    _round_trip(project, env)
    # another "machine": a copy of the project with an empty .barca/, the same store
    other = Project(tmp_path / "other")
    other.path.mkdir()
    shutil.copy(project.path / "pipeline.py", other.path / "pipeline.py")
    r = other.barca("get", "sales", "pipeline.py", "--json", "--agent", env=env)
    assert r.code == 0, r.err
    assert r.completed() == []
    assert "[barca] fetched 3 cached artifacts" in r.err
    assert os.environ.get("BARCA_REMOTE_URI") is None
