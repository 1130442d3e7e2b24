"""A shared store you can trust: two machine folders, one store (file:// and S3 through moto's
server). An edited, truncated or planted store copy is never served; with BARCA_STORE_KEY only
signed manifests count; two machines racing on one run hash leave one good copy."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import Project
from test_remote import s3_server  # noqa: F401 - the moto server fixture

KEY = "correct horse battery staple 21"

PIPELINE = '''\
import os
import subprocess
import sys
import time
from pathlib import Path

from barca import asset


class Box:
    def __init__(self, n):
        self.n = n


@asset
def v() -> dict:
    return {"v": 1}


@asset(inputs={"v": v})
def doubled(v: dict) -> dict:
    return {"v2": v["v"] * 2}


@asset(serializer="pickle")
def box() -> Box:
    return Box(7)


@asset(inputs={"box": box})
def opened(box: Box) -> int:
    return box.n


@asset
def racing() -> dict:
    """Both machines in here at once (a barrier on a shared folder), then different bytes."""
    gate = Path(os.environ["RACE_DIR"])
    (gate / str(os.getpid())).touch()
    end = time.time() + 30
    while len(list(gate.iterdir())) < 2 and time.time() < end:
        time.sleep(0.01)
    return {"pid": os.getpid(), "pad": "x" * 1000}
'''


class Store:
    """The shared store seen from the test, as an attacker with write access sees it."""

    def __init__(self, uri: str, env: dict[str, str]) -> None:
        import fsspec
        self.uri, self.env = uri, env
        opts = {"client_kwargs": {"endpoint_url": env["AWS_ENDPOINT_URL"]}, "key": "test",
                "secret": "test", "skip_instance_cache": True} if uri.startswith("s3://") else {}
        self.fs, self.base = fsspec.core.url_to_fs(uri, **opts)

    def files(self, node_dir: str) -> list[str]:
        self.fs.invalidate_cache()
        try:
            return sorted(self.fs.find(f"{self.base}/artifacts/{node_dir}"))
        except FileNotFoundError:
            return []

    def blob(self, node_dir: str) -> str:
        [path] = [p for p in self.files(node_dir) if not p.endswith(".manifest")]
        return path

    def manifest(self, node_dir: str) -> str:
        [path] = [p for p in self.files(node_dir) if p.endswith(".manifest")]
        return path

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(path))

    def write(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(path, data)

    def everything(self) -> bytes:
        self.fs.invalidate_cache()
        return b"".join(self.read(p) for p in self.fs.find(self.base))


@pytest.fixture(params=["file", pytest.param("s3", marks=pytest.mark.slow)])
def store(request, tmp_path: Path) -> Store:
    if request.param == "file":
        return Store(f"file://{tmp_path / 'store'}", {})
    server = request.getfixturevalue("s3_server")
    env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": server}
    return Store("s3://barca-trust/cache", env)


def machine(tmp_path: Path, name: str) -> Project:
    p = Project(tmp_path / name)
    p.path.mkdir()
    p.write("pipeline.py", PIPELINE)
    return p


def run(p: Project, store: Store, target: str, key: str | None = None, **extra: str):
    env = {"BARCA_REMOTE_URI": store.uri, **store.env, **extra}
    if key is not None:
        env["BARCA_STORE_KEY"] = key
    return p.barca("get", target, "pipeline.py", "--json", "--agent", env=env)


def cache_state(p: Project, store: Store, node: str, key: str | None = None
                ) -> tuple[str, str]:
    """What `barca status` predicts for one node: (state, reason)."""
    env = {"BARCA_REMOTE_URI": store.uri, **store.env}
    if key is not None:
        env["BARCA_STORE_KEY"] = key
    r = p.barca("status", "pipeline.py", "--json", env=env)
    assert r.code == 0, r.err
    [got] = [n["cache"] for n in json.loads(r.out)["nodes"] if n["name"] == node]
    return got["state"], got["reason"]


def lines(err: str, text: str) -> list[str]:
    return [ln for ln in err.splitlines() if text in ln]


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["edited", "truncated"])
def test_a_damaged_store_copy_is_computed_again(tmp_path: Path, store: Store,
                                                damage: str) -> None:
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    assert run(a, store, "doubled").code == 0
    blob = store.blob("pipeline.py--v")
    good = store.read(blob)
    assert good == b'{"v": 1}'
    store.write(blob, b'{"v": 100}' if damage == "edited" else good[:4])
    r = run(b, store, "doubled")
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"v2": 2}
    assert r.completed() == ["pipeline.py:v"]           # v again; doubled still from the store
    said = lines(r.err, "the store's copy of")
    assert said == [("[barca] warning: the store's copy of .barca/artifacts/pipeline.py--v/"
                     f"{r.json()['steps'][0]['run_hash']}.json did not match its manifest; "
                     "computing it again")], r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
    assert said[0][len("[barca] warning: "):] in [w["message"] for w in r.json()["warnings"]]
    # the good copy replaced the bad one: a third machine takes it from the store
    assert store.read(store.blob("pipeline.py--v")) == good
    c = machine(tmp_path, "c")
    r = run(c, store, "doubled")
    assert r.code == 0 and r.completed() == [] and "store's copy" not in r.err, r.err


@pytest.mark.slow
def test_a_damaged_store_copy_of_this_machines_own_result(tmp_path: Path, store: Store) -> None:
    """Local file gone, the store's copy edited: checked against this machine's own record."""
    a = machine(tmp_path, "a")
    assert run(a, store, "v").code == 0
    blob = store.blob("pipeline.py--v")
    store.write(blob, b'{"v": 100}')
    for f in (a.path / ".barca" / "artifacts" / "pipeline.py--v").iterdir():
        f.unlink()
    r = run(a, store, "v")
    assert r.code == 0 and r.json()["final_output"] == {"v": 1}, r.err
    assert r.completed() == ["pipeline.py:v"]
    assert len(lines(r.err, "did not match the SHA-256 recorded here; computing it again")) == 1
    assert store.read(blob) == b'{"v": 1}'


@pytest.mark.slow
def test_a_missing_manifest_means_not_in_the_store(tmp_path: Path, store: Store) -> None:
    """Bytes without a manifest (an upload cut short) are not a result: computed again."""
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    assert run(a, store, "v").code == 0
    store.fs.rm_file(store.manifest("pipeline.py--v"))
    status = b.barca("status", "pipeline.py", "--json",
                     env={"BARCA_REMOTE_URI": store.uri, **store.env})
    states = {n["id"]: n["cache"]["state"] for n in status.json()["nodes"]}
    assert states["pipeline.py:v"] == "never_run"
    r = run(b, store, "v")
    assert r.code == 0 and r.completed() == ["pipeline.py:v"], r.err
    assert "store's copy" not in r.err
    assert len(store.files("pipeline.py--v")) == 2       # one copy, one manifest again


@pytest.mark.slow
def test_with_a_key_a_result_rewritten_with_its_digests_is_not_served(
        tmp_path: Path, store: Store) -> None:
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    r = run(a, store, "doubled", KEY)
    assert r.code == 0, r.err
    blob, mpath = store.blob("pipeline.py--v"), store.manifest("pipeline.py--v")
    forged = b'{"v": 100}'
    body = json.loads(store.read(mpath))
    assert len(body["signature"]) == 64
    digest = hashlib.sha256(forged).hexdigest()
    body.update(sha256=digest, size=len(forged))     # every digest rewritten, the old signature
    store.write(blob, forged)                        # at the result's own name
    store.write(mpath, json.dumps(body).encode())
    # without the key, the forgery passes for the real thing: this is what the key is for
    r = run(machine(tmp_path, "keyless"), store, "v")
    assert r.code == 0 and r.json()["final_output"] == {"v": 100}, r.err
    r = run(b, store, "doubled", KEY)
    assert r.code == 0, r.err
    assert r.json()["final_output"] == {"v2": 2}
    assert r.completed() == ["pipeline.py:v"]
    assert len(lines(r.err, "is not signed with BARCA_STORE_KEY; computing it again")) == 1
    # a machine with another key trusts none of it
    other = run(machine(tmp_path, "other-key"), store, "doubled", "another secret")
    assert other.code == 0 and sorted(other.completed()) == ["pipeline.py:doubled",
                                                             "pipeline.py:v"], other.err
    assert KEY not in r.out + r.err and KEY.encode() not in store.everything()
    for f in (b.path / ".barca").rglob("*"):
        assert not f.is_file() or KEY.encode() not in f.read_bytes(), f


@pytest.mark.slow
def test_with_a_key_unsigned_results_are_not_served(tmp_path: Path, store: Store) -> None:
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    assert run(a, store, "v").code == 0                 # no key: unsigned manifests
    # a prediction agrees with the run: without a key the copy would be fetched, with one it
    # is not taken, so v runs (status reads the manifest, not the bytes)
    assert cache_state(b, store, "v") == ("cached", "materialized")
    assert cache_state(b, store, "v", KEY) == ("never_run", "no_record")
    r = run(b, store, "v", KEY)
    assert r.code == 0 and r.completed() == ["pipeline.py:v"], r.err
    assert len(lines(r.err, "is not signed with BARCA_STORE_KEY")) == 1
    # b replaced the unsigned manifest with a signed one: a third keyed machine takes it
    assert "signature" in json.loads(store.read(store.manifest("pipeline.py--v")))
    r = run(machine(tmp_path, "c"), store, "v", KEY)
    assert r.code == 0 and r.completed() == [] and "not signed" not in r.err, r.err


PLANT = b"""
import pickle, sys
class Evil:
    def __reduce__(self):
        return (eval, ("open(%r, 'w').write('pwned') and None",))
