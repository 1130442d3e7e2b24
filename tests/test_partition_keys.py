"""``--partition`` naming a key that does not exist is a usage error (exit 2) with the known
keys and a did-you-mean, whatever the keys come from: a list, a dict asset, a sensor's value."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from barca import api
from barca.core.errors import UsageError

PIPE = """
from pathlib import Path

from barca import asset, partitions, partitions_from, sensor


@asset(partitions={"k": partitions(["alpha", "beta"])})
def listed(k: str) -> str:
    return k


@asset()
def table() -> dict:
    return {"gamma": 1, "delta": 2}


@asset(partitions={"t": partitions_from(table)})
def from_dict(t: str, table: int) -> int:
    return table


@sensor()
def feed() -> dict:
    return {name: 1 for name in Path("feed.txt").read_text().split()}


@asset(partitions={"f": partitions_from(feed)})
def from_sensor(f: str, feed: int) -> str:
    return f
"""


@pytest.fixture
def here(tmp_path: Path):
    (tmp_path / "pipeline.py").write_text(PIPE)
    (tmp_path / "feed.txt").write_text("north south\n")
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(old)


@pytest.mark.parametrize("target,dim,typo,valid", [
    ("listed", "k", "alpah", "alpha"),
    ("from_dict", "t", "gama", "gamma"),
    ("from_sensor", "f", "nort", "north"),
])
def test_an_unknown_key_is_a_usage_error_with_the_known_keys(here, target, dim, typo, valid
                                                               ) -> None:
    for ask in ("get", "dry_run"):
        with pytest.raises(UsageError) as err:
            if ask == "get":
                api.get(target, "pipeline.py", partition=f"{dim}={typo}")
            else:  # a dry run knows the keys once a run has found them
                api.get(target, "pipeline.py")
                api.get(target, "pipeline.py", partition=f"{dim}={typo}", dry_run=True)
        assert err.value.code == 2
        text = str(err.value) + str(getattr(err.value, "hint", ""))
        assert f"Did you mean '{valid}'?" in text, text
        assert valid in text
    # a known key still narrows the run
    value = 1 if target == "from_dict" else valid
    assert api.get(target, "pipeline.py", partition=f"{dim}={valid}") == {f"{dim}={valid}": value}


@pytest.mark.parametrize("damage", ["deleted", "corrupted"])
def test_a_key_source_whose_artifact_is_gone_is_computed_again_not_read_as_no_keys(
        here, damage) -> None:
    """Found by the oracle (tests/test_oracle.py): the dict asset's artifact deleted, ``get`` of
    its consumer served ``{}`` (no keys) with exit 0."""
    assert api.get("from_dict", "pipeline.py") == {"t=gamma": 1, "t=delta": 2}
    (art,) = (here / ".barca" / "artifacts").glob("pipeline.py--table/*")
    if damage == "deleted":
        art.unlink()
    else:
        art.write_bytes(b"{}")
    assert api.get("from_dict", "pipeline.py") == {"t=gamma": 1, "t=delta": 2}
