"""The ``barca`` command (``barca.faces.cli.command``: the installed scripts/barca) ends
its process at once after it has said everything, when nothing is left for the interpreter's
end to do but run its ``atexit`` callbacks (which it runs) and free objects: no other thread, no
module but barca's, the standard library's and those the process started with. Whatever it
printed is there in full, its exit code is the command's; a callback still runs; a thread, or a
module another library loaded, gets the usual end; and ``main`` itself still raises SystemExit
for a caller to catch. Real processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, Project

pytestmark = pytest.mark.slow

WIDE = "from barca import asset\n\n\n@asset()\ndef source() -> dict:\n    return {'n': 1}\n" + \
    "".join(
    f"\n\n@asset(inputs={{'source': source}})\ndef r{i:03d}(source: dict) -> str:\n"
    f"    return 'x' * 200 + str(source['n'] + {i})\n" for i in range(300))


def _py(project: Project, code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(REPO)!r})\n"
                           + code], cwd=project.path, capture_output=True, text=True,
                          timeout=120)


def _command(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command: this checkout's scripts/barca, run by this Python."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("BARCA_OUTPUT", None)
    return subprocess.run([sys.executable, str(REPO / "scripts" / "barca"), *args],
                          cwd=project.path, capture_output=True, text=True, timeout=120, env=env)


def test_what_the_command_prints_is_there_in_full_with_its_exit_code(project: Project) -> None:
    project.write("pipeline.py", WIDE)
    first = _command(project, "get", "pipeline.py", "--json")
    assert first.returncode == 0, first.stderr
    for _ in range(2):  # cached: the end at once (a document of ~100 kB, past a pipe's buffer)
        res = _command(project, "get", "pipeline.py", "--json")
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["steps_executed"] == 0 and len(doc["final_output"]) == 301
        assert doc["final_output"]["pipeline.py:r299"].endswith("300")
        assert len(res.stdout) > 65536
    bad = _command(project, "get", "nosuch", "pipeline.py", "--json")
    assert bad.returncode == 2 and json.loads(bad.stderr)["kind"] == "usage"
    failed = _command(project, "get", "nosuch", "pipeline.py")
    assert failed.returncode == 2 and "nosuch" in failed.stderr


def test_the_interpreter_end_is_kept_when_something_needs_it(project: Project) -> None:
    project.write("pipeline.py", WIDE)
    assert project.barca("get", "pipeline.py", "--json").code == 0
    run = ("sys.argv = ['barca', 'get', 'pipeline.py', '--json']\n"
           "from barca.faces.cli import command\n")
    # the interpreter's usual end clears its state, which an audit hook sees: it tells whether
    # the process ended at once (nothing written) or the usual way ("FINALIZED"). (A finalizer
    # would not: `main` freezes the collector, whose frozen objects the end leaves alone.)
    held = ("import os\ndef hook(event, args, write=os.write):\n"
            "    if event == 'cpython.PyInterpreterState_Clear':\n"
            "        write(1, b'FINALIZED\\n')\nsys.addaudithook(hook)\n")
    # an atexit callback registered before barca loaded (as a .pth file's library does at
    # start-up: certifi's, on the CI machine): run, after the whole document; the end at once
    called = _py(project, "import atexit\natexit.register(lambda: print('AT EXIT'))\n" + held
                 + run + "command()\n")
    assert called.returncode == 0 and called.stdout.splitlines()[-1] == "AT EXIT", called.stderr
    assert json.loads(called.stdout.splitlines()[0])["steps_executed"] == 0
    # a callback that loads a module neither barca's nor the standard library's: run once,
    # then the usual end (its module's objects may still have something to write)
    (Path(project.path) / "late.py").write_text("X = 1\n")
    loads = _py(project, "import atexit\natexit.register(lambda: print('LOADED', "
                "__import__('late').X))\n" + held + run + "command()\n")
    assert loads.returncode == 0, loads.stderr
    assert loads.stdout.splitlines()[-2:] == ["LOADED 1", "FINALIZED"]
    # a thread still working: waited for, as ever, and the usual end
    threaded = _py(project, "import threading, time\n"
                   "threading.Thread(target=lambda: (time.sleep(0.5), print('THREAD DONE')))"
                   ".start()\n" + held + run + "command()\n")
    assert threaded.returncode == 0, threaded.stderr
    assert threaded.stdout.splitlines()[-2:] == ["THREAD DONE", "FINALIZED"]
    # nothing of the kind: the end at once
    plain = _py(project, held + run + "command()\n")
    assert plain.returncode == 0 and "FINALIZED" not in plain.stdout, plain.stderr
    # a module loaded after barca started that is neither barca's nor the standard library's
    # (its objects may hold what only their finalizer writes): not ended at once
    gate = ("from barca.faces import cli\nprint(cli._nothing_left_to_end())\n"
            "import late\nprint(cli._nothing_left_to_end())\n")
    got = _py(project, gate)
    assert got.stdout.split() == ["True", "False"], got.stderr
    # a usage error keeps its code
    bad = _py(project, "sys.argv = ['barca', 'get', 'nosuch', 'pipeline.py', '--json']\n"
              "from barca.faces.cli import command\ncommand()\n")
    assert bad.returncode == 2 and json.loads(bad.stderr)["kind"] == "usage"


def test_main_and_the_module_still_raise_system_exit_for_their_caller(project: Project) -> None:
    project.write("pipeline.py", WIDE)
    got = _py(project, "from barca.faces.cli import main\n"
              "try:\n    main(['get', 'source', 'pipeline.py', '--json'])\n"
              "except SystemExit as exc:\n    print('CODE', exc.code)\n")
    assert got.returncode == 0, got.stderr
    assert got.stdout.splitlines()[-1] == "CODE 0"
    ran = _py(project, "import runpy\nsys.argv = ['barca', 'get', 'source', 'pipeline.py']\n"
              "try:\n    runpy.run_module('barca', run_name='__main__')\n"
              "except SystemExit as exc:\n    print('CODE', exc.code)\n")
    assert ran.returncode == 0 and ran.stdout.splitlines()[-1] == "CODE 0", ran.stderr
