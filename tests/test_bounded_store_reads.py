"""A store writer cannot hang or fill the disk of a reader (issue #35, item 4): a FIFO, a link
to ``/dev/zero`` or a huge object in place of a result's bytes (or of its manifest) is refused
after reading at most the manifest's size plus one byte, and the result counts as missing."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from barca.store import manifest
from barca.store.artifacts import node_dir
from barca.store.remote import Remote

REL = f".barca/artifacts/{node_dir('pipeline.py:a', '')}/0123456789abcdef.json"
DATA = b'{"v": 1}'


def _stored(tmp_path: Path) -> tuple[Remote, Path, Path]:
    """A folder store holding one result uploaded from a project; the project then loses its
    local copy, so a command would fetch it."""
    root = tmp_path / "project"
    (root / REL).parent.mkdir(parents=True)
    (root / REL).write_bytes(DATA)
    store = Remote(f"file://{tmp_path / 'store'}")
    store.upload(root, REL, "pipeline.py:a", "")
    (root / REL).unlink()
    blob = tmp_path / "store" / REL.removeprefix(".barca/")  # at its local relative path
    assert blob.is_file()
    return store, root, blob


def test_an_intact_result_is_fetched(tmp_path: Path) -> None:
    store, root, _ = _stored(tmp_path)
    assert store.fetch(root, REL) == len(DATA)
    assert (root / REL).read_bytes() == DATA


@pytest.mark.timeout(20)
@pytest.mark.parametrize("plant", ["fifo", "dev_zero", "huge"])
@pytest.mark.parametrize("recorded", [False, True])
def test_a_planted_blob_is_refused_without_reading_it_to_the_end(
        tmp_path: Path, plant: str, recorded: bool) -> None:
    store, root, blob = _stored(tmp_path)
    blob.unlink()
    if plant == "fifo":       # read to its end, it never ends: every reader would hang
        os.mkfifo(blob)
    elif plant == "dev_zero":
        blob.symlink_to("/dev/zero")
    else:                     # 64 MB where 8 bytes were recorded: the disk is not filled
        with open(blob, "wb") as f:
            f.truncate(64 << 20)
    import hashlib
    sha = hashlib.sha256(DATA).hexdigest() if recorded else None
    assert store.fetch(root, REL, sha) is None
    assert not (root / REL).exists()
    leftovers = [p for p in (root / REL).parent.iterdir()]
    assert leftovers == [], leftovers  # no temp file left behind
    assert any(REL in n and "computing it again" in n for n in store.notes), store.notes


@pytest.mark.timeout(20)
@pytest.mark.parametrize("plant", ["fifo", "dev_zero"])
def test_a_planted_manifest_is_not_read(tmp_path: Path, plant: str) -> None:
    store, root, _ = _stored(tmp_path)
    target = tmp_path / "store" / (REL.removeprefix(".barca/") + manifest.SUFFIX)
    target.unlink()
    if plant == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/zero")
    assert not store.vouches(REL)
    assert store.fetch(root, REL) is None
    assert not (root / REL).exists()
