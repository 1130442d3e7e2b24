"""A cached result is read only if it is a regular file holding its recorded bytes: the check
the cached path makes with one open (barca.engine.integrity.read_digest, ``regular=True``),
in process with a real store. Whatever else sits at a result's path -- a symlink, a folder, a
FIFO -- is moved aside and the step computed again; a cached get after it is cached again."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from barca import api
from barca.engine.integrity import _NotRegular, read_digest

PIPELINE = """
from barca import asset


@asset()
def base() -> int:
    return 41


@asset(inputs={"base": base})
def top(base: int) -> int:
    return base + 1
"""


def test_read_digest_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "f.json"
    f.write_bytes(b"42")
    assert read_digest(str(f), True, regular=True) == (hashlib.sha256(b"42").hexdigest(), b"42")
    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 5000)  # past the preview size: hashed in blocks, bytes not kept
    assert read_digest(str(big), True, regular=True) == (
        hashlib.sha256(b"x" * 5000).hexdigest(), None)
    link = tmp_path / "link.json"
    link.symlink_to(f)
    with pytest.raises(OSError) as got:
        read_digest(str(link), True, regular=True)  # never followed
    assert not isinstance(got.value, _NotRegular)
    with pytest.raises(_NotRegular) as kind:
        read_digest(str(tmp_path), True, regular=True)
    assert kind.value.kind == "dir"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(_NotRegular) as kind:  # opened without blocking, then refused
        read_digest(str(fifo), True, regular=True)
    assert kind.value.kind == "other"
    with pytest.raises(FileNotFoundError):
        read_digest(str(tmp_path / "absent"), True, regular=True)


@pytest.mark.parametrize("what", ["symlink", "folder", "fifo", "corrupt"])
def test_a_cached_result_that_is_not_its_file_is_computed_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> None:
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    first = api.materialize("top", "pipeline.py")
    assert first.steps_executed == 2
    assert api.materialize("top", "pipeline.py").steps_executed == 0
    path = tmp_path / first.outputs[0].items[0].path  # top's result file
    assert path.is_file()
    path.unlink()
    if what == "symlink":
        other = tmp_path / "elsewhere.json"
        other.write_text("42")
        path.symlink_to(other)  # the same bytes, but not barca's file: never followed
    elif what == "folder":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)  # a read would block forever
    else:
        path.write_text("43")
    again = api.materialize("top", "pipeline.py", load_values=True)
    assert again.steps_executed == 1
    assert again.outputs[0].values == 42
    assert path.is_file() and not path.is_symlink()
    if what != "corrupt":
        assert any(".moved-aside-" in p.name for p in path.parent.iterdir())
    assert api.materialize("top", "pipeline.py").steps_executed == 0


def test_the_collector_held_off_by_the_cli_is_on_again_once_a_step_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc

    from barca import engine
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    assert gc.isenabled()
    threshold = gc.get_threshold()
    try:
        gc.disable()
        engine.gc_held = True  # as faces.cli holds it for a command
        api.materialize("top", "pipeline.py")
        assert gc.isenabled() and not engine.gc_held  # steps ran: the collector works again
        assert gc.get_threshold()[0] >= 20_000  # (a young collection no longer every 700)
        gc.disable()
        engine.gc_held = True
        assert api.materialize("top", "pipeline.py").steps_executed == 0
        assert not gc.isenabled()  # a fully cached get only reads
        engine.release_gc()
        assert gc.isenabled()
        gc.disable()  # a caller's own setting: never turned on by barca
        api.materialize("top", "pipeline.py", refresh="top")
        assert not gc.isenabled()
    finally:
        engine.gc_held = False
        gc.enable()
        gc.set_threshold(*threshold)
