"""The per-step write path (store.artifacts.write_new): a step's bytes land at their place
through a temp file of this process, never over another process's result, and nothing is left
behind -- also when the temp name is taken by a stale file."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from barca.store import artifacts


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".tmp-")]


def test_bytes_land_at_their_place_in_a_new_folder(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "h.json"   # neither folder exists yet
    placed = artifacts.write_new(path, b'{"n": 1}', _sha(b'{"n": 1}'))
    assert placed == str(path)
    assert path.read_bytes() == b'{"n": 1}'
    assert os.stat(path).st_mode & 0o777 == artifacts.file_mode()   # a new file's mode
    assert _temps(path.parent) == []


def test_another_result_of_the_same_run_hash_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    first, other = b"1", b"2"
    artifacts.write_new(path, first, _sha(first))
    # the same bytes: the same file
    assert artifacts.write_new(path, first, _sha(first)) == str(path)
    # other bytes (a uuid in the value): beside it, named by their digest; the first stays
    beside = artifacts.write_new(path, other, _sha(other))
    assert beside == str(tmp_path / f"h-{_sha(other)[:16]}.json")
    assert path.read_bytes() == first and Path(beside).read_bytes() == other
    # a repair replaces a file known bad in place
    assert artifacts.write_new(path, other, _sha(other), replace=True) == str(path)
    assert path.read_bytes() == other
    assert _temps(tmp_path) == []


def test_a_taken_temp_name_is_never_written_through(tmp_path: Path) -> None:
    """A stale temp file (a crashed process of the same pid and tag) keeps its bytes; the
    result goes through another temp file."""
    artifacts.write_new(tmp_path / "x.json", b"0", _sha(b"0"))   # this process's tag is set
    t = artifacts._Temp
    stale = tmp_path / f".tmp-{os.getpid()}-{t.tag}-{t.n + 1}"
    stale.write_bytes(b"stale")
    placed = artifacts.write_new(tmp_path / "y.json", b"new", _sha(b"new"))
    assert Path(placed).read_bytes() == b"new"
    assert stale.read_bytes() == b"stale"
    assert os.stat(placed).st_mode & 0o777 == artifacts.file_mode()
    assert _temps(tmp_path) == [stale.name]


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("a file where a folder should be")
    try:
        artifacts.write_new(tmp_path / "f" / "h.json", b"1", _sha(b"1"))
    except OSError:
        pass
    else:
        raise AssertionError("a file in the folder's place must fail the write")
    assert _temps(tmp_path) == []