sys.stdout.buffer.write(pickle.dumps(Evil()))
"""


def _planted(path: Path) -> bytes:
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-c", PLANT.decode() % str(path)],
                          capture_output=True, check=True).stdout


@pytest.mark.slow
def test_with_a_key_a_planted_pickle_is_never_unpickled(tmp_path: Path, store: Store) -> None:
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    r = run(a, store, "opened", KEY)
    assert r.code == 0 and r.json()["final_output"] == 7, r.err
    pwned = tmp_path / "pwned"
    evil = _planted(pwned)
    blob, mpath = store.blob("pipeline.py--box"), store.manifest("pipeline.py--box")
    body = json.loads(store.read(mpath))
    digest = hashlib.sha256(evil).hexdigest()
    body.update(sha256=digest, size=len(evil))
    store.write(blob, evil)
    store.write(mpath, json.dumps(body).encode())
    r = run(b, store, "opened", KEY)
    assert r.code == 0, r.err
    assert r.json()["final_output"] == 7
    assert not pwned.exists()
    assert "pipeline.py:box" in r.completed()
    assert len(lines(r.err, "pipeline.py--box")) == 1
    # the planted bytes in place of those a signed manifest names (b signed it, other bytes)
    assert "signature" in json.loads(store.read(mpath))
    store.write(blob, evil)
    r = run(machine(tmp_path, "c"), store, "opened", KEY)
    assert r.code == 0 and r.json()["final_output"] == 7, r.err
    assert not pwned.exists()


@pytest.mark.slow
def test_without_a_key_a_pickle_from_the_store_is_said_to_be_trusted(tmp_path: Path,
                                                                      store: Store) -> None:
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    assert run(a, store, "opened").code == 0
    r = run(b, store, "opened")
    assert r.code == 0 and r.completed() == [] and r.json()["final_output"] == 7, r.err
    said = lines(r.err, "trusted as code")
    assert said == [("[barca] warning: a pickle from the shared store is trusted as code: set "
                     "BARCA_STORE_KEY on every machine that shares it to accept only signed "
                     "results (barca docs remote)")]
    r = run(machine(tmp_path, "c"), store, "v")      # no pickle fetched: nothing said
    assert "trusted as code" not in r.err


@pytest.mark.slow
def test_two_machines_racing_on_one_run_hash_leave_one_good_copy(tmp_path: Path,
                                                                  store: Store) -> None:
    import subprocess
    import sys
    gate = tmp_path / "gate"
    gate.mkdir()
    a, b = machine(tmp_path, "a"), machine(tmp_path, "b")
    env = {**os.environ, "BARCA_REMOTE_URI": store.uri, **store.env, "RACE_DIR": str(gate),
           "BARCA_STORE_KEY": KEY}
    env.pop("BARCA_OUTPUT", None)
    procs = [subprocess.Popen([sys.executable, "-m", "barca", "get", "racing", "pipeline.py",
                               "--json"], cwd=p.path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for p in (a, b)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    pids = {json.loads(out)["final_output"]["pid"] for out, _ in outs}
    assert len(pids) == 2                                # both computed, different bytes
    assert len(store.files("pipeline.py--racing")) == 2  # one copy, one manifest
    r = run(machine(tmp_path, "c"), store, "racing", KEY, RACE_DIR=str(gate))
    assert r.code == 0 and r.completed() == [] and "store's copy" not in r.err, r.err
    assert r.json()["final_output"]["pid"] in pids


def test_readers_never_see_a_half_written_result(tmp_path: Path) -> None:
    """Writers race on one run hash with different bytes while a reader fetches: it gets one
    writer's bytes whole, or nothing, never a mix."""
    from barca.store.remote import Remote
    remote = Remote(f"file://{tmp_path / 'store'}")
    rel = ".barca/artifacts/pipeline.py--v/" + "a" * 64 + ".json"
    values = [json.dumps({"w": i, "pad": str(i) * 300000}).encode() for i in range(2)]
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            for _ in range(30):
                Remote(remote.uri).upload(tmp_path / f"w{i}", rel, "pipeline.py:v", "",
                                          values[i])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(i,)) for i in range(2)]
    for t in writers:
        t.start()
    seen = set()
    while any(t.is_alive() for t in writers):
        reader = Remote(remote.uri)
        if reader.fetch(tmp_path / "r", rel) is not None:
            seen.add((tmp_path / "r" / rel).read_bytes())
        # nothing rejected (the one note: a store without a key is unsigned, see test_reads)
        assert all(n.startswith("results taken from the shared store are not signed")
                   for n in reader.notes), reader.notes
    assert not errors
    assert seen and seen <= set(values)
    folder = tmp_path / "store" / "artifacts" / "pipeline.py--v"
    assert len([n for n in os.listdir(folder) if not n.startswith(".tmp")]) == 2


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b"null", b'{"v": 1}', "é".encode("latin-1"),
                                 b'{"v": 1, "path": 3}', b"\x80\x04K\x01."])
