"""The cached ``%barca get`` in a kernel (issue #31 item 5), in-process: the work that a kernel
would repeat at every cell -- resolving the settings, splitting the line, asking whether the
store moved -- is remembered, and every input of it is still seen: an environment variable, a
``barca.toml`` made, edited, removed or found in a parent folder, another working folder,
another process writing the store."""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

import pytest

from barca.core.settings import Settings

PIPELINE = """\
from barca import asset


@asset()
def base() -> int:
    return 20


@asset(inputs={"base": base})
def top(base: int) -> dict:
    return {"top": base + 1}
"""


def test_settings_are_remembered_and_every_input_is_seen(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("BARCA_ENV", "BARCA_POOL_SIZE", "BARCA_REMOTE", "BARCA_REMOTE_URI"):
        monkeypatch.delenv(var, raising=False)
    sub = tmp_path / "proj" / "notebooks"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    from barca.core import root
    monkeypatch.setattr(root, "RACY_NS", 0)  # each file is trusted by its stamp at once
    first = Settings.resolve()
    assert Settings.resolve() is first  # remembered: the same state asks nothing again
    assert first.root == sub and first.env is None and first.pool_size is None

    monkeypatch.setenv("BARCA_ENV", "dev")  # %env BARCA_ENV=dev in a notebook
    assert Settings.resolve().env == "dev" and Settings.resolve().where("env") == "BARCA_ENV"
    monkeypatch.delenv("BARCA_ENV")
    assert Settings.resolve().env is None

    (tmp_path / "proj" / "barca.toml").write_text("[run]\npool_size = 3\n")  # in a parent
    got = Settings.resolve()
    assert got.root == tmp_path / "proj" and got.pool_size == 3
    toml = sub / "barca.toml"  # a nearer one: the root moves down
    toml.write_text("[run]\npool_size = 5\n")
    assert Settings.resolve().root == sub and Settings.resolve().pool_size == 5
    st = os.stat(toml)  # the same size, the modification time put back: the ctime moved
    time.sleep(0.01)
    toml.write_text("[run]\npool_size = 7\n")
    os.utime(toml, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert Settings.resolve().pool_size == 7
    toml.unlink()
    assert Settings.resolve().root == tmp_path / "proj"
    toml.mkdir()  # a folder named barca.toml marks no root, as the search reads it
    assert Settings.resolve().root == tmp_path / "proj"
    toml.rmdir()

    monkeypatch.chdir(tmp_path)  # another working folder
    assert Settings.resolve().root == tmp_path and Settings.resolve().pool_size is None
    assert Settings.resolve(pool_size=2).pool_size == 2  # a flag is part of the ask
    assert Settings.resolve(include=["a*.py"]).include == ("a*.py",)  # unhashable: not kept


def test_a_young_barca_toml_is_read_again(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A file rewritten with the same size within the filesystem clock's resolution keeps its
    stamp (a second on some filesystems): a barca.toml younger than the window is no proof,
    and is read again at every ask, as warm state does with its stamps."""
    from barca.core import root
    monkeypatch.chdir(tmp_path)
    (tmp_path / "barca.toml").write_text("[run]\npool_size = 3\n")
    assert Settings.resolve() is not Settings.resolve()  # young: read again
    assert Settings.resolve().pool_size == 3
    monkeypatch.setattr(root, "RACY_NS", 0)  # the same file, old enough
    assert Settings.resolve() is Settings.resolve()


def test_a_line_is_split_once_and_stays_one_list_per_call() -> None:
    from barca.faces.jupyter.magics import _split
    a = _split("get top pipeline.py --env 'my env'")
    assert a == ["get", "top", "pipeline.py", "--env", "my env"]
    a.append("--refresh-all")  # a caller's change is its own
    assert _split("get top pipeline.py --env 'my env'") == ["get", "top", "pipeline.py",
                                                             "--env", "my env"]


def test_a_store_moved_by_another_writer_is_never_served(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's generation is read inside the transaction that records the served run: a
    write by anyone since the state was kept sends the ask down the normal path."""
    pytest.importorskip("IPython")
    import barca.api as api
    import barca.api.warm as warm
    from barca.faces.jupyter.magics import run_magic
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(warm, "RACY_NS", 100_000_000)
    monkeypatch.setattr(api, "keeping", True)
    made: list[int] = []

    class Counting(api.Session):
        def __init__(self, *a, **kw) -> None:
            made.append(1)
            super().__init__(*a, **kw)
    monkeypatch.setattr(api, "Session", Counting)
    try:
        assert run_magic("get top pipeline.py") == {"top": 21}
        time.sleep(0.2)
        assert run_magic("get top pipeline.py") == {"top": 21}  # decided in full, kept
        n = len(made)
        assert run_magic("get top pipeline.py") == {"top": 21} and len(made) == n  # served
        runs = sqlite3.connect(tmp_path / ".barca" / "metadata.db")
        row = runs.execute("SELECT command, target, status, steps_run, steps_cached, "
                           "steps_failed, pool_size IS NOT NULL, finished_at >= started_at, "
                           "triggered_by FROM runs ORDER BY rowid DESC LIMIT 1").fetchone()
        assert row == ("get", "top", "success", 0, 2, 0, 1, 1, "manual")  # as a cold run's
        with runs:  # another process's write: the generation moves
            runs.execute("DELETE FROM materializations WHERE asset = 'pipeline.py:base'")
        count = runs.execute("SELECT count(*) FROM runs").fetchone()[0]
        assert run_magic("get top pipeline.py") == {"top": 21} and len(made) == n + 1
        assert runs.execute("SELECT count(*) FROM runs").fetchone()[0] == count + 1  # one run
        runs.close()
    finally:
        warm._ENTRIES.clear()
        warm._prune()


def test_looks_like_file_is_pathlibs_answer(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from barca.api import looks_like_file
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder").mkdir()
    (tmp_path / "data.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    for arg in ("folder", "folder/", "data.txt", "data.txt/", "pipe", "missing", "x.py",
                "data.txt/inside", "a\0b", "", "/", "./folder//", str(tmp_path / "data.txt")):
        want = arg.endswith(".py") or Path(arg).is_dir() or Path(arg).is_file()
        assert looks_like_file(arg) == want, arg


def test_a_same_size_dotenv_edit_that_keeps_its_stamp_is_seen(tmp_path: Path) -> None:
    """``.env`` feeds ``env=`` run hashes: its memo, like barca.toml's, trusts a stamp only once
    it is older than the file system clock's resolution. The edit below puts the old stamp
    back (mtime and size; the inode and a coarse ctime would not move either), as a second
    write within one tick can."""
    from barca.core import dotenv
    env = tmp_path / ".env"
    env.write_text("REGION=eu\n")
    assert dotenv.file_values(tmp_path) == {"REGION": "eu"}
    st = env.stat()
    with env.open("r+") as f:  # same inode, same size
        f.write("REGION=us\n")
    os.utime(env, ns=(st.st_atime_ns, st.st_mtime_ns))
    # a coarse clock keeps the ctime too: the stamp the memo holds is unchanged
    dotenv._FILES[env] = ((st.st_ino, st.st_size, st.st_mtime_ns, env.stat().st_ctime_ns),
                         dotenv._FILES[env][1])
    assert dotenv.file_values(tmp_path) == {"REGION": "us"}
