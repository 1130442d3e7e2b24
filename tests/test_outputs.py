"""Outputs around a run: final_output past 1,000 keys, history, dict-source key errors."""
from __future__ import annotations

import json
import re

from conftest import Project


def test_final_output_past_1000_keys(project: Project) -> None:
    project.write("pipeline.py", """
        from barca import asset, partitions

        N = 1001


        @asset(partitions={"k": partitions([f"k{i:04d}" for i in range(N)])})
        def item(k: str) -> int:
            return len(k)
    """)
    r = project.barca("get", "item", "pipeline.py", "--json")
    assert r.code == 0, r.err
    out = r.json()["final_output"]
    assert out["total_keys"] == 1001 and out["computed_keys"] == 1001
    project.edit("pipeline.py", "N = 1001", "N = 1003")
    r = project.barca("get", "item", "pipeline.py", "--json")
    out = r.json()["final_output"]
    assert out["total_keys"] == 1003 and out["computed_keys"] == 2
    assert sorted(out["keys"]) == ["k=k1001", "k=k1002"] and out["not_shown"] == 1001
    paths = project.barca("get", "item", "pipeline.py", "-o", "path").out.splitlines()
    # the paths alone, in key order (as barca 0.30.2 prints them: `| xargs` works)
    assert len(paths) == 1003 and paths[0].startswith(".barca/artifacts/pipeline.py--item_k")
    assert "k0000" in paths[0] and "k1002" in paths[-1]
    assert all((project.path / line).is_file() for line in paths)
    pretty = project.barca("get", "item", "pipeline.py", "--pretty").out.splitlines()
    assert len([line for line in pretty if line.startswith("k=k")]) == 1003


def test_history(seed: Project) -> None:
    for _ in range(3):
        assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    runs = seed.barca("history", "--json").json()["runs"]
    assert [r["steps_run"] for r in runs] == [1, 1, 8]           # newest first
    assert all(r["status"] == "success" and r["command"] == "get" for r in runs)
    assert len(seed.barca("history", "--limit", "2", "--json").json()["runs"]) == 2
    table = seed.barca("history", "--pretty").out.splitlines()
    assert table[0].split() == ["RUN", "COMMAND", "TARGET", "STATUS", "RAN", "CACHED", "STARTED"]
    assert len(table) == 4


DICT_SOURCE = """
import json
from pathlib import Path
from barca import asset, partitions_from, sensor


@sensor()
def versions() -> dict:
    return {json.loads(k) if k.startswith("1") else k: v
            for k, v in json.loads(Path("versions.json").read_text()).items()}


@asset(partitions={"retailer": partitions_from(versions)})
def orders(retailer: str) -> str:
    return retailer
"""


def test_dict_source_key_errors_fail_the_source_step(project: Project) -> None:
    project.write("pipeline.py", DICT_SOURCE)
    project.write("versions.json", json.dumps({"1": "a", "r1": "b"}))
    r = project.barca("get", "orders", "pipeline.py", "--json")
    assert r.code == 0, r.err
    assert sorted(r.json()["final_output"]) == ["retailer=1", "retailer=r1"]  # int key -> "1"
    project.edit("pipeline.py", "def versions() -> dict:\n", "def versions() -> dict:\n"
                 "    if Path('collide').exists():\n        return {1: 'a', '1': 'b'}\n"
                 "    if Path('badvalue').exists():\n        return {'r1': {1, 2}}\n")
    (project.path / "collide").write_text("")
    r = project.barca("get", "orders", "pipeline.py", "--json")
    assert r.code == 1
    err = json.loads(r.err.strip().splitlines()[-1])
    assert err["node"] == "pipeline.py:versions" and "collide" in err["error"]
    (project.path / "collide").unlink()
    (project.path / "badvalue").write_text("")
    r = project.barca("get", "orders", "pipeline.py", "--json")
    assert r.code == 1
    err = json.loads(r.err.strip().splitlines()[-1])
    assert "'r1' is not JSON-writable" in err["error"]


