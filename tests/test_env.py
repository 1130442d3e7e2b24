"""env=["NAME", ...]: each value (the process's, else the project's .env) is in the run hash;
secret-like names are shown as <redacted>, and their values are never printed."""
from __future__ import annotations

from pathlib import Path

import pytest
from conftest import Project

from barca import api
from barca.core.dotenv import is_secret, parse
from barca.core.errors import UsageError
from barca.core.settings import Settings

PIPELINE = """
from barca import asset


@asset(env=ENV)
def region() -> str:
    return "r"


@asset(inputs={"r": region})
def report(r: str) -> str:
    return r + "!"
"""


def test_dotenv_lines() -> None:
    text = ('# comment\nexport A=1\nB="two words"  # trailing\nC=\'$A literal\'\n'
            'D=${A}-$B\nE=x # note\n  F = spaced \nnot a line\n')
    assert parse(text, environ={}) == {"A": "1", "B": "two words", "C": "$A literal",
                                       "D": "1-two words", "E": "x", "F": "spaced"}
    assert parse("G=${OUTER}", environ={"OUTER": "o"}) == {"G": "o"}


def test_secret_names() -> None:
    for name in ("API_TOKEN", "db_password", "aws_secret", "SIGNING_KEY", "KEY", "Token"):
        assert is_secret(name), name
    for name in ("VOCAB_TOKENS", "KEYS", "MONKEY", "REGION", "TOKEN_URL"):
        assert not is_secret(name), name


def _hash(root: Path, env: str = '["VOCAB_REGION"]') -> str:
    (root / "pipeline.py").write_text(PIPELINE.replace("ENV", env))
    plan = api.plan(str(root / "pipeline.py"), settings=Settings.resolve(root, environ={}))
    return plan.phases[0][0]["run_hash"]


def test_each_value_is_hashed_process_first_then_dotenv(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VOCAB_REGION", raising=False)
    unset = _hash(tmp_path)
    monkeypatch.setenv("VOCAB_REGION", "")
    empty = _hash(tmp_path)
    monkeypatch.setenv("VOCAB_REGION", "emea")
    emea = _hash(tmp_path)
    assert len({unset, empty, emea}) == 3
    monkeypatch.delenv("VOCAB_REGION")
    (tmp_path / ".env").write_text("VOCAB_REGION=emea\n")
    assert _hash(tmp_path) == emea                 # the file's value, when the process has none
    monkeypatch.setenv("VOCAB_REGION", "")
    assert _hash(tmp_path) == empty                # the process wins


@pytest.mark.parametrize("env", ['"VOCAB_REGION"', '("VOCAB_REGION",)', "NAMES", "[NAME]"])
def test_env_must_be_a_list_of_strings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       env: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="env="):
        _hash(tmp_path, env)


@pytest.mark.slow
def test_env_values_rerun_and_secrets_are_never_printed(project: Project) -> None:
    project.write("pipeline.py", PIPELINE.replace("ENV", '["VOCAB_REGION", "API_TOKEN"]'))
    project.write(".env", 'VOCAB_REGION=emea\nAPI_TOKEN="hunter2-secret"\n')
    r = project.barca("get", "report", "pipeline.py", "--json")
    assert r.code == 0, r.err
    step = r.json()["steps"][0]
    assert step["env"] == {"API_TOKEN": "<redacted>", "VOCAB_REGION": "emea"}
    r = project.barca("get", "report", "pipeline.py", "--json", env={"VOCAB_REGION": "amer"})
    assert [s["status"] for s in r.json()["steps"]] == ["ran", "ran"]  # and its downstream
    assert r.json()["steps"][0]["env"]["VOCAB_REGION"] == "amer"
    r = project.barca("get", "report", "pipeline.py", "--json")  # back to emea: from cache
    assert [s["status"] for s in r.json()["steps"]] == ["cached", "cached"]
    project.write(".env", 'VOCAB_REGION=emea\nAPI_TOKEN="hunter2-other"\n')
    r = project.barca("get", "report", "pipeline.py", "--agent", "--json")
    assert r.code == 0, r.err
    assert ("[barca] step:pipeline.py:region completed" in r.err
            and "env API_TOKEN=<redacted> VOCAB_REGION=emea" in r.err)
    said = [r.out, r.err]
    for cmd in (["get", "report", "--pretty"], ["get", "report", "--dry-run", "--json"],
                ["get", "report", "--dry-run", "--pretty"], ["status", "--json"],
                ["status", "--pretty"], ["history", "--json"], ["list", "--json"]):
        r = project.barca(*cmd, "pipeline.py") if cmd[0] != "history" else project.barca(*cmd)
        assert r.code == 0, (cmd, r.err)
        said += [r.out, r.err]
    assert not any("hunter2" in s for s in said)
    assert not any(b"hunter2" in p.read_bytes()  # not in the store, the database, the logs
                   for p in (project.path / ".barca").rglob("*") if p.is_file())
