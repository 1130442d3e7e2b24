"""The remote store is laid out as ``.barca/`` is (issue #29 item 6): each result at its local
relative path, ``<uri>/artifacts/<node dir>/<run hash>.<ext>``, its manifest beside it. Racing
writers with different bytes stay safe: a reader never takes bytes its manifest does not name,
and the store ends with one manifest its bytes match. A store of the earlier layout (bytes
named by their digest) is still read."""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest
from test_remote import s3_server  # noqa: F401 - the moto server fixture

from barca.store import manifest
from barca.store.remote import Remote

PIPELINE = '''
from barca import asset, partitions


class Box:
    def __init__(self, n):
        self.n = n


@asset
def v() -> dict:
    return {"v": 1}


@asset(serializer="pickle")
def box() -> Box:
    return Box(7)


@asset(partitions={"region": partitions(["emea", "amer"])})
def sales(region: str) -> dict:
    return {"region": region}


@asset(inputs={"v": v, "box": box})
def report(v: dict, box: Box) -> int:
    return v["v"] + box.n
'''

KEY = "a long shared secret for the store, 42"


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*") if p.is_file()}


def _good_pair(store: Path, path: str, secret: bytes | None = None) -> dict:
    """The manifest of ``path`` (store-relative), checked, and the bytes beside it match it."""
    body = manifest.read((store / (path + manifest.SUFFIX)).read_bytes(), path, secret)
    assert manifest.matches(body, (store / path).read_bytes()), path
    return body


def test_the_store_mirrors_the_local_artifacts(tmp_path: Path, monkeypatch) -> None:
    """Every result of .barca/artifacts is at the same relative path in the store, the same
    bytes, with its manifest beside it and nothing else there."""
    import barca
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "store"
    assert barca.get("report", "pipeline.py", remote_uri=f"file://{store}") == 8
    assert barca.get("sales", "pipeline.py", remote_uri=f"file://{store}") == {
        "region=emea": {"region": "emea"}, "region=amer": {"region": "amer"}}
    local = _files(tmp_path / ".barca" / "artifacts")
    stored = _files(store / "artifacts")
    assert len(local) == 5 and {Path(p).suffix for p in local} == {".json", ".pkl"}
    results = {p: b for p, b in stored.items() if not p.endswith(manifest.SUFFIX)}
    assert results == local                                       # same paths, same bytes
    assert sorted(stored) == sorted([*local, *(p + manifest.SUFFIX for p in local)])
    for p in local:
        body = _good_pair(store, f"artifacts/{p}")
        assert body["path"] == f"artifacts/{p}" and body["sha256"] == hashlib.sha256(
            local[p]).hexdigest()
    assert sorted(os.listdir(store)) == [".barca-store", "artifacts"]
    # an environment's results: .barca/envs/NAME/artifacts/... at envs/NAME/artifacts/...
    assert barca.get("v", "pipeline.py", env="dev", remote_uri=f"file://{store}") == {"v": 1}
    dev = _files(tmp_path / ".barca" / "envs" / "dev" / "artifacts")
    assert len(dev) == 1 and dev == {p: b for p, b in _files(
        store / "envs" / "dev" / "artifacts").items() if not p.endswith(manifest.SUFFIX)}


REL = ".barca/artifacts/pipeline.py--v/" + "a" * 64 + ".json"
PATH = REL.removeprefix(".barca/")


def _key_file(tmp_path: Path) -> str:
    (tmp_path / "store.key").write_text(KEY)
    return str(tmp_path / "store.key")