def test_manual_freshness_and_declared_env(project: Project) -> None:
    project.write("pipeline.py", """
        import os
        from barca import Manual, asset


        @asset(freshness=Manual)
        def snapshot() -> int:
            return 1


        @asset(env=["REGION"])
        def regional() -> str:
            return os.environ.get("REGION", "<unset>")
    """)
    assert project.barca("get", "snapshot", "pipeline.py", "--json").code == 0
    project.edit("pipeline.py", "return 1", "return 2")          # a Manual asset keeps its value
    r = project.barca("get", "snapshot", "pipeline.py", "--json", "--agent")
    assert r.completed() == [] and r.json()["final_output"] == 1
    r = project.barca("get", "snapshot", "pipeline.py", "--json", "--refresh", "snapshot")
    assert r.json()["final_output"] == 2
    runs = []
    for env in ({}, {"REGION": ""}, {"REGION": "emea"}, {"REGION": "emea"}):
        r = project.barca("get", "regional", "pipeline.py", "--json", "--agent", env=env)
        assert r.code == 0, r.err
        runs.append((r.completed(), r.json()["final_output"]))
    assert runs == [(["pipeline.py:regional"], "<unset>"), (["pipeline.py:regional"], ""),
                    (["pipeline.py:regional"], "emea"), ([], "emea")]


def test_a_live_progress_bar_in_a_terminal(project: Project) -> None:
    """stderr on a terminal: rich's bar (percentage, N/M steps, elapsed < ETA, rate, the step)
    redrawn in place once the run has lasted a moment, then cleared by the seed page's end line;
    a pipe gets only the end line."""
    import os
    import pty
    import subprocess
    import sys

    project.write("pipeline.py", """
        import time
        from barca import asset, partitions


        @asset(partitions={"key": partitions([f"k{i:02d}" for i in range(40)])})
        def item(key: str) -> dict:
            time.sleep(0.05)
            return {"key": key}
    """)
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "BARCA_OUTPUT"}
    env["COLUMNS"] = "120"
    proc = subprocess.run([sys.executable, "-m", "barca", "get", "item", "pipeline.py",
                           "--pretty"], cwd=project.path, stdout=subprocess.PIPE, stderr=slave,
                          env=env, timeout=120)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    err = b"".join(chunks).decode()
    assert proc.returncode == 0, err
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)
    bars = [b for b in plain.split("\r") if b.startswith("[barca] ") and "%" in b]
    assert bars, plain
    last = bars[-1]
    assert re.search(r"\d+% +\d+/40 steps \d:\d\d:\d\d < (\d:\d\d:\d\d|-:--:--) "
                     r"[\d.]+ (steps/s|s/step) pipeline\.py:item\[key=k\d\d\]", last), last
    assert re.search(r"\n\[barca\] 40/40 steps \| done in \d+\.\ds\n", plain.replace(
        "\r", "")), plain[-300:]
    piped = project.barca("get", "item", "pipeline.py", "--pretty", "--refresh", "item")
    assert "\r" not in piped.err and "[barca] 40/40 steps | done in" in piped.err


def test_a_cached_run_in_a_terminal_never_imports_rich(seed: Project) -> None:
    """The live bar starts only once a run has lasted a moment: rich stays off the cached
    path."""
    import os
    import pty
    import subprocess
    import sys

    assert seed.barca("get", "report", "pipeline.py", "--json").code == 0
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "BARCA_OUTPUT"}
    code = ("import sys, barca.faces.cli\ntry:\n    barca.faces.cli.run_cli(['get', 'report', "
            "'pipeline.py', '--pretty'])\nfinally:\n    print('rich' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=seed.path, stdout=subprocess.PIPE,
                          stderr=slave, env=env, timeout=120, text=True)
    os.close(slave)
    os.close(master)
    assert proc.returncode == 0
    assert proc.stdout.strip().endswith("False"), proc.stdout


