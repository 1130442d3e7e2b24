"""`barca gc --json` in the words barca 0.30.2's scripts read: each evicted file with its
`tier`, `path`, `bytes` and `node`; `tiers` as a list of `{tier, files, bytes}`;
`evicted_files` and `evicted_bytes`; `held`, what `.barca/` holds afterwards by kind
(metadata, results, other) and whether eviction may remove it; `restricted`, null unless a run
in progress kept results back. An environment named for the command (`--env`) evicts from its
own store alone. In process: the same document the CLI prints."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from barca import api
from barca.core.settings import Settings

BIG = '''from barca import asset

VERSION = 1


@asset()
def x() -> str:
    return "x" * 20_000 + str(VERSION)


@asset()
def y() -> str:
    return "y" * 30_000
'''


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pipeline.py").write_text(BIG)
    return tmp_path


def _size(root: Path) -> int:
    return sum(f.stat().st_size for f in (root / ".barca").rglob("*") if f.is_file())


def test_each_evicted_file_says_its_tier_bytes_and_node(here: Path) -> None:
    api.get("x,y", "pipeline.py")
    old_x = [p for p in os.listdir(here / ".barca/artifacts/pipeline.py--x")]
    (here / "pipeline.py").write_text(BIG.replace("VERSION = 1", "VERSION = 2"))
    api.get("x,y", "pipeline.py")
    before = _size(here)
    doc = api.gc("pipeline.py", max_size="off").to_json()
    (gone,) = doc["evicted"]
    assert gone["tier"] == "superseded" and gone["node"] == "pipeline.py:x"
    assert gone["path"] == f".barca/artifacts/pipeline.py--x/{old_x[0]}"
    assert gone["bytes"] > 20_000 and not (here / gone["path"]).exists()
    assert doc["tiers"] == [{"tier": "superseded", "files": 1, "bytes": gone["bytes"]}]
    assert doc["evicted_files"] == 1 and doc["evicted_bytes"] == gone["bytes"]
    assert doc["limit_bytes"] is None and doc["target_bytes"] is None
    assert doc["restricted"] is None and doc["dry_run"] is False
    # what .barca/ holds afterwards, by kind, adds up to its size
    held = {h["what"]: h for h in doc["held"]}
    assert list(held) == ["metadata", "results", "other"]
    assert held["metadata"]["evictable"] is False and held["results"]["evictable"] is True
    assert held["results"]["bytes"] >= 50_000
    assert doc["size_bytes"] == before and doc["after_bytes"] == before - gone["bytes"]
    assert sum(h["bytes"] for h in doc["held"]) == doc["after_bytes"]
    # nothing left to evict: an empty list of tiers
    again = api.gc("pipeline.py", max_size="off").to_json()
    assert again["tiers"] == [] and again["evicted"] == [] and again["evicted_bytes"] == 0


def test_a_dry_run_says_what_would_be_held_afterwards(here: Path) -> None:
    api.get("x,y", "pipeline.py")
    budget = int((_size(here) - 10_000) / 0.8)   # one result must go: x, read first
    dry = api.gc("pipeline.py", max_size=str(budget), dry_run=True).to_json()
    assert dry["dry_run"] is True and dry["target_bytes"] == int(budget * 0.8)
    assert [(e["tier"], e["node"]) for e in dry["evicted"]] == [
        ("least_recently_read", "pipeline.py:x")]
    assert (here / dry["evicted"][0]["path"]).exists()   # nothing deleted
    assert sum(h["bytes"] for h in dry["held"]) == dry["size_bytes"] - dry["evicted_bytes"]


def test_an_environment_named_for_the_command_evicts_from_its_store_alone(here: Path) -> None:
    api.get("x,y", "pipeline.py")
    api.get("x,y", "pipeline.py", settings=Settings.resolve(here, env="dev"))
    doc = api.gc("pipeline.py", max_size="1", env="dev").to_json()
    assert doc["evicted"] and all(e["path"].startswith(".barca/envs/dev/")
                                  for e in doc["evicted"])
    assert len(os.listdir(here / ".barca/artifacts/pipeline.py--x")) == 1   # untouched
    every = api.gc("pipeline.py", max_size="1").to_json()
    assert any(e["path"].startswith(".barca/artifacts/") for e in every["evicted"])
    # both stores' databases are metadata, never evictable; what held adds up to is the size
    held = {h["what"]: h["bytes"] for h in every["held"]}
    dbs = [here / ".barca/metadata.db", here / ".barca/envs/dev/metadata.db"]
    assert held["metadata"] >= sum(p.stat().st_size for p in dbs)
    assert sum(held.values()) == every["after_bytes"]
