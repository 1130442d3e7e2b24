"""``env=`` values cannot be guessed offline from what barca stores (issue #35, item 6): they
enter run hashes and records only as a keyed digest -- the store key when there is one, so a
team still shares results, else a random salt of the project's own."""
from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

import pytest

from barca.core import dotenv
from barca.identity.hashing import digest as plain_digest

URL = "postgres://app:hunter2@db/prod"


def test_the_digest_of_a_value_is_keyed_never_a_plain_hash(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("BARCA_STORE_KEY", raising=False)
    a, b = tmp_path / "a", tmp_path / "b"
    got = dotenv.digest("DATABASE_URL", URL, a)
    assert got != plain_digest("set", URL)                # the guess a reader could check
    assert got == dotenv.digest("DATABASE_URL", URL, a)   # stable in one project
    assert got != dotenv.digest("DATABASE_URL", URL, b)   # each project its own salt
    assert got != dotenv.digest("DATABASE_URL", URL + "x", a)
    assert dotenv.digest("X", None, a) != dotenv.digest("X", "", a)  # unset is not empty
    salt = a / ".barca" / dotenv.SALT_FILE
    assert stat.S_IMODE(salt.stat().st_mode) == 0o600
    assert URL not in salt.read_text()


def test_with_a_store_key_machines_that_share_it_agree(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BARCA_STORE_KEY", "team-secret-0123456789")
    a, b = tmp_path / "a", tmp_path / "b"
    assert dotenv.digest("DATABASE_URL", URL, a) == dotenv.digest("DATABASE_URL", URL, b)
    assert not (a / ".barca" / dotenv.SALT_FILE).exists()
    keyed = dotenv.digest("DATABASE_URL", URL, a)
    monkeypatch.setenv("BARCA_STORE_KEY", "another-key-9876543210")
    assert dotenv.digest("DATABASE_URL", URL, a) != keyed


@pytest.mark.slow
def test_the_recorded_definition_holds_no_guessable_digest(project) -> None:
    project.write("pipeline.py", '''
from barca import asset

@asset(env=["DATABASE_URL"])
def rows() -> int:
    return 1
''')
    project.write(".env", f"DATABASE_URL={URL}\n")
    r = project.barca("get", "rows", "pipeline.py", "--json")
    assert r.code == 0, r.err
    db = sqlite3.connect(project.path / ".barca" / "metadata.db")
    [(parts,)] = db.execute("select parts from materializations where asset like '%rows'")
    part = json.loads(parts)["env:DATABASE_URL"]
    assert part != plain_digest("set", URL)
    # still current, and a changed value is still a different result
    assert project.barca("get", "rows", "pipeline.py", "--json").json()["steps"][0]["status"] \
        == "cached"
    project.write(".env", f"DATABASE_URL={URL}2\n")
    assert project.barca("get", "rows", "pipeline.py", "--json").json()["steps"][0]["status"] \
        != "cached"