def test_a_cached_get_imports_only_what_it_uses(project: Project) -> None:
    """#27's bench rule (every figure as before the layout move): a cached ``barca get`` loads
    no parser (ast), no table renderer, no shape words, no plans, no server queue, no
    artifact writer, no groups and no barca.toml reader when there is none; and it leaves the
    collector held to the end of the process (no collection walks every object at exit)."""
    import subprocess
    import sys
    from pathlib import Path

    import barca

    project.write("pipeline.py", """
from barca import asset


@asset()
def a() -> int:
    return 1


@asset(inputs={"a": a})
def b(a: int) -> int:
    return a + 1
""")
    for _ in range(3):  # the first runs; then the model cache and the settle record are kept
        res = project.barca("get", "b", "pipeline.py", "--json")
        assert res.code == 0, res.err
    unused = ["ast", "barca.model.decorators",  # (the models are read, the pipeline not run)
              "barca.core.render", "barca.store.shapes", "barca.present.plans",
              "barca.store.serverq", "barca.store.artifacts", "barca.model.groups",
              "barca.core.config", "barca.core.sizes", "barca.model.arguments",
              # no json: its C half alone (barca.core.jsontext), so no re, nor the enum it loads
              "json", "re", "enum",
              # a settled cone decides no node: no decision, no input planning (#31 item 2)
              "barca.engine.decision", "barca.engine.inputs",
              # nor hashes a definition or a run: no definition hasher, no pairs of hashes
              "barca.identity.hashing", "barca.identity.pairs", "barca.engine.keyindex",
              # #31 item 2: the command line read without the grammar (argparse, and gettext
              # and locale it loads for its messages)
              "argparse", "gettext", "locale", "barca.faces.grammar", "signal",
              "hashlib", "_hashlib",  # (barca.core.sha: no OpenSSL for a few small digests)
              "typing",  # (annotations only, under TYPE_CHECKING)
              "sqlite3.dbapi2", "datetime",  # (barca.store.driver: sqlite3's C half alone)
              # str paths: no pathlib, nor the urllib.parse and ipaddress it loads (#31 item 2)
              "pathlib", "urllib.parse", "ipaddress", "fnmatch", "warnings",
              "contextlib"]  # (try/except where a cached command passes)
    # -S: no site, whose .pth files may import typing (this interpreter's do); barca from the
    # folder this test imports it from
    root = str(Path(barca.__file__).parent.parent)
    code = (f"import sys; sys.path.insert(0, {root!r})\n"
            "import atexit, gc, barca.faces.cli\n"
            f"atexit.register(lambda: print(sorted(set({unused!r}) & set(sys.modules)), "
            "gc.isenabled()))\n"
            "sys.argv = ['barca', 'get', 'b', 'pipeline.py', '--json']\n"
            "barca.faces.cli.main()\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=project.path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc, last = proc.stdout.strip().splitlines()
    assert json.loads(doc)["steps_executed"] == 0
    assert last == "[] False", last
    # `barca status` of the same state: none of the standard library's costly modules either
    stdlib = unused[unused.index("argparse"):] + ["csv"]
    status = stdlib + ["json", "re", "enum"]  # (its --json text: barca.core.jsontext too)
    code = code.replace(repr(unused), repr(status)).replace("'get', 'b'", "'status'")
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=project.path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[] False", proc.stdout
    # a command given no file finds the project's pipelines without pathlib, and outside a
    # kernel does not load the notebook reader (ast, inspect, typing) to learn it is not in one
    # (run from a script file, as the console script is: a `-c` program is a REPL's __main__)
    bare = status + ["ast", "inspect", "barca.model.notebook"]
    script = project.path / ".probe" / "run.py"  # (a hidden folder: not a pipeline)
    script.parent.mkdir()
    for argv in ("'get', 'b', '--json'", "'status', '--json'"):
        script.write_text(code.replace(repr(status), repr(bare)).replace(
            "'status', 'pipeline.py', '--json'", argv))
        proc = subprocess.run([sys.executable, "-S", str(script)], cwd=project.path,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == "[] False", (argv, proc.stdout)
