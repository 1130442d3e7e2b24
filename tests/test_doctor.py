"""`barca doctor`: a project's health checked without running a step (pipeline files are
imported only in a child process, as a worker imports them, to find module-level errors)."""
from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import Project
from nbtools import execute, notebook, result

SIDE_EFFECT = """
from pathlib import Path

Path("imported.txt").write_text("the pipeline was imported")
"""


def test_a_healthy_project(seed: Project) -> None:
    assert seed.barca("get", "report", "pipeline.py").code == 0
    r = seed.barca("doctor", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["ok"] is True
    assert all(set(c) == {"name", "ok", "detail", "data"} for c in doc["checks"])
    names = [c["name"] for c in doc["checks"]]
    # barca 0.30.2's names, in its order, and what each found as values
    assert names[:11] == ["project_root", "configuration", "environment", "local_cache",
                          "metadata", "cache_size", "capacity", "discovery",
                          "source:pipeline.py", "python", "store:artifacts"]
    data = {c["name"]: c["data"] for c in doc["checks"]}
    assert data["project_root"] == {"path": str(seed.path.resolve()), "source": "cwd"}
    assert data["configuration"] == {"found": False}
    assert data["environment"]["name"] == "default"
    assert data["metadata"] == {"path": ".barca/metadata.db"}
    assert data["local_cache"]["artifacts"] == ".barca/artifacts"
    assert data["discovery"] == {"files": ["pipeline.py"]}
    assert data["source:pipeline.py"]["nodes"] == 4
    assert 0 < data["cache_size"]["size_bytes"] < data["cache_size"]["limit_bytes"]
    assert data["cache_size"]["source"] == "default"
    assert data["capacity"]["pool_size"] >= 1 and data["python"]["version"].startswith("3.")
    assert data["store:artifacts"] == {"enabled": False}
    pretty = seed.barca("doctor", "--pretty")
    assert pretty.code == 0 and pretty.out.rstrip().endswith("healthy")


def test_a_broken_file_and_a_corrupt_database_without_running_anything(seed: Project) -> None:
    seed.edit("pipeline.py", "from pathlib import Path\n", "from pathlib import Path\n"
              + SIDE_EFFECT)
    assert seed.barca("get", "report", "pipeline.py").code == 0
    (seed.path / "imported.txt").unlink()
    seed.write("broken.py", "from barca import asset\n\n\n@asset()\ndef oops(:\n    pass\n")
    db = seed.path / ".barca" / "metadata.db"
    with sqlite3.connect(db) as conn:  # fold the WAL in, then damage a page in the middle
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(db.read_bytes())
    data[2 * 4096:2 * 4096 + 64] = b"\xff" * 64  # a b-tree page's header
    db.write_bytes(bytes(data))

    def files() -> dict[str, int]:  # the discovery memo may grow, as for `barca status`
        return {p.relative_to(seed.path).as_posix(): p.stat().st_mtime_ns
                for p in seed.path.rglob("*")
                if p.is_file() and not p.relative_to(seed.path).as_posix().startswith(
                    ".barca/discovery/")}
    before = files()
    r = seed.barca("doctor", "--pretty")
    assert r.code == 3, (r.out, r.err)
    lines = r.out.splitlines()
    problems = [line for line in lines if line.startswith("PROBLEM")]
    assert any("broken.py:5" in p and "SyntaxError" in p for p in problems), r.out
    assert any("metadata.db" in p and "quick_check" in p and "mv " in p for p in problems)
    assert lines[-1] == f"{len(problems)} problems found"
    doc = json.loads(seed.barca("doctor", "--json").out)
    assert doc["ok"] is False
    bad = {c["name"] for c in doc["checks"] if not c["ok"]}
    assert bad == {"source:broken.py", "metadata"}
    # the pipeline's own module-level code ran once, in doctor's child process (#29: import
    # errors are found that way); barca itself wrote nothing
    assert (seed.path / "imported.txt").exists()
    after = files()
    after.pop("imported.txt")
    assert after == before


def test_a_bad_barca_toml_and_a_store_that_does_not_answer(seed: Project) -> None:
    seed.write("barca.toml", '[remote]\nuri = "file:///tmp/x"\nsize = 3\n')
    r = seed.barca("doctor", "--json")
    assert r.code == 3
    checks = {c["name"]: c for c in r.json()["checks"]}
    assert not checks["configuration"]["ok"]
    assert "barca.toml:3" in checks["configuration"]["detail"]
    assert sum(not c["ok"] for c in checks.values()) == 1  # not repeated by other checks
    seed.write("barca.toml", "")
    r = seed.barca("doctor", "--json", env={"BARCA_REMOTE_URI": "nope://bucket/x"})
    assert r.code == 3
    checks = {c["name"]: c for c in r.json()["checks"]}
    assert not checks["store:artifacts"]["ok"]


def test_doctor_magic_shows_a_table(seed: Project) -> None:
    nb = notebook("%load_ext barca", "%barca doctor")
    execute(nb, seed.path)
    shown = result(nb, 1)
    assert "<table" in shown["text/html"] and "source:pipeline.py" in shown["text/html"]
    assert "application/json" not in shown


def test_a_store_without_signatures_is_reported_and_the_key_never_shown(
        seed: Project, tmp_path) -> None:
    store = tmp_path / "store"
    seed.write("barca.toml", f'[remote]\nuri = "file://{store}"\n')
    r = seed.barca("doctor", "--json")
    checks = {c["name"]: c for c in r.json()["checks"]}
    assert r.code == 3 and checks["store:artifacts"]["ok"]
    assert not checks["store signatures"]["ok"]
    assert "BARCA_STORE_KEY" in checks["store signatures"]["detail"]
    secret = "s3cr3t-" + "k" * 30
    (tmp_path / "store.key").write_text(secret + "\n")
    seed.write("barca.toml", f'[remote]\nuri = "file://{store}"\n'
               f'key_file = "{tmp_path / "store.key"}"\n')
    r = seed.barca("doctor", "--json")
    assert r.code == 0, r.out
    assert secret not in r.out + r.err
    # the key from key_file signs what is uploaded, and is nowhere in the store
    assert seed.barca("get", "report", "pipeline.py").code == 0
    manifests = list(store.rglob("*.manifest"))
    assert manifests and all("signature" in json.loads(m.read_text()) for m in manifests)
    assert not any(secret.encode() in f.read_bytes() for f in store.rglob("*") if f.is_file())


@pytest.mark.slow
def test_doctor_lists_every_problem_of_a_file_with_exit_3(project) -> None:
    project.write("bad.py", '''
from barca import asset

X = undefined_name + 1

@asset()
def a() -> int:
    return X

@asset(inputs={"zz": nonexistent})
def b(zz: int) -> int:
    return zz
''')
    for target in ("bad.py", "."):   # a folder is accepted like a file
        r = project.barca("doctor", target, "--json")
        assert r.code == 3, (target, r.out, r.err)
        details = [c["detail"] for c in json.loads(r.out)["checks"] if not c["ok"]]
        assert any(d.startswith("bad.py:4: NameError: name 'undefined_name'") for d in details), \
            details
        assert any("bad.py:10" in d and "nonexistent" in d for d in details), details
    assert project.barca("doctor", "--bogus").code == 2