@pytest.mark.parametrize("signed", [False, True], ids=["no-key", "key"])
def test_a_tampered_result_at_its_path_is_rejected(tmp_path: Path, signed: bool) -> None:
    """Bytes edited at the result's own name: a digest mismatch, not in the store; with a key,
    a manifest rewritten to the edited bytes' digests (its signature no longer good) too."""
    key_file = _key_file(tmp_path) if signed else None
    uri = f"file://{tmp_path / 'store'}"
    Remote(uri, key_file=key_file).upload(tmp_path, REL, "pipeline.py:v", "", b'{"v": 1}')
    blob, mpath = tmp_path / "store" / PATH, tmp_path / "store" / (PATH + manifest.SUFFIX)
    assert blob.read_bytes() == b'{"v": 1}'
    blob.write_bytes(b'{"v": 9}')                                  # same size, other bytes
    reader = Remote(uri, key_file=key_file)
    assert reader.fetch(tmp_path / "r", REL) is None
    assert reader.notes == [f"the store's copy of {REL} did not match its manifest; "
                            "computing it again"]
    assert not (tmp_path / "r" / REL).exists()
    own = Remote(uri, key_file=key_file)                           # this machine's own record
    assert own.fetch(tmp_path / "o", REL, hashlib.sha256(b'{"v": 1}').hexdigest()) is None
    assert own.notes == [f"the store's copy of {REL} did not match the SHA-256 recorded here; "
                         "computing it again"]
    # the next upload of the result puts a good pair back
    Remote(uri, key_file=key_file).upload(tmp_path, REL, "pipeline.py:v", "", b'{"v": 1}')
    assert blob.read_bytes() == b'{"v": 1}'
    blob.write_bytes(b'{"v": 9}')
    body = json.loads(mpath.read_bytes())
    body.update(sha256=hashlib.sha256(b'{"v": 9}').hexdigest())    # the forgery completed
    mpath.write_bytes(json.dumps(body).encode())
    forged = Remote(uri, key_file=key_file)
    if not signed:  # without a key the store's word is all there is: what the key is for
        assert forged.fetch(tmp_path / "f", REL) == 8
        assert (tmp_path / "f" / REL).read_bytes() == b'{"v": 9}'
        return
    assert forged.fetch(tmp_path / "f", REL) is None
    assert forged.notes == [f"the store's copy of {REL} is not signed with "
                            "BARCA_STORE_KEY; computing it again"]
    assert not (tmp_path / "f" / REL).exists()
    Remote(uri, key_file=key_file).upload(tmp_path, REL, "pipeline.py:v", "", b'{"v": 1}')
    assert blob.read_bytes() == b'{"v": 1}'
    _good_pair(tmp_path / "store", PATH, KEY.encode())


def test_a_store_of_the_earlier_layout_is_still_read(tmp_path: Path) -> None:
    """Bytes under their digest name (the layout before this one) with a manifest: fetched on
    the manifest's word and on this machine's record; uploading the same result again also
    puts it at its own name, and the old copy stays."""
    data = b'{"v": 1}'
    sha = hashlib.sha256(data).hexdigest()
    store = tmp_path / "store"
    old = store / manifest.blob_path(PATH, sha)
    old.parent.mkdir(parents=True)
    old.write_bytes(data)
    (store / (PATH + manifest.SUFFIX)).write_bytes(
        manifest.make(PATH, "pipeline.py:v", "", "json", len(data), sha, None))
    uri = f"file://{store}"
    assert Remote(uri).fetch(tmp_path / "a", REL) == len(data)
    assert Remote(uri).fetch(tmp_path / "b", REL, sha) == len(data)
    for m in ("a", "b"):
        assert (tmp_path / m / REL).read_bytes() == data
    assert not (store / PATH).exists()
    tampered = Remote(uri)
    old.write_bytes(b'{"v": 9}')
    assert tampered.fetch(tmp_path / "c", REL) is None and tampered.notes
    old.write_bytes(data)
    Remote(uri).upload(tmp_path, REL, "pipeline.py:v", "", data)
    assert (store / PATH).read_bytes() == data and old.read_bytes() == data
    _good_pair(store, PATH)


