"""The result objects rebuilt from their JSON (``barca.present.fromjson``), which is how
``--server`` prints a server's answer: the rebuilt object's JSON is the JSON it came from, and
its text the text the local command prints. In-process, on a real project in ``tmp_path``."""
from __future__ import annotations

from pathlib import Path

import pytest

from barca import api
from barca.core.errors import UsageError
from barca.core.settings import Settings
from barca.present import fromjson
from barca.queries.listing import list_nodes
from barca.queries.runlog import history, logs
from barca.queries.stats import stats_report

PIPELINE = '''
from barca import asset, partitions


@asset()
def numbers() -> list:
    print("making numbers")
    return [1, 2, 3]


@asset(inputs={"numbers": numbers})
def total(numbers: list) -> int:
    return sum(numbers)


@asset(partitions={"region": partitions(["emea", "amer"])})
def regions(region: str) -> dict:
    return {"region": region}


@asset()
def boom() -> int:
    raise ValueError("kaput")
'''


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    s = Settings.resolve(tmp_path, environ={})
    api.materialize("total", settings=s)
    api.materialize("regions", settings=s)
    with pytest.raises(Exception, match="kaput"):
        api.materialize("boom", settings=s)
    return s


def test_runs_round_trip(settings: Settings) -> None:
    for target, again in (("total", "numbers"), ("regions", "regions"),
                          ("total,regions", "numbers")):
        res = api.materialize(target, settings=settings, refresh=again)
        back = fromjson.run_from_json(res.to_json(), "get", target.split(","))
        assert back.to_json() == res.to_json()
        assert back.headline() == res.headline()
        assert back.value() == res.value()
    res = api.materialize("total", settings=settings)
    back = fromjson.run_from_json(res.to_json(), "get", ["total"])
    assert str(back).splitlines()[0] == str(res).splitlines()[0]
    assert str(res).endswith("  6") and str(back).endswith("  6")  # the value's preview


def test_inspection_results_round_trip_json_and_text(settings: Settings) -> None:
    pairs = [
        (api.status(settings=settings), fromjson.status_from_json),
        (list_nodes(settings=settings), fromjson.listing_from_json),
        (list_nodes(settings=settings, groups=True), fromjson.listing_from_json),
        (history(5, settings=settings), fromjson.history_from_json),
        (stats_report("total", settings=settings), fromjson.stats_from_json),
        (api.plan_run("total", settings=settings), fromjson.plan_from_json),
    ]
    for local, rebuild in pairs:
        back = rebuild(local.to_json())
        assert back.to_json() == local.to_json(), type(local).__name__
        assert str(back) == str(local), type(local).__name__


def test_status_of_one_target_is_its_cone(settings: Settings) -> None:
    every = fromjson.status_from_json(api.status(settings=settings).to_json())
    cone = fromjson.status_cone(every, ["total"])
    assert [r.id for r in cone.rows] == [r.id for r in api.status("total",
                                                                  settings=settings).rows]


def test_logs_from_a_servers_lines(settings: Settings) -> None:
    local = logs(settings=settings)  # boom's run
    run = {"run_id": local.run_id, "command": local.command, "target": local.target,
           "status": local.status}
    lines = [dict(x.to_json(), seq=x.id) for x in local.lines]
    back = fromjson.logs_from_json(run, lines)
    assert back.headline() == local.headline()
    assert back.json_array() == local.json_array()
    assert back.text_lines() == local.text_lines()


def test_server_argv_takes_only_an_address() -> None:
    from barca.faces.remote import server_argv
    assert server_argv(["get", "--server", "report"]) == ["get", "--server=", "report"]
    assert server_argv(["--server", "http://h:1", "x"]) == ["--server=http://h:1", "x"]
    assert server_argv(["--server", "build-box:8274"]) == ["--server=build-box:8274"]
    assert server_argv(["--server"]) == ["--server="]


def test_server_url(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from barca.api.server import server_token, server_url
    monkeypatch.delenv("BARCA_SERVER", raising=False)
    monkeypatch.delenv("BARCA_SERVER_TOKEN", raising=False)
    assert server_url("http://h:8274/") == "http://h:8274"
    assert server_url("h:8274") == "http://h:8274"
    with pytest.raises(UsageError, match="names no server"):
        server_url("", tmp_path)
    with pytest.raises(UsageError, match="not an http"):
        server_url("ftp://h/x")
    monkeypatch.setenv("BARCA_SERVER", "http://env:1")
    assert server_url("", tmp_path) == "http://env:1"
    monkeypatch.delenv("BARCA_SERVER")
    (tmp_path / "barca.toml").write_text('[server]\nurl = "http://toml:2"\n'
                                         'token_env = "MY_TOKEN"\n')
    assert server_url(None, tmp_path) == "http://toml:2"
    monkeypatch.setenv("MY_TOKEN", "t0k")
    assert server_token(tmp_path) == "t0k"