def test_a_malformed_manifest_is_a_bad_copy_never_an_error(tmp_path: Path, raw: bytes) -> None:
    from barca.store.remote import Remote
    remote = Remote(f"file://{tmp_path / 'store'}")
    rel = ".barca/artifacts/pipeline.py--v/" + "a" * 64 + ".json"
    remote.upload(tmp_path, rel, "pipeline.py:v", "", b'{"v": 1}')
    (tmp_path / "store" / (rel[len(".barca/"):] + ".manifest")).write_bytes(raw)
    reader = Remote(remote.uri)
    assert reader.fetch(tmp_path / "r", rel) is None
    assert reader.notes == [f"the store's copy of {rel} did not match its manifest; "
                            "computing it again"]
    assert not (tmp_path / "r" / rel).exists()


def test_a_fetch_streams_the_bytes_and_leaves_nothing_behind_on_a_bad_copy(
        tmp_path: Path) -> None:
    """A result is checked while it streams into a temp file beside its place, so fetching a
    large one does not hold it in memory; a bad copy leaves no file (and no temp file)."""
    import tracemalloc

    from barca.store.remote import Remote
    remote = Remote(f"file://{tmp_path / 'store'}")
    rel = ".barca/artifacts/pipeline.py--big/" + "b" * 64 + ".pkl"
    data = os.urandom(24 << 20)
    remote.upload(tmp_path / "w", rel, "pipeline.py:big", "", data)
    reader = Remote(remote.uri)
    tracemalloc.start()
    try:
        assert reader.fetch(tmp_path / "r", rel) == len(data)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak                 # a few 1 MiB chunks, never the 24 MiB result
    assert (tmp_path / "r" / rel).read_bytes() == data
    import hashlib

    blob = tmp_path / "store" / rel[len(".barca/"):]       # at its local relative path
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == hashlib.sha256(data).hexdigest()
    blob.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # one bit flipped in the store
    again = Remote(remote.uri)
    assert again.fetch(tmp_path / "s", rel) is None
    assert again.notes == [f"the store's copy of {rel} did not match its manifest; "
                           "computing it again"]
    assert not [p for p in (tmp_path / "s").rglob("*") if p.is_file()]