def test_an_interrupted_upload_is_repaired_by_the_next(tmp_path: Path) -> None:
    """Bytes without a manifest (an upload cut short, other bytes or the same) are not a
    result; the next upload of the run hash leaves a good pair."""
    uri = f"file://{tmp_path / 'store'}"
    blob = tmp_path / "store" / PATH
    blob.parent.mkdir(parents=True)
    for left in (b'{"v": "half"}', b'{"v": 1}'):
        blob.write_bytes(left)
        (tmp_path / "store" / (PATH + manifest.SUFFIX)).unlink(missing_ok=True)
        assert Remote(uri).fetch(tmp_path / "r", REL) is None      # no manifest, no result
        writer = Remote(uri)
        writer.settle_seconds = 0.2   # how long other bytes may be another machine's upload
        writer.upload(tmp_path, REL, "pipeline.py:v", "", b'{"v": 1}')
        assert blob.read_bytes() == b'{"v": 1}'
        _good_pair(tmp_path / "store", PATH)
        assert sorted(os.listdir(blob.parent)) == sorted([blob.name, blob.name + ".manifest"])
    # a manifest its bytes do not match (the bytes replaced after it) is repaired too
    blob.write_bytes(b'{"v": 2}')
    Remote(uri).upload(tmp_path, REL, "pipeline.py:v", "", b'{"v": 1}')
    _good_pair(tmp_path / "store", PATH)


def _race(uri: str, rels: list[str], values: list[bytes], barrier, i: int, errors) -> None:
    """One writer: each run hash uploaded with its own bytes, all writers released at once."""
    for rel in rels:
        barrier.wait(timeout=30)
        writer = Remote(uri)
        writer.settle_seconds = 0.5
        try:
            writer.upload(Path("/nonexistent"), rel, "pipeline.py:v", "", values[i])
        except Exception as exc:  # pragma: no cover - reported by the test
            errors.append(f"{type(exc).__name__}: {exc}")


def _read(uri: str, rels: list[str], values: list[bytes], barrier, where: str,
          errors) -> None:
    """A reader fetching each run hash while it is raced on: one writer's bytes, or nothing."""
    for n, rel in enumerate(rels):
        barrier.wait(timeout=30)
        for attempt in range(15):
            reader = Remote(uri)
            dest = Path(where) / f"{n}-{attempt}"
            got = reader.fetch(dest, rel)
            if got is not None:
                if (dest / rel).read_bytes() not in values:
                    errors.append(f"{rel}: a reader took bytes no writer wrote")
                (dest / rel).unlink()
            if [x for x in reader.notes if "not signed" not in x]:
                errors.append(f"{rel}: {reader.notes}")


def _check_store(store: Path, rels: list[str], values: list[bytes]) -> None:
    for rel in rels:
        path = rel.removeprefix(".barca/")
        body = _good_pair(store, path)
        assert (store / path).read_bytes() in values
        assert body["sha256"] == hashlib.sha256((store / path).read_bytes()).hexdigest()
    # each result and its manifest, nothing else: no temp file, no orphan copy
    names = {n for rel in rels for n in os.listdir((store / rel.removeprefix(".barca/")).parent)}
    assert names == {n for rel in rels for n in (Path(rel).name, Path(rel).name + ".manifest")}


def _rels(n: int) -> list[str]:
    return [f".barca/artifacts/pipeline.py--v/{hashlib.sha256(str(i).encode()).hexdigest()}"
            ".json" for i in range(n)]


