"""Warm state (barca.api.warm): a fully cached ``%barca get`` / ``barca.get`` in a live kernel is
served from what the kernel kept, and after every change it depends on -- a helper module, the
pipeline file, barca.toml, another process writing the store, a deleted or corrupt target, a
different ``env=`` -- the next ask gives exactly what a cold process gives.

``total`` returns a fresh random token each time it is computed, so a value served from stale
state cannot pass for a recomputed one. The notebook checks itself: each cell asserts, and a
failed assertion fails the test with the cell's traceback. ``served()`` tells that an ask was
answered from the kept state (the normal path builds a Session; a served ask does not)."""
from __future__ import annotations

import pytest
from conftest import Project
from nbtools import execute, notebook

pytestmark = pytest.mark.slow

PIPELINE = """
    import os

    from barca import asset, collect, partitions
    from helpers import bump

    KEYS = ["a", "b", "c", "d", "e"]


    @asset(partitions={"key": partitions(KEYS)})
    def item(key: str) -> int:
        return bump(len(key))


    @asset(inputs={"items": collect(item)})
    def total(items: list[int]) -> dict:
        return {"sum": sum(items), "token": os.urandom(6).hex()}
"""

SETUP = '''
%load_ext barca
import glob, json, os, subprocess, sys, time
import barca
import barca.api as api
import barca.api.warm as warm

warm.RACY_NS = 300_000_000  # the window, shortened so the test need not wait 2 s per step
made = []
class Counting(api.Session):
    def __init__(self, *a, **kw):
        made.append(1)
        super().__init__(*a, **kw)
api.Session = Counting

def cold(*flags):
    """What a new process gives."""
    r = subprocess.run([sys.executable, "-m", "barca", "get", "total", "pipeline.py", "--json",
                        *flags], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["final_output"]

def get(**kw):
    if kw:
        return barca.get("total", "pipeline.py", **kw)
    return get_ipython().run_line_magic("barca", "get total pipeline.py")

def served(**kw):
    """Bring the ask to a kept state and return its value, asserting it was served warm."""
    time.sleep(0.4)  # the files' stamps now older than the window
    get(**kw)
    get(**kw)
    before = len(made)
    value = get(**kw)
    assert len(made) == before, "not served from warm state"
    return value

def fresh(**kw):
    """The next ask, asserting it took the normal path."""
    before = len(made)
    value = get(**kw)
    assert len(made) == before + 1, "served from warm state after a change"
    return value

def artifacts():
    return glob.glob(".barca/artifacts/pipeline.py--total/*")
'''