def test_an_upload_streams_a_result_from_its_file(tmp_path: Path) -> None:
    """A result on disk (a table a worker wrote, or one an earlier command could not copy) is
    hashed and copied to the store in blocks, never held whole in memory; what arrives is the
    result, under a manifest that checks."""
    import tracemalloc

    from barca.store.remote import Remote
    rel = ".barca/artifacts/pipeline.py--big/" + "c" * 64 + ".pkl"
    data = os.urandom(24 << 20)
    (tmp_path / "w" / rel).parent.mkdir(parents=True)
    (tmp_path / "w" / rel).write_bytes(data)
    remote = Remote(f"file://{tmp_path / 'store'}")
    tracemalloc.start()
    try:
        remote.upload(tmp_path / "w", rel, "pipeline.py:big", "")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak                 # a few 1 MiB blocks, never the 24 MiB result
    reader = Remote(remote.uri)
    assert reader.fetch(tmp_path / "r", rel) == len(data)
    assert (tmp_path / "r" / rel).read_bytes() == data
    assert not [n for n in reader.notes if "did not match" in n], reader.notes
    assert not [p for p in (tmp_path / "store").rglob(".tmp-*")]


def test_results_and_the_shared_store_take_the_users_umask(seed: Project, tmp_path: Path) -> None:
    """Files are written as temp files (created 0600) and renamed: each result, manifest and
    stored copy gets the mode the user's umask gives a new file, so a team shares them."""
    store = tmp_path / "team-store"
    env = {**os.environ, "BARCA_REMOTE_URI": f"file://{store}"}
    env.pop("BARCA_OUTPUT", None)
    proc = subprocess.run(["sh", "-c", f'umask 027 && exec "{sys.executable}" -m barca get '
                           "report pipeline.py --json"], cwd=seed.path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    made = [p for p in [*(seed.path / ".barca" / "artifacts").rglob("*"), *store.rglob("*")]
            if p.is_file()]
    assert any(p.name.endswith(".manifest") for p in made)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in made
            if p.stat().st_mode & 0o777 != 0o640} == {}