@pytest.mark.slow
def test_threads_racing_with_different_bytes_leave_one_good_pair(tmp_path: Path) -> None:
    """Two writers upload each of many run hashes at the same moment, each with its own
    bytes (a nondeterministic step), while a reader fetches: the reader gets one writer's
    bytes whole or nothing and is never told of a bad copy; each run hash ends with one
    manifest and the bytes it names."""
    uri = f"file://{tmp_path / 'store'}"
    values = [json.dumps({"w": i, "pad": str(i) * 20000}).encode() for i in range(2)]
    rels, errors = _rels(40), []
    barrier = threading.Barrier(3)
    threads = [threading.Thread(target=_race, args=(uri, rels, values, barrier, i, errors))
               for i in range(2)]
    threads.append(threading.Thread(target=_read, args=(uri, rels, values, barrier,
                                                        str(tmp_path / "r"), errors)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    _check_store(tmp_path / "store", rels, values)
    winners = {(tmp_path / "store" / r.removeprefix(".barca/")).read_bytes() for r in rels}
    assert winners  # which writer wins each race is up to the machine


@pytest.mark.slow
def test_processes_racing_with_different_bytes_leave_one_good_pair(tmp_path: Path) -> None:
    """As above with three writer processes and a reader process (truly at once on two
    cores); results of a megabyte, so that uploads overlap often."""
    ctx = multiprocessing.get_context("fork")
    uri = f"file://{tmp_path / 'store'}"
    values = [json.dumps({"w": i, "pad": str(i) * (1 << 20)}).encode() for i in range(3)]
    rels = _rels(40)
    barrier, errors = ctx.Barrier(4), ctx.Manager().list()
    procs = [ctx.Process(target=_race, args=(uri, rels, values, barrier, i, errors))
             for i in range(3)]
    procs.append(ctx.Process(target=_read, args=(uri, rels, values, barrier,
                                                 str(tmp_path / "r"), errors)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=600)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert list(errors) == []
    _check_store(tmp_path / "store", rels, values)


@pytest.mark.slow
def test_writers_repairing_at_once_end_with_one_good_pair(tmp_path: Path) -> None:
    """Each run hash starts as an upload cut short (other bytes, no manifest); two writers
    repair it at once while a reader fetches. The reader may find no result (a copy that did
    not match, said as such), never bytes that do not match what it trusted; the store ends
    with one manifest and its bytes."""
    uri = f"file://{tmp_path / 'store'}"
    values = [json.dumps({"w": i, "pad": str(i) * 20000}).encode() for i in range(2)]
    rels, errors = _rels(5), []
    for rel in rels:
        left = tmp_path / "store" / rel.removeprefix(".barca/")
        left.parent.mkdir(parents=True, exist_ok=True)
        left.write_bytes(b'{"cut": "short"}')
    barrier = threading.Barrier(3)
    seen: list[bytes] = []

    def read() -> None:
        for n, rel in enumerate(rels):
            barrier.wait(timeout=30)
            for attempt in range(100):
                dest = tmp_path / "r" / f"{n}-{attempt}"
                if Remote(uri).fetch(dest, rel) is not None:
                    seen.append((dest / rel).read_bytes())

    threads = [threading.Thread(target=_race, args=(uri, rels, values, barrier, i, errors))
               for i in range(2)]
    threads.append(threading.Thread(target=read))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    assert set(seen) <= set(values)
    _check_store(tmp_path / "store", rels, values)


@pytest.mark.slow
def test_threads_racing_on_an_s3_store_leave_one_good_pair(tmp_path: Path, monkeypatch,
                                                           request) -> None:
    """The same race against a real S3 API (moto's server): conditional PUTs decide it."""
    server = request.getfixturevalue("s3_server")
    for name, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": server}.items():
        monkeypatch.setenv(name, value)
    uri = "s3://barca-race/store"
    Remote(uri).check()
    values = [json.dumps({"w": i, "pad": str(i) * 200000}).encode() for i in range(2)]
    rels, errors = _rels(12), []
    barrier = threading.Barrier(3)
    threads = [threading.Thread(target=_race, args=(uri, rels, values, barrier, i, errors))
               for i in range(2)]
    threads.append(threading.Thread(target=_read, args=(uri, rels, values, barrier,
                                                        str(tmp_path / "r"), errors)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert errors == []
    fs = Remote(uri).fs
    fs.invalidate_cache()
    names = set()
    for rel in rels:
        path = rel.removeprefix(".barca/")
        data = bytes(fs.cat_file(f"barca-race/store/{path}"))
        body = manifest.read(bytes(fs.cat_file(f"barca-race/store/{path}.manifest")), path, None)
        assert data in values and manifest.matches(body, data)
        names |= {p.rsplit("/", 1)[-1] for p in fs.ls(f"barca-race/store/{path.rsplit('/', 1)[0]}",
                                                       detail=False)}
    assert names == {n for rel in rels for n in (Path(rel).name, Path(rel).name + ".manifest")}
