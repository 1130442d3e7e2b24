"""The settle record (barca.engine.settle): a fully cached command settles its whole cone from one
record, and nothing it depends on can change without the next command deciding again.

Each test brings a project up to date, runs the same command once more (which writes the
record), checks that the record is there and then is used, changes one thing, and checks that
the next command serves the new state -- never the recorded one."""
from __future__ import annotations

import sqlite3

import pytest

pytestmark = pytest.mark.slow

PIPELINE = """
    from barca import asset, partitions
    from helpers import bump
    from consts import RATE

    KEYS = ["a", "b"]
    SCALE = 2


    @asset()
    def base() -> int:
        return 10 * SCALE


    @asset(inputs={"base": base}, partitions={"k": partitions(KEYS)})
    def item(base: int, k: str) -> int:
        return bump(base) + len(k) * RATE


    @asset(inputs={"base": base})
    def top(base: int) -> int:
        return bump(base) * RATE
"""


def settle_rows(project) -> list[tuple[str, str]]:
    with sqlite3.connect(project.path / ".barca" / "metadata.db") as conn:
        return list(conn.execute("SELECT cone, key FROM settle_records"))


def get(project, *args, env=None) -> dict:
    res = project.barca("get", *args, "pipeline.py", "--json", env=env)
    assert res.code == 0, res.out + res.err
    return res.json()


@pytest.fixture
def settled(project):
    """A project brought up to date, with the record of its cached state written."""
    project.write("pipeline.py", PIPELINE)
    project.write("helpers.py", "def bump(x):\n    return x + 1\n")
    project.write("consts.py", "RATE = 3\n")
    assert get(project, "top")["steps_executed"] == 2
    assert settle_rows(project) == []  # steps ran: the state is not settled yet
    assert get(project, "top")["steps_executed"] == 0
    rows = settle_rows(project)
    assert len(rows) == 1
    served = get(project, "top")  # the record's exit
    assert served["steps_executed"] == 0 and served["final_output"] == 63
    assert settle_rows(project) == rows  # a hit writes nothing
    return project


def status(project) -> dict:
    res = project.barca("status", "top", "pipeline.py", "--json")
    assert res.code == 0, res.out + res.err
    return res.json()


def test_status_and_dry_run_say_the_same_with_and_without_the_record(settled) -> None:
    served = status(settled), get(settled, "top", "--dry-run")
    with sqlite3.connect(settled.path / ".barca" / "metadata.db") as conn:
        conn.execute("DELETE FROM settle_records")
    assert (status(settled), get(settled, "top", "--dry-run")) == served


def test_edited_helper_module_is_noticed(settled) -> None:
    settled.write("helpers.py", "def bump(x):\n    return x + 2\n")
    out = get(settled, "top")
    assert out["steps_executed"] == 1 and out["final_output"] == 66


def test_edited_imported_constant_is_noticed(settled) -> None:
    settled.write("consts.py", "RATE = 4\n")
    out = get(settled, "top")
    assert out["steps_executed"] == 1 and out["final_output"] == 84


def test_edited_constant_in_pipeline_is_noticed(settled) -> None:
    settled.edit("pipeline.py", "SCALE = 2", "SCALE = 3")
    out = get(settled, "top")
    assert out["steps_executed"] == 2 and out["final_output"] == 93


def test_key_added_and_removed_are_noticed(settled) -> None:
    assert get(settled, "item")["steps_executed"] == 2
    assert get(settled, "item")["steps_executed"] == 0  # the item cone's record
    settled.edit("pipeline.py", 'KEYS = ["a", "b"]', 'KEYS = ["a", "b", "cc"]')
    out = get(settled, "item")
    assert out["steps_executed"] == 1 and out["steps_total"] == 4
    assert get(settled, "item")["steps_executed"] == 0
    settled.edit("pipeline.py", 'KEYS = ["a", "b", "cc"]', 'KEYS = ["a"]')
    out = get(settled, "item")
    assert out["steps_executed"] == 0 and out["steps_total"] == 2


def test_deleted_or_corrupted_target_artifact_is_computed_again(settled) -> None:
    files = sorted((settled.path / ".barca" / "artifacts").rglob("*.json"))
    for f in files:
        f.write_text("999")  # every artifact, the target's included
    out = get(settled, "top")
    assert out["final_output"] == 63 and out["steps_executed"] == 2  # top and what it reads
    assert get(settled, "top")["steps_executed"] == 0  # writes the record of the new state
    assert get(settled, "top")["steps_executed"] == 0
    mine = [f for f in (settled.path / ".barca" / "artifacts").rglob("*.json") if "top" in str(f)]
    assert len(mine) == 1
    mine[0].unlink()
    out = get(settled, "top")
    assert out["final_output"] == 63 and out["steps_executed"] == 1


def test_settings_and_env_change_the_state(settled) -> None:
    before = settle_rows(settled)
    settled.write("barca.toml", "[run]\npool_size = 1\n")
    assert get(settled, "top")["steps_executed"] == 0
    assert settle_rows(settled) != before  # decided again: a record for the new settings
    # another environment is another store: nothing of this one is served there
    assert get(settled, "top", env={"BARCA_ENV": "other"})["steps_executed"] == 2
    settled.write("barca.toml", 'default_env = "third"\n')
    assert get(settled, "top")["steps_executed"] == 2
    settled.write("barca.toml", "")
    assert get(settled, "top")["steps_executed"] == 0


def test_another_process_writing_the_store_is_noticed(settled) -> None:
    db = settled.path / ".barca" / "metadata.db"
    with sqlite3.connect(db) as conn:
        gen = conn.execute("SELECT n FROM generation").fetchone()[0]
        # another barca (or anything) forgets the results of `top`: snapshot and rows
        conn.execute("DELETE FROM snapshots WHERE asset LIKE '%:top'")
        conn.execute("DELETE FROM materializations WHERE asset LIKE '%:top'")
        assert conn.execute("SELECT n FROM generation").fetchone()[0] > gen
    for f in (settled.path / ".barca" / "artifacts").rglob("*.json"):
        if "top" in str(f):
            f.unlink()
    out = get(settled, "top")
    assert out["steps_executed"] == 1 and out["final_output"] == 63


def test_flags_are_never_served_from_the_record(settled) -> None:
    out = get(settled, "top", "--refresh", "base")
    assert out["steps_executed"] == 2
    assert get(settled, "item", "--partition", "k=a")["steps_executed"] == 1
    assert get(settled, "top", "--refresh-all")["steps_executed"] == 2


def test_changed_sensor_value_is_noticed(project) -> None:
    project.write("pipeline.py", """
        from pathlib import Path
        from barca import asset, sensor


        @sensor()
        def signal() -> str:
            return Path("signal.txt").read_text().strip()


        @asset(inputs={"signal": signal})
        def stamped(signal: str) -> str:
            return signal + "!"
    """)
    project.write("signal.txt", "v1\n")
    assert get(project, "stamped")["final_output"] == "v1!"
    assert get(project, "stamped")["final_output"] == "v1!"
    project.write("signal.txt", "v2\n")
    out = get(project, "stamped")
    assert out["final_output"] == "v2!" and out["steps_executed"] == 2