CELLS = [
    # a kept state is served, and is what a cold process gives
    """
first = get()
assert first["sum"] == 10
v = served()
last = lambda: barca.history(1).runs[0]
row = lambda r: (r.command, r.target, r.status, r.steps_run, r.steps_cached, r.steps_failed)
assert row(last()) == ("get", "total", "success", 0, 6, 0)  # recorded as a cold run is
assert v == first == cold()
assert row(last()) == ("get", "total", "success", 0, 6, 0)
assert get() == first and get() is not get()  # a new value each ask: the caller may change it
""",
    # a helper module edited in place: same size, mtime put back
    """
st = os.stat("helpers.py")
with open("helpers.py", "r+") as f:
    f.write(open("helpers.py").read().replace("x + 1", "x + 2"))
os.utime("helpers.py", ns=(st.st_atime_ns, st.st_mtime_ns))
assert os.stat("helpers.py").st_size == st.st_size
assert os.stat("helpers.py").st_mtime_ns == st.st_mtime_ns
v = fresh()
assert v["sum"] == 15 and v["token"] != first["token"]
assert v == cold()
""",
    # the pipeline file edited
    """
before = served()
text = open("pipeline.py").read()
open("pipeline.py", "w").write(text.replace('"e"]', '"e", "f"]'))
v = fresh()
assert v["sum"] == 18 and v["token"] != before["token"]
assert v == cold()
""",
    # barca.toml: another store (a named environment) by default
    """
before = served()
open("barca.toml", "w").write('default_env = "dev"\\n')
v = fresh()
assert os.path.exists(".barca/envs/dev/metadata.db")
assert v["token"] != before["token"] and v == cold()
assert served() == v
os.remove("barca.toml")  # the default store again, as it was: served as it was
assert get() == before == cold()
""",
    # another process writes the store: results the target's artifact does not show, then
    # a new value for it
    """
before = served()
import sqlite3
conn = sqlite3.connect(".barca/metadata.db")
with conn:
    conn.execute("DELETE FROM materializations WHERE asset = 'pipeline.py:item'")
conn.close()
assert fresh() == before
mine = row(last())
assert cold() == before and row(last()) == mine
assert served() == before
new = cold("--refresh-all")
assert new["token"] != before["token"]
assert fresh() == new == cold()
""",
    # the target's artifact deleted, then corrupted
    """
before = served()
for p in artifacts():
    os.remove(p)
v = fresh()
assert v["token"] != before["token"] and v == cold()
before = served()
for p in artifacts():
    data = open(p, "rb").read()
    open(p, "wb").write(data.replace(b'"sum"', b'"SUM"'))
v = fresh()
assert v["token"] != before["token"] and v == cold()
""",
    # a notebook saved beside the pipeline (a hidden file renamed over it) changes no listing;
    # a new module does
    """
open("notes.ipynb", "w").write("{}")
before = served()
open(".~notes.ipynb", "w").write('{"cells": []}')
os.replace(".~notes.ipynb", "notes.ipynb")
n = len(made)
assert get() == before and len(made) == n
open("other.py", "w").write("X = 1\\n")
assert fresh() == before == cold()
""",
    # env= on the API: another store, kept apart
    """
default = served()
prod = get(env="prod")
assert prod["token"] != default["token"] and prod == cold("--env", "prod")
assert served(env="prod") == prod
assert served() == default == cold()
""",
    # a notebook-defined asset: never kept (it changes with no file changing)
    """
before = len(warm._ENTRIES)
@barca.asset()
def local() -> int:
    return 7
assert barca.get("local") == 7 and barca.get("local") == 7
assert len(warm._ENTRIES) == before
""",
]


def test_warm_state_in_a_kernel_is_what_a_cold_process_gives(project: Project) -> None:
    project.write("pipeline.py", PIPELINE)
    project.write("helpers.py", "def bump(x):\n    return x + 1\n")
    nb = notebook(SETUP, *CELLS)
    execute(nb, project.path, allow_errors=False, timeout=300)


def test_a_file_younger_than_the_window_is_not_trusted(project: Project) -> None:
    """An outcome is kept only when every stamp is older than the window at the command's
    start: a same-size rewrite within the clock's resolution would not move the stamp."""
    project.write("pipeline.py", PIPELINE)
    project.write("helpers.py", "def bump(x):\n    return x + 1\n")
    nb = notebook(SETUP + "\nwarm.RACY_NS = 3600 * 10**9\n", """
for _ in range(3):
    get()
assert not warm._ENTRIES
warm.RACY_NS = 0
get()
assert len(warm._ENTRIES) == 1
""")
    execute(nb, project.path, allow_errors=False, timeout=300)


def test_the_cli_keeps_nothing(project: Project) -> None:
    """One command per process: a cached `barca get` opens no second connection to keep."""
    project.write("pipeline.py", PIPELINE)
    project.write("helpers.py", "def bump(x):\n    return x + 1\n")
    for _ in range(3):
        res = project.barca("get", "total", "pipeline.py", "--json")
        assert res.code == 0, res.err
    code = ("import sys, barca.faces.cli, barca.api.warm as w\n"
            "w.RACY_NS = 0\n"
            "sys.argv = ['barca', 'get', 'total', 'pipeline.py', '--json']\n"
            "try:\n    barca.faces.cli.main()\n"
            "except SystemExit:\n    pass\n"
            "assert not w._ENTRIES and not w._STORES, (w._ENTRIES, w._STORES)\n")
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", code], cwd=project.path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
